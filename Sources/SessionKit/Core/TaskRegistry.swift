import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The per-task delegates of one manager, keyed by task identity.
///
/// A task is registered before it can be resumed and removed when it completes, so a finished task leaves
/// nothing behind. Keys are object identities, which stay unique across the sessions a manager builds after
/// each reset (task identifiers do not).
final class TaskRegistry: @unchecked Sendable {
    // @unchecked Sendable: `delegates` is a `Protected` box.
    private let delegates = Protected<[ObjectIdentifier: TaskDelegate]>([:])
    /// Tasks whose coming cancellation delivers the response of an authentication challenge (see
    /// ``markChallengeResponseDelivery(for:)``).
    private let challengeResponses = Protected<Set<ObjectIdentifier>>([])

    /// Registers `delegate` for its task.
    func add(_ delegate: TaskDelegate) {
        delegates.write { $0[ObjectIdentifier(delegate.task)] = delegate }
    }

    /// The delegate of `task`, if it is still running.
    func delegate(for task: URLSessionTask) -> TaskDelegate? {
        delegates.read { $0[ObjectIdentifier(task)] }
    }

    /// Removes and returns the delegate of `task`.
    @discardableResult
    func remove(_ task: URLSessionTask) -> TaskDelegate? {
        delegates.write { $0.removeValue(forKey: ObjectIdentifier(task)) }
    }

    /// Notes that `task` ends with the response of an authentication challenge nobody answered: URLSession ends it by
    /// a cancellation, which ``takeChallengeResponseDelivery(for:)`` turns back into the delivery of that response.
    func markChallengeResponseDelivery(for task: URLSessionTask) {
        challengeResponses.write { _ = $0.insert(ObjectIdentifier(task)) }
    }

    /// Whether `task` was marked by ``markChallengeResponseDelivery(for:)``; clears the mark.
    func takeChallengeResponseDelivery(for task: URLSessionTask) -> Bool {
        challengeResponses.write { $0.remove(ObjectIdentifier(task)) != nil }
    }

    /// The tasks still registered, oldest first.
    var tasks: [URLSessionTask] {
        delegates.read { $0.values.map(\.task) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

}
