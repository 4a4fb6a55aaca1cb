import Foundation
@testable import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The lifetime of the curl transport's engines (one thread and connection pool per policy configuration).
final class CurlEngineTests: LoopbackTestCase {
    func testAnIdleEngineRetiresAndANewOneServesTheNextRequest() async throws {
        CurlEngine.idleLifetime.wrappedValue = 0.3
        defer { CurlEngine.idleLifetime.wrappedValue = 30 }
        let connectionsPerHost = 7_919  // a configuration no other test uses: an engine of its own
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connectionsPerHost
        let own = URLSessionManager(sessionConfiguration: configuration)
        own.transport = .curl
        own.responseSerializer = HTTPResponseSerializer()
        func get() async throws {
            let error: Error? = try await awaitCallback { done in
                own.resume(
                    own.dataTask(
                        with: URLRequest(url: server.url("/get")), completionHandler: { _, _, error in done(error) }))
            }
            XCTAssertNil(error)
        }
        try await get()
        XCTAssertTrue(CurlEngine.isRunning(for: own.securityPolicy, maximumConnectionsPerHost: connectionsPerHost))
        for _ in 0..<300
        where CurlEngine.isRunning(for: own.securityPolicy, maximumConnectionsPerHost: connectionsPerHost) {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertFalse(
            CurlEngine.isRunning(for: own.securityPolicy, maximumConnectionsPerHost: connectionsPerHost),
            "idle for longer than its lifetime: retired")
        try await get()  // a new engine
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(server.connectionCount, 2, "the retired engine's connection closed with it")
    }

    func testRequestsRacingAnEngineThatRetiresAtOnceAllComplete() async throws {
        CurlEngine.idleLifetime.wrappedValue = 0  // retire as soon as idle: every request races a retirement
        defer { CurlEngine.idleLifetime.wrappedValue = 30 }
        let manager = makeManager(transport: .curl)
        for index in 0..<150 {
            let result = try await manager.get("/get", parameters: ["i": index])
            XCTAssertEqual(result.statusCode, 200)
            if index % 10 == 0 { try await Task.sleep(nanoseconds: UInt64.random(in: 0...3_000_000)) }
        }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 { group.addTask { try await manager.get("/get").statusCode } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 40))
        XCTAssertGreaterThan(
            server.connectionCount, 1, "engines retired between requests (their connections with them)")
    }
}
