/// How a manager's requests move bytes under its `URLSession`.
public enum Transport: String, Sendable, CaseIterable {
    /// FoundationNetworking's built-in transport: URLSession's own libcurl integration. It trusts the system CA
    /// bundle only and cannot enforce a ``SecurityPolicy``.
    case foundation
    /// SessionKit's own transport: a `URLProtocol` over one libcurl multi handle per security policy, which
    /// evaluates the manager's ``SecurityPolicy`` in the TLS handshake of the connection that carries the request.
    /// Still growing: data tasks and uploads from data run on it today; uploads from files and streams, downloads,
    /// upload progress, redirects through the manager's closure, cookies and proxies are not handled yet and fail
    /// with a clear error or behave as documented in `Docs/Transport.md`.
    case curl
}
