internal import CCurl
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// SessionKit's libcurl transport under URLSession: a `URLProtocol` whose requests run on a ``CurlEngine``.
///
/// URLSession calls `startLoading` on its internal work queue, and its client must be called on that same queue
/// (from another thread, URLSession's task registry crashes under load). The queue is captured in `startLoading`
/// and every client call is sent there; calls after `stopLoading` are dropped.
final class CurlURLProtocol: URLProtocol, @unchecked Sendable {
    // @unchecked Sendable: `state` is a `Protected` box; the rest is set in `startLoading` before any callback.

    /// What a task needs from its manager on this transport.
    struct Context {
        let policy: SecurityPolicy
        /// The session configuration's `timeoutIntervalForRequest`.
        let idleTimeout: TimeInterval
        /// The session configuration's `timeoutIntervalForResource`: the whole task, redirects included.
        let resourceTimeout: TimeInterval
        /// The session configuration's `httpAdditionalHeaders` (URLSession does not merge them for a protocol).
        let additionalHeaders: [String: String]
        /// Where cookies are read and stored, nil when the configuration does not handle cookies.
        let cookieStorage: HTTPCookieStorage?
        /// The session configuration's `httpMaximumConnectionsPerHost`.
        let maximumConnectionsPerHost: Int
        /// The proxy for `http` and for `https` URLs from the configuration's `connectionProxyDictionary`
        /// (`HTTPEnable`/`HTTPProxy`/`HTTPPort`, `HTTPSEnable`/`HTTPSProxy`/`HTTPSPort`), as `http://host:port`;
        /// nil leaves libcurl's own choice (the `http_proxy`, `https_proxy` and `no_proxy` environment).
        let proxies: (http: String?, https: String?)
        /// The manager's redirect decision: the request to follow, or nil to stop and deliver the 3xx.
        let redirect: (HTTPURLResponse, URLRequest) -> URLRequest?
        /// The manager's answer to an authentication challenge (a 401 or 407 that names a scheme).
        let challenge: (URLAuthenticationChallenge) -> ChallengeAction
        /// Tells the manager that the task's cancellation, which follows, delivers the challenging response it just
        /// received (URLSession would otherwise raise a challenge of its own for a 401, and on Linux never end it).
        let deliversChallengeResponse: () -> Void
        /// The configuration's `urlCredentialStorage`: where the default handling of a challenge looks.
        let credentialStorage: URLCredentialStorage?
        /// Reports body bytes sent (sent, expected) to the task's delegate.
        let uploadProgress: @Sendable (Int64, Int64) -> Void
        /// Back-pressure between the transfer and the per-task delegate.
        let flowControl: FlowControl
        /// Reports each transfer's timings (one per redirect step) to the manager.
        let timings: @Sendable (TransferTimings) -> Void
    }

    /// The context of each task that runs on this transport, by task identity (per-task configuration cannot
    /// travel through the request on Linux: `URLProtocol.setProperty` values are lost).
    static let contexts = Protected<[ObjectIdentifier: Context]>([:])

    private struct State {
        var transfer: CurlTransfer?
        var engine: CurlEngine?
        var stopped = false
    }

    private let state = Protected(State())
    private var queue: UnsafeMutableRawPointer?

    override class func canInit(with request: URLRequest) -> Bool {
        ["http", "https"].contains(request.url?.scheme?.lowercased() ?? "")
    }

    override class func canInit(with task: URLSessionTask) -> Bool {
        contexts.read { $0[ObjectIdentifier(task)] != nil }
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    deinit {
        if let queue { sk_dispatch_release(queue) }
    }

    override func startLoading() {
        queue = sk_dispatch_current_queue()
        context = task.flatMap { task in Self.contexts.read { $0[ObjectIdentifier(task)] } }
        var request = self.request
        for (field, value) in context?.additionalHeaders ?? [:] where request.value(forHTTPHeaderField: field) == nil {
            request.setValue(value, forHTTPHeaderField: field)
        }
        start(request)
    }

    private var context: Context?
    private var redirects = RedirectState()
    /// Challenges answered so far (the challenge's `previousFailureCount`), for the server and for the proxy.
    private var challengeFailures = (server: 0, proxy: 0)
    /// The credentials this task answered challenges with: the server's only go to the origin that asked for them.
    private var serverCredential: (credential: CurlTransfer.Credential, origin: String)?
    private var proxyCredential: CurlTransfer.Credential?
    /// When the resource timeout ends the task, set when its first request starts.
    private var deadline: Date?

    /// Runs `request` (the first one, or the next of a redirect chain) on the engine of the task's policy.
    private func start(_ request: URLRequest) {
        let policy = context?.policy ?? SecurityPolicy.default
        let idleTimeout = min(request.timeoutInterval, context?.idleTimeout ?? request.timeoutInterval)
        if deadline == nil, let resourceTimeout = context?.resourceTimeout, resourceTimeout > 0, resourceTimeout.isFinite {
            deadline = Date().addingTimeInterval(resourceTimeout)
        }
        let remaining = deadline.map { $0.timeIntervalSinceNow }
        if let remaining, remaining <= 0 {
            client?.urlProtocol(self, didFailWithError: URLError(.timedOut, userInfo: [
                NSLocalizedDescriptionKey: "The request took longer than the session's resource timeout.",
                NSURLErrorFailingURLErrorKey: request.url as Any,
            ]))
            return
        }
        var request = request
        let cookieStorage = request.httpShouldHandleCookies ? context?.cookieStorage : nil
        if let cookieStorage, let url = request.url, request.value(forHTTPHeaderField: "Cookie") == nil,
           let cookies = cookieStorage.cookies(for: url), !cookies.isEmpty {
            for (field, value) in HTTPCookie.requestHeaderFields(with: cookies) { request.setValue(value, forHTTPHeaderField: field) }
        }
        let uploadProgress = context?.uploadProgress
        let held = HeldResponse()
        let events = CurlTransfer.Events(
            response: { [weak self] response, lines in
                if let cookieStorage, let url = response.url {
                    let setCookies = lines.filter { $0.0.equalsIgnoringASCIICase("Set-Cookie") }
                    for (_, value) in setCookies {
                        let cookies = HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": value], for: url)
                        cookieStorage.setCookies(cookies, for: url, mainDocumentURL: nil)
                    }
                }
                if RedirectState.isRedirect(response.statusCode), response.value(forHTTPHeaderField: "Location") != nil {
                    held.hold(response, challenge: nil)  // decided when the transfer ends; its body is not delivered
                    return
                }
                if let challenge = AuthenticationChallengeHeader(response: response) {
                    held.hold(response, challenge: challenge)  // answered when the transfer ends
                    return
                }
                self?.onClientQueue { me in me.client?.urlProtocol(me, didReceive: response, cacheStoragePolicy: .notAllowed) }
            },
            data: { [weak self] data in
                guard !held.keep(data) else { return }
                self?.onClientQueue { me in me.client?.urlProtocol(me, didLoad: data) }
            },
            completion: { [weak self] error in
                let (heldResponse, challenge, body) = held.take()
                self?.onClientQueue { me in
                    if let error {
                        me.client?.urlProtocol(me, didFailWithError: error)
                    } else if let heldResponse, let challenge {
                        me.answer(challenge, of: heldResponse, body: body, to: request)
                    } else if let heldResponse {
                        me.followRedirect(heldResponse, from: request)
                    } else {
                        me.client?.urlProtocolDidFinishLoading(me)
                    }
                }
            },
            uploadProgress: { sent, expected in uploadProgress?(sent, expected) },
            timings: { [context] timings in context?.timings(timings) },
            flush: { [weak self] in self?.sendClientWork() })
        let maximumConnectionsPerHost = context?.maximumConnectionsPerHost ?? 0
        var credentials: [CurlTransfer.Credential] = proxyCredential.map { [$0] } ?? []
        if let serverCredential, serverCredential.origin == Self.origin(of: request.url) {
            credentials.append(serverCredential.credential)  // never to another origin after a redirect
        }
        guard let transfer = CurlTransfer(request: request, policy: policy, idleTimeout: idleTimeout, totalTimeout: remaining,
                                          proxy: proxy(for: request.url), credentials: credentials,
                                          flowControl: context?.flowControl, events: events),
              attach(transfer, policy: policy, maximumConnectionsPerHost: maximumConnectionsPerHost)
        else {
            client?.urlProtocol(self, didFailWithError: URLError(.unknown, userInfo: [
                NSLocalizedDescriptionKey: "libcurl could not be set up for this request.",
                NSURLErrorFailingURLErrorKey: request.url as Any,
            ]))
            return
        }
    }

    /// Starts `transfer` on the engine of `policy`; an engine that retired meanwhile (idle) is replaced by a new one.
    private func attach(_ transfer: CurlTransfer, policy: SecurityPolicy, maximumConnectionsPerHost: Int) -> Bool {
        for _ in 0..<3 {
            guard let engine = CurlEngine.engine(for: policy, maximumConnectionsPerHost: maximumConnectionsPerHost)
            else { return false }
            state.write {
                $0.transfer = transfer
                $0.engine = engine
            }
            context?.flowControl.resume = { [weak engine, weak transfer] in
                if let engine, let transfer { engine.unpause(transfer) }
            }
            if engine.add(transfer) { return true }
        }
        return false
    }

    /// A 3xx ended: ask the manager's redirect closure, then follow, or deliver the 3xx as the response.
    private func followRedirect(_ response: HTTPURLResponse, from request: URLRequest) {
        switch redirects.next(after: response, to: request) {
        case .failure(let error):
            client?.urlProtocol(self, didFailWithError: error)
        case .success(let proposed):
            if let next = context?.redirect(response, proposed) {
                start(next)
            } else {
                client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
                client?.urlProtocolDidFinishLoading(self)
            }
        }
    }

    /// A 401 or 407 ended: ask the manager, then retry with a credential, deliver the response, or cancel.
    private func answer(_ header: AuthenticationChallengeHeader, of response: HTTPURLResponse, body: Data,
                        to request: URLRequest) {
        let proxyURL = header.isProxy ? proxy(for: request.url).flatMap(URL.init(string:)) : nil
        let space = header.protectionSpace(for: request.url ?? response.url ?? URL(fileURLWithPath: "/"), proxyURL: proxyURL)
        let failures = header.isProxy ? challengeFailures.proxy : challengeFailures.server
        if header.isProxy { challengeFailures.proxy += 1 } else { challengeFailures.server += 1 }
        let challenge = ChallengeResolver.proposingStoredCredential(
            URLAuthenticationChallenge(
                protectionSpace: space, proposedCredential: nil, previousFailureCount: failures,
                failureResponse: response, error: nil, sender: ChallengeSender()),
            from: context?.credentialStorage)
        switch context?.challenge(challenge) ?? .deliverResponse {
        case .retry(let credential):
            let answer = CurlTransfer.Credential(credential, scheme: header.scheme, forProxy: header.isProxy)
            if header.isProxy {
                proxyCredential = answer
            } else {
                serverCredential = (answer, Self.origin(of: request.url))
            }
            start(request)
        case .deliverResponse:
            // The response and its body are the task's result; the cancellation only ends URLSession's task, and the
            // manager turns it back into a success.
            context?.deliversChallengeResponse()
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { client?.urlProtocol(self, didLoad: body) }
            client?.urlProtocol(self, didFailWithError: URLError(.cancelled, userInfo: [
                NSLocalizedDescriptionKey: "The authentication challenge was not answered; its response is the result.",
                NSURLErrorFailingURLErrorKey: request.url as Any,
            ]))
        case .cancel:
            client?.urlProtocol(self, didFailWithError: URLError(.cancelled, userInfo: [
                NSLocalizedDescriptionKey: "The authentication challenge was cancelled.",
                NSURLErrorFailingURLErrorKey: request.url as Any,
            ]))
        }
    }

    /// The proxy of the configuration for `url`'s scheme, as `http://host:port`.
    private func proxy(for url: URL?) -> String? {
        url?.scheme?.lowercased() == "https" ? context?.proxies.https : context?.proxies.http
    }

    /// `scheme://host:port` of `url`, with the scheme's default port.
    private static func origin(of url: URL?) -> String {
        let scheme = url?.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url?.host?.lowercased() ?? ""):\(url?.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// A redirect or challenge response of one transfer, with its body, set on the engine thread and taken on
    /// URLSession's queue after it.
    private final class HeldResponse: @unchecked Sendable {
        // @unchecked Sendable: `storage` is a `Protected` box.
        private let storage = Protected<(HTTPURLResponse?, AuthenticationChallengeHeader?, Data)>((nil, nil, Data()))
        /// The body of a challenge kept for delivery, at most this many bytes (a challenge's page is small).
        private static let bodyLimit = 1 << 20

        func hold(_ response: HTTPURLResponse, challenge: AuthenticationChallengeHeader?) {
            storage.write { $0 = (response, challenge, Data()) }
        }

        /// Keeps `data` if a response is held (a challenge's body, within the limit); false when none is.
        func keep(_ data: Data) -> Bool {
            storage.write { held in
                guard held.0 != nil else { return false }
                if held.1 != nil, held.2.count + data.count <= Self.bodyLimit { held.2.append(data) }
                return true
            }
        }

        func take() -> (HTTPURLResponse?, AuthenticationChallengeHeader?, Data) {
            storage.write { held in
                defer { held = (nil, nil, Data()) }
                return held
            }
        }
    }


    override func stopLoading() {
        let (engine, transfer) = state.write { state -> (CurlEngine?, CurlTransfer?) in
            state.stopped = true
            return (state.engine, state.transfer)
        }
        if let engine, let transfer { engine.remove(transfer) }
    }

    /// Client calls queued on the engine thread, sent together by ``sendClientWork()``.
    private let outbox = Protected<[(CurlURLProtocol) -> Void]>([])

    /// Queues `body` to run on the queue URLSession started this protocol on (unless loading was stopped by then).
    /// Called on the engine thread; the engine sends the queue at the end of its pass.
    private func onClientQueue(_ body: @escaping (CurlURLProtocol) -> Void) {
        outbox.write { $0.append(body) }
    }

    /// Sends the queued client calls to URLSession's queue in one `dispatch_async_f`, in order.
    private func sendClientWork() {
        let bodies = outbox.write { outbox -> [(CurlURLProtocol) -> Void] in
            defer { outbox.removeAll(keepingCapacity: true) }
            return outbox
        }
        guard let queue, !bodies.isEmpty else { return }
        let work = ClientWork(protocolObject: self, bodies: bodies)
        sk_dispatch_async_f(queue, Unmanaged.passRetained(work).toOpaque()) { context in
            guard let context else { return }
            let work = Unmanaged<ClientWork>.fromOpaque(context).takeRetainedValue()
            for body in work.bodies {
                guard !work.protocolObject.state.read({ $0.stopped }) else { return }
                body(work.protocolObject)
            }
        }
    }

    /// Client calls travelling to URLSession's queue together.
    private final class ClientWork {
        let protocolObject: CurlURLProtocol
        let bodies: [(CurlURLProtocol) -> Void]

        init(protocolObject: CurlURLProtocol, bodies: [(CurlURLProtocol) -> Void]) {
            self.protocolObject = protocolObject
            self.bodies = bodies
        }
    }
}
