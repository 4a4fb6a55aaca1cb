import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the curl transport takes from a session configuration (URLSession does not apply it for a protocol).
struct CurlSessionSettings {
    let additionalHeaders: [String: String]
    let cookieStorage: HTTPCookieStorage?
    let idleTimeout: TimeInterval
    let resourceTimeout: TimeInterval
    let maximumConnectionsPerHost: Int
    let proxies: (http: String?, https: String?)
    let credentialStorage: URLCredentialStorage?

    init(_ configuration: URLSessionConfiguration) {
        var headers: [String: String] = [:]
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            if let name = name.base as? String, let value = value as? String { headers[name] = value }
        }
        additionalHeaders = headers
        cookieStorage = configuration.httpShouldSetCookies ? configuration.httpCookieStorage : nil
        idleTimeout = configuration.timeoutIntervalForRequest
        resourceTimeout = configuration.timeoutIntervalForResource
        maximumConnectionsPerHost = configuration.httpMaximumConnectionsPerHost
        proxies = URLSessionManager.proxies(in: configuration)
        credentialStorage = configuration.urlCredentialStorage
    }
}

extension URLSessionManager {
    /// Registers what `task` needs on the curl transport (its policy, the configuration, the routes back to its
    /// delegate and to the closure overrides) and returns its back-pressure.
    func registerCurlContext(for task: URLSessionTask, policy: SecurityPolicy) -> FlowControl {
        let settings = curlSettings
        let operationQueue = self.operationQueue
        let overrides = self.overrides
        let registry = self.registry
        let session = self.session
        let flowControl = FlowControl()
        let context = CurlURLProtocol.Context(
            policy: policy, idleTimeout: settings.idleTimeout, resourceTimeout: settings.resourceTimeout,
            additionalHeaders: settings.additionalHeaders,
            cookieStorage: settings.cookieStorage, maximumConnectionsPerHost: settings.maximumConnectionsPerHost,
            proxies: settings.proxies,
            redirect: { [weak task] response, request in
                // Called on URLSession's work queue, once per redirect of this task.
                guard let task else { return request }
                let decided = overrides.read({ $0.taskWillPerformHTTPRedirection }).map { $0(session, task, response, request) }
                    ?? request
                if let decided { registry.delegate(for: task)?.willRedirect(response, to: decided) }
                return decided
            },
            challenge: { [weak task] challenge in
                // Called on URLSession's work queue, once per challenge of this task.
                guard let task else { return .cancel }
                return ChallengeResolver(overrides: overrides).resolve(challenge, for: task, in: session)
            },
            deliversChallengeResponse: { [weak task] in
                if let task { registry.markCancellation(of: task, as: .challengeResponse) }
            },
            credentialStorage: settings.credentialStorage,
            uploadProgress: { [weak task] sent, expected in
                // URLSession has no upload-progress callback for a protocol: report to the delegate ourselves, on
                // the delegate queue, as URLSession would.
                guard let task else { return }
                operationQueue.addOperation {
                    overrides.read { $0.taskDidSendBodyData }?(session, task, 0, sent, expected)
                    registry.delegate(for: task)?.didSendBodyData(totalBytesSent: sent, totalBytesExpectedToSend: expected)
                }
            },
            flowControl: flowControl,
            timings: { [weak task] timings in
                guard let task else { return }
                registry.delegate(for: task)?.didCollect(timings)
                // The closure only when someone set it: an operation on the delegate queue costs about 15k
                // instructions.
                guard let observe = overrides.read({ $0.taskDidFinishCollectingTimings }) else { return }
                operationQueue.addOperation { observe(session, task, timings) }
            })
        CurlURLProtocol.contexts.write { $0[ObjectIdentifier(task)] = context }
        return flowControl
    }
}
