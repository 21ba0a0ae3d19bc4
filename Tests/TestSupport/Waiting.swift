import Foundation

/// Collects values from another thread and lets a test wait until they satisfy a condition.
///
/// The wait is event-driven (a condition variable signalled on every value); the timeout only
/// bounds how long a broken build can hang, it never stands in for synchronization.
public final class Recorder<Value: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var storage: [Value] = []
    private var closed = false

    public init() {}

    /// Marks the end of the values (for example, the end of a stream).
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until ``close()`` is called; false on timeout.
    @discardableResult
    public func waitUntilClosed(timeout: TimeInterval = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !closed {
            if !condition.wait(until: deadline) { return closed }
        }
        return true
    }

    /// True once ``close()`` was called.
    public var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }

    public func append(_ value: Value) {
        condition.lock()
        storage.append(value)
        condition.broadcast()
        condition.unlock()
    }

    public var values: [Value] {
        condition.lock()
        defer { condition.unlock() }
        return storage
    }

    /// Waits until `predicate` holds for the recorded values and returns them; nil on timeout.
    @discardableResult
    public func wait(timeout: TimeInterval = 10, until predicate: ([Value]) -> Bool) -> [Value]? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(storage) {
            if !condition.wait(until: deadline) { return predicate(storage) ? storage : nil }
        }
        return storage
    }

    /// Waits until the last value satisfies `predicate`, and returns it; nil on timeout.
    public func waitForLast(timeout: TimeInterval = 10, _ predicate: @escaping (Value) -> Bool) -> Value? {
        wait(timeout: timeout) { values in values.last.map(predicate) ?? false }?.last
    }
}
