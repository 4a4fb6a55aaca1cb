import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URL that reaches an HTTP server on a Unix domain socket, in AsyncHTTPClient's form:
/// `http+unix://<percent-encoded socket path>/<path>` or `https+unix://…`.
///
/// The task keeps its URL as written (its response's URL, the cache's and the cookie storage's key: the socket path
/// is the URL's host, so two sockets never share cookies or cached responses); libcurl gets `http://localhost/<path>`
/// (or `https`) and the socket path (`CURLOPT_UNIX_SOCKET_PATH`), and sends `Host: localhost` unless the request sets
/// its own `Host`. libcurl reuses a connection only for a transfer to the same socket path.
struct UnixSocketURL: Equatable {
    /// The socket's path in the file system, percent-decoded.
    let socketPath: String
    /// What libcurl is given: `http://localhost/<path>?<query>` (or `https`).
    let curlURL: String
    /// Whether the connection speaks TLS (`https+unix`).
    let isTLS: Bool

    /// The schemes of Unix socket URLs.
    static let schemes: Set<String> = ["http+unix", "https+unix"]

    /// Whether `url`'s scheme is a Unix socket scheme (whatever the rest of it).
    static func isUnixSocket(_ url: URL?) -> Bool {
        url?.scheme.map { schemes.contains($0.lowercased()) } ?? false
    }

    /// The socket URL `url` names; nil when it is not one, or has no socket path.
    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), Self.schemes.contains(scheme),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let encoded = components.percentEncodedHost, !encoded.isEmpty,
            let path = encoded.removingPercentEncoding, !path.isEmpty, !path.utf8.contains(0),
            components.port == nil
        else { return nil }
        socketPath = path
        isTLS = scheme == "https+unix"
        let target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        curlURL =
            "\(isTLS ? "https" : "http")://localhost\(target)"
            + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    /// The name a TLS policy checks the certificate against: the request's own `Host` (without its port), else
    /// `localhost`.
    static func tlsHost(for request: URLRequest) -> String {
        guard let field = request.value(forHTTPHeaderField: "Host")?.trimmingCharacters(in: .whitespaces),
            !field.isEmpty
        else { return "localhost" }
        if field.hasPrefix("["), let end = field.firstIndex(of: "]") {
            return String(field[field.index(after: field.startIndex)..<end])
        }
        return String(field.split(separator: ":", maxSplits: 1).first ?? Substring(field))
    }

    /// Why `url` cannot be sent on the curl transport, when it is a Unix socket URL without a usable socket path.
    static func refusal(for url: URL?) -> NSError? {
        guard let url, isUnixSocket(url), UnixSocketURL(url) == nil else { return nil }
        return URLError(
            .badURL,
            userInfo: [
                NSLocalizedDescriptionKey:
                    "\(url.absoluteString) names no Unix socket: write http+unix://<percent-encoded socket path>/<path> "
                    + "(no port), e.g. http+unix://%2Fvar%2Frun%2Fapp.sock/status.",
                NSURLErrorFailingURLErrorKey: url,
            ]) as NSError
    }
}
