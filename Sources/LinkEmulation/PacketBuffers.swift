/// The packet buffers one emulator thread reuses: a packet's bytes are copied into a buffer
/// taken from here when it is read, and the buffer comes back once the packet was written out,
/// so that a link carrying packets at a steady rate allocates nothing per packet. Without it,
/// every packet was an allocation of its own size held for as long as the link delays it, and
/// packets of every size from 64 bytes to 64 KB, freed in another order than they came, left
/// the thread's allocator arena growing slowly over an hour.
///
/// Buffers are kept by size class (``classSizes``: 128 bytes to 64 KB, with one for an
/// Ethernet MTU's packets and one for a jumbo frame's, so that a queued packet's buffer is not
/// much larger than the packet), at most ``maximumPerClass`` in a class and ``maximumBytes`` in
/// all: what a burst needed beyond that goes back to the allocator. A buffer still shared when
/// it is taken again (a duplicated packet's twin still on the line) is not written to: the array
/// copies on write, as any array.
struct PacketBuffers {
    /// The classes' sizes in bytes, ascending.
    static let classSizes = [128, 256, 512, 1024, 1536, 2048, 4096, 9216, 16384, 32768, 65536]
    /// The most buffers a class keeps.
    static let maximumPerClass = 1024
    /// The most bytes of capacity all the classes keep together.
    static let maximumBytes = 4 << 20

    private var free = Array(repeating: [[UInt8]](), count: Self.classSizes.count)
    /// Capacity kept, in bytes.
    private(set) var bytesKept = 0
    /// Buffers taken that came from the allocator rather than from here, counting one kept
    /// here that was still shared when taken (for tests).
    private(set) var allocated = 0

    /// How many buffers are kept.
    var count: Int { free.reduce(0) { $0 + $1.count } }

    /// The class whose buffers hold `size` bytes, nil above the largest.
    private static func classFitting(_ size: Int) -> Int? {
        classSizes.firstIndex { size <= $0 }
    }

    /// An empty buffer with room for at least `size` bytes.
    mutating func take(capacity size: Int) -> [UInt8] {
        guard let index = Self.classFitting(size) else {
            allocated += 1
            var buffer = [UInt8]()
            buffer.reserveCapacity(size)
            return buffer
        }
        if var buffer = free[index].popLast() {
            bytesKept -= buffer.capacity
            let storage = buffer.withUnsafeBufferPointer { $0.baseAddress }
            buffer.removeAll(keepingCapacity: true)
            // Still shared, it got storage of its own from the allocator.
            if buffer.withUnsafeBufferPointer({ $0.baseAddress }) != storage { allocated += 1 }
            return buffer
        }
        allocated += 1
        var buffer = [UInt8]()
        buffer.reserveCapacity(Self.classSizes[index])
        return buffer
    }

    /// A buffer holding a copy of `bytes`.
    mutating func take(copying bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var buffer = take(capacity: bytes.count)
        buffer.append(contentsOf: bytes)
        return buffer
    }

    /// Gives a buffer back once its packet is gone: kept for the next packet that fits, or
    /// freed when its class or the whole is full.
    mutating func recycle(_ buffer: consuming [UInt8]) {
        let capacity = buffer.capacity
        // The largest class it can stand for.
        guard bytesKept + capacity <= Self.maximumBytes, let index = Self.classSizes.lastIndex(where: { $0 <= capacity }),
              free[index].count < Self.maximumPerClass else { return }
        bytesKept += capacity
        free[index].append(buffer)
    }
}
