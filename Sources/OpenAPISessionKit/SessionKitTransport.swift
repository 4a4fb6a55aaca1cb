// The transport needs swift-openapi-runtime, which the package resolves only for the `OpenAPI` trait: a consumer of
// SessionKit alone never fetches it. Without the trait this module is empty.
#if OpenAPI
    public import Foundation
    public import HTTPTypes
    public import OpenAPIRuntime
    public import SessionKit

    /// A swift-openapi-runtime `ClientTransport` that sends a generated client's requests through a SessionKit
    /// `URLSessionManager`, on its HTTP core API: the manager's security policy (pinning in the handshake),
    /// interceptors, event monitors, redirects, challenges, HTTP cache, cookies and body limits apply to every
    /// operation.
    ///
    /// Bodies stream both ways: a request `HTTPBody` is written as it is sent (with its length as `Content-Length` when
    /// it knows it, else chunked), and the response's `HTTPBody` is read as it arrives, after
    /// ``send(_:body:baseURL:operationID:)`` returned; cancelling the Swift task that calls the operation, or that
    /// reads the body, cancels the transfer.
    ///
    /// ```swift
    /// import OpenAPISessionKit
    ///
    /// let manager = URLSessionManager()
    /// manager.securityPolicy = policy
    /// let client = Client(serverURL: try Servers.Server1.url(), transport: SessionKitTransport(manager: manager))
    /// let item = try await client.getItem(path: .init(itemID: 7)).ok.body.json
    /// ```
    ///
    /// An `HTTPBody` is never iterated twice: one whose `iterationBehavior` is `.single`, or larger than
    /// ``maximumReplayableBodySize``, is streamed, and a redirect that keeps the body (307, 308), an authentication
    /// round or a retry that would need it again fails with `URLError.requestBodyStreamExhausted` (its underlying error
    /// `SessionKitError.Code.streamedBodyUnavailable`) and sends nothing in its place. A `.multiple` body of
    /// a known length up to ``maximumReplayableBodySize`` (a generated client's JSON or form body) is read into memory
    /// first, so that it can be sent again. Errors reach the caller as the runtime's `ClientError`, whose
    /// `underlyingError` is SessionKit's `URLError` or `SessionKitError` value, unchanged.
    public struct SessionKitTransport: ClientTransport {
        // Sendable, checked by the compiler: `URLSessionManager` is Sendable.

        /// The largest `.multiple` request body kept in memory so that it can be sent again (1 MiB); a larger one is
        /// streamed and sent once.
        public static let maximumReplayableBodySize: Int64 = 1 << 20

        /// The manager that sends every request.
        public let manager: URLSessionManager

        /// A transport sending through `manager`.
        ///
        /// - Parameter manager: The manager whose configuration, policy and interceptors apply; a new one by default.
        public init(manager: URLSessionManager = URLSessionManager()) {
            self.manager = manager
        }

        /// Sends `request`, its path joined to `baseURL`, with `body`, and returns the response as soon as its head
        /// arrived, with its body to read as it comes (nil for `HEAD`, `CONNECT` and `TRACE`).
        ///
        /// - Parameters:
        ///   - request: The operation's request; its path (with its query) is appended to `baseURL`'s path.
        ///   - body: The request body, if any.
        ///   - baseURL: The server URL: its scheme, authority and path prefix; its own query is replaced by the
        ///     request's.
        ///   - operationID: The operation's identifier (unused: the manager's event monitors see the request itself).
        /// - Returns: The response head and its body.
        /// - Throws: `URLError.badURL` when `baseURL` and the path make no URL, or what the manager's HTTP core API
        ///   throws before the head: a `URLError` or a `SessionKitError`.
        public func send(
            _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
        ) async throws -> (HTTPResponse, HTTPBody?) {
            let joined = try Self.request(request, joinedTo: baseURL)
            let (response, responseBody) = try await manager.response(
                for: joined, body: try await Self.requestBody(body))
            switch request.method {
            case .head:
                // No body follows: wait for the response's end rather than drop the body, which would cancel the
                // request and close a connection that can be reused.
                for try await _ in responseBody {}
                return (response, nil)
            case .connect, .trace:
                return (response, nil)
            default:
                return (response, HTTPBody(responseBody, length: Self.length(of: response), iterationBehavior: .single))
            }
        }
    }

    // MARK: - Conversions

    extension SessionKitTransport {
        /// `request` with the scheme and authority of `baseURL`, and its path appended to `baseURL`'s, as the
        /// URLSession and AsyncHTTPClient transports join them: the base's path prefix kept, the request's query in
        /// place of the base's; without a `Content-Length` field (the body sets it).
        static func request(_ request: HTTPRequest, joinedTo baseURL: URL) throws -> HTTPRequest {
            guard var components = URLComponents(string: baseURL.absoluteString),
                let requestComponents = URLComponents(string: request.path ?? ""),
                let scheme = components.scheme, let host = components.percentEncodedHost, !host.isEmpty
            else {
                throw URLError(
                    .badURL,
                    userInfo: [
                        NSLocalizedDescriptionKey:
                            "The operation's path \(request.path ?? "") and the server URL \(baseURL.absoluteString) "
                            + "make no URL.",
                        NSURLErrorFailingURLErrorKey: baseURL,
                    ])
            }
            components.percentEncodedPath += requestComponents.percentEncodedPath
            components.percentEncodedQuery = requestComponents.percentEncodedQuery
            // An IPv6 literal keeps (or gets) its brackets in the authority.
            let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            var joined = request
            // The body's framing is the manager's, from the body itself (its length, or chunked). The runtime's
            // `Content-Length` field goes: URLSession on Linux, which the Foundation transport runs on, keeps a
            // hand-set one on a 307 and never finishes the redirected request.
            joined.headerFields[.contentLength] = nil
            joined.scheme = scheme
            joined.authority = components.port.map { "\(bracketed):\($0)" } ?? bracketed
            var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            if let query = components.percentEncodedQuery { path += "?" + query }
            joined.path = path
            return joined
        }

        /// `body` as the HTTP core API's body: a small `.multiple` body of known length in memory (sent again when a
        /// redirect or a retry needs it), any other streamed as it is read, once.
        static func requestBody(_ body: HTTPBody?) async throws -> HTTPRequestBody? {
            guard let body else { return nil }
            var length: Int64?
            if case .known(let count) = body.length { length = count }
            if body.iterationBehavior == .multiple, let length, length <= maximumReplayableBodySize {
                return .data(try await Data(collecting: body, upTo: Int(length)))
            }
            return .stream(length: length) { writer in
                for try await chunk in body { try await writer.write(Data(chunk)) }
                return nil
            }
        }

        /// The body length `response` announces: its `Content-Length`, unless a content coding (which the manager may
        /// decode) makes it the length of other bytes; none for a 204 or a 304.
        static func length(of response: HTTPResponse) -> HTTPBody.Length {
            // A 204 has no body, and a 304's `Content-Length` is that of the representation it did not send.
            if response.status == .noContent || response.status == .notModified { return .known(0) }
            guard let field = response.headerFields[.contentLength], let count = Int64(field), count >= 0,
                response.headerFields[.contentEncoding].map({ $0.lowercased() == "identity" }) ?? true
            else { return .unknown }
            return .known(count)
        }
    }
#endif
