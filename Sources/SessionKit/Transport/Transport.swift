/// How a manager's requests move bytes under its `URLSession`. ``curl`` is the default (decision 2 of
/// `Docs/Architecture.md`).
public enum Transport: String, Sendable, CaseIterable {
    /// FoundationNetworking's built-in transport: URLSession's own libcurl integration. It trusts the system CA
    /// bundle only, reports every TLS failure as error -1 and cannot enforce a ``SecurityPolicy``; it honours a
    /// `URLCache`.
    case foundation
    /// SessionKit's own transport, the default: a `URLProtocol` over one libcurl multi handle per security policy,
    /// which evaluates the manager's ``SecurityPolicy`` in the TLS handshake of the connection that carries the
    /// request, with real TLS error codes, HTTP/2, timings and resumable downloads. What it covers and what it does
    /// not (a `URLCache`) is in `Docs/Transport.md`.
    case curl
}
