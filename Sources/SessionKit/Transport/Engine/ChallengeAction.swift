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
