import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The per-task delegates of one manager, keyed by task identity (``TaskReference/registryKey``: a curl task's
/// driver's, so that its `URLSessionTask`, made only when asked for, finds the same entry).
///
/// A task is registered before it can be resumed and removed when it completes, so a finished task leaves
/// nothing behind. Keys are object identities, which stay unique across the sessions a manager builds after
/// each reset (task identifiers do not).
final class TaskRegistry: Sendable {
    // Sendable, checked by the compiler: `delegates` is a `Protected` box.
    private let delegates = Protected<[ObjectIdentifier: TaskDelegate]>([:])
    /// Stream and WebSocket tasks, which have no per-task delegate (their operations complete through their own
    /// handlers).
    private let streams = Protected<[ObjectIdentifier: URLSessionTask]>([:])

    /// Who watches a WebSocket task, which has no per-task delegate: its span, and the request its event monitors see.
    struct WebSocketObservers {
        var telemetry: TaskTelemetry?
        var observation: TaskDelegate.Observation?
    }

    /// The observers of WebSocket tasks (the other tasks' are their delegates').
    private let webSocketObservers = Protected<[ObjectIdentifier: WebSocketObservers]>([:])

    /// Registers the observers of WebSocket task `task` until it completes.
    func add(_ observers: WebSocketObservers, of task: SessionWebSocketTask) {
        webSocketObservers.write { $0[ObjectIdentifier(task)] = observers }
    }

    /// The observers of WebSocket task `task`, while it runs.
    func observers(of task: SessionWebSocketTask) -> WebSocketObservers? {
        webSocketObservers.read { $0[ObjectIdentifier(task)] }
    }

    /// Removes and returns the observers of WebSocket task `task`.
    func takeObservers(of task: SessionWebSocketTask) -> WebSocketObservers? {
        webSocketObservers.write { $0.removeValue(forKey: ObjectIdentifier(task)) }
    }

    /// Registers `delegate` for its task.
    func add(_ delegate: TaskDelegate) {
        delegates.write { $0[delegate.reference.registryKey] = delegate }
    }

    /// Registers a stream or WebSocket task until it completes.
    func add(_ stream: URLSessionTask) {
        streams.write { $0[stream.registryKey] = stream }
    }

    /// The delegate of `task`, if it is still running.
    func delegate(for task: any TaskReference) -> TaskDelegate? {
        let key = task.registryKey
        return delegates.read { $0[key] }
    }

    /// Removes and returns the delegate of `task`.
    @discardableResult
    func remove(_ task: any TaskReference) -> TaskDelegate? {
        let key = task.registryKey
        if let delegate = delegates.write({ $0.removeValue(forKey: key) }) { return delegate }
        streams.write { _ = $0.removeValue(forKey: key) }  // a stream or WebSocket task, which has no delegate
        return nil
    }

    /// The tasks still registered, oldest first (a curl task's `URLSessionTask` made now if it had none).
    var tasks: [URLSessionTask] {
        references.map(\.task).sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    /// What the registered tasks are known by, without making any `URLSessionTask`: for cancelling them all.
    var references: [any TaskReference] {
        delegates.read { $0.values.map(\.reference) } + streams.read { Array($0.values) }
    }

}
