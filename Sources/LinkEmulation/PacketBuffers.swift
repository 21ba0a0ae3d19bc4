/// The packet buffers one emulator thread reuses: a packet's bytes are copied into a buffer
/// taken from here when it is read, and the buffer comes back once the packet was written out,
/// so that a link carrying packets at a steady rate allocates nothing per packet. Without it,
/// every packet was an allocation of its own size held for as long as the link delays it, and
/// packets of every size from 64 bytes to 64 KB, freed in another order than they came, left
/// the thread's allocator arena growing slowly over an hour.
///
/// Buffers are kept by size class (256 bytes to 64 KB, doubling), at most
/// ``maximumPerClass`` in a class and ``maximumBytes`` in all: what a burst needed beyond that
/// goes back to the allocator. A buffer still shared when it is taken again (a duplicated
/// packet's twin still on the line) is not written to: the array copies on write, as any array.
struct PacketBuffers {
    /// The smallest class, as a power of two (256 bytes).
    static let smallestShift = 8
    /// How many classes: 256 bytes to 64 KB.
    static let classCount = 9
    /// The most buffers a class keeps.
    static let maximumPerClass = 1024
    /// The most bytes of capacity all the classes keep together.
    static let maximumBytes = 8 << 20

    private var free = Array(repeating: [[UInt8]](), count: Self.classCount)
    /// Capacity kept, in bytes.
    private(set) var bytesKept = 0
    /// Buffers taken that came from the allocator rather than from here (for tests).
    private(set) var allocated = 0

    /// How many buffers are kept.
    var count: Int { free.reduce(0) { $0 + $1.count } }

    /// The class whose buffers hold `size` bytes, nil above the largest.
    private static func classFitting(_ size: Int) -> Int? {
        var index = 0
        while index < classCount {
            if size <= 1 << (smallestShift + index) { return index }
            index += 1
        }
        return nil
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
            buffer.removeAll(keepingCapacity: true)
            return buffer
        }
        allocated += 1
        var buffer = [UInt8]()
        buffer.reserveCapacity(1 << (Self.smallestShift + index))
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
        guard capacity >= 1 << Self.smallestShift, bytesKept + capacity <= Self.maximumBytes else { return }
        // The largest class it can stand for.
        var index = Self.classCount - 1
        while index > 0, capacity < 1 << (Self.smallestShift + index) { index -= 1 }
        guard free[index].count < Self.maximumPerClass else { return }
        bytesKept += capacity
        free[index].append(buffer)
    }
}
