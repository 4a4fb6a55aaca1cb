internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// TLS of SessionKit's own over a stream's connected socket, for `startSecureConnection()` after plain bytes
/// (STARTTLS): an OpenSSL client session on the file descriptor libcurl opened, non-blocking, whose verify callback is
/// the stream connection's (the ``SecurityPolicy`` decides in the handshake, as on libcurl's handshakes).
///
/// Used on the engine thread only (its I/O checks it, ``EngineThread``).
final class StreamTLSSession {
    /// What one OpenSSL call came to.
    enum Outcome: Equatable {
        /// Done: bytes moved (a read or write), or the handshake completed (0).
        case done(Int)
        /// Try again when the socket is readable.
        case wantsRead
        /// Try again when the socket is writable.
        case wantsWrite
        /// The peer closed the TLS session (a read).
        case closed
        case failed(String)
    }

    private let context: OpaquePointer
    private let ssl: OpaquePointer

    /// A client session on `socket` for `host` (its SNI when it is a name), between `tlsVersions`, whose handshake
    /// `check` judges (it must outlive the session).
    init?(socket: Int32, host: String, tlsVersions: TLSVersionRange, check: HandshakeCheck) {
        let versions = tlsVersions.openSSLValues
        guard let context = sk_ssl_client_context(versions.minimum, versions.maximum) else { return nil }
        guard check.install(on: context) else {
            SSL_CTX_free(context)
            return nil
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            return nil
        }
        guard SSL_set_fd(ssl, socket) == 1 else {
            SSL_free(ssl)
            SSL_CTX_free(context)
            return nil
        }
        self.context = context
        self.ssl = ssl
        if !Self.isIPAddress(host) { _ = sk_ssl_set_host_name(ssl, host) }
        SSL_set_connect_state(ssl)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// One step of the handshake.
    func handshake() -> Outcome {
        EngineThread.check("StreamTLSSession.handshake")
        // The engine thread shares OpenSSL's error queue with libcurl: start each call from an empty queue, so that
        // `SSL_get_error` and the message read this call's errors only.
        ERR_clear_error()
        return outcome(of: SSL_do_handshake(ssl))
    }

    /// Reads into `buffer`, at most its size.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        EngineThread.check("StreamTLSSession.read")
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return .failed("nothing to read into") }
        ERR_clear_error()
        return outcome(of: SSL_read(ssl, base, Int32(clamping: buffer.count)))
    }

    /// Writes (a part of) `buffer`, which must not be empty.
    func write(_ buffer: UnsafeRawBufferPointer) -> Outcome {
        EngineThread.check("StreamTLSSession.write")
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return .done(0) }
        ERR_clear_error()
        return outcome(of: SSL_write(ssl, base, Int32(clamping: buffer.count)))
    }

    /// Sends the TLS close alert (`close_notify`), without waiting for the peer's.
    func close() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func outcome(of result: Int32) -> Outcome {
        if result > 0 { return .done(Int(result)) }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantsRead
        case SSL_ERROR_WANT_WRITE:
            return .wantsWrite
        case SSL_ERROR_ZERO_RETURN:
            // Also a peer that closed without close_notify (`SSL_OP_IGNORE_UNEXPECTED_EOF`, see
            // `sk_ssl_client_context`).
            return .closed
        case SSL_ERROR_SYSCALL where ERR_peek_error() == 0:
            // The peer closed the socket without a close alert.
            return result == 0 ? .closed : .failed(String(cString: strerror(errno)))
        default:
            var message = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(ERR_get_error(), &message, message.count)
            ERR_clear_error()
            return .failed(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
