import Foundation

/// A value shared across queues, guarded by one lock.
///
/// Every read and write of the wrapped value goes through `read` or `write`, so the lock is the single
/// place that orders access. The closures run with the lock held: keep them short and never call out to
/// user code or block inside them.
///
/// A copy of a `Protected` shares its value and lock (it is a handle, like a class reference). The value and a
/// `pthread_mutex_t` live in one allocation (`ManagedBuffer`, whose elements have a stable address): a request makes
/// several of these, and Foundation's `NSLock` costs four allocations of its own.
struct Protected<Value>: @unchecked Sendable {  // @unchecked: the value is only touched under the mutex.
    /// The value as the header, the mutex as the one element.
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        }
    }

    private let storage: Storage

    /// Wraps `value`.
    init(_ value: Value) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in value }, to: Storage.self)
        _ = storage.withUnsafeMutablePointerToElements { pthread_mutex_init($0, nil) }
    }

    /// Returns what `body` computes from the current value.
    func read<Result>(_ body: (Value) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(value.pointee)
        }
    }

    /// Lets `body` change the value and returns what it computes.
    @discardableResult
    func write<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    /// The current value (a copy).
    var wrappedValue: Value {
        get { read { $0 } }
        nonmutating set { write { $0 = newValue } }
    }
}
