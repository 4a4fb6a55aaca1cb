import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A test case for WebSocket tasks: it starts SwiftNIO's WebSocket server (``WebSocketServer``) and raw servers
/// (``RawWebSocketServer``) on 127.0.0.1, stops them all after each test, and makes managers whose completions a
/// ``TaskCompletionObserver`` watches.
class WebSocketTestCase: XCTestCase {
    private var servers: [WebSocketServer] = []
    private var rawServers: [RawWebSocketServer] = []

    override func tearDown() async throws {
        for server in servers { try await server.shutdown() }
        for server in rawServers { try await server.shutdown() }
        servers = []
        rawServers = []
        try await super.tearDown()
    }

    /// Starts a NIO WebSocket server, stopped after the test.
    func startServer(
        tls: TestCertificates.Identity? = nil, protocols: [String] = [], deflate: WebSocketServer.Deflate? = nil
    ) async throws -> WebSocketServer {
        let server = try await WebSocketServer.start(tls: tls, protocols: protocols, deflate: deflate)
        servers.append(server)
        return server
    }

    /// Starts a raw server answering each upgrade with `script`'s bytes (and closing a connection
    /// `closingAfterClientClose` seconds after the client's close frame), stopped after the test.
    func startRaw(
        closingAfterClientClose closeDelay: TimeInterval? = nil,
        _ script: @escaping @Sendable (RawWebSocketServer.Upgrade) -> Data
    ) async throws
        -> RawWebSocketServer
    {
        let server = try await RawWebSocketServer.start(closingAfterClientClose: closeDelay, script: script)
        rawServers.append(server)
        return server
    }

    /// A manager on the transport under test (a 10 s request timeout), and an observer of its completions.
    func makeManager(
        policy: SecurityPolicy? = nil, configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> (URLSessionManager, TaskCompletionObserver) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configure(configuration)
        let manager = URLSessionManager(sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        if let policy { manager.securityPolicy = policy }
        return (manager, TaskCompletionObserver(observing: manager))
    }

    /// The completion `completions` saw for `task`, waiting 30 s at most: a completion that never comes fails the test
    /// where it was awaited, instead of hanging the suite.
    func awaitCompletion(
        of task: URLSessionTask, in completions: TaskCompletionObserver, file: StaticString = #filePath,
        line: UInt = #line
    ) async throws -> Error? {
        let box = OnceBox<Error?>()
        Task { box.resolve(await completions.completion(of: task)) }
        return try await box.value(timeout: 30, file: file, line: line)
    }

    /// The next message of `task`, or the error that ended it.
    func receive(_ task: SessionWebSocketTask) async throws -> Result<SessionWebSocketTask.Message, Error> {
        try await awaitCallback { done in task.receive { done($0) } }
    }
}
