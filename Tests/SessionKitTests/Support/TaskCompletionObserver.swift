import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Counts each task's completions and a stream task's closing callbacks as the manager's closures see them, and
/// whether one ran off the manager's delegate queue (stream and WebSocket task tests).
final class TaskCompletionObserver: @unchecked Sendable {
    // @unchecked Sendable: every field is guarded by `lock`.
    private let lock = NSLock()
    private var completions: [Int: [Error?]] = [:]
    private var waiters: [Int: [CheckedContinuation<Error?, Never>]] = [:]
    private var counts = (readClosed: 0, writeClosed: 0, offQueue: 0)

    private static let queueKey = DispatchSpecificKey<String>()

    /// An observer of `manager`'s task completions and stream closings (it sets the manager's closures).
    init(observing manager: URLSessionManager) {
        manager.operationQueue.underlyingQueue?.setSpecific(key: Self.queueKey, value: "delegate")
        manager.taskDidComplete = { [self] _, task, error in
            if !Self.isOnDelegateQueue { count { $0.offQueue += 1 } }
            completed(task, error)
        }
        manager.streamTaskReadClosed = { [self] _, _ in count { $0.readClosed += 1 } }
        manager.streamTaskWriteClosed = { [self] _, _ in count { $0.writeClosed += 1 } }
    }

    /// Whether this code runs on the delegate queue of a manager an observer observes.
    static var isOnDelegateQueue: Bool { DispatchQueue.getSpecific(key: queueKey) == "delegate" }

    /// Read sides closed so far.
    var readClosed: Int { lock.withLock { counts.readClosed } }
    /// Write sides closed so far.
    var writeClosed: Int { lock.withLock { counts.writeClosed } }
    /// Callbacks that ran off the delegate queue.
    var offQueueCallbacks: Int { lock.withLock { counts.offQueue } }

    private func count(_ change: (inout (readClosed: Int, writeClosed: Int, offQueue: Int)) -> Void) {
        lock.withLock { change(&counts) }
    }

    private func completed(_ task: URLSessionTask, _ error: Error?) {
        lock.lock()
        completions[task.taskIdentifier, default: []].append(error)
        let waiting = waiters.removeValue(forKey: task.taskIdentifier) ?? []
        lock.unlock()
        for waiter in waiting { waiter.resume(returning: error) }
    }

    /// How many times `task` completed.
    func completionCount(of task: URLSessionTask) -> Int {
        lock.withLock { completions[task.taskIdentifier]?.count ?? 0 }
    }

    /// The task's completion error, once it completed.
    func completion(of task: URLSessionTask) async -> Error? {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let first = completions[task.taskIdentifier]?.first {
                lock.unlock()
                continuation.resume(returning: first)
            } else {
                waiters[task.taskIdentifier, default: []].append(continuation)
                lock.unlock()
            }
        }
    }
}
