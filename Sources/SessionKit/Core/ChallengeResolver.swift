import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
    func resolve(
        _ challenge: URLAuthenticationChallenge, for task: URLSessionTask, in session: URLSession
    )
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

    /// `challenge` with the credential stored for its protection space in `storage` as its proposed credential, when
    /// it has none and nothing was refused yet (a stored credential is proposed once: after a refusal, it is not
    /// tried again).
    ///
    /// URLProtectionSpace on Linux compares by identity, so `URLCredentialStorage.credentials(for:)` finds nothing for
    /// an equal space built anew, and URLSession never proposes a stored credential: the spaces are matched by their
    /// fields here.
    static func proposingStoredCredential(
        _ challenge: URLAuthenticationChallenge, from storage: URLCredentialStorage?
    )
        -> URLAuthenticationChallenge
    {
        guard challenge.proposedCredential == nil, challenge.previousFailureCount == 0, let storage,
            let stored = storedCredential(for: challenge.protectionSpace, in: storage)
        else { return challenge }
        return URLAuthenticationChallenge(
            protectionSpace: challenge.protectionSpace, proposedCredential: stored,
            previousFailureCount: challenge.previousFailureCount, failureResponse: challenge.failureResponse,
            error: challenge.error, sender: ChallengeSender())
    }

    /// The default credential of the stored space equal to `space` field by field, else its first by user name.
    static func storedCredential(for space: URLProtectionSpace, in storage: URLCredentialStorage) -> URLCredential? {
        for (candidate, credentials) in storage.allCredentials
        where candidate.host == space.host && candidate.port == space.port && candidate.protocol == space.protocol
            && candidate.realm == space.realm && candidate.authenticationMethod == space.authenticationMethod
            && candidate.proxyType == space.proxyType
        {
            return storage.defaultCredential(for: candidate) ?? credentials.sorted { $0.key < $1.key }.first?.value
        }
        return nil
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
