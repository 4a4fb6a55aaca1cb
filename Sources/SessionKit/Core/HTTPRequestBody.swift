import Foundation
public import HTTPTypes

/// The body of a request sent with the HTTP core API (``URLSessionManager/perform(_:body:_:)``): bytes in memory, a
/// file, or a stream written while the request is sent.
///
/// ```swift
/// let body = HTTPRequestBody.stream { writer in
///     for chunk in chunks { try await writer.write(chunk) }
///     return [.init("X-Checksum")!: checksum]   // sent as trailers after the last chunk
/// }
/// try await manager.perform(request, body: body) { response, body in … }
/// ```
public struct HTTPRequestBody: Sendable {
    enum Source: Sendable {
        case data(Data)
        case file(URL)
        case stream(length: Int64?, write: @Sendable (HTTPBodyWriter) async throws -> HTTPFields?)
    }

    let source: Source

    /// A body of `data`, sent with its `Content-Length`. It can be sent again (a 307/308 redirect, a retry).
    public static func data(_ data: Data) -> HTTPRequestBody {
        HTTPRequestBody(source: .data(data))
    }

    /// The contents of the file at `url`, read as they are sent, with the file's size as `Content-Length`.
    public static func file(_ url: URL) -> HTTPRequestBody {
        HTTPRequestBody(source: .file(url))
    }

    /// A body that `write` produces while the request is sent, chunk by chunk: each ``HTTPBodyWriter/write(_:)``
    /// suspends while the transport has enough waiting (back-pressure), and the response may arrive meanwhile (full
    /// duplex: ``URLSessionManager/perform(_:body:_:)``'s handler runs as soon as the head is there). The closure's
    /// result is sent as request trailers after the last chunk (nil: none). Trailers need a chunked HTTP/1.1 body on
    /// the curl transport: with a `length` (sent with `Content-Length`), over HTTP/2 (libcurl has no way to send
    /// request trailers there) or on the Foundation transport, the request fails with
    /// ``SessionKitError/Code/requestTrailersNotSent`` rather than drop them.
    ///
    /// Written once: a redirect that keeps the body (307, 308), an authentication round or a retry that would need it
    /// again fails with `URLError.requestBodyStreamExhausted`, whose underlying error (`NSUnderlyingErrorKey`) is
    /// ``SessionKitError/Code/streamedBodyUnavailable`` saying why. The curl transport sends it as it is written; the
    /// Foundation transport (URLSession on Linux reads request bodies synchronously) collects it first and sends no
    /// trailers.
    ///
    /// - Parameters:
    ///   - length: The body's size in bytes, sent as `Content-Length`; nil sends it chunked (HTTP/1.1) or as HTTP/2
    ///     DATA frames. The body must be exactly that long: a write past it throws, and an end before it fails the
    ///     request, both with `URLError.cannotDecodeRawData` saying so.
    ///   - write: Writes the body; its error fails the request.
    public static func stream(
        length: Int64? = nil, _ write: @escaping @Sendable (HTTPBodyWriter) async throws -> HTTPFields?
    ) -> HTTPRequestBody {
        HTTPRequestBody(source: .stream(length: length, write: write))
    }
}
