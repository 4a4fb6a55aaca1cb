// The transport needs swift-openapi-runtime, which the package resolves only for the `OpenAPI` trait: a consumer of
// SessionKit alone never fetches it. Without the trait this module is empty.
#if OpenAPI
    public import Foundation
    public import HTTPTypes
    public import OpenAPIRuntime
    public import SessionKit
    import Synchronization

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
            // No call (and no suspension point) for the usual GET without a body.
            let requestBody = body == nil ? nil : try await Self.requestBody(body)
            let (response, responseBody) = try await manager.response(for: joined, body: requestBody)
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
            let server = try Server.parsed(baseURL)
            let operation = request.path ?? ""
            let (operationPath, query): (String, String?)
            if let (path, found) = Self.splitQuery(operation) {
                (operationPath, query) = (path, found)
            } else {
                // Characters a URL does not carry as they are: read as `URLComponents` reads (and encodes) them.
                guard let components = URLComponents(string: operation) else {
                    throw Server.noURL(operation, baseURL)
                }
                (operationPath, query) = (components.percentEncodedPath, components.percentEncodedQuery)
            }
            var joined = request
            // The body's framing is the manager's, from the body itself (its length, or chunked). The runtime's
            // `Content-Length` field goes: URLSession on Linux, which the Foundation transport runs on, keeps a
            // hand-set one on a 307 and never finishes the redirected request.
            joined.headerFields[.contentLength] = nil
            joined.scheme = server.scheme
            joined.authority = server.authority
            var path = server.path + operationPath
            if path.isEmpty { path = "/" }
            if let query { path += "?" + query }
            joined.path = path
            return joined
        }

        /// `path` (an operation's path and query, as the runtime writes it) cut at its `?`, without its fragment; nil
        /// when it holds a byte a URL does not carry as it is (a space, a quote, a non-ASCII byte, a `%` that starts
        /// no escape), which `URLComponents` then reads (and encodes).
        static func splitQuery(_ path: String) -> (path: String, query: String?)? {
            var question: String.UTF8View.Index?
            var end = path.utf8.endIndex
            var hexDigitsDue = 0  // after a `%`
            for index in path.utf8.indices {
                let byte = path.utf8[index]
                guard byte > 0x20, byte < 0x7F, !Self.notInURLs.contains(byte) else { return nil }
                if hexDigitsDue > 0 {
                    guard Self.hexDigits.contains(byte) else { return nil }
                    hexDigitsDue -= 1
                    continue
                }
                if byte == UInt8(ascii: "%") {
                    hexDigitsDue = 2
                    continue
                }
                if byte == UInt8(ascii: "#") {
                    end = index
                    break
                }
                if byte == UInt8(ascii: "?"), question == nil { question = index }
            }
            guard hexDigitsDue == 0 else { return nil }
            guard let question else { return (String(path[..<end]), nil) }
            return (String(path[..<question]), String(path[path.utf8.index(after: question)..<end]))
        }

        /// The printable ASCII bytes RFC 3986 never lets a URL carry unencoded.
        private static let notInURLs: Set<UInt8> = Set("\"<>\\^`{|}".utf8)

        /// The bytes of a percent-escape's two digits.
        private static let hexDigits: Set<UInt8> = Set("0123456789ABCDEFabcdef".utf8)

        /// The server URL's scheme, authority and path, which every operation's path is joined to.
        struct Server: Sendable {
            let scheme: String
            /// The host (an IPv6 literal in brackets) and port.
            let authority: String
            /// Percent-encoded; the operation's path follows it.
            let path: String

            /// The parts of `baseURL`.
            init(_ baseURL: URL) throws {
                guard let components = URLComponents(string: baseURL.absoluteString),
                    let scheme = components.scheme, let host = components.percentEncodedHost, !host.isEmpty
                else { throw Self.noURL(nil, baseURL) }
                // An IPv6 literal keeps (or gets) its brackets in the authority.
                let bracketed = host.utf8.contains(UInt8(ascii: ":")) && !host.hasPrefix("[") ? "[\(host)]" : host
                self.scheme = scheme
                authority = components.port.map { "\(bracketed):\($0)" } ?? bracketed
                path = components.percentEncodedPath
            }

            /// The parts of `baseURL`, parsed once while it is the one the calls pass (a generated client passes the
            /// same server URL to every call; parsing it cost about 12k instructions a call).
            static func parsed(_ baseURL: URL) throws -> Server {
                if let server = last.withLock({ $0.flatMap { $0.url == baseURL ? $0.server : nil } }) { return server }
                let server = try Server(baseURL)
                last.withLock { $0 = (baseURL, server) }
                return server
            }

            private static let last = Mutex<(url: URL, server: Server)?>(nil)

            /// The error of an operation path and server URL that make no URL.
            static func noURL(_ operationPath: String?, _ baseURL: URL) -> URLError {
                let reason =
                    operationPath.map {
                        "The operation's path \($0) and the server URL \(baseURL.absoluteString) make no URL."
                    }
                    ?? "The server URL \(baseURL.absoluteString) makes no URL: it needs a scheme and a host."
                return URLError(
                    .badURL, userInfo: [NSLocalizedDescriptionKey: reason, NSURLErrorFailingURLErrorKey: baseURL])
            }
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
            // One pass over the fields (a lookup by name joins the values it finds, and there are two names). As
            // that lookup reads them: a repeated field is a list, which is no length, and an encoding other than
            // `identity` means the length is the encoded body's.
            var length: String?
            var lengthFields = 0
            var encoding: String?
            var encodingFields = 0
            for field in response.headerFields {
                if field.name == .contentLength {
                    (length, lengthFields) = (field.value, lengthFields + 1)
                } else if field.name == .contentEncoding {
                    (encoding, encodingFields) = (field.value, encodingFields + 1)
                }
            }
            guard lengthFields == 1, let length, let count = Int64(length), count >= 0,
                encodingFields == 0 || (encodingFields == 1 && encoding?.lowercased() == "identity")
            else { return .unknown }
            return .known(count)
        }
    }
#endif
