import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URL that reaches an HTTP server on a Unix domain socket, in AsyncHTTPClient's form:
/// `http+unix://<percent-encoded socket path>/<path>` or `https+unix://…`.
///
/// The task keeps its URL as written (its response's URL, the cache's and the cookie storage's key: the socket path
/// is the URL's host, so two sockets never share cookies or cached responses); libcurl gets `http://<host>/<path>`
/// (or `https`) and the socket path (`CURLOPT_UNIX_SOCKET_PATH`), where `<host>` is the request's own `Host` field
/// when it is a host name or an IP address, else `localhost`: libcurl sends it as `Host`, as the TLS server name
/// (SNI), and reuses a connection only for a transfer to the same socket path *and* host, so a connection verified
/// for one name never carries a request for another.
struct UnixSocketURL: Equatable {
    /// The socket's path in the file system, percent-decoded.
    let socketPath: String
    /// What libcurl is given: `http://<host>/<path>?<query>` (or `https`).
    let curlURL: String
    /// Whether the connection speaks TLS (`https+unix`).
    let isTLS: Bool
    /// The name libcurl sends as `Host` and SNI, and the TLS policy checks the certificate against: the request's
    /// `Host` (without its port) when it is a host name or an IP address, else `localhost`.
    let host: String

    /// The schemes of Unix socket URLs.
    static let schemes: Set<String> = ["http+unix", "https+unix"]

    /// Whether `url`'s scheme is a Unix socket scheme (whatever the rest of it).
    static func isUnixSocket(_ url: URL?) -> Bool {
        url?.scheme.map { schemes.contains($0.lowercased()) } ?? false
    }

    /// The socket URL `url` names, for a request whose `Host` field is `hostField`; nil when it is not one, or has
    /// no socket path.
    init?(_ url: URL, hostField: String? = nil) {
        guard let scheme = url.scheme?.lowercased(), Self.schemes.contains(scheme),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let encoded = components.percentEncodedHost, !encoded.isEmpty,
            let path = encoded.removingPercentEncoding, !path.isEmpty, !path.utf8.contains(0),
            components.port == nil
        else { return nil }
        socketPath = path
        isTLS = scheme == "https+unix"
        let target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let named = hostField.flatMap(Self.hostName(inField:)).flatMap(CurlStreamConnection.authority(of:))
        host = named?.name ?? "localhost"
        curlURL =
            "\(isTLS ? "https" : "http")://\(named?.url ?? "localhost")\(target)"
            + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    /// The host of a `Host` field value, without its port (an IPv6 literal keeps its brackets).
    private static func hostName(inField field: String) -> String? {
        let value = field.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("["), let end = value.firstIndex(of: "]") { return String(value[...end]) }
        let host = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)
        return host?.isEmpty == false ? host : nil
    }

    /// Why `url`, whose scheme is a Unix socket scheme, cannot be sent on the curl transport: it has no usable socket
    /// path.
    static func refusal(for url: URL) -> URLError? {
        guard UnixSocketURL(url) == nil else { return nil }
        return URLError(
            .badURL,
            userInfo: [
                NSLocalizedDescriptionKey:
                    "\(url.absoluteString) names no Unix socket: write http+unix://<percent-encoded socket path>/<path> "
                    + "(no port), e.g. http+unix://%2Fvar%2Frun%2Fapp.sock/status.",
                NSURLErrorFailingURLErrorKey: url,
            ])
    }
}
