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
        let redirect = LockedRedirect()
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
                    redirect.response = response  // decided when the transfer ends; its body is not delivered
                    return
                }
                self?.onClientQueue { me in me.client?.urlProtocol(me, didReceive: response, cacheStoragePolicy: .notAllowed) }
            },
            data: { [weak self] data in
                guard redirect.response == nil else { return }
                self?.onClientQueue { me in me.client?.urlProtocol(me, didLoad: data) }
            },
            completion: { [weak self] error in
                let redirectResponse = redirect.response
                self?.onClientQueue { me in
                    if let error {
                        me.client?.urlProtocol(me, didFailWithError: error)
                    } else if let redirectResponse {
                        me.followRedirect(redirectResponse, from: request)
                    } else {
                        me.client?.urlProtocolDidFinishLoading(me)
                    }
                }
            },
            uploadProgress: { sent, expected in uploadProgress?(sent, expected) },
            timings: { [context] timings in context?.timings(timings) },
            flush: { [weak self] in self?.sendClientWork() })
        let maximumConnectionsPerHost = context?.maximumConnectionsPerHost ?? 0
        guard let transfer = CurlTransfer(request: request, policy: policy, idleTimeout: idleTimeout, totalTimeout: remaining,
                                          proxy: request.url?.scheme?.lowercased() == "https" ? context?.proxies.https : context?.proxies.http,
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

    /// The redirect response of one transfer, set on the engine thread and read on URLSession's queue after it.
    private final class LockedRedirect: @unchecked Sendable {
        // @unchecked Sendable: `storage` is a `Protected` box.
        private let storage = Protected<HTTPURLResponse?>(nil)
        var response: HTTPURLResponse? {
            get { storage.wrappedValue }
            set { storage.wrappedValue = newValue }
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
