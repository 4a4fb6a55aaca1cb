import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Resumes and suspends a manager's tasks and posts its notifications.
///
/// A task its transport drives (``TransportDrivenTask``: the curl transport's, stream and WebSocket tasks) keeps
/// URLSession's promises itself: its `resume()` and `suspend()` work in every state (a loading task holds its transfer
/// in libcurl) and post the notifications. A task of URLSession's own (the Foundation transport) needs guarding against
/// two crashes of URLSession on Linux:
/// - `suspend()` on a task that is already loading stops the transfer later, on URLSession's internal work queue; if
///   a `resume()` lands before that stop has run, URLSession stops the process (`NativeProtocol.swift`). When the
///   stop runs cannot be observed from outside, so a loading task is not suspended at all: ``suspend(_:)`` says so
///   by returning false. A task that has not started yet can be suspended and resumed freely.
/// - a task resumed while it runs restarts its transfer (and then stops the process when both end), so resuming a
///   running task does nothing.
struct TaskControl: Sendable {
    /// Resumes `task` if it is suspended, and then posts `Notification.Name.sessionKitTaskDidResume`.
    func resume(_ task: URLSessionTask) {
        if let task = task as? TransportDrivenTask {
            return task.transportResume()
        }
        guard task.state == .suspended else { return }
        task.resume()
        NotificationCenter.default.post(name: .sessionKitTaskDidResume, object: task)
    }

    /// Suspends `task` (on the Foundation transport: unless it is loading), and posts
    /// `Notification.Name.sessionKitTaskDidSuspend` when it did.
    ///
    /// - Returns: Whether the task was suspended.
    @discardableResult
    func suspend(_ task: URLSessionTask) -> Bool {
        if let task = task as? TransportDrivenTask {
            return task.transportSuspend()
        }
        guard task.state == .suspended else { return false }
        task.suspend()
        NotificationCenter.default.post(name: .sessionKitTaskDidSuspend, object: task)
        return true
    }
}
