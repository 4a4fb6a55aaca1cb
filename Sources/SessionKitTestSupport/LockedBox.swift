import Foundation

/// A value shared across threads by tests, the demo and the benchmark, guarded by one lock.
public final class LockedBox<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    /// Wraps `value`.
    public init(_ value: Value) { self.value = value }

    /// Lets `body` read or change the value, under the lock, and returns what it computes.
    @discardableResult
    public func write<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }

    /// The current value.
    public var wrappedValue: Value {
        get { write { $0 } }
        set { write { $0 = newValue } }
    }
}
