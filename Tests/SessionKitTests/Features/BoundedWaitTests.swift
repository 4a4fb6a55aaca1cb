import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// No task waits without a bound: whatever state it is in (paused, behind a slow reader, waiting for a redirect
/// decision or a challenge's answer), the session's resource timeout ends it, with `URLError.timedOut`, once.
final class BoundedWaitTests: LoopbackTestCase {
    /// A manager whose tasks may take `resource` seconds in all, with a generous request (idle) timeout.
    private func makeManager(
        resource: TimeInterval, transport: Transport = LoopbackTestCase.testTransport
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.timeoutIntervalForResource = resource
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = transport
        return manager
    }

    private func assertTimedOut(_ error: Error?, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            (error as NSError?)?.domain, NSURLErrorDomain, "\(String(describing: error))", file: file, line: line)
        XCTAssertEqual(
            (error as NSError?)?.code, NSURLErrorTimedOut, "\(String(describing: error))", file: file, line: line)
    }

    func testAPausedTaskEndsAtTheResourceTimeout() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "a loading task pauses on the curl transport only")
        let manager = makeManager(resource: 2)
        let received = LockedBox<Int64>(0)
        let done = OnceBox<Error?>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/bytes/\(64 << 20)")),
            downloadProgress: { progress in
                received.write { $0 = progress.completedUnitCount }
            }, completionHandler: { _, _, error in done.resolve(error) })
        manager.resume(task)
        while received.wrappedValue == 0 { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertTrue(manager.suspend(task))
        let error = try await done.value(timeout: 20, file: #filePath, line: #line)
        assertTimedOut(error)
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(done.deliveries, 1)
    }

    /// The request timeout is an idle timeout of the network: a task its caller holds (suspended while loading) for
    /// longer is not idle, and once resumed it has the whole timeout again.
    func testATaskSuspendedLongerThanItsRequestTimeoutGoesOnWhenResumed() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "a loading task pauses on the curl transport only")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        manager.responseSerializer = HTTPResponseSerializer()  // the body as it came
        let received = LockedBox<Int64>(0)
        let done = OnceBox<(Int, Error?)>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/bytes/\(16 << 20)")),
            downloadProgress: { progress in
                received.write { $0 = progress.completedUnitCount }
            }, completionHandler: { _, data, error in done.resolve(((data as? Data)?.count ?? 0, error)) })
        manager.resume(task)
        for _ in 0..<2_000 where received.wrappedValue == 0 { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertGreaterThan(received.wrappedValue, 0, "no body byte in 10 s")
        XCTAssertTrue(manager.suspend(task))
        try await Task.sleep(nanoseconds: 2_500_000_000)  // two and a half request timeouts
        XCTAssertEqual(done.deliveries, 0, "a suspended task timed out")
        manager.resume(task)
        let (count, error) = try await done.value(timeout: 20, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual(count, 16 << 20)
    }

    func testASlowReaderEndsAtTheResourceTimeout() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "back-pressure towards a reader is the curl transport's")
        let manager = makeManager(resource: 2)
        let streamed = try await manager.stream("/bytes/\(256 << 20)")
        XCTAssertEqual(streamed.response.statusCode, 200)
        var received = 0
        do {
            for try await chunk in streamed.body {
                received += chunk.count
                if received == chunk.count { try await Task.sleep(nanoseconds: 3_000_000_000) }  // then reads on
            }
            XCTFail("the reader took longer than the resource timeout")
        } catch {
            assertTimedOut(error)
        }
        XCTAssertLessThan(received, 256 << 20)
    }

    func testARedirectDecisionThatOutlastsTheResourceTimeoutEndsTheTask() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "the closure would hold URLSession's delegate queue; the curl transport decides on its own queue")
        let manager = makeManager(resource: 0.5)
        manager.taskWillPerformHTTPRedirection = { _, _, _, request in
            Thread.sleep(forTimeInterval: 0.8)  // a slow decision, bounded
            return request
        }
        let error: Error? = try await awaitCallback(timeout: 20) { done in
            manager.dataTask(
                with: URLRequest(url: server.url("/redirect/1")),
                completionHandler: { _, _, error in
                    done(error)
                }
            ).resume()
        }
        assertTimedOut(error)
        XCTAssertEqual(server.requests.map(\.uri), ["/redirect/1"], "the redirect was not followed after the deadline")
    }

    func testAChallengeAnswerThatOutlastsTheResourceTimeoutEndsTheTask() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "the closure would hold URLSession's delegate queue; the curl transport decides on its own queue")
        let manager = makeManager(resource: 0.5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in
            Thread.sleep(forTimeInterval: 0.8)  // a slow answer, bounded
            return (.useCredential, URLCredential(user: "user", password: "pass", persistence: .none))
        }
        let error: Error? = try await awaitCallback(timeout: 20) { done in
            manager.dataTask(
                with: URLRequest(url: server.url("/basic-auth/user/pass")),
                completionHandler: { _, _, error in
                    done(error)
                }
            ).resume()
        }
        assertTimedOut(error)
        XCTAssertEqual(server.requests.count, 1, "the answer came after the deadline: nothing more was sent")
    }

    func testASlowServerEndsAtTheResourceTimeoutOnBothTransports() async throws {
        // URLSession on Linux ignores `timeoutIntervalForResource`: on the Foundation transport the manager enforces it.
        let manager = makeManager(resource: 1)
        let error: Error? = try await awaitCallback(timeout: 20) { done in
            manager.dataTask(
                with: URLRequest(url: server.url("/drip?numbytes=10&duration=8")),
                completionHandler: { _, _, error in
                    done(error)
                }
            ).resume()
        }
        assertTimedOut(error)
    }
}
