/// How a manager's requests move bytes under its `URLSession`.
///
/// Today only the built-in Foundation transport exists; SessionKit's own libcurl transport (`.curl`, which
/// enforces a `SecurityPolicy` in the TLS handshake) arrives with its own change and then becomes the default.
public enum Transport: String, Sendable, CaseIterable {
    /// FoundationNetworking's built-in transport: URLSession's own libcurl integration.
    case foundation
}
