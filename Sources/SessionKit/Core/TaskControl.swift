import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Resumes, suspends and cancels a manager's tasks and posts its notifications, through the transport that made each
/// task (``TaskTransports/owner(of:)``): the manager and a task's `Progress` name no transport.
///
/// The curl transport's tasks (and stream and WebSocket tasks) keep URLSession's promises themselves: their
/// `resume()` and `suspend()` work in every state (a loading task holds its transfer in libcurl) and post the
/// notifications. URLSession's own go through ``FoundationTaskTransport``, which guards them against URLSession's
/// crashes on Linux.
struct TaskControl: Sendable {
    let transports: TaskTransports

    /// Resumes `task` if it is suspended, and then posts `Notification.Name.sessionKitTaskDidResume`.
    ///
    /// - Parameter announces: Whether the notification is posted (not for a task no caller holds); a transport that
    ///   reports through the event sink asks the sink, which knows.
    func resume(_ task: any TaskReference, announces: @autoclosure () -> Bool = true) {
        let owner = transports.owner(of: task)
        owner.resume(task, announces: owner.reportsSuspension || announces())
    }

    /// Suspends `task` (on the Foundation transport: unless it is loading), and posts
    /// `Notification.Name.sessionKitTaskDidSuspend` when it did.
    ///
    /// - Returns: Whether the task was suspended.
    @discardableResult
    func suspend(_ task: any TaskReference, announces: @autoclosure () -> Bool = true) -> Bool {
        let owner = transports.owner(of: task)
        return owner.suspend(task, announces: owner.reportsSuspension || announces())
    }

    /// Cancels `task`: it completes once, with `URLError.cancelled`.
    func cancel(_ task: any TaskReference) {
        transports.owner(of: task).cancel(task)
    }

    /// Whether the caller's resume and suspend of `task` reach its delegate from the transport (else the manager
    /// tells it).
    func reportsSuspension(of task: any TaskReference) -> Bool {
        transports.owner(of: task).reportsSuspension
    }

    /// Whether invalidating the session with `invalidateAndCancel()` cancels `task` (else the manager cancels it).
    func sessionCancels(_ task: any TaskReference) -> Bool {
        transports.owner(of: task).sessionCancelsTasks
    }

    /// Sets the identity `task`'s connections present; a transport that cannot present one ends the task when it is
    /// `running`.
    func setClientIdentity(_ identity: ClientIdentity?, for task: any TaskReference, running: Bool) {
        transports.owner(of: task).setClientIdentity(identity, for: task, running: running)
    }
}
