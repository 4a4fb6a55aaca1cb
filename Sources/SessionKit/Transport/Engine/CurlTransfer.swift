internal import CCurl
internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request on libcurl: its easy handle, the response head parsed as bytes, the body, and the TLS check.
///
/// For https, libcurl's own peer verification is off and OpenSSL's verify callback (installed through
/// `CURLOPT_SSL_CTX_FUNCTION`) evaluates the ``SecurityPolicy`` on the chain of the handshake. A pre-request
/// callback (`CURLOPT_PREREQFUNCTION`, run after the connection is set up and before any request byte) aborts the
/// transfer unless that evaluation passed on this connection, or the connection is a reused one of the same
/// policy's engine. The TLS session cache is off, so a resumed session never skips the check.
final class CurlTransfer: @unchecked Sendable {
    // @unchecked Sendable: after `init`, the fields are used on the engine thread only (its callbacks and end check
    // it: `EngineThread`); `handshake` is written by OpenSSL's callback on that same thread.

    /// What the transfer reports, on the engine thread.
    struct Events {
        /// The response head as parsed (its `HTTPURLResponse` is built by whoever receives it: it costs as much as the
        /// rest of a small transfer, and the engine thread is the busiest one).
        var response: (ResponseHead) -> Void
        var data: (Data) -> Void
        var completion: (URLError?) -> Void
        /// Body bytes sent so far, and the body's size (-1 unknown).
        var uploadProgress: (Int64, Int64) -> Void
        /// The response's trailer fields, after its body (before `completion`).
        var trailers: ([(String, String)]) -> Void = { _ in }
        /// libcurl's timings, once the transfer ended.
        var timings: (TransferTimings) -> Void = { _ in }
        /// A pin mismatch the policy only reports (``SecurityPolicy/reportsOnly``): the connection went on.
        var pinningReport: (PinningReport) -> Void = { _ in }
        /// Sends what `response`, `data` and `completion` queued in this pass of the engine, in one piece.
        var flush: () -> Void = {}
    }

    let easy: UnsafeMutableRawPointer
    private let url: URL
    /// The request's method, upper-cased.
    private let method: String
    private let isTLS: Bool
    private let events: Events
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var statusCode = 0
    private var httpVersion = "HTTP/1.1"
    /// Reads the response head line by line.
    private var head = ResponseHeadParser()
    private var responseDelivered = false
    /// The policy's decision on this transfer's TLS handshake.
    private let handshake: HandshakeCheck
    /// No byte for this long ends the transfer with `URLError.timedOut` (URLSession's request timeout is an idle
    /// timeout, which libcurl's own options do not express while waiting for the response head).
    private let idleTimeout: TimeInterval
    private var lastActivity = Date()
    private var lastProgress: (Int64, Int64) = (0, 0)
    private var timedOut = false
    /// The Unix socket the URL names (`http+unix`, `https+unix`), nil for a TCP URL.
    private let unixSocket: UnixSocketURL?
    /// libcurl's `CURLOPT_CONNECT_TO` list (the manager's resolved addresses), freed with the handle.
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    /// The longest wait from the request's last byte sent to the first byte of a response head; nil for none.
    private let responseHeadTimeout: TimeInterval?
    /// When the request's last byte went out (or the request started), while no response head byte has come.
    private var headClock: Date?
    /// Whether a byte of a response head arrived (the response-head timeout no longer applies).
    private var headStarted = false
    /// Set when the response-head timeout ended the transfer.
    private var headTimedOut = false
    private var uploadLength: Int64 = -1
    private var bodyStream: InputStream?
    /// The file ``bodyStream`` reads, when the transfer opened it itself: libcurl may rewind it (the seek callback
    /// opens it again), as it does a `Data` body, to send it again on a fresh connection.
    private let bodyFile: URL?
    /// Whether a POST's `httpBody` without a `Content-Type` goes as `application/x-www-form-urlencoded` (a data
    /// task's, as URLSession sends it); false for an upload task's.
    private let formTypeByDefault: Bool
    /// A body written while it is sent (the HTTP core API's streamed body), read without blocking.
    private var bodyPipe: RequestBodyPipe?
    /// The response's trailer lines (after its body), bounded like its head.
    private var trailerFields: [(String, String)] = []
    /// Back-pressure towards the per-task delegate, nil when the task has none.
    let flowControl: FlowControl?
    private var bodyStreamFailed = false
    /// Bytes a body stream read in place has given (engine thread), and whether it ended before its `Content-Length`.
    private var bodyStreamSent: Int64 = 0
    private var bodyStreamEndedShort = false

    /// A credential answering an authentication challenge: the origin server's (401) or the proxy's (407).
    struct Credential: Equatable {
        let user: String
        let password: String
        /// The challenge's scheme, as libcurl's `CURLAUTH_…` bits.
        let schemes: Int
        /// Whether it answers the proxy (`CURLOPT_PROXYUSERNAME`…) rather than the origin server.
        let forProxy: Bool

        /// The credential for a challenge of `scheme` (`Basic`, `Digest`…).
        init(_ credential: URLCredential, scheme: String, forProxy: Bool) {
            user = credential.user ?? ""
            password = credential.password ?? ""
            switch scheme.lowercased() {
            case "basic": schemes = 1  // CURLAUTH_BASIC: sent with the request itself
            case "digest": schemes = 2  // CURLAUTH_DIGEST: libcurl answers the server's nonce in the same transfer
            default: schemes = 1 | 2
            }
            self.forProxy = forProxy
        }
    }

    /// Whether a 401 or 407 head may still be followed by libcurl's own authenticated retry in this transfer
    /// (Digest): such a head is reported at its first body byte or at the end, not when it ends.
    private let answersChallenges: Bool

    /// The methods RFC 9110 calls idempotent: only these may be sent again transparently.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]
    /// A response head larger than this many bytes, or with more fields, ends the transfer (`.badServerResponse`).
    static let maximumHeadBytes = 96 * 1024
    static let maximumHeadFields = 256

    /// Whether libcurl may send this transfer's request again on a fresh connection (after a reused one died before
    /// any response byte): only an idempotent one. A non-idempotent request is written at most once per transfer.
    private let mayResend: Bool
    /// Requests libcurl started on a connection so far (``prerequestCallback``).
    private var requestsStarted = 0
    /// The status of the last response head that answered the request libcurl started last, nil before one: a new
    /// start after a complete 401 or 407 is libcurl's authentication round; any other is a resend after a failure.
    private var lastStartAnswer: Int?
    /// Resends libcurl made on its own after a reused connection failed before any response byte (at most one).
    private var automaticResends = 0
    /// Set when libcurl wanted to send the request again and may not: the transfer ends instead.
    private var resendRefused = false
    /// Why the response head is not HTTP, when that ended the transfer.
    private var malformedHead: String?
    /// Whether libcurl's decoding is off for this response: it names a coding libcurl does not decode, so its bytes
    /// are delivered as they came (RFC 9110 8.4), with the field kept.
    private var decodingOff = false
    /// Bytes and fields of the response head so far, and whether a bound was crossed.
    private var headBytes = 0
    private var headTooLarge = false
    /// The decoding bounds: decoded bytes at most `ratio` times the bytes on the wire (checked past 1 MiB), and at most
    /// `size` decoded bytes.
    struct DecodingLimits: Sendable, Equatable {
        var ratio: Int?
        var size: Int64?
    }

    private let decodingLimits: DecodingLimits
    /// Body bytes handed on so far, after decoding.
    private var decodedBytes: Int64 = 0
    /// Set when a decoding bound was crossed: the transfer ended with `.dataLengthExceedsMaximum`.
    private var decodingLimitCrossed: String?

    /// Counts the connections this transfer opens and uses (`http.client.open_connections`), when metrics are on.
    private let connectionObserver: CurlConnectionObserver?

    /// What was left of the task's resource timeout when this transfer started, nil for none.
    private let totalTimeout: TimeInterval?

    /// A `.timedOut` error saying which limit fired (`userInfo[SessionKitError.timeoutLimitKey]`).
    private static func timeout(_ limit: TimeoutLimit, _ reason: String, _ userInfo: [String: Any]) -> URLError {
        URLError(
            .timedOut,
            userInfo: userInfo.merging([
                NSLocalizedDescriptionKey: "\(reason) (\(limit.rawValue))",
                SessionKitError.timeoutLimitKey: limit.rawValue,
            ]) { $1 })
    }

    /// libcurl's detailed message for the transfer's failure (`CURLOPT_ERRORBUFFER`).
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: 256)

    init?(
        request: URLRequest, policy: SecurityPolicy, tlsVersions: TLSVersionRange = TLSVersionRange(),
        idleTimeout: TimeInterval, totalTimeout: TimeInterval? = nil,
        proxy: String? = nil, credentials: [Credential] = [], decodingLimits: DecodingLimits = DecodingLimits(),
        flowControl: FlowControl? = nil, connection: ConnectionOptions = ConnectionOptions(),
        identity: ClientIdentity? = nil, events: Events, connectionObserver: CurlConnectionObserver? = nil,
        pumpsBodyStream: Bool = false, bodyFile: URL? = nil, formTypeByDefault: Bool = true
    ) {
        guard let url = request.url, let easy = CurlHandlePool.take() else { return nil }
        let unixSocket =
            UnixSocketURL.isUnixSocket(url)
            ? UnixSocketURL(url, hostField: request.value(forHTTPHeaderField: "Host")) : nil
        self.method = (request.httpMethod ?? "GET").uppercased()
        self.mayResend = Self.idempotentMethods.contains(method)
        self.easy = easy
        self.url = url
        self.isTLS = url.scheme?.lowercased() == "https" || unixSocket?.isTLS == true
        self.handshake = HandshakeCheck(
            policy: policy, host: unixSocket?.host ?? url.host, identity: identity)
        self.unixSocket = unixSocket
        self.responseHeadTimeout = connection.responseHeadTimeout
        self.idleTimeout = idleTimeout
        self.totalTimeout = totalTimeout
        self.flowControl = flowControl
        self.events = events
        self.answersChallenges = !credentials.isEmpty
        self.decodingLimits = decodingLimits
        self.connectionObserver = connectionObserver
        self.pumpsBodyStream = pumpsBodyStream
        self.bodyFile = bodyFile
        self.formTypeByDefault = formTypeByDefault
        connectionObserver?.attach(to: easy)
        errorBuffer.initialize(repeating: 0, count: 256)
        handshake.onPinningReport = { [unowned self] report in
            hasQueuedEvents = true
            self.events.pinningReport(report)
        }
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if isTLS { _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSLVERSION, tlsVersions.curlValue) }
        configure(request)
        connectToList = connection.apply(to: easy)
        if let unixSocket {
            _ = sk_curl_easy_setopt_string(easy, CURLOPT_UNIX_SOCKET_PATH, unixSocket.socketPath)
            // A socket is reached directly: a proxy (configured or from the environment) would get the request.
            _ = sk_curl_easy_setopt_string(easy, CURLOPT_NOPROXY, "*")
        } else {
            if let proxy { _ = sk_curl_easy_setopt_string(easy, CURLOPT_PROXY, proxy) }
            // A tunnel's "200 Connection established" is not the response, whether the proxy was configured or libcurl
            // took it from the environment (`https_proxy`, `ALL_PROXY`).
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        }
        for credential in credentials {
            _ = sk_curl_easy_setopt_string(
                easy, credential.forProxy ? CURLOPT_PROXYUSERNAME : CURLOPT_USERNAME, credential.user)
            _ = sk_curl_easy_setopt_string(
                easy, credential.forProxy ? CURLOPT_PROXYPASSWORD : CURLOPT_PASSWORD, credential.password)
            _ = sk_curl_easy_setopt_long(
                easy, credential.forProxy ? CURLOPT_PROXYAUTH : CURLOPT_HTTPAUTH, credential.schemes)
        }
        if let totalTimeout, totalTimeout > 0, totalTimeout < TimeInterval(Int.max / 1000) {
            // What is left of the session's resource timeout (the whole task, redirects included).
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(totalTimeout * 1000)))
        }
    }

    deinit {
        // A pump still reading the caller's stream stops at its next write.
        if pumpsBodyStream { bodyPipe?.fail(CancellationError()) }
        // Detached from the multi handle by now: the engine holds a transfer until it removed its handle.
        if endedWell && !sendsBody && !pausedWrites { CurlHandlePool.recycle(easy) } else { curl_easy_cleanup(easy) }
        errorBuffer.deallocate()
        if let headerList { curl_slist_free_all(headerList) }
        if let connectToList { curl_slist_free_all(connectToList) }
    }

    private func configure(_ request: URLRequest) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = sk_curl_easy_setopt_string(easy, CURLOPT_URL, unixSocket?.curlURL ?? url.absoluteString)
        // HTTP only, whatever the URL or a redirect names (the transport refuses other schemes before this; libcurl
        // would otherwise read files, or speak gopher or dict to any host).
        _ = sk_curl_easy_allow_http_only(easy)
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // No TLS session is kept in the handle, for the origin or a proxy: each handshake is checked by the policy,
        // and a kept handle (``CurlHandlePool``) starts with nothing from its last transfer.
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_SESSIONID_CACHE, 0)
        _ = sk_curl_easy_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, "")
        if method == "HEAD" {
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        } else if method != "GET" {
            _ = sk_curl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
        }
        let httpBody = request.httpBody
        sendsBody = httpBody != nil || request.httpBodyStream != nil
        if httpBody == nil, let pipe = (request.httpBodyStream as? PipeInputStream)?.pipe {
            configure(pipe)
        } else if httpBody == nil, pumpsBodyStream, let stream = request.httpBodyStream {
            // A caller's stream may wait in `read` (a socket's, or one a producer feeds): read on a thread of its own,
            // never on the engine's.
            let length = request.value(forHTTPHeaderField: "Content-Length").flatMap(Int64.init)
            configure(InputStreamPump.pipe(reading: stream, length: length))
        } else if httpBody == nil, let stream = request.httpBodyStream {
            bodyStream = stream
            let length = request.value(forHTTPHeaderField: "Content-Length").flatMap(Int64.init)
            uploadLength = length ?? -1
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
            if let length { _ = sk_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(length)) }
            _ = sk_curl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, Self.readCallback)
            _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, Unmanaged.passUnretained(self).toOpaque())
            if bodyFile != nil {
                _ = sk_curl_easy_setopt_seek_callback(easy, Self.seekCallback)
                _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, Unmanaged.passUnretained(self).toOpaque())
            }
        }
        if let body = httpBody {
            uploadLength = Int64(body.count)
            _ = sk_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            if body.count <= Self.copiedBodyLimit {
                _ = body.withUnsafeBytes { raw in
                    sk_curl_easy_setopt_pointer(
                        easy, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                }
            } else {
                // A large body is read from the request's own bytes rather than copied into libcurl; the seek
                // callback lets libcurl start over when it must resend on a fresh connection.
                bodyData = body
                _ = sk_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
                _ = sk_curl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, Self.readCallback)
                _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, Unmanaged.passUnretained(self).toOpaque())
                _ = sk_curl_easy_setopt_seek_callback(easy, Self.seekCallback)
                _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, Unmanaged.passUnretained(self).toOpaque())
            }
        }
        var list: UnsafeMutablePointer<curl_slist>?
        // Whether the request sets the fields libcurl would add on its own (read in the same pass as the list).
        var (setsExpect, setsAccept, setsContentType) = (false, false, false)
        for (field, value) in request.allHTTPHeaderFields ?? [:] {
            // libcurl writes Content-Length itself.
            if field.equalsIgnoringASCIICase("Content-Length")
                || (bodyPipe != nil && field.equalsIgnoringASCIICase("Transfer-Encoding"))
            {
                continue
            }
            setsExpect = setsExpect || field.equalsIgnoringASCIICase("Expect")
            setsAccept = setsAccept || field.equalsIgnoringASCIICase("Accept")
            setsContentType = setsContentType || field.equalsIgnoringASCIICase("Content-Type")
            // libcurl reads `Name:` with nothing after it as "remove this field", and `Name;` as the field with an
            // empty value.
            let empty = value.utf8.allSatisfy { $0 == 0x20 || $0 == 0x09 }
            list = curl_slist_append(list, empty ? "\(field);" : "\(field): \(value)")
        }
        // curl adds these on its own; an empty value removes them unless the request set them.
        if !setsExpect { list = curl_slist_append(list, "Expect:") }
        if !setsAccept { list = curl_slist_append(list, "Accept:") }
        // libcurl gives every body without a Content-Type `application/x-www-form-urlencoded`; URLSession does so for a
        // data task's POST `httpBody` only (not for another method, an upload task's data or file, or a stream), and so
        // does this transport.
        if sendsBody, !(method == "POST" && httpBody != nil && formTypeByDefault), !setsContentType {
            list = curl_slist_append(list, "Content-Type:")
        }
        headerList = list
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list)
        if idleTimeout > 0 && idleTimeout.isFinite {
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(idleTimeout * 1000)))
        }
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
        _ = sk_curl_easy_setopt_xferinfo_callback(easy, Self.progressCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, me)

        _ = sk_curl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, Self.headerCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
        _ = sk_curl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, Self.writeCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, me)
        _ = sk_curl_easy_setopt_prereq_callback(easy, Self.prerequestCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, me)

        if isTLS {
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
            _ = sk_curl_easy_setopt_ssl_ctx_callback(easy, HandshakeCheck.sslContextCallback)
            _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_SSL_CTX_DATA, Unmanaged.passUnretained(handshake).toOpaque())
            // HTTP/2 when the server offers it by ALPN; a request waits for a connection being set up rather
            // than opening another, so concurrent requests share one HTTP/2 connection.
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        }
    }

    /// Sends `pipe` as the body: read as it is written, pausing the upload (never the engine) while nothing waits.
    private func configure(_ pipe: RequestBodyPipe) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
        _ = sk_curl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, Self.readCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, me)
        guard pipe.claim() else {
            // Used by an earlier transfer (the task driver refuses that before any I/O; this is the backstop): the
            // transfer fails at its first read rather than send another body.
            pipeRefused = true
            return
        }
        bodyPipe = pipe
        uploadLength = pipe.length ?? -1
        if let length = pipe.length {
            _ = sk_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(length))
        } else {
            // Chunked on HTTP/1.1 (libcurl's default for a POST of unknown size), with the writer's trailers.
            _ = sk_curl_easy_setopt_trailer_callback(easy, Self.trailerCallback)
            _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_TRAILERDATA, me)
        }
    }

    /// Whether libcurl asked for the request trailers (it does only after a chunked HTTP/1.1 body).
    private var trailersSent = false
    /// Set when the writer's trailers could not follow its body on this transfer: the body was cut short (the
    /// transfer aborted before its end), so that the server never saw the request complete without them.
    private var trailersRefused = false

    /// Whether request trailers can follow the body on this transfer's connection: after a chunked HTTP/1.1 body
    /// only. A body with a length goes with `Content-Length`, and libcurl 7.88 has no way to send them over HTTP/2
    /// (the connection's ALPN says which it is; SessionKit asks for HTTP/2 over TLS only).
    private func carriesRequestTrailers(_ pipe: RequestBodyPipe) -> Bool {
        guard pipe.length == nil else { return false }
        guard isTLS, let ssl = sk_curl_easy_openssl_ssl(easy) else { return true }
        return sk_ssl_alpn_selected_h2(OpaquePointer(ssl)) == 0
    }

    /// Why the writer's trailers were not sent.
    private func unsentTrailersReason(_ pipe: RequestBodyPipe) -> String {
        pipe.length != nil
            ? "The request body's trailers could not be sent: the body had a length, so it went with Content-Length "
                + "and no chunked framing for trailers to follow (give no length to send them)."
            : "The request body's trailers could not be sent: libcurl sends request trailers only after a chunked "
                + "HTTP/1.1 body, and this request went over HTTP/2."
    }
    /// Whether ``bodyPipe`` is filled from the caller's stream by an ``InputStreamPump`` (the driver decides, with
    /// ``InputStreamPump/pumps(_:readInPlace:)``); SessionKit's own streams are read in place.
    private let pumpsBodyStream: Bool

    /// Set when the body's pipe was used by an earlier transfer: it is never sent twice.
    private var pipeRefused = false
    /// Whether the request has a body (its handle is then never kept, see ``CurlHandlePool``).
    private var sendsBody = false
    /// Whether libcurl ended the transfer without an error (set on the engine thread, read in `deinit`).
    private var endedWell = false
    /// Whether the write callback ever paused the transfer: libcurl keeps paused bytes in the handle, which a kept
    /// handle must not carry (see ``CurlHandlePool``).
    private var pausedWrites = false

    /// Wakes the transfer when its body's writer gave bytes or its end (set once the transfer is on an engine).
    func wakeOnBody(_ wake: @escaping @Sendable () -> Void) {
        bodyPipe?.onReadable = wake
    }

    // MARK: - libcurl callbacks (engine thread)

    /// Adds the request trailers the body's writer returned (chunked bodies).
    private static let trailerCallback: sk_curl_trailer_callback = { list, userdata in
        guard let list, let userdata else { return 1 }  // CURL_TRAILERFUNC_ABORT
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        transfer.trailersSent = true
        for (name, value) in transfer.bodyPipe?.trailers ?? [] {
            list.pointee = curl_slist_append(list.pointee, "\(name): \(value)")
        }
        return 0  // CURL_TRAILERFUNC_OK
    }

    private static let headerCallback: sk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        let length = size * count
        transfer.headStarted = true
        transfer.headBytes += length
        if transfer.headBytes > maximumHeadBytes || transfer.head.fields.count >= maximumHeadFields {
            transfer.headTooLarge = true
            return 0  // ends the transfer
        }
        return transfer.header(UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
    }

    private static let writeCallback: sk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        let length = size * count
        // Too much handed on and not yet consumed: pause without taking these bytes; libcurl offers them again
        // once the engine resumes the transfer.
        if transfer.flowControl?.shouldPause() == true {
            transfer.pausedWrites = true
            transfer.receivePaused = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        if transfer.crossesDecodingLimit(adding: length) { return 0 }  // ends the transfer
        transfer.deliverResponseIfNeeded()
        transfer.hasQueuedEvents = true
        transfer.events.data(Data(bytes: buffer, count: length))
        transfer.flowControl?.produced(length)
        return length
    }

    /// libcurl's receive buffer (`CURLOPT_BUFFERSIZE`, left at its default: `CURL_MAX_WRITE_SIZE`).
    private static let receiveBufferSize: Int64 = 16 * 1024

    /// Whether handing on `count` more decoded bytes crosses a decoding bound (then noted for the error).
    private func crossesDecodingLimit(adding count: Int) -> Bool {
        decodedBytes += Int64(count)
        if let size = decodingLimits.size, decodedBytes > size {
            decodingLimitCrossed = "the decoded size limit (\(size) bytes)"
            return true
        }
        guard let ratio = decodingLimits.ratio, decodedBytes > 1 << 20 else { return false }
        var wire: curl_off_t = 0
        _ = sk_curl_easy_getinfo_off_t(easy, CURLINFO_SIZE_DOWNLOAD_T, &wire)
        // libcurl 7.88 counts a chunked read's bytes only after handing on what they decoded to: one read of slack
        // (its 16 KiB receive buffer) keeps a chunked body within the ratio from being refused.
        guard decodedBytes > Int64(ratio) * (Int64(wire) + Self.receiveBufferSize) else { return false }
        decodingLimitCrossed =
            "the decompression ratio limit (\(ratio)×: \(decodedBytes) bytes from \(wire) on the wire)"
        return true
    }

    /// Bodies up to this size are copied into libcurl; larger ones are read from ``bodyData``.
    private static let copiedBodyLimit = 256 * 1024
    /// A large `Data` body, read by ``readCallback`` from ``bodyOffset``.
    private var bodyData: Data?
    private var bodyOffset = 0

    /// Feeds the request body from its bytes or its stream (opened on the first read), on the engine thread.
    private static let readCallback: sk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0x1000_0000 }  // CURL_READFUNC_ABORT
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        if transfer.pipeRefused {
            transfer.bodyStreamFailed = true
            return 0x1000_0000  // CURL_READFUNC_ABORT
        }
        if let pipe = transfer.bodyPipe {
            switch pipe.read(into: buffer, count: size * count) {
            case .bytes(let read): return read
            case .end where !pipe.trailers.isEmpty && !transfer.carriesRequestTrailers(pipe):
                // Ending the body here would send a request that looks complete without its trailers (an HTTP/2
                // stream's END_STREAM): it is cut short instead, and the stream reset; not reusing the connection
                // makes libcurl send that at once (see `CurlEngine`). A body with a length is read no further than
                // its length, so it ends before the writer's trailers are known: that failure comes at the end.
                transfer.trailersRefused = true
                _ = sk_curl_easy_setopt_long(transfer.easy, CURLOPT_FORBID_REUSE, 1)
                return 0x1000_0000  // CURL_READFUNC_ABORT
            case .end: return 0
            case .wouldBlock:
                transfer.uploadWaits = true
                return 0x1000_0001  // CURL_READFUNC_PAUSE: `onReadable` unpauses
            case .failed:
                transfer.bodyStreamFailed = true
                return 0x1000_0000
            }
        }
        if let data = transfer.bodyData {
            let length = min(size * count, data.count - transfer.bodyOffset)
            guard length > 0 else { return 0 }
            let start = data.startIndex + transfer.bodyOffset
            data.copyBytes(
                to: UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: UInt8.self), from: start..<start + length)
            transfer.bodyOffset += length
            return length
        }
        guard let stream = transfer.bodyStream else { return 0 }
        if stream.streamStatus == .notOpen { stream.open() }
        let read = buffer.withMemoryRebound(to: UInt8.self, capacity: size * count) {
            stream.read($0, maxLength: size * count)
        }
        if read < 0 {
            transfer.bodyStreamFailed = true
            return 0x1000_0000
        }
        if read == 0 {
            stream.close()
            if transfer.uploadLength > transfer.bodyStreamSent {
                // Ending the body here would leave the server waiting for the rest of its `Content-Length`, taking
                // the next request on the connection for it: the transfer fails instead, its connection not reused.
                (transfer.bodyStreamEndedShort, transfer.bodyStreamFailed) = (true, true)
                _ = sk_curl_easy_setopt_long(transfer.easy, CURLOPT_FORBID_REUSE, 1)
                return 0x1000_0000  // CURL_READFUNC_ABORT
            }
        }
        transfer.bodyStreamSent += Int64(read)
        return read
    }

    /// libcurl rewinds a `Data` body or an upload's file to send it again (on a fresh connection after a reused one
    /// died before any response byte; the prerequest check lets only an idempotent request go again).
    private static let seekCallback: sk_curl_seek_callback = { userdata, offset, origin in
        guard let userdata else { return 1 }  // CURL_SEEKFUNC_FAIL
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        // 2 is CURL_SEEKFUNC_CANTSEEK: libcurl then fails the transfer (`requestBodyStreamExhausted`).
        guard origin == SEEK_SET, offset >= 0 else { return 2 }
        if let data = transfer.bodyData {
            guard offset <= data.count else { return 2 }
            transfer.bodyOffset = Int(offset)
            return 0
        }
        return transfer.reopenBodyFile(at: Int64(offset)) ? 0 : 2
    }

    /// Reads ``bodyFile`` again from `offset` (a local file: reading it never waits on the network), in place of the
    /// stream read so far; false when there is no such file, or it cannot be opened or is shorter than `offset`.
    private func reopenBodyFile(at offset: Int64) -> Bool {
        guard let bodyFile, let reopened = Self.stream(of: bodyFile, from: offset) else { return false }
        bodyStream?.close()
        bodyStream = reopened
        bodyStreamSent = offset
        return true
    }

    /// The file at `url`, opened and read up to `offset`; nil when it cannot be opened or is shorter than `offset`.
    private static func stream(of url: URL, from offset: Int64) -> InputStream? {
        guard let stream = InputStream(url: url) else { return nil }
        stream.open()
        var skipped: Int64 = 0
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        while skipped < offset {
            let read = stream.read(&scratch, maxLength: Int(min(Int64(scratch.count), offset - skipped)))
            guard read > 0 else {
                stream.close()
                return nil
            }
            skipped += Int64(read)
        }
        return stream
    }

    /// Called at least once a second, and at each step of a transfer: ends a transfer that has been idle for longer
    /// than its timeout. Several calls a request: the common one (bytes moved) takes no lock and no reference count.
    private static let progressCallback: sk_curl_xferinfo_callback = { userdata, _, received, _, sent in
        guard let userdata else { return 1 }
        return Unmanaged<CurlTransfer>.fromOpaque(userdata)._withUnsafeGuaranteedRef {
            $0.progressed(received: Int64(received), sent: Int64(sent))
        }
    }

    /// libcurl's progress: 0 to go on, 1 to end the transfer (idle, or no response head in time).
    private func progressed(received: Int64, sent: Int64) -> Int32 {
        EngineThread.check("A libcurl callback of a transfer")
        let now = Date()
        if sent != lastProgress.1 {
            events.uploadProgress(sent, uploadLength)
            if headClock != nil, !headStarted {
                headClock = now  // the response-head timeout counts from the request's last byte sent
            }
        }
        if let limit = responseHeadTimeout, let start = headClock, !headStarted, now.timeIntervalSince(start) > limit {
            headTimedOut = true
            return 1
        }
        if (received, sent) != lastProgress {
            lastProgress = (received, sent)
            lastActivity = now
            return 0
        }
        guard idleTimeout > 0, now.timeIntervalSince(lastActivity) > idleTimeout else { return 0 }
        if flowControl?.isPaused == true {
            // Waiting for the reader (or a paused task) is not an idle network; ``willResume()`` restarts the clock.
            lastActivity = now
            return 0
        }
        timedOut = true
        return 1
    }

    /// The engine resumes this paused transfer: its idle clock starts again, as if a byte had just moved.
    func willResume() {
        EngineThread.check("Resuming a transfer")
        lastActivity = Date()
        (uploadWaits, receivePaused) = (false, false)
    }

    /// Whether the upload is paused because the body's writer has given nothing more yet (engine thread).
    private var uploadWaits = false
    /// Whether the write callback paused the download, the reader being behind (engine thread).
    private var receivePaused = false
    /// The socket of the current request's connection, once looked for (the outer nil: not yet), and whether its end
    /// was seen once already (engine thread; a new request, which may go on another connection, forgets both).
    private var watchedSocket: Int32??
    private var socketEndSeen = false
    /// Set when the server closed the connection while the upload waited for the body's writer.
    private var closedWhileUploadWaited = false

    /// What the engine does about a transfer's connection between passes.
    enum ConnectionWatch: Equatable {
        /// Nothing: libcurl watches the connection.
        case none
        /// Poll this socket for reading too: the upload waits for its writer, and libcurl 7.88 watches an HTTP/1.1
        /// connection for nothing else then once it read the connection's end.
        case watch(Int32)
        /// Run another pass at once: the connection ended, and libcurl gets one pass to read that end itself and
        /// end the transfer as it would (one whose upload it stopped after an error status ends with its response).
        /// A transfer still waiting to send after that pass ends as a lost connection, even when its response had
        /// come whole: as when a send meets the closed connection.
        case recheck
        /// The server closed the connection while the upload waited, and libcurl did not end the transfer: the engine
        /// ends it.
        case closed
    }

    /// Whether the server closed the connection of a transfer whose upload waits for its writer (engine thread).
    ///
    /// libcurl 7.88 stops reading an HTTP/1.1 connection once it read its end, and watches a paused upload for
    /// nothing: the close would be found only at the writer's next bytes, or at the request's timeout. A look at the
    /// socket (``ConnectionSocket``) tells an end from bytes still to read; while nothing waits to be read, the socket
    /// joins the engine's poll, so that a close wakes it. Bytes libcurl has not read yet, or a download the reader
    /// paused, are left to libcurl (a poll on them would wake at once, again and again). HTTP/2 is left to libcurl,
    /// which reads its connection whatever its streams do.
    func connectionWatch() -> ConnectionWatch {
        EngineThread.check("CurlTransfer.connectionWatch")
        guard uploadWaits, !receivePaused, unixSocket == nil else { return .none }
        if isTLS, let ssl = sk_curl_easy_openssl_ssl(easy), sk_ssl_alpn_selected_h2(OpaquePointer(ssl)) != 0 {
            return .none
        }
        if watchedSocket == nil {
            func end(_ address: CURLINFO, _ port: CURLINFO) -> ConnectionSocket.End {
                var (text, number): (UnsafeMutablePointer<CChar>?, Int) = (nil, 0)
                _ = sk_curl_easy_getinfo_string(easy, address, &text)
                _ = sk_curl_easy_getinfo_long(easy, port, &number)
                return ConnectionSocket.End(address: text.map { String(cString: $0) } ?? "", port: number)
            }
            watchedSocket = .some(
                ConnectionSocket.find(
                    local: end(CURLINFO_LOCAL_IP, CURLINFO_LOCAL_PORT),
                    peer: end(CURLINFO_PRIMARY_IP, CURLINFO_PRIMARY_PORT)))
        }
        guard case let socket?? = watchedSocket else { return .none }
        switch ConnectionSocket.state(of: socket) {
        case .quiet: return .watch(socket)
        case .readable, .unknown: return .none
        case .ended:
            guard socketEndSeen else {
                socketEndSeen = true
                return .recheck
            }
            closedWhileUploadWaited = true
            // Never offered to another request, whatever libcurl made of it.
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1)
            return .closed
        }
    }

    /// Runs once the connection is ready and before any request byte: refuse unless the policy passed, and refuse
    /// to send a non-idempotent request a second time.
    private static let prerequestCallback: sk_curl_prereq_callback = { userdata, _, _, _, localPort in
        guard let userdata else { return Int32(CURL_PREREQFUNC_ABORT) }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        EngineThread.check("A libcurl callback of a transfer")
        defer { (transfer.requestsStarted, transfer.lastStartAnswer) = (transfer.requestsStarted + 1, nil) }
        transfer.connectionObserver?.requestStarted(localPort: localPort)
        // A new request (a resend, a redirect, an authentication round) may go on another connection, and has not
        // waited for its body yet.
        transfer.uploadWaits = false
        if transfer.watchedSocket != nil { (transfer.watchedSocket, transfer.socketEndSeen) = (nil, false) }
        if transfer.responseHeadTimeout != nil { (transfer.headClock, transfer.headStarted) = (Date(), false) }
        // libcurl's own answer to a complete 401/407 (Digest) is the next round, not a resend. Any other new start is
        // libcurl sending the request again because a reused connection failed before any response byte: for a POST
        // that may have reached the server only the caller (its retrier) may decide that; an idempotent request goes
        // again once, and a resend that fails is not sent a third time (RFC 9112 9.3.1; libcurl would go on over
        // every dead connection of the pool).
        if transfer.requestsStarted > 0, transfer.lastStartAnswer != 401, transfer.lastStartAnswer != 407 {
            guard transfer.mayResend, transfer.automaticResends == 0 else {
                transfer.resendRefused = true
                return Int32(CURL_PREREQFUNC_ABORT)
            }
            transfer.automaticResends += 1
        }
        guard transfer.isTLS else { return Int32(CURL_PREREQFUNC_OK) }
        // A reused connection was verified by this engine, whose connections all belong to one policy.
        let verified = transfer.reusedConnection || transfer.handshake.accepted
        return verified ? Int32(CURL_PREREQFUNC_OK) : Int32(CURL_PREREQFUNC_ABORT)
    }

    // MARK: - Response

    /// Reads one line of a response head; false ends the transfer (a status line that is not one).
    private func header(_ line: UnsafeRawBufferPointer) -> Bool {
        guard !responseDelivered else { return trailer(line) }
        switch head.read(line) {
        case .status(let status):
            // A status line (a new one after a 1xx or a 401): "HTTP/1.1 200 OK", "HTTP/1.1 200", "HTTP/2 200 ".
            (httpVersion, statusCode, lastStartAnswer) = (status.version, status.code, status.code)
            headBytes = line.count  // the bounds apply to each response head (a 1xx or a 401 went before)
            if decodingOff {
                decodingOff = false
                _ = sk_curl_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 1)
            }
        case .field(let name, let value):
            if !decodingOff, Self.namesCodings(name),
                !Self.decodesAll(value, transfer: name.utf8.first.map { $0 | 0x20 == 0x74 } == true)
            {
                // libcurl would fail the body of a coding it does not know: its bytes are delivered as they came.
                decodingOff = true
                _ = sk_curl_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0)
            }
        case .end:
            if statusCode >= 200, let problem = Self.contentLengthProblem(in: head.fields) {
                malformedHead = problem
                return false
            }
            let mayRetry = answersChallenges && (statusCode == 401 || statusCode == 407)
            if statusCode >= 200 && !mayRetry { deliverResponseIfNeeded() }
        case .malformed(let reason):
            malformedHead = reason
            return false
        }
        return true
    }

    /// What is wrong with a final head's `Content-Length`, or nil: each of its values (fields, and list members in
    /// one) must be digits that fit an `Int64`, and all must be the same (RFC 9110 8.6, RFC 9112 6.3: otherwise the
    /// framing cannot be trusted). libcurl 7.88 takes the last field, reads `5abc` and `5, 10` as 5 and a number too
    /// large as "until the connection closes": on a reused connection another response's bytes would be read as this
    /// one's. A `Transfer-Encoding` frames the body instead, and the field is not looked at.
    static func contentLengthProblem(in fields: [(String, String)]) -> String? {
        // Read at every response: the names are told apart by their length first, the value byte by byte.
        if fields.contains(where: { $0.0.utf8.count == 17 && $0.0.equalsIgnoringASCIICase("Transfer-Encoding") }) {
            return nil
        }
        var length: Int64?
        for (name, value) in fields {
            guard name.utf8.count == 14, name.equalsIgnoringASCIICase("Content-Length") else { continue }
            var (number, digits, ended): (Int64, Int, Bool) = (0, 0, false)
            func member() -> String? {
                guard digits > 0 else { return "a Content-Length that is not a number (\(value))" }
                guard length == nil || length == number else { return "two different Content-Length values" }
                length = number
                (number, digits, ended) = (0, 0, false)
                return nil
            }
            for byte in value.utf8 {
                switch byte {
                case 0x30...0x39 where !ended:
                    let (times10, overflow) = number.multipliedReportingOverflow(by: 10)
                    let (sum, overflowed) = times10.addingReportingOverflow(Int64(byte - 0x30))
                    guard !overflow, !overflowed else { return "a Content-Length too large (\(value))" }
                    (number, digits) = (sum, digits + 1)
                case 0x20, 0x09:
                    ended = digits > 0
                case UInt8(ascii: ","):
                    if let problem = member() { return problem }
                default:
                    return "a Content-Length that is not a number (\(value))"
                }
            }
            if let problem = member() { return problem }
        }
        return nil
    }

    /// Reads a line that came after the delivered head: a trailer field (chunked HTTP/1.1, HTTP/2); false ends the
    /// transfer (a line that is not a field, or more trailers than a head may have fields).
    private func trailer(_ line: UnsafeRawBufferPointer) -> Bool {
        switch ResponseHeadParser.fieldLine(line) {
        case .blank:
            return true
        case .field(let name, let value):
            guard trailerFields.count < Self.maximumHeadFields else {
                headTooLarge = true
                return false
            }
            trailerFields.append((name, value))
        case .fold(let more):
            guard let last = trailerFields.popLast() else {
                malformedHead = "a folded trailer line with no field to continue"
                return false
            }
            trailerFields.append((last.0, last.1.isEmpty ? more : last.1 + " " + more))
        case .invalid(let reason):
            malformedHead = "in the trailers, " + reason
            return false
        }
        return true
    }

    /// Whether `name` is `Content-Encoding` or `Transfer-Encoding` (one byte ruled out most fields).
    private static func namesCodings(_ name: String) -> Bool {
        guard let first = name.utf8.first, first | 0x20 == 0x63 || first | 0x20 == 0x74 else { return false }
        return name.equalsIgnoringASCIICase("Content-Encoding") || name.equalsIgnoringASCIICase("Transfer-Encoding")
    }

    /// The codings this libcurl decodes (its build decides brotli and zstd).
    private static let decodedCodings: Set<String> = {
        let features = Int(sk_curl_version_features())
        var codings: Set<String> = ["identity"]
        if features & (1 << 3) != 0 { codings.formUnion(["gzip", "x-gzip", "deflate"]) }  // CURL_VERSION_LIBZ
        if features & (1 << 23) != 0 { codings.insert("br") }  // CURL_VERSION_BROTLI
        if features & (1 << 26) != 0 { codings.insert("zstd") }  // CURL_VERSION_ZSTD
        return codings
    }()

    /// Whether libcurl decodes every coding the field value `list` names (`transfer`: `chunked` too).
    private static func decodesAll(_ list: String, transfer: Bool) -> Bool {
        list.split(separator: ",").allSatisfy { item in
            let coding = item.trimmingCharacters(in: .whitespaces).lowercased()
            return coding.isEmpty || decodedCodings.contains(coding) || (transfer && coding == "chunked")
        }
    }

    private func deliverResponseIfNeeded() {
        guard !responseDelivered, statusCode > 0 else { return }
        responseDelivered = true
        hasQueuedEvents = true
        events.response(ResponseHead(url: url, statusCode: statusCode, httpVersion: httpVersion, lines: head.fields))
    }

    /// A response head: its status line and its header lines as received (repeated fields kept apart, for cookies).
    struct ResponseHead {
        let url: URL
        let statusCode: Int
        let httpVersion: String
        let lines: [(String, String)]

        /// The head as an `HTTPURLResponse`: repeated fields joined with ", " under the first spelling of their name
        /// (RFC 9110 5.3), the lines kept as they came (``WireHTTPURLResponse``); nil if Foundation refuses it.
        func makeResponse() -> HTTPURLResponse? {
            var fields: [String: String] = [:]
            var names: [String] = []
            for (name, value) in lines {
                if let key = names.first(where: { $0.equalsIgnoringASCIICase(name) }) {
                    fields[key] = (fields[key] ?? "") + ", " + value
                } else {
                    names.append(name)
                    fields[name] = value
                }
            }
            return WireHTTPURLResponse(
                url: url, statusCode: statusCode, httpVersion: httpVersion, fields: fields, lines: lines)
        }
    }

    /// Whether `response`, `data` or `completion` queued something since the last ``flushEvents()``.
    private var hasQueuedEvents = false

    /// Called by the engine after each pass: one hop to URLSession's queue for all this pass produced (a small
    /// response's head, body and end usually travel together).
    func flushEvents() {
        EngineThread.check("CurlTransfer.flushEvents")
        guard hasQueuedEvents else { return }
        hasQueuedEvents = false
        events.flush()
    }

    /// Whether the transfer goes again, at once, on a new connection after ending with `code` (the engine adds its
    /// handle again): libcurl failed it with `CURLE_HTTP2` on a connection it reused, before any response byte. libcurl
    /// 7.88 sends a request on an idle HTTP/2 connection whose GOAWAY it read, then fails it this way; the server never
    /// processed that stream (RFC 9113 6.8). Only a request that may go again: idempotent (RFC 9110 9.2.2), not sent
    /// again before in this transfer, its body its own bytes or an upload's file (opened again; not a caller's stream,
    /// which was read).
    func resendsOnNewConnection(after code: CURLcode) -> Bool {
        EngineThread.check("CurlTransfer.resendsOnNewConnection")
        guard code == CURLE_HTTP2, mayResend, automaticResends == 0, !headStarted, bodyPipe == nil,
            bodyStream == nil || bodyFile != nil, reusedConnection
        else { return false }
        if bodyFile != nil, !reopenBodyFile(at: 0) { return false }
        bodyOffset = 0
        // libcurl marked the connection that refused the stream for closing (it allows no new request): the transfer
        // goes on another one, which the others resent with it may share (no CURLOPT_FRESH_CONNECT, which would give
        // each its own). Its clock starts again, so the total limit is what is left of it.
        var elapsed = 0.0
        _ = sk_curl_easy_getinfo_double(easy, CURLINFO_TOTAL_TIME, &elapsed)
        elapsedBeforeResend += elapsed
        if let totalTimeout, totalTimeout > 0, totalTimeout < TimeInterval(Int.max / 1000) {
            let left = max(0.001, totalTimeout - elapsedBeforeResend)
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(left * 1000)))
        }
        return true
    }

    /// Seconds the transfer ran before libcurl's clock restarted (``resendsOnNewConnection(after:)``).
    private var elapsedBeforeResend: TimeInterval = 0

    /// Whether the transfer's last request went on a connection it did not open.
    private var reusedConnection: Bool {
        var connects = 0
        _ = sk_curl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        return connects == 0
    }

    /// The transfer ended with `code`.
    func finish(code: CURLcode) {
        EngineThread.check("CurlTransfer.finish")
        endedWell = code == CURLE_OK
        connectionObserver?.transferEnded()
        events.timings(timings())
        hasQueuedEvents = true
        defer { flushEvents() }
        if code == CURLE_OK {
            deliverResponseIfNeeded()
            // A body that ended before the read saw the writer's trailers (an empty body of length 0 is never read).
            if let pipe = bodyPipe, !trailersSent, !pipe.trailers.isEmpty {
                return events.completion(SessionKitError.trailersNotSent(unsentTrailersReason(pipe), url: url))
            }
            if responseDelivered, !trailerFields.isEmpty { events.trailers(trailerFields) }
            // Whatever a parser made of the bytes, a transfer that ends well has delivered a response, or it fails.
            events.completion(responseDelivered ? nil : malformed("The transfer ended without a response head."))
        } else {
            events.completion(error(for: code))
        }
    }

    /// A `.badServerResponse` with `reason` and the failing URL.
    private func malformed(_ reason: String) -> URLError {
        URLError(
            .badServerResponse,
            userInfo: [
                NSURLErrorFailingURLErrorKey: url, failingURLStringErrorKey: url.absoluteString,
                NSLocalizedDescriptionKey: reason,
            ])
    }

    /// libcurl's timings of this transfer.
    private func timings() -> TransferTimings {
        func seconds(_ info: CURLINFO) -> TimeInterval {
            var value = 0.0
            _ = sk_curl_easy_getinfo_double(easy, info, &value)
            return value
        }
        func count(_ info: CURLINFO) -> Int64 {
            var value: curl_off_t = 0
            _ = sk_curl_easy_getinfo_off_t(easy, info, &value)
            return Int64(value)
        }
        return TransferTimings(
            nameLookup: seconds(CURLINFO_NAMELOOKUP_TIME), connect: seconds(CURLINFO_CONNECT_TIME),
            tlsHandshake: seconds(CURLINFO_APPCONNECT_TIME), firstByte: seconds(CURLINFO_STARTTRANSFER_TIME),
            total: seconds(CURLINFO_TOTAL_TIME), bytesReceived: count(CURLINFO_SIZE_DOWNLOAD_T),
            bytesSent: count(CURLINFO_SIZE_UPLOAD_T), newConnection: !reusedConnection, protocolVersion: httpVersion)
    }

    /// The error of a request whose body stream failed, read in place or pumped: `.cannotDecodeRawData` with the
    /// stream's own error.
    private static func bodyStreamError(_ streamError: Error?, _ userInfo: [String: Any]) -> URLError {
        let reason = "The request body stream failed: \(streamError.map { "\($0)" } ?? "read error")"
        return URLError(.cannotDecodeRawData, userInfo: userInfo.merging([NSLocalizedDescriptionKey: reason]) { $1 })
    }

    /// A `URLError` with the real reason and the failing URL.
    private func error(for code: CURLcode) -> URLError {
        let reason = String(cString: curl_easy_strerror(code))
        let userInfo: [String: Any] = [
            NSURLErrorFailingURLErrorKey: url, failingURLStringErrorKey: url.absoluteString,
            NSLocalizedDescriptionKey: reason,
        ]
        /// `code`, described by `description` instead of libcurl's words.
        func described(_ code: URLError.Code, _ description: String) -> URLError {
            URLError(code, userInfo: userInfo.merging([NSLocalizedDescriptionKey: description]) { $1 })
        }
        // libcurl's own detail of the failure, when it wrote one, and what it said at all.
        let detail = String(cString: errorBuffer)
        let libcurlSays = detail.isEmpty ? reason : detail
        if isTLS && handshake.evaluated && !handshake.accepted { return handshake.error(userInfo: userInfo) }
        if pipeRefused { return RequestBodyPipe.notReplayableError(userInfo: userInfo) }
        if closedWhileUploadWaited {
            let reason =
                "The server closed the connection while the request body was being sent (it waited for its writer)"
                + (headStarted ? ", before the response ended." : ", before any response.")
            return described(.networkConnectionLost, reason)
        }
        if trailersRefused, let pipe = bodyPipe {
            return SessionKitError.trailersNotSent(unsentTrailersReason(pipe), url: url)
        }
        if bodyStreamFailed, let failure = bodyPipe?.failure as? InputStreamPump.ReadFailure {
            return Self.bodyStreamError(failure.streamError, userInfo)
        }
        if bodyStreamFailed, let mismatch = bodyPipe?.failure as? RequestBodyPipe.LengthMismatch {
            return mismatch.urlError(userInfo: userInfo)
        }
        if bodyStreamFailed, let pipe = bodyPipe {
            let reason = pipe.failure.map { "The request body's writer failed: \($0)" } ?? "The request body failed."
            return described(.cancelled, reason)
        }
        if bodyStreamEndedShort {
            return RequestBodyPipe.LengthMismatch(declared: uploadLength, written: bodyStreamSent).urlError(
                userInfo: userInfo)
        }
        if bodyStreamFailed { return Self.bodyStreamError(bodyStream?.failure, userInfo) }
        if headTimedOut, let limit = responseHeadTimeout {
            return Self.timeout(
                .responseHead, "No response head began within \(limit) s of sending the request.", userInfo)
        }
        if timedOut {
            return Self.timeout(.request, "The request timed out: no byte moved for \(idleTimeout) s.", userInfo)
        }
        if code == CURLE_OPERATION_TIMEDOUT {
            // libcurl's total limit is what was left of the resource timeout; its connect limit is the idle one.
            var elapsed = 0.0
            _ = sk_curl_easy_getinfo_double(easy, CURLINFO_TOTAL_TIME, &elapsed)
            if let totalTimeout, totalTimeout > 0, elapsedBeforeResend + elapsed + 0.01 >= totalTimeout {
                return Self.timeout(
                    .resource, "The task ran out of its resource timeout (\(Int(totalTimeout * 1000)) ms were left).",
                    userInfo)
            }
            if idleTimeout > 0 {
                return Self.timeout(.request, "No connection was made within \(idleTimeout) s.", userInfo)
            }
        }
        let connectFailure: String? =
            code == CURLE_INTERFACE_FAILED
            ? "The connection could not be bound to the local address (localAddress)"
            : code == CURLE_COULDNT_CONNECT
                ? unixSocket.map { "Could not connect to the Unix socket \($0.socketPath)" }
                : nil
        if let connectFailure {
            return described(.cannotConnectToHost, "\(connectFailure): \(libcurlSays).")
        }
        if let crossed = decodingLimitCrossed {
            return described(
                .dataLengthExceedsMaximum,
                "The response body crossed \(crossed); the task was stopped and the partial body discarded.")
        }
        if resendRefused {
            let reason =
                mayResend
                ? "The connection was lost before any response, again after the \(method) was sent a second time; it is "
                    + "not sent a third time."
                : "The connection was lost after the request was sent, before any response; a \(method) is not sent "
                    + "again automatically (it may have reached the server). Retry it yourself if that is safe."
            return described(.networkConnectionLost, reason)
        }
        if code == CURLE_HTTP2, !headStarted, !mayResend, reusedConnection {
            // See `resendsOnNewConnection(after:)`: what an idempotent request is sent again after.
            let reason =
                "The HTTP/2 connection this request reused failed before any response (the server may have sent "
                + "GOAWAY); a \(method) is not sent again automatically (it may have reached the server). Retry it "
                + "yourself if that is safe."
            return described(.networkConnectionLost, reason)
        }
        if let malformedHead {
            return malformed("The response is not HTTP: \(malformedHead).")
        }
        if headTooLarge {
            return described(
                .badServerResponse,
                "The response head is larger than \(Self.maximumHeadBytes) bytes or \(Self.maximumHeadFields) fields.")
        }
        if isTLS, statusCode == 0,
            [CURLE_SSL_CONNECT_ERROR, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING].contains(code),
            let refused = handshake.clientCertificateError(detail: libcurlSays, userInfo: userInfo)
        {
            // The server asked for a client certificate, then ended the connection before any response: over TLS
            // 1.3 its alert arrives after the handshake, when the request is read.
            return refused
        }
        if code == CURLE_HTTP2_STREAM, let reset = Self.streamGivenUp(detail) {
            // The server gave the stream up (it failed, was cancelled or shed load), as a connection closed mid-way:
            // not a response that is malformed.
            return described(
                .networkConnectionLost, "The server reset the HTTP/2 stream (\(reset)) before the response ended.")
        }
        func badResponse() -> URLError {
            described(.badServerResponse, "The server's response is malformed: \(libcurlSays).")
        }
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING, CURLE_HTTP2,
            CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_OUT_OF_MEMORY:
            // The URL's scheme was http or https: an "unsupported protocol" is a reply that is not HTTP (HTTP/0.9, a
            // garbage status line), and libcurl reports a head line over its own bound as "out of memory".
            return badResponse()
        case CURLE_RECV_ERROR where detail.lowercased().contains("chunk"):
            return badResponse()
        default:
            break
        }
        let mapped: URLError.Code
        switch code {
        case CURLE_COULDNT_CONNECT: mapped = .cannotConnectToHost
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: mapped = .cannotFindHost
        case CURLE_PROXY: mapped = .cannotConnectToHost  // the SOCKS5 handshake (or its authentication) failed
        case CURLE_OPERATION_TIMEDOUT: mapped = .timedOut
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE: mapped = .networkConnectionLost
        case CURLE_ABORTED_BY_CALLBACK where isTLS && !handshake.accepted: mapped = .serverCertificateUntrusted
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION:
            // OpenSSL's reason (a protocol version or cipher the server alone offers, a DH group too small, an alert)
            // instead of libcurl's "SSL connect error".
            return described(.secureConnectionFailed, "The TLS handshake failed: \(libcurlSays).")
        case CURLE_URL_MALFORMAT: mapped = .badURL
        case CURLE_SEND_FAIL_REWIND: mapped = .requestBodyStreamExhausted
        default: mapped = .unknown
        }
        return URLError(mapped, userInfo: userInfo)
    }

    /// The HTTP/2 error code of a stream's reset that gave the stream up rather than refused a malformed one, from
    /// libcurl's detail: libcurl 7.88 reports every reset alike ("HTTP/2 stream 1 was not closed cleanly:
    /// INTERNAL_ERROR (err 2)"), its own of a head that is not valid HTTP/2 (PROTOCOL_ERROR) included, which stays a
    /// malformed response, as a flow-control, frame-size or compression error does. REFUSED_STREAM and
    /// HTTP_1_1_REQUIRED never get here: libcurl sends the request again itself.
    static func streamGivenUp(_ detail: String) -> String? {
        guard let marker = detail.range(of: "not closed cleanly: ") else { return nil }
        let name = detail[marker.upperBound...].prefix { $0 != " " }
        let givenUp: Set<Substring> = [
            "NO_ERROR", "INTERNAL_ERROR", "STREAM_CLOSED", "CANCEL", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
        ]
        return givenUp.contains(name) ? String(name) : nil
    }
}
