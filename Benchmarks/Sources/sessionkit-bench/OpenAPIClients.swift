import AsyncHTTPClient
import BenchOpenAPIClient
import Foundation
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import OpenAPISessionKit
import SessionKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The OpenAPI rows (issue 25): the test suite's generated client (`GeneratedClient`, operation `downloadBytes`,
/// `GET /bytes/100`) through `SessionKitTransport` on a curl-transport `URLSessionManager` configured as every
/// SessionKit client here (the pinning policy over HTTPS), and through swift-openapi-async-http-client's
/// `AsyncHTTPClientTransport` on an `HTTPClient` configured as the AHC rows' default pool. The small-GET scenarios
/// only (sequential, 64 in flight, new connection per GET) and the soak; each call reads the body to its end. Swift
/// concurrency runs in a detached task while the measurement thread waits, as for the HTTP core API's rows.
enum OpenAPIClients {
    static func run(client: Client, scenario: Scenario, url: URL, count: Int, caFile: String?) throws -> Int {
        guard let serverURL = URL(string: "/", relativeTo: url)?.absoluteURL else { throw BenchError("no root of \(url)") }
        let transport: any ClientTransport
        var httpClient: HTTPClient?
        defer { try? httpClient?.syncShutdown() }
        switch client {
        case .openAPISessionKit:
            transport = SessionKitTransport(manager: Measurement.makeManager(transport: .curl, https: url.scheme == "https"))
        case .openAPIAHC:
            let made = try AHC.makeClient(pool64: false, caFile: caFile)
            httpClient = made
            transport = AsyncHTTPClientTransport(configuration: .init(client: made))
        default:
            throw BenchError("\(client.title) is not an OpenAPI client")
        }
        let generated = GeneratedClient(serverURL: serverURL, transport: transport,
                                        closesConnections: scenario == .handshake)
        let get: @Sendable () async throws -> Void = {
            let length = try await generated.downloadBytes(100)
            guard length == 100 else { throw BenchError("downloadBytes: \(length) bytes") }
        }
        guard [.sequential, .soak, .handshake, .concurrent64].contains(scenario) else {
            throw BenchError("the OpenAPI clients run the small-GET scenarios only")
        }
        try SessionKitVerbs.runAsync(scenario: scenario, count: count, get)
        return 0
    }
}
