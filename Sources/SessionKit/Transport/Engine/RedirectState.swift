import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The redirect chain of one request on the curl transport, as a value: it turns a 3xx response into the next
/// request (or the reason to stop), with a limit, cycle detection (reset by a response that sets a cookie), the
/// method rules, header stripping across origins, https → http refused, and a Unix socket reached only from itself.
struct RedirectState {
    /// At most this many redirects per request.
    static let limit = 16

    private(set) var count = 0
    private var visited: Set<String> = []

    /// Whether `statusCode` is a redirect that carries a `Location`.
    static func isRedirect(_ statusCode: Int) -> Bool {
        [301, 302, 303, 307, 308].contains(statusCode)
    }

    /// The request to send after `response` to `request`, or the error that ends the chain.
    mutating func next(after response: HTTPURLResponse, to request: URLRequest) -> Result<URLRequest, URLError> {
        guard let current = request.url else { return .failure(URLError(.badURL)) }
        func failure(_ code: URLError.Code, _ reason: String) -> Result<URLRequest, URLError> {
            .failure(
                URLError(
                    code,
                    userInfo: [
                        NSLocalizedDescriptionKey: reason, NSURLErrorFailingURLErrorKey: current,
                        failingURLStringErrorKey: current.absoluteString,
                    ]))
        }
        guard let location = response.value(forHTTPHeaderField: "Location"),
            var target = Self.resolve(location, against: current)
        else { return failure(.redirectToNonExistentLocation, "The redirect has no usable Location.") }
        // A URL this transport would not load given directly (`file:`, `ftp:`, `data:`) fails as that URL would.
        guard ["http", "https", "http+unix", "https+unix"].contains(target.scheme?.lowercased() ?? "") else {
            return failure(.unsupportedURL, "A redirect to a \(target.scheme ?? "schemeless") URL is refused.")
        }
        // A server on the network must not steer a request onto a local socket (a Docker or database API): a
        // Unix socket URL is followed only from a request on that same socket, as AsyncHTTPClient does.
        if UnixSocketURL.isUnixSocket(target) {
            guard let socket = UnixSocketURL(target)?.socketPath, socket == UnixSocketURL(current)?.socketPath else {
                return failure(
                    .unsupportedURL, "A redirect to a Unix socket is refused: the request was not on that socket.")
            }
        }
        // RFC 9110 10.2.2: a Location without a fragment inherits the request's.
        if target.fragment == nil, let fragment = current.fragment(percentEncoded: true),
            var components = URLComponents(url: target, resolvingAgainstBaseURL: false)
        {
            components.percentEncodedFragment = fragment
            target = components.url ?? target
        }
        if ["https", "https+unix"].contains(current.scheme?.lowercased() ?? ""),
            ["http", "http+unix"].contains(target.scheme?.lowercased() ?? "")
        {
            return failure(.appTransportSecurityRequiresSecureConnection, "A redirect from https to http is refused.")
        }
        count += 1
        guard count <= Self.limit else { return failure(.httpTooManyRedirects, "More than \(Self.limit) redirects.") }
        // A response that sets a cookie may answer the same request differently next time (a login's or a cookie
        // check's redirect back to itself): what was visited before it, this request included, is no cycle. The
        // limit still holds.
        if response.value(forHTTPHeaderField: "Set-Cookie") != nil {
            visited.removeAll()
        } else {
            visited.insert(Self.key(request))
        }

        var next = request
        next.url = target
        if Self.becomesGET(method: request.httpMethod ?? "GET", status: response.statusCode) {
            next.httpMethod = "GET"
            next.httpBody = nil
            next.httpBodyStream = nil
            for field in Self.bodyFields { next.setValue(nil, forHTTPHeaderField: field) }
        }
        if Self.origin(of: target) != Self.origin(of: current) {
            // What only the first origin may get: its credentials and cookies, a proxy's credential (libcurl would
            // send it to the origin), and the name the caller gave it (curl drops a custom `Host` too).
            for field in Self.originFields { next.setValue(nil, forHTTPHeaderField: field) }
        }
        guard !visited.contains(Self.key(next)) else {
            return failure(.httpTooManyRedirects, "The redirects form a cycle.")
        }
        return .success(next)
    }

    /// `location` resolved against `current` (RFC 3986 5.2); an empty reference is `current` itself, without its
    /// fragment (which the step after inherits again).
    private static func resolve(_ location: String, against current: URL) -> URL? {
        guard !location.isEmpty else {
            var components = URLComponents(url: current, resolvingAgainstBaseURL: true)
            components?.fragment = nil
            return components?.url
        }
        return URL(string: location, relativeTo: current)?.absoluteURL
    }

    /// The fields that describe a body, dropped with it (Fetch's request-body-header names, the length, the framing,
    /// and an `Expect: 100-continue`, which RFC 9110 10.1.1 forbids without content).
    private static let bodyFields = [
        "Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location",
        "Transfer-Encoding", "Expect",
    ]

    /// The fields dropped when a redirect leaves the origin.
    private static let originFields = ["Authorization", "Cookie", "Proxy-Authorization", "Host"]

    /// Whether `next` goes to another origin than `current`.
    static func leavesOrigin(_ next: URLRequest, from current: URLRequest) -> Bool {
        origin(of: next.url) != origin(of: current.url)
    }

    /// Whether the request after a `status` redirect of a `method` request is a GET without a body: a POST answered
    /// by a 301 or 302 (RFC 9110 15.4.2 and 15.4.3 allow it "for historical reasons", and every browser and libcurl do
    /// it), and anything but a GET or HEAD answered by a 303 (RFC 9110 15.4.4). Any other method keeps its method and
    /// body: a DELETE or PUT answered by a 301 or 302 is sent again as itself, as RFC 9110 and Fetch say, not turned
    /// into a GET the caller never asked for.
    static func becomesGET(method: String, status: Int) -> Bool {
        let method = method.uppercased()
        switch status {
        case 301, 302: return method == "POST"
        case 303: return method != "GET" && method != "HEAD"
        default: return false
        }
    }

    private static func key(_ request: URLRequest) -> String {
        "\(request.httpMethod ?? "GET") \(request.url?.absoluteString ?? "")"
    }

    /// `scheme://host:port` of `url`, with the scheme's default port: what "the same origin" compares (redirects
    /// and a challenge's credential use it alike).
    static func origin(of url: URL?) -> String {
        let scheme = url?.scheme?.lowercased() ?? ""
        let port = url?.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url?.host?.lowercased() ?? ""):\(port)"
    }
}
