import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What OpenTelemetry's HTTP client conventions record of one attempt's request: its method, server and scheme (low
/// cardinality, for metrics too) and its URL without credentials (for spans).
struct AttemptDescription: Sendable {
    /// The method, or `_OTHER` for one outside RFC 9110's and PATCH (OpenTelemetry's rule, keeping metrics' cardinality
    /// bounded).
    let method: String
    /// The method as sent, when ``method`` is `_OTHER`.
    let originalMethod: String?
    /// `url.scheme`: `http` or `https`.
    let scheme: String
    /// `server.address`: the URL's host.
    let host: String
    /// `server.port`: the URL's port, or the scheme's default.
    let port: Int
    /// The request's URL.
    let url: URL

    /// The methods recorded as they are.
    private static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "QUERY",
    ]

    /// Query parameters whose values never go into `url.full` (OpenTelemetry's list: signatures and keys of
    /// pre-signed URLs).
    static let redactedQueryNames: Set<String> = ["awsaccesskeyid", "signature", "sig", "x-goog-signature"]

    /// The description of `request`; nil when it has no URL with a host.
    init?(_ request: URLRequest) {
        guard let url = request.url, let host = url.host else { return nil }
        let sent = request.httpMethod ?? "GET"
        if Self.knownMethods.contains(sent) {
            (method, originalMethod) = (sent, nil)
        } else {
            (method, originalMethod) = ("_OTHER", sent)
        }
        let scheme = url.scheme?.lowercased() ?? "http"
        self.scheme = scheme
        self.host = host
        self.port = url.port ?? (scheme == "https" || scheme == "wss" ? 443 : 80)
        self.url = url
    }

    /// `url.full`: the URL without user or password, with the values of ``redactedQueryNames`` replaced by
    /// `REDACTED`.
    var fullURL: String {
        let text = url.absoluteString
        guard url.user != nil || url.password != nil || url.query != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return text }
        components.user = nil
        components.password = nil
        if let items = components.percentEncodedQueryItems,
            items.contains(where: { Self.redactedQueryNames.contains($0.name.lowercased()) })
        {
            components.percentEncodedQueryItems = items.map { item in
                Self.redactedQueryNames.contains(item.name.lowercased())
                    ? URLQueryItem(name: item.name, value: "REDACTED") : item
            }
        }
        return components.string ?? text
    }

    /// The attributes of the request's metrics: method, scheme, server address and port.
    var dimensions: [(String, String)] {
        [
            ("http.request.method", method), ("url.scheme", scheme), ("server.address", host),
            ("server.port", String(port)),
        ]
    }
}
