import Foundation

/// A value shared across queues, guarded by one lock.
///
/// Every read and write of the wrapped value goes through `read` or `write`, so the lock is the single
/// place that orders access. The closures run with the lock held: keep them short and never call out to
/// user code or block inside them.
final class Protected<Value>: @unchecked Sendable {  // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    /// Wraps `value`.
    init(_ value: Value) {
        self.value = value
    }

    /// Returns what `body` computes from the current value.
    func read<Result>(_ body: (Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(value)
    }

    /// Lets `body` change the value and returns what it computes.
    @discardableResult
    func write<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The current value (a copy).
    var wrappedValue: Value {
        get { read { $0 } }
        set { write { $0 = newValue } }
    }
}
