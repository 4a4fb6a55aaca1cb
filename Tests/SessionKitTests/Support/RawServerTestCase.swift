import Foundation
import SessionKitTestSupport
import XCTest

/// A test case that starts ``RawFaultServer``s on 127.0.0.1 (servers that answer byte for byte what a test scripts)
/// and stops them all after each test.
class RawServerTestCase: XCTestCase {
    private var servers: [RawFaultServer] = []

    override func tearDown() async throws {
        for server in servers { try await server.shutdown() }
        servers = []
        try await super.tearDown()
    }

    /// Starts a server whose `script` decides what each request gets; it is stopped after the test.
    func start(
        _ script: @escaping @Sendable (RawFaultServer.ReceivedRequest) -> RawFaultServer.Action
    ) async throws -> RawFaultServer {
        let server = try await RawFaultServer.start(script: script)
        servers.append(server)
        return server
    }
}
