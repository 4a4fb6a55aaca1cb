import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a task does about an HTTP authentication challenge (a 401 with `WWW-Authenticate`, or a 407 with
/// `Proxy-Authenticate`).
enum ChallengeAction: Equatable {
    /// Sends the request again with this credential.
    case retry(URLCredential)
    /// Ends the task with the challenging response and its body as its result (the response serializer then
    /// refuses the status, -1011, with the response and body in the error).
    case deliverResponse
    /// Ends the task with `URLError.cancelled`.
    case cancel
}

/// Turns the answer of the manager's challenge closures into a ``ChallengeAction``: the one place where both
/// transports decide what a challenge leads to.
///
/// The task-level closure (`taskDidReceiveAuthenticationChallenge`) is asked first, then the session-level one
/// (`sessionDidReceiveAuthenticationChallenge`); without either, the default handling applies. The dispositions mean
/// what they mean for URLSession on Apple platforms:
/// - `.useCredential` with a credential retries with it (without one, it is the default handling);
/// - `.performDefaultHandling` retries with the challenge's proposed credential (the configuration's
///   `URLCredentialStorage`, never the same stored credential twice), else delivers the response;
/// - `.rejectProtectionSpace` delivers the response;
/// - `.cancelAuthenticationChallenge` cancels the task.
///
/// A task is never challenged without end: after ``maximumFailures`` refused credentials the response is delivered
/// without asking again.
struct ChallengeResolver {
    /// How many refused credentials a task takes before it delivers the challenging response.
    static let maximumFailures = 3

    /// The manager's closure overrides.
    let overrides: Protected<DelegateOverrides>

    /// The action for `challenge`, received by `task` of `session`. Runs the user's closures, so it is called
    /// outside any lock.
    func resolve(_ challenge: URLAuthenticationChallenge, for task: URLSessionTask, in session: URLSession)
        -> ChallengeAction
    {
        guard challenge.previousFailureCount < Self.maximumFailures else { return .deliverResponse }
        let (taskClosure, sessionClosure) = overrides.read {
            ($0.taskDidReceiveAuthenticationChallenge, $0.sessionDidReceiveAuthenticationChallenge)
        }
        let answer: (URLSession.AuthChallengeDisposition, URLCredential?)
        if let taskClosure {
            answer = taskClosure(session, task, challenge)
        } else if let sessionClosure {
            answer = sessionClosure(session, challenge)
        } else {
            answer = (.performDefaultHandling, nil)
        }
        return Self.action(for: answer.0, credential: answer.1, proposed: challenge.proposedCredential)
    }

    /// The action a disposition stands for, given the credential that came with it and the challenge's proposed one.
    static func action(
        for disposition: URLSession.AuthChallengeDisposition, credential: URLCredential?, proposed: URLCredential?
    ) -> ChallengeAction {
        switch disposition {
        case .useCredential:
            if let credential { return .retry(credential) }
            return proposed.map(ChallengeAction.retry) ?? .deliverResponse
        case .performDefaultHandling:
            return proposed.map(ChallengeAction.retry) ?? .deliverResponse
        case .rejectProtectionSpace:
            return .deliverResponse
        case .cancelAuthenticationChallenge:
            return .cancel
        @unknown default:
            return .deliverResponse
        }
    }
}
