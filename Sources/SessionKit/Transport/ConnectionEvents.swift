import Foundation

/// Where the curl transport reports the lives of the connections its transfers open, for
/// `http.client.open_connections` and `http.client.connection.duration` (``CurlConnectionObserver``).
protocol ConnectionEvents: Sendable {
    /// A connection to `endpoint` went from `old` to `new`; nil is "not open" (opened: nil → active, closed: state →
    /// nil).
    func connection(to endpoint: ConnectionEndpoint, changedFrom old: ConnectionState?, to new: ConnectionState?)
    /// A connection to `endpoint` that carried at least one request closed after `nanoseconds`.
    func connectionClosed(to endpoint: ConnectionEndpoint, afterNanoseconds nanoseconds: UInt64)
}

/// Whether a connection carries a request (`active`) or waits in the pool (`idle`): OpenTelemetry's
/// `http.connection.state`.
enum ConnectionState: String, Sendable {
    case idle
    case active
}

/// The server end of a connection, as metrics name it.
struct ConnectionEndpoint: Sendable, Equatable {
    /// `url.scheme`.
    let scheme: String
    /// `server.address`.
    let host: String
    /// `server.port`.
    let port: Int

    /// The endpoint of a request to `url`; nil without a host.
    init?(_ url: URL) {
        guard let host = url.host else { return nil }
        let scheme = url.scheme?.lowercased() ?? "http"
        self.scheme = scheme
        self.host = host
        self.port = url.port ?? (scheme == "https" ? 443 : 80)
    }
}
