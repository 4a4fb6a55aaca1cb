import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Resumes and suspends a manager's tasks and posts its notifications, whichever transport runs them.
///
/// A task its transport drives (``TransportDrivenTask``: the curl transport's, stream and WebSocket tasks) keeps
/// URLSession's promises itself: its `resume()` and `suspend()` work in every state (a loading task holds its transfer
/// in libcurl) and post the notifications. A task of URLSession's own goes through ``FoundationTaskTransport``, which
/// guards it against URLSession's crashes on Linux.
struct TaskControl: Sendable {
    /// Resumes `task` if it is suspended, and then posts `Notification.Name.sessionKitTaskDidResume`.
    ///
    /// - Parameter announces: Whether the notification is posted (not for a task no caller holds); a task its
    ///   transport drives asks the manager's event sink, which knows.
    func resume(_ task: URLSessionTask, announces: @autoclosure () -> Bool = true) {
        if let task = task.asTransportDriven {
            return task.transportResume()
        }
        FoundationTaskTransport.resume(task, announces: announces())
    }

    /// Suspends `task` (on the Foundation transport: unless it is loading), and posts
    /// `Notification.Name.sessionKitTaskDidSuspend` when it did.
    ///
    /// - Returns: Whether the task was suspended.
    @discardableResult
    func suspend(_ task: URLSessionTask, announces: @autoclosure () -> Bool = true) -> Bool {
        if let task = task.asTransportDriven {
            return task.transportSuspend()
        }
        return FoundationTaskTransport.suspend(task, announces: announces())
    }
}
