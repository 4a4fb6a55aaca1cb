import Foundation
import HTTPTypes
import OpenAPIRuntime

/// The test suite's generated OpenAPI client (`Generated/`, from `Tests/OpenAPISessionKitTests/openapi.yaml`), made
/// reachable from the benchmark: its declarations are internal to this module.
public struct GeneratedClient: Sendable {
    private let client: Client

    /// A client of `serverURL` over `transport`; with `closesConnections`, every request carries `Connection: close`
    /// (the benchmark's new-connection-per-GET row).
    public init(serverURL: URL, transport: any ClientTransport, closesConnections: Bool = false) {
        client = Client(
            serverURL: serverURL, transport: transport,
            middlewares: closesConnections ? [ConnectionClose()] : [])
    }

    /// `GET /bytes/{count}` (operation `downloadBytes`): the body read to its end; returns its length.
    public func downloadBytes(_ count: Int64) async throws -> Int {
        let response = try await client.downloadBytes(path: .init(count: count))
        guard case .ok(let ok) = response, case .binary(let body) = ok.body else {
            throw GeneratedClientError(description: "downloadBytes: \(response)")
        }
        var length = 0
        for try await chunk in body { length += chunk.count }
        return length
    }
}

/// A response the generated client did not expect.
public struct GeneratedClientError: Error, CustomStringConvertible {
    public let description: String
}

/// Adds `Connection: close` to every request.
struct ConnectionClose: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.connection] = "close"
        return try await next(request, body, baseURL)
    }
}
