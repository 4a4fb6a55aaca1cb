import Foundation
import Metrics

/// OpenTelemetry's HTTP client metrics of one manager, through swift-metrics: `http.client.request.duration`,
/// `http.client.active_requests`, `http.client.request.body.size`, `http.client.response.body.size` per attempt, and
/// `http.client.open_connections` and `http.client.connection.duration` per connection of the curl transport
/// (``ConnectionEvents``: the Foundation transport does not show its connections).
///
/// Every metric carries low-cardinality attributes only: `http.request.method`, `url.scheme`, `server.address`,
/// `server.port`, and at the end of an attempt `http.response.status_code`, `error.type` and
/// `network.protocol.version` when known.
struct HTTPClientMetrics: Sendable {
    /// The factory the metrics are made by.
    let factory: any MetricsFactory

    static let requestDuration = "http.client.request.duration"
    static let activeRequests = "http.client.active_requests"
    static let requestBodySize = "http.client.request.body.size"
    static let responseBodySize = "http.client.response.body.size"
    static let openConnections = "http.client.open_connections"
    static let connectionDuration = "http.client.connection.duration"

    /// An attempt started: one more active request.
    func attemptStarted(_ attempt: AttemptDescription) {
        Meter(label: Self.activeRequests, dimensions: attempt.dimensions, factory: factory).increment()
    }

    /// An attempt ended after `nanoseconds` with `outcome`: one less active request, its duration and body sizes.
    func attemptEnded(_ attempt: AttemptDescription, outcome: AttemptOutcome, nanoseconds: Int64) {
        var dimensions = attempt.dimensions
        Meter(label: Self.activeRequests, dimensions: dimensions, factory: factory).decrement()
        if let status = outcome.statusCode { dimensions.append(("http.response.status_code", String(status))) }
        if let errorType = outcome.errorType { dimensions.append(("error.type", errorType)) }
        if let version = outcome.protocolVersion { dimensions.append(("network.protocol.version", version)) }
        let timer = Metrics.Timer(label: Self.requestDuration, dimensions: dimensions, factory: factory)
        timer.recordNanoseconds(nanoseconds)
        if let size = outcome.requestBodySize {
            Recorder(label: Self.requestBodySize, dimensions: dimensions, factory: factory).record(size)
        }
        if let size = outcome.responseBodySize {
            Recorder(label: Self.responseBodySize, dimensions: dimensions, factory: factory).record(size)
        }
    }
}

extension HTTPClientMetrics: ConnectionEvents {
    /// The attributes of a connection's metrics: scheme, server address and port.
    private static func dimensions(of endpoint: ConnectionEndpoint) -> [(String, String)] {
        [("url.scheme", endpoint.scheme), ("server.address", endpoint.host), ("server.port", String(endpoint.port))]
    }

    func connection(to endpoint: ConnectionEndpoint, changedFrom old: ConnectionState?, to new: ConnectionState?) {
        let dimensions = Self.dimensions(of: endpoint)
        if let old {
            Meter(
                label: Self.openConnections, dimensions: dimensions + [("http.connection.state", old.rawValue)],
                factory: factory
            ).decrement()
        }
        if let new {
            Meter(
                label: Self.openConnections, dimensions: dimensions + [("http.connection.state", new.rawValue)],
                factory: factory
            ).increment()
        }
    }

    func connectionClosed(to endpoint: ConnectionEndpoint, afterNanoseconds nanoseconds: UInt64) {
        Metrics.Timer(label: Self.connectionDuration, dimensions: Self.dimensions(of: endpoint), factory: factory)
            .recordNanoseconds(Int64(clamping: nanoseconds))
    }
}
