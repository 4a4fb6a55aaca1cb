import Foundation

/// The client identity one task's connections present: the manager's when the task was made, unless the task is
/// given its own before it starts (``URLSessionManager/setClientIdentity(_:for:)``). Fixed once its first connection
/// read it, so that every connection of a task presents the same one.
final class TaskClientIdentity: Sendable {
    // Sendable, checked by the compiler: the state is a `Protected` box.
    private let state: Protected<(identity: ClientIdentity?, fixed: Bool)>

    /// The identity `identity` (the manager's), not fixed yet.
    init(_ identity: ClientIdentity?) {
        state = Protected((identity, false))
    }

    /// Replaces the identity (nil: none); false once a connection read it, when it is too late.
    func set(_ identity: ClientIdentity?) -> Bool {
        state.write { state in
            guard !state.fixed else { return false }
            state.identity = identity
            return true
        }
    }

    /// The identity for a connection of the task, fixed from now on.
    func forConnection() -> ClientIdentity? {
        state.write { state in
            state.fixed = true
            return state.identity
        }
    }
}
