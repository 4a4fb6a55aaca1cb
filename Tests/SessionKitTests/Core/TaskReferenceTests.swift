import Foundation
import HTTPTypes
@testable import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request of the HTTP core API that nothing watches runs on the curl transport without a `URLSessionTask` (issue
/// 23, item 5): its driver stands for it in the manager, and the task object is made only when someone asks for one,
/// then stays the same object while the request runs.
final class TaskReferenceTests: LoopbackTestCase {
    private func coreRequest(_ path: String) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: path)
    }

    /// Waits (at most 5 s) until `manager` has a running request registered, and returns what it is known by.
    private func registeredReference(of manager: URLSessionManager) async throws -> any TaskReference {
        for _ in 0..<250 {
            if let reference = manager.registry.references.first { return reference }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        XCTFail("the request never showed up in the manager's registry")
        throw URLError(.timedOut)
    }

    func testAnUnwatchedCoreRequestMakesItsTaskOnlyWhenAskedForAndKeepsItWhileItRuns() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "URLSession makes its own task for every request")
        let manager = makeManager()
        // A body that takes a second: the request is still running while the test looks at it.
        async let result = manager.data(for: coreRequest("/drip?duration=1&numbytes=4"))
        let reference = try await registeredReference(of: manager)
        XCTAssertFalse(reference is URLSessionTask, "no URLSessionTask is made for a request no one watches")
        let task = try XCTUnwrap(manager.tasks.first, "the manager's task list makes it when asked")
        XCTAssertTrue(task is URLSessionDataTask)
        XCTAssertEqual(task.originalRequest?.url?.path, "/drip")
        XCTAssertTrue(manager.tasks.first === task, "the same object at every ask while the request runs")
        XCTAssertTrue(reference.task === task)
        let (data, response) = try await result
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(data.count, 4)
        XCTAssertEqual(task.state, .completed, "the task made on the way reports the request's end")
        XCTAssertEqual(task.countOfBytesReceived, 4)
        XCTAssertTrue(manager.tasks.isEmpty, "nothing is left once the request completed")
    }

    func testTheTaskAPIHandsOutTheTaskItRegisters() async throws {
        let manager = makeManager()
        let task = manager.dataTask(with: URLRequest(url: server.url("/drip?duration=1&numbytes=4")))
        task.resume()
        let reference = try await registeredReference(of: manager)
        XCTAssertTrue(reference === task, "the caller's task itself stands for it")
        XCTAssertTrue(manager.tasks.first === task)
        task.cancel()
    }

    func testAMonitoredCoreRequestShowsTheMonitorOneTaskFromCreationToCompletion() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "URLSession makes its own task for every request")
        let manager = makeManager()
        let monitor = TaskIdentityMonitor()
        manager.eventMonitors = [monitor]
        _ = try await manager.data(for: coreRequest("/get"))
        for _ in 0..<250 where monitor.completed.wrappedValue.isEmpty { try await Task.sleep(nanoseconds: 20_000_000) }
        monitor.queue.sync {}
        let created = monitor.created.wrappedValue
        let completed = monitor.completed.wrappedValue
        XCTAssertEqual(created.count, 1)
        XCTAssertEqual(completed.count, 1)
        XCTAssertTrue(created.first === completed.first, "one task object from didCreateTask to didCompleteTask")
        XCTAssertEqual(completed.first?.state, .completed)
    }
}

/// Keeps the task objects a monitor is shown.
private final class TaskIdentityMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: both lists are `Protected` boxes.
    let queue = DispatchQueue(label: "TaskIdentityMonitor")
    let created = Protected<[URLSessionTask]>([])
    let completed = Protected<[URLSessionTask]>([])

    func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) {
        created.write { $0.append(task) }
    }

    func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?) {
        completed.write { $0.append(task) }
    }
}
