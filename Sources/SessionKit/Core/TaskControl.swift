import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Resumes and suspends a manager's tasks and posts its notifications, refusing the one transition URLSession on
/// Linux does not survive.
///
/// URLSession's `suspend()` on a task that is already loading stops the transfer later, on its internal work
/// queue; if a `resume()` lands before that stop has run, the stop finds a running task without an error and
/// URLSession stops the process (`NativeProtocol.swift`, "Fatal error"). When the stop runs depends on URLSession's
/// cache lookups and cannot be observed from outside, so on the Foundation transport a loading task is not
/// suspended at all: ``suspend(_:)`` says so by returning false. A task that has not started yet can be suspended
/// and resumed freely.
///
/// URLSession on Linux also restarts the transfer of a task that is resumed while it runs (and then stops the
/// process when both transfers end), so resuming a running task does nothing — except on the curl transport, where
/// a loading task is paused and resumed inside libcurl (``FlowControl``) without URLSession knowing.
struct TaskControl: Sendable {
    /// Resumes `task` if it is suspended (or, on the curl transport, paused), and then posts
    /// `Notification.Name.sessionKitTaskDidResume`.
    func resume(_ task: URLSessionTask) {
        if task.state == .running, let flow = Self.curlFlowControl(of: task) {
            if flow.release() { NotificationCenter.default.post(name: .sessionKitTaskDidResume, object: task) }
            return
        }
        guard task.state == .suspended else { return }
        task.resume()
        NotificationCenter.default.post(name: .sessionKitTaskDidResume, object: task)
    }

    /// Suspends `task` unless it is loading, and posts `Notification.Name.sessionKitTaskDidSuspend`
    /// when it did.
    ///
    /// - Returns: Whether the task was suspended.
    @discardableResult
    func suspend(_ task: URLSessionTask) -> Bool {
        // On the curl transport a loading task is paused in libcurl (`CURL_WRITEFUNC_PAUSE` at its next bytes) and
        // URLSession never learns of it: its task stays running, its connection open.
        if task.state == .running, let flow = Self.curlFlowControl(of: task) {
            guard flow.hold() else { return false }
            NotificationCenter.default.post(name: .sessionKitTaskDidSuspend, object: task)
            return true
        }
        guard task.state == .suspended else { return false }
        task.suspend()
        NotificationCenter.default.post(name: .sessionKitTaskDidSuspend, object: task)
        return true
    }

    /// The back-pressure of `task` when it runs on the curl transport.
    private static func curlFlowControl(of task: URLSessionTask) -> FlowControl? {
        CurlURLProtocol.contexts.read { $0[ObjectIdentifier(task)]?.flowControl }
    }
}
