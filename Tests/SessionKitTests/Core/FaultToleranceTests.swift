import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every way a server can misbehave ends in one error for the caller: never a hang, never a second completion.
final class FaultToleranceTests: LoopbackTestCase {
    /// Runs `path` once and returns the completion's error, after checking it was called exactly once.
    private func errorFromFault(_ path: String, timeout: TimeInterval = 10) async throws -> Error? {
        let manager = makeManager(timeout: timeout)
        manager.responseSerializer = HTTPResponseSerializer()
        let box = OnceBox<Error?>()
        manager.resume(
            manager.dataTask(
                with: URLRequest(url: server.url(path)), completionHandler: { _, _, error in box.resolve(error) }))
        let error = try await box.value(timeout: timeout + 20, file: #filePath, line: #line)
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(box.deliveries, 1, "completion must run exactly once for \(path)")
        XCTAssertTrue(manager.tasks.isEmpty)
        return error
    }

    func testConnectionClosedMidBodyFails() async throws {
        let error = try await errorFromFault("/fault/close-mid-body")
        XCTAssertNotNil(error, "a chunked body cut short must not look like success")
    }

    func testFewerBytesThanContentLengthFails() async throws {
        let error = try await errorFromFault("/fault/short-body")
        XCTAssertNotNil(error, "a body shorter than Content-Length must not look like success")
    }

    func testServerThatNeverAnswersTimesOut() async throws {
        let error = try await errorFromFault("/fault/never-answer", timeout: 1)
        XCTAssertEqual((error as? URLError)?.code, .timedOut, "\(String(describing: error))")
    }

    func testResetBeforeStatusLineFails() async throws {
        let error = try await errorFromFault("/fault/reset")
        XCTAssertNotNil(error)
        XCTAssertTrue(error is URLError, "transport errors are URLErrors: \(String(describing: error))")
    }

    func testConnectionRefusedFails() async throws {
        let port = server.port
        try await server.shutdown()
        let manager = makeManager(timeout: 5)
        let result: Error? = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: URL(string: "http://127.0.0.1:\(port)/get")!),
                    completionHandler: { _, _, error in
                        done(error)
                    }))
        }
        XCTAssertEqual((result as? URLError)?.code, .cannotConnectToHost, "\(String(describing: result))")
        server = try await LoopbackServer.start()
    }

    func testFaultsUnderConcurrencyEachCompleteOnce() async throws {
        let manager = makeManager(timeout: 2)
        let paths = ["/fault/close-mid-body", "/fault/short-body", "/fault/reset", "/get", "/status/500"]
        let total = 100
        let finished = CallCounter()
        let all = OnceBox<Void>()
        let counts = LockedBox<[Int: Int]>([:])
        for index in 0..<total {
            let task = manager.dataTask(
                with: URLRequest(url: server.url(paths[index % paths.count])),
                completionHandler: { _, _, _ in
                    counts.write { $0[index, default: 0] += 1 }
                    finished.increment()
                    if finished.count == total { all.resolve(()) }
                })
            manager.resume(task)
        }
        try await all.value(timeout: 60, file: #filePath, line: #line)
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(counts.wrappedValue.count, total)
        XCTAssertTrue(counts.wrappedValue.values.allSatisfy { $0 == 1 })
    }
}
