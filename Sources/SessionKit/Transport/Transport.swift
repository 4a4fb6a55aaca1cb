/// How a manager's requests move bytes under its `URLSession`.
public enum Transport: String, Sendable, CaseIterable {
    /// FoundationNetworking's built-in transport: URLSession's own libcurl integration. It trusts the system CA
    /// bundle only and cannot enforce a ``SecurityPolicy``.
    case foundation
    /// SessionKit's own transport: a `URLProtocol` over one libcurl multi handle per security policy, which
    /// evaluates the manager's ``SecurityPolicy`` in the TLS handshake of the connection that carries the request.
    /// What it covers and what it does not yet (proxies from the configuration, metrics, resumable downloads) is in
    /// `Docs/Transport.md`.
    case curl
}
