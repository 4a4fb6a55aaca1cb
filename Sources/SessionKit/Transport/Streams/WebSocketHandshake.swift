internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The opening handshake of a WebSocket client (RFC 6455 4.1), I/O-free: the upgrade request's bytes, and the strict
/// check of the server's answer. Anything but a `101` with `Upgrade: websocket`, `Connection: Upgrade`, the
/// `Sec-WebSocket-Accept` of this key, at most one subprotocol and only one of those offered, and no extension but
/// permessage-deflate as ``WebSocketDeflateParameters`` checks it (and only when offered) fails the connection before
/// any frame is read.
struct WebSocketHandshake: Sendable {
    /// The GUID RFC 6455 4.2.2 appends to the key.
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// The most bytes a response head may take: a server that sends more is not answering a WebSocket upgrade.
    static let maximumHeadLength = 16 * 1024

    /// The URL the task connects to (`ws`, `wss`, `http` or `https`).
    let url: URL
    /// The `Sec-WebSocket-Key`: 16 random bytes in base64, fresh for each connection.
    let key: String
    /// The subprotocols offered, in order of preference.
    let protocols: [String]
    /// The request's header fields beyond those the handshake sets, in order.
    let fields: [(name: String, value: String)]
    /// Whether the request offers permessage-deflate (RFC 7692).
    var offersDeflate = true

    /// The response head, the name of the subprotocol the server chose, and permessage-deflate's parameters when
    /// the server accepted it.
    struct Accepted: @unchecked Sendable, Equatable {
        // @unchecked Sendable: `HTTPURLResponse` is immutable once made.
        let response: HTTPURLResponse
        let negotiatedProtocol: String?
        var deflate: WebSocketDeflateParameters? = nil
        /// The values of the response's `Set-Cookie` lines, one cookie each (the response's `allHeaderFields` joins
        /// them with commas, which a cookie's value may hold).
        var setCookies: [String] = []
    }

    /// Header fields only the handshake itself sets: a caller's copy would contradict or repeat it.
    private static let reservedFields: Set<String> = [
        "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
        "sec-websocket-protocol", "content-length", "transfer-encoding",
    ]

    init(url: URL, key: String, protocols: [String], fields: [(name: String, value: String)]) {
        self.url = url
        self.key = key
        // Each offered once (RFC 6455 4.1: the values must all be unique), in the caller's order.
        var offered = Set<String>()
        self.protocols = protocols.filter { offered.insert($0).inserted }
        self.fields = fields.filter { !Self.reservedFields.contains($0.name.lowercased()) }
    }

    /// A fresh `Sec-WebSocket-Key`: 16 bytes from the system's secure generator, in base64.
    static func makeKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
    }

    /// The `Sec-WebSocket-Accept` a server must answer `key` with: base64(SHA-1(key + GUID)).
    static func acceptValue(for key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        let done = input.withUnsafeBytes { raw in
            EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha1(), nil)
        }
        // Never fails with OpenSSL's built-in SHA-1; an empty answer matches no server's.
        guard done == 1, length == 20 else { return "" }
        return Data(digest).base64EncodedString()
    }

    /// The host and port the connection goes to, and whether it is TLS; nil for a URL that is not ws, wss, http or
    /// https with a host.
    static func endpoint(of url: URL) -> (host: String, port: Int, secure: Bool)? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return nil }
        let secure: Bool
        switch scheme {
        case "ws", "http": secure = false
        case "wss", "https": secure = true
        default: return nil
        }
        return (host, url.port ?? (secure ? 443 : 80), secure)
    }

    /// The upgrade request's bytes.
    var requestBytes: Data {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var target = components?.percentEncodedPath ?? "/"
        if target.isEmpty { target = "/" }
        if let query = components?.percentEncodedQuery { target += "?" + query }
        var host = url.host ?? ""
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        if let port = url.port, let endpoint = Self.endpoint(of: url), port != (endpoint.secure ? 443 : 80) {
            host += ":\(port)"
        }
        var head = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if !protocols.isEmpty { head += "Sec-WebSocket-Protocol: \(protocols.joined(separator: ", "))\r\n" }
        if offersDeflate { head += "Sec-WebSocket-Extensions: \(WebSocketDeflateParameters.offer)\r\n" }
        for field in fields { head += "\(field.name): \(field.value)\r\n" }
        return Data((head + "\r\n").utf8)
    }

    /// The error for a field name that is not a token, a value with CR, LF or NUL, or a subprotocol that is not a
    /// token (RFC 6455 4.1): the request must not reach the wire.
    var fieldError: NSError? {
        if let error = HTTPFieldValidation.error(
            forFields: Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first }))
        {
            return error
        }
        if let bad = protocols.first(where: { !HTTPFieldValidation.isToken($0) }) {
            return SessionKitError.session(
                .invalidRequestField, "The WebSocket subprotocol \"\(bad)\" is not a token: the request was not sent.")
        }
        return nil
    }

    /// The length of the response head in `buffer` (up to and with its empty line), nil while it is incomplete.
    static func headLength(in buffer: Data) -> Int? {
        let bytes = buffer.prefix(maximumHeadLength + 4)
        var index = bytes.startIndex
        while index + 3 < bytes.endIndex {
            if bytes[index] == 0x0D && bytes[index + 1] == 0x0A && bytes[index + 2] == 0x0D && bytes[index + 3] == 0x0A
            {
                return index + 4 - bytes.startIndex
            }
            index += 1
        }
        return nil
    }

    /// Checks the server's response head (its bytes up to and with the empty line).
    func accept(head: Data) -> Result<Accepted, URLError> {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard !lines.isEmpty, let status = StatusLine(lines.removeFirst()) else {
            return .failure(Self.error("The server's answer to the WebSocket upgrade is not an HTTP response."))
        }
        var fields: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                return .failure(Self.error("The server's answer to the WebSocket upgrade has a malformed header line."))
            }
            fields.append(
                (
                    String(line[..<colon]),
                    line[line.index(after: colon)...].trimmingCharacters(in: Self.optionalWhitespace)
                ))
        }
        func values(_ name: String) -> [String] {
            fields.filter { $0.0.equalsIgnoringASCIICase(name) }.map(\.1)
        }
        func tokens(_ name: String) -> [String] {
            values(name).flatMap { $0.split(separator: ",") }.map {
                $0.trimmingCharacters(in: Self.optionalWhitespace).asciiLowercased
            }
        }
        var headerFields: [String: String] = [:]
        for (name, value) in fields {
            headerFields[name] = headerFields[name].map { $0 + ", " + value } ?? value
        }
        let response = HTTPURLResponse(
            url: url, statusCode: status.code, httpVersion: "HTTP/1.1", headerFields: headerFields)
        guard status.code == 101 else {
            return .failure(
                Self.error("The server answered the WebSocket upgrade with status \(status.code), not 101.", response))
        }
        // RFC 6455 4.1: the value is `websocket` (in any case), and nothing else beside it.
        guard tokens("Upgrade") == ["websocket"] else {
            return .failure(Self.error("The server's 101 has no `Upgrade: websocket`.", response))
        }
        guard tokens("Connection").contains("upgrade") else {
            return .failure(Self.error("The server's 101 has no `Connection: Upgrade`.", response))
        }
        guard values("Sec-WebSocket-Accept") == [Self.acceptValue(for: key)] else {
            return .failure(Self.error("The server's Sec-WebSocket-Accept does not match the key sent.", response))
        }
        let chosen = values("Sec-WebSocket-Protocol").flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: Self.optionalWhitespace)
        }
        guard chosen.count <= 1, chosen.allSatisfy({ protocols.contains($0) }) else {
            return .failure(
                Self.error(
                    "The server chose the subprotocol \(chosen.joined(separator: ", ")), which was not offered.",
                    response))
        }
        let extensions = values("Sec-WebSocket-Extensions").filter { !$0.isEmpty }
        var deflate: WebSocketDeflateParameters?
        if offersDeflate {
            switch WebSocketDeflateParameters.negotiate(extensions) {
            case .success(let parameters): deflate = parameters
            case .failure(let refusal): return .failure(Self.error(refusal.reason, response))
            }
        } else if !extensions.isEmpty {
            return .failure(
                Self.error(
                    "The server chose the extension \(extensions.joined(separator: ", ")), which was not offered.",
                    response))
        }
        guard let response else {
            return .failure(Self.error("The server's answer to the WebSocket upgrade cannot be represented."))
        }
        return .success(
            Accepted(
                response: response, negotiatedProtocol: chosen.first, deflate: deflate,
                setCookies: values("Set-Cookie")))
    }

    /// HTTP's optional whitespace (RFC 9110 5.6.3): space and horizontal tab, not Unicode's other spaces.
    static let optionalWhitespace = CharacterSet(charactersIn: " \t")

    /// The `userInfo` key of a refused upgrade's error under which the server's answer is, when it could be read.
    static let responseKey = "SessionKitWebSocketResponse"

    private static func error(_ description: String, _ response: HTTPURLResponse? = nil) -> URLError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: description]
        if let response { userInfo[responseKey] = response }
        return URLError(.badServerResponse, userInfo: userInfo)
    }
}
