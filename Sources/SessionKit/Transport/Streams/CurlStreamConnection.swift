internal import CCurl
internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The connection of one stream task on libcurl: an easy handle in connect-only mode (`CURLOPT_CONNECT_ONLY`) on a
/// stream ``CurlEngine``, then `curl_easy_send`/`curl_easy_recv` on the engine thread.
///
/// libcurl opens the connection (and, for a secure stream, runs the TLS handshake, where OpenSSL's verify callback
/// lets the ``SecurityPolicy`` decide, as for HTTP transfers); the transfer then ends with `CURLMSG_DONE` and the
/// handle stays in the multi handle, because removing it closes a connect-only connection. Each engine pass,
/// ``pump(now:)`` does the I/O its driver's ``StreamLifecycle`` asks for until the socket would block, and says which
/// socket events the engine should wait for (`curl_multi_poll`'s extra descriptors).
///
/// Each connection sits in a connection cache of its own (a share handle with `CURL_LOCK_DATA_CONNECT`): libcurl 7.88
/// closes a cached connection it finds dead (the peer's FIN, say) when another transfer of the same cache connects,
/// and a half-closed stream's is such a one until its first `curl_easy_send`/`curl_easy_recv`; its descriptor would
/// then go to the next socket, and the stream's own `shutdown` or TLS writes would reach that other connection.
///
/// A stream upgraded to TLS after plain bytes (STARTTLS) runs a ``StreamTLSSession`` of its own over libcurl's socket,
/// with the same verify callback, and moves its bytes through it from then on.
final class CurlStreamConnection: @unchecked Sendable {
    // @unchecked Sendable: after `init`, every field is used on the engine thread only (OpenSSL's verify callback
    // runs on that thread too, inside `curl_multi_perform`); `didConnect` and `pump` check it (`EngineThread`).

    /// What the engine should wait for before the next pass.
    struct Interest {
        /// `curl_waitfd` events on ``socket`` (0: none).
        var events: Int16 = 0
        /// The earliest deadline of a queued operation (monotonic nanoseconds).
        var deadline: UInt64?
        /// More I/O is ready now: poll without waiting.
        var busy = false
        /// The task ended: remove the handle (which closes the connection).
        var release = false
    }

    let easy: UnsafeMutableRawPointer
    /// The share handle that holds the connection cache of this connection alone.
    private let share: UnsafeMutableRawPointer
    private let host: String
    private let isTLS: Bool
    /// The task's driver, until the connection is released.
    private var driver: CurlStreamDriver?
    private(set) var socket: curl_socket_t = -1
    /// The policy's decision on the connection's TLS handshake (from the start, or the upgrade's).
    private let handshake: HandshakeCheck
    private let tlsVersions: TLSVersionRange
    /// Whether a byte was received over the connection from the start (libcurl's TLS): a failure before tells of the
    /// server's refusal of the client certificate, when it asked for one.
    private var receivedAny = false
    /// The TLS session of an upgrade (STARTTLS), once its handshake started.
    private var upgrade: StreamTLSSession?
    /// What the upgrade's handshake waits for (`curl_waitfd` events), while it runs.
    private var handshakeWaits: Int16 = 0
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
    /// libcurl's `CURLOPT_CONNECT_TO` list (the manager's resolved addresses), freed with the handle.
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    /// Where `curl_easy_recv` writes, reused (allocated with the connection, never empty).
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: receiveChunk, alignment: 1)
    /// I/O steps in one pass at most, so that one busy stream does not starve the others.
    private static let stepsPerPass = 64
    private static let receiveChunk = 64 * 1024

    init?(
        host: String, port: Int, secure: Bool, policy: SecurityPolicy, tlsVersions: TLSVersionRange,
        connectTimeout: TimeInterval, proxy: String? = nil, connection: ConnectionOptions = ConnectionOptions(),
        identity: ClientIdentity? = nil, driver: CurlStreamDriver
    ) {
        guard (1...65535).contains(port), let (authority, name) = Self.authority(of: host),
            let share = Self.privateConnectionCache()
        else { return nil }
        guard let easy = curl_easy_init() else {
            curl_share_cleanup(share)
            return nil
        }
        guard sk_curl_easy_setopt_pointer(easy, CURLOPT_SHARE, share) == CURLE_OK else {
            curl_easy_cleanup(easy)
            curl_share_cleanup(share)
            return nil
        }
        self.easy = easy
        self.share = share
        // The policy and SNI see the host libcurl connects to: without the brackets of an IPv6 literal.
        self.host = name
        self.isTLS = secure
        self.handshake = HandshakeCheck(policy: policy, host: name, identity: identity)
        self.tlsVersions = tlsVersions
        self.driver = driver
        errorBuffer.initialize(repeating: 0, count: 256)
        _ = sk_curl_easy_setopt_string(easy, CURLOPT_URL, "\(secure ? "https" : "http")://\(authority):\(port)")
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_CONNECT_ONLY, 1)
        // A stream has a connection of its own, which libcurl's cache must never close for being idle.
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1)
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, Int(Int32.max))
        // The proxies of HTTP requests: the configuration's, else libcurl's from the environment (`http_proxy`,
        // `https_proxy`, `all_proxy`, `no_proxy`); an HTTP proxy carries the stream in a CONNECT tunnel, a SOCKS5 one
        // as it carries any connection. A proxy that cannot be reached fails the stream (never a direct connection).
        if let proxy { _ = sk_curl_easy_setopt_string(easy, CURLOPT_PROXY, proxy) }
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_HTTPPROXYTUNNEL, 1)
        connectToList = connection.apply(to: easy)
        _ = sk_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        if connectTimeout > 0 && connectTimeout < TimeInterval(Int32.max / 1000) {
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connectTimeout * 1000)))
        }
        if secure {
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSLVERSION, tlsVersions.curlValue)
            // The policy decides in the handshake; libcurl's own checks would use the system store instead.
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
            // A resumed TLS session skips the verify callback.
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_SESSIONID_CACHE, 0)
            _ = sk_curl_easy_setopt_long(easy, CURLOPT_SSL_ENABLE_ALPN, 0)
            _ = sk_curl_easy_setopt_ssl_ctx_callback(easy, HandshakeCheck.sslContextCallback)
            _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_SSL_CTX_DATA, Unmanaged.passUnretained(handshake).toOpaque())
        }
    }

    /// A share handle whose only shared data is the connection cache: a transfer using it keeps its connection out
    /// of the multi handle's cache, so no other transfer prunes or closes it.
    private static func privateConnectionCache() -> UnsafeMutableRawPointer? {
        guard let share = curl_share_init() else { return nil }
        guard sk_curl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_CONNECT.rawValue)) == CURLSHE_OK
        else {
            curl_share_cleanup(share)
            return nil
        }
        return share
    }

    /// `host` as the authority of libcurl's URL and as the name the policy checks, or nil when it is neither a host
    /// name (letters, digits, `-`, `.`) nor an IPv4 or IPv6 literal (with or without brackets): anything else would
    /// change the URL's meaning (`a.com/`, `x@y`, `a.com:1`) and connect elsewhere than the policy checks.
    static func authority(of host: String) -> (url: String, name: String)? {
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2
        let name = bracketed ? String(host.dropFirst().dropLast()) : host
        var v6 = in6_addr()
        if inet_pton(AF_INET6, name, &v6) == 1 { return ("[\(name)]", name) }
        guard !bracketed else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return (name, name) }
        let isName =
            !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            }
        return isName ? (name, name) : nil
    }

    deinit {
        // The handle first: a share handle still used by one refuses to go.
        curl_easy_cleanup(easy)
        curl_share_cleanup(share)
        if let connectToList { curl_slist_free_all(connectToList) }
        errorBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    /// The handle left the engine: the connection is closed, and the driver let go.
    func released() {
        driver = nil
        upgrade = nil
    }

    // MARK: - Engine thread

    /// libcurl finished connecting with `code`: the stream opens, or fails before any application byte.
    func didConnect(code: CURLcode) {
        EngineThread.check("CurlStreamConnection.didConnect")
        var error = code == CURLE_OK ? nil : connectError(for: code)
        if error == nil && isTLS && !handshake.accepted {
            // Never reached while the verify callback runs on every handshake: refuse rather than trust.
            error = refusalError()
        }
        if error == nil {
            var fd: curl_socket_t = -1
            if sk_curl_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK, fd >= 0 {
                socket = fd
            } else {
                error = StreamLifecycle.error(.networkConnectionLost, "The connection closed while it was set up.")
            }
        }
        driver?.engineUpdate { $0.connected(error) }
        driver?.flush()
    }

    /// Does the I/O the lifecycle asks for until the socket would block, and says what to wait for.
    func pump(now: UInt64) -> Interest {
        EngineThread.check("CurlStreamConnection.pump")
        guard let driver else { return Interest(release: true) }
        driver.engineUpdate { $0.expire(now: now) }
        if socket >= 0 && !libcurlStillHoldsSocket() {
            // Never expected with a cache of its own; but `shutdown`, the upgrade's TLS and the engine's poll use the
            // descriptor directly, and once libcurl closed it, it may belong to another connection: fail instead.
            socket = -1
            let lost = StreamLifecycle.error(.networkConnectionLost, "libcurl closed the stream's connection.")
            driver.engineUpdate { $0.handle(.failed(lost)) }
        }
        var readBlocked = false
        var writeBlocked = false
        var steps = 0
        handshakeWaits = 0
        loop: while steps < Self.stepsPerPass {
            steps += 1
            switch driver.engineInspect({ $0.nextIO(readBlocked: readBlocked, writeBlocked: writeBlocked) }) {
            case .none:
                break loop
            case .release:
                driver.flush()
                return Interest(release: true)
            case .receive(let count):
                if let event = receive(atMost: count) {
                    driver.engineUpdate { $0.handle(event) }
                } else {
                    readBlocked = true
                }
            case .send(let data):
                if let event = send(data) {
                    driver.engineUpdate { $0.handle(event) }
                } else {
                    writeBlocked = true
                    driver.engineUpdate { $0.handle(.sendBlocked) }
                }
            case .handshake:
                if let event = handshakeStep(now: now) {
                    driver.engineUpdate { $0.handle(event) }
                } else {
                    (readBlocked, writeBlocked) = (true, true)
                }
            case .shutdownWrite:
                upgrade?.close()
                let event = shutdownWrite()
                driver.engineUpdate { $0.handle(event) }
            }
        }
        driver.flush()
        return driver.engineInspect { lifecycle in
            var interest = Interest(deadline: lifecycle.nextDeadline, busy: steps >= Self.stepsPerPass)
            interest.events = handshakeWaits
            if lifecycle.wantsReadable { interest.events |= sk_curl_wait_pollin }
            if lifecycle.wantsWritable { interest.events |= sk_curl_wait_pollout }
            return interest
        }
    }

    /// Whether the connection libcurl keeps for this handle is still open on ``socket``.
    private func libcurlStillHoldsSocket() -> Bool {
        var fd: curl_socket_t = -1
        return sk_curl_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK && fd == socket
    }

    /// Shuts the socket's write side. After the peer's orderly close, the upgrade's `close_notify` (or any byte sent
    /// since) reaches a closed socket, whose reset makes the shutdown fail, in a race with it: that close follows the
    /// peer's end of stream and is no error. Only a connection broken without the peer's end fails the task.
    private func shutdownWrite() -> StreamLifecycle.IOEvent {
        guard shutdown(socket, Int32(SHUT_WR)) != 0 else { return .shutDownWrite }
        let reason = String(cString: strerror(errno))
        let failure = StreamLifecycle.error(.networkConnectionLost, "The write side could not be shut down: \(reason).")
        // The kernel still holds what came before a reset: nothing left but the peer's end reads as 0, unread bytes
        // (its last data, its close_notify) leave the answer to the reads after them.
        var byte: UInt8 = 0
        let peeked = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if peeked == 0 { return .shutDownWrite }
        return peeked > 0 ? .writeShutdownFailed(failure) : .failed(failure)
    }

    /// One step of the upgrade's handshake: nil while it waits for the socket. `now` starts its deadline.
    private func handshakeStep(now: UInt64) -> StreamLifecycle.IOEvent? {
        if upgrade == nil {
            // The server speaks TLS only after our ClientHello: a byte already waiting in the socket came in plain
            // text before the handshake, and must not be taken for part of it (STARTTLS injection).
            var byte: UInt8 = 0
            if recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 {
                return .failed(StreamLifecycle.plaintextBeforeHandshake)
            }
            upgrade = StreamTLSSession(
                socket: socket, host: host, tlsVersions: tlsVersions, check: handshake)
            guard upgrade != nil else {
                return .failed(StreamLifecycle.error(.secureConnectionFailed, "OpenSSL could not be set up."))
            }
            driver?.engineUpdate { $0.handle(.handshakeStarted(at: now)) }
        }
        switch upgrade?.handshake() {
        case .done:
            // Never without the verify callback's verdict: refuse rather than trust.
            return handshake.accepted ? .secured : .failed(refusalError())
        case .wantsRead:
            handshakeWaits = sk_curl_wait_pollin
            return nil
        case .wantsWrite:
            handshakeWaits = sk_curl_wait_pollout
            return nil
        case .failed(let reason):
            if handshake.evaluated && !handshake.accepted { return .failed(refusalError()) }
            return .failed(
                StreamLifecycle.error(.secureConnectionFailed, "The TLS handshake of the upgrade failed: \(reason)."))
        case .closed, nil:
            return .failed(
                StreamLifecycle.error(
                    .secureConnectionFailed, "The peer closed the connection during the TLS handshake."))
        }
    }

    /// One `curl_easy_recv` (or TLS read after an upgrade): nil when it would block.
    private func receive(atMost count: Int) -> StreamLifecycle.IOEvent? {
        if let upgrade {
            let size = min(count, receiveBuffer.count)
            switch upgrade.read(into: UnsafeMutableRawBufferPointer(rebasing: receiveBuffer[0..<size])) {
            case .done(let received):
                return .received(Data(UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<received])))
            case .closed:
                return .endOfStream
            case .wantsRead, .wantsWrite:
                return nil
            case .failed(let reason):
                return .failed(StreamLifecycle.error(.networkConnectionLost, "The connection was lost: \(reason)."))
            }
        }
        var received = 0
        let code = curl_easy_recv(easy, receiveBuffer.baseAddress, min(count, receiveBuffer.count), &received)
        switch code {
        case CURLE_AGAIN:
            return nil
        case CURLE_OK where received == 0:
            return .endOfStream
        case CURLE_OK:
            receivedAny = true
            return .received(Data(UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<received])))
        default:
            return .failed(ioError(code, "receiving"))
        }
    }

    /// One `curl_easy_send` (or TLS write after an upgrade): nil when it would block.
    private func send(_ data: Data) -> StreamLifecycle.IOEvent? {
        if let upgrade {
            let outcome = data.withUnsafeBytes { upgrade.write($0) }
            switch outcome {
            case .done(let sent):
                return .sent(sent)
            case .wantsRead, .wantsWrite:
                return nil
            case .closed:
                return .failed(StreamLifecycle.error(.networkConnectionLost, "The peer closed the TLS session."))
            case .failed(let reason):
                return .failed(StreamLifecycle.error(.networkConnectionLost, "The connection was lost: \(reason)."))
            }
        }
        var sent = 0
        let code = data.withUnsafeBytes { buffer in
            curl_easy_send(easy, buffer.baseAddress, buffer.count, &sent)
        }
        switch code {
        case CURLE_AGAIN:
            return nil
        case CURLE_OK:
            return .sent(sent)
        default:
            return .failed(ioError(code, "sending"))
        }
    }

    // MARK: - Errors

    private func ioError(_ code: CURLcode, _ doing: String) -> URLError {
        let reason = String(cString: curl_easy_strerror(code))
        if isTLS, !receivedAny, let refused = handshake.clientCertificateError(detail: reason, userInfo: [:]) {
            // The server asked for a client certificate and ended the connection before sending a byte: over TLS
            // 1.3 its alert arrives after the handshake, at the first read.
            return refused
        }
        return StreamLifecycle.error(.networkConnectionLost, "The connection was lost while \(doing): \(reason).")
    }

    private func refusalError() -> URLError { handshake.error(userInfo: [:]) }

    private func connectError(for code: CURLcode) -> URLError {
        if isTLS && handshake.evaluated && !handshake.accepted { return refusalError() }
        let detail = String(cString: errorBuffer)
        let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        if isTLS, let refused = handshake.clientCertificateError(detail: reason, userInfo: [:]) { return refused }
        let mapped: URLError.Code
        switch code {
        case CURLE_COULDNT_CONNECT: mapped = .cannotConnectToHost
        case CURLE_COULDNT_RESOLVE_HOST: mapped = .cannotFindHost
        case CURLE_OPERATION_TIMEDOUT: mapped = .timedOut
        case CURLE_COULDNT_RESOLVE_PROXY: mapped = .cannotFindHost
        case CURLE_PROXY: mapped = .cannotConnectToHost
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION: mapped = .secureConnectionFailed
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING: mapped = .networkConnectionLost
        default: mapped = .cannotConnectToHost
        }
        return URLError(mapped, userInfo: [NSLocalizedDescriptionKey: "\(host): \(reason)"])
    }
}
