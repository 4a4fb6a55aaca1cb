import Foundation
import HTTPTypes
import Logging
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Records the names of the events it sees, in order (consecutive data chunks as one `data`; timings left out,
/// since only the curl transport has them).
final class RecordingMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: `log` and `delays` are `LockedBox`es.
    let queue = DispatchQueue(label: "test.monitor")
    private let log = LockedBox<[String]>([])
    private let delays = LockedBox<[TimeInterval]>([])
    private let timingsSeen = LockedBox(0)

    var events: [String] { log.wrappedValue }
    var retryDelays: [TimeInterval] { delays.wrappedValue }
    var timingsCount: Int { timingsSeen.wrappedValue }

    /// Waits until every event sent so far was handled.
    func flush() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    private func add(_ event: String) {
        log.write { events in
            if event == "data", events.last == "data" { return }
            events.append(event)
        }
    }

    func requestDidCreate(_ request: SessionRequest) { add("created") }
    func request(_ request: SessionRequest, didAdapt initial: URLRequest, to adapted: URLRequest) { add("adapted") }
    func request(_ request: SessionRequest, didFailToAdapt initial: URLRequest, withError error: Error) {
        add("adaptFailed")
    }
    func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) { add("taskCreated") }
    func request(_ request: SessionRequest, didResumeTask task: URLSessionTask) { add("resumed") }
    func request(_ request: SessionRequest, didSuspendTask task: URLSessionTask) { add("suspended") }
    func requestDidCancel(_ request: SessionRequest) { add("cancelled") }
    func request(_ request: SessionRequest, willRedirectWith response: HTTPURLResponse, to newRequest: URLRequest) {
        add("redirect")
    }
    func request(_ request: SessionRequest, didReceive data: Data) { add("data") }
    func request(_ request: SessionRequest, didGather timings: TransferTimings) { timingsSeen.write { $0 += 1 } }
    func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?) {
        add(error == nil ? "taskCompleted" : "taskFailed")
    }
    func request(_ request: SessionRequest, didSerialize object: Any?, error: Error?) {
        add(error == nil ? "serialized" : "serializationFailed")
    }
    func request(_ request: SessionRequest, isRetryingAfter delay: TimeInterval, dueTo error: Error) {
        delays.write { $0.append(delay) }
        add("retrying")
    }
    func requestDidFinish(_ request: SessionRequest, error: Error?) {
        add(error == nil ? "finished" : "finishedWithError")
    }
}

/// The order of events for success, failure, cancel, retry and redirect, and the logging monitor's redaction.
final class EventMonitorTests: LoopbackTestCase {
    private func monitored() -> (HTTPSessionManager, RecordingMonitor) {
        let manager = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        return (manager, recorder)
    }

    func testSuccess() async throws {
        let (manager, recorder) = monitored()
        _ = try await manager.get("/get")
        await recorder.flush()
        XCTAssertEqual(
            recorder.events, ["created", "taskCreated", "resumed", "data", "taskCompleted", "serialized", "finished"])
        XCTAssertEqual(recorder.timingsCount, LoopbackTestCase.testTransport == .curl ? 1 : 0)
    }

    func testOneMonitorSeesEveryAPI() async throws {
        let (manager, recorder) = monitored()
        // The closure verb, the task API, the async verb, the HTTP core API.
        let closure: Bool = try await awaitCallback { done in
            manager.get(
                "/get", parameters: nil, headers: nil, progress: nil, success: { _, _ in done(true) },
                failure: { _, _ in done(false) })
        }
        XCTAssertTrue(closure)
        let task: Error? = try await awaitCallback { done in
            manager.dataTask(with: URLRequest(url: self.server.url("/get"))) { _, _, error in done(error) }.resume()
        }
        XCTAssertNil(task)
        _ = try await manager.get("/get")
        let core = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/get")
        _ = try await manager.data(for: core)
        // Each request's end reaches the monitor once its completion ran: a bounded wait for the last one.
        for _ in 0..<250 where recorder.events.filter({ $0 == "finished" }).count < 4 {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await recorder.flush()
        let events = recorder.events
        XCTAssertEqual(events.filter { $0 == "created" }.count, 4, "\(events)")
        XCTAssertEqual(events.filter { $0 == "taskCreated" }.count, 4, "\(events)")
        XCTAssertEqual(events.filter { $0 == "taskCompleted" }.count, 4, "\(events)")
        XCTAssertEqual(events.filter { $0 == "finished" }.count, 4, "\(events)")
    }

    func testFailure() async throws {
        let (manager, recorder) = monitored()
        _ = try? await manager.get("/status/404")
        await recorder.flush()
        XCTAssertEqual(
            recorder.events,
            ["created", "taskCreated", "resumed", "taskCompleted", "serializationFailed", "finishedWithError"])
    }

    func testRetryWithAnAdapter() async throws {
        let (manager, recorder) = monitored()
        manager.interceptor = Interceptor(
            adapt: { request, _ in request },
            retry: { request, _ in
                request.retryCount == 0 ? .retry : .doNotRetry
            })
        _ = try await manager.get("/flaky/\(UUID().uuidString)?failures=1")
        await recorder.flush()
        if LoopbackTestCase.testTransport == .curl {
            // One task carries both attempts: its request machine adapts before each and asks the retriers after.
            XCTAssertEqual(
                recorder.events,
                [
                    "created", "taskCreated", "resumed", "adapted", "data", "serializationFailed", "retrying",
                    "adapted", "data", "taskCompleted", "serialized", "finished",
                ])
        } else {
            // URLSession restarts no task: each attempt is a task of its own.
            XCTAssertEqual(
                recorder.events,
                [
                    "created", "adapted", "taskCreated", "resumed", "data", "taskCompleted", "serializationFailed",
                    "retrying",
                    "adapted", "taskCreated", "resumed", "data", "taskCompleted", "serialized", "finished",
                ])
        }
    }

    func testRedirect() async throws {
        let (manager, recorder) = monitored()
        _ = try await manager.get("/redirect/2")
        await recorder.flush()
        XCTAssertEqual(
            recorder.events,
            [
                "created", "taskCreated", "resumed", "redirect", "redirect", "data", "taskCompleted", "serialized",
                "finished",
            ])
        if LoopbackTestCase.testTransport == .curl {
            XCTAssertEqual(recorder.timingsCount, 3, "one transfer per redirect step")
        }
    }

    func testCancel() async throws {
        let (manager, recorder) = monitored()
        let request = Task { try await manager.get("/delay/5") }
        while !recorder.events.contains("resumed") {
            try await Task.sleep(nanoseconds: 10_000_000)
            await recorder.flush()
        }
        request.cancel()
        do {
            _ = try await request.value
            XCTFail("cancelled")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)")
        }
        await recorder.flush()
        XCTAssertEqual(
            recorder.events, ["created", "taskCreated", "resumed", "cancelled", "taskFailed", "finishedWithError"])
    }

    /// A task the caller holds (the task API): its resume, suspend and cancel are the caller's, and the monitor hears
    /// of each, in order, before the task's end. URLSession's own tasks report the manager's `resume(_:)` and
    /// `suspend(_:)` (a loading one is not suspended on the Foundation transport).
    func testTheTaskAPIReportsTheCallersResumeSuspendAndCancel() async throws {
        let (manager, recorder) = monitored()
        let ended = OnceBox<Error?>()
        let task = manager.dataTask(with: URLRequest(url: server.url("/delay/5"))) { _, _, error in
            ended.resolve(error)
        }
        manager.resume(task)
        let pauses = LoopbackTestCase.testTransport == .curl
        if pauses {
            XCTAssertTrue(manager.suspend(task))
            manager.resume(task)
        }
        task.cancel()
        let error = try await ended.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(String(describing: error))")
        for _ in 0..<250 where !recorder.events.contains("finishedWithError") {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await recorder.flush()
        let events = recorder.events
        let control = pauses ? ["resumed", "suspended", "resumed", "cancelled"] : ["resumed", "cancelled"]
        XCTAssertEqual(Array(events.prefix(2 + control.count)), ["created", "taskCreated"] + control, "\(events)")
        XCTAssertTrue(events.contains("taskFailed"), "\(events)")
        XCTAssertEqual(events.last, "finishedWithError", "\(events)")
    }

    func testSuspendAndResumeOfALoadingRequest() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "a loading task is paused by the curl transport only")
        let (manager, recorder) = monitored()
        let created = LockedBox<SessionRequest?>(nil)
        let running = Task {
            try await manager.perform(
                URLRequest(url: server.url("/bytes/\(32 << 20)")),
                responseSerializer: HTTPResponseSerializer(), onCreate: { created.wrappedValue = $0 })
        }
        while !recorder.events.contains("data") {
            try await Task.sleep(nanoseconds: 5_000_000)
            await recorder.flush()
        }
        let request = try XCTUnwrap(created.wrappedValue)
        XCTAssertTrue(request.suspend())
        request.resume()
        let result = try await running.value
        XCTAssertEqual(result.data.count, 32 << 20)
        await recorder.flush()
        let events = recorder.events
        XCTAssertEqual(Array(events.prefix(4)), ["created", "taskCreated", "resumed", "data"])
        XCTAssertEqual(events.filter { $0 == "suspended" }.count, 1)
        XCTAssertEqual(events.filter { $0 == "resumed" }.count, 2)
        XCTAssertEqual(events.last, "finished")
    }

    func testCompositeDeliversToEveryMonitor() async throws {
        let manager = makeManager()
        let (first, second) = (RecordingMonitor(), RecordingMonitor())
        manager.eventMonitors = [CompositeEventMonitor(monitors: [first, second])]
        _ = try await manager.get("/get")
        await first.flush()
        await second.flush()
        XCTAssertEqual(first.events.last, "finished")
        XCTAssertEqual(first.events, second.events)
    }

    func testLoggingMonitorRedactsSecretsAndBodiesUnlessAsked() async throws {
        let lines = LockedBox<[String]>([])
        func logger() -> Logger {
            var logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
            logger.logLevel = .trace
            return logger
        }
        let manager = makeManager()
        manager.eventMonitors = [LoggingEventMonitor(logger: logger())]
        let headers = ["Authorization": "Bearer secret-token-123", "Cookie": "session=secret-cookie-456"]
        _ = try await manager.post("/post", parameters: ["password": "secret-body-789"], headers: headers)
        let monitor = try XCTUnwrap(manager.eventMonitors.first as? LoggingEventMonitor)
        await withCheckedContinuation { continuation in monitor.queue.async { continuation.resume() } }
        let text = lines.wrappedValue.joined(separator: "\n")
        XCTAssertTrue(text.contains("POST "), text)
        XCTAssertTrue(text.contains("Authorization: <redacted>"), text)
        XCTAssertTrue(text.contains("Cookie: <redacted>"), text)
        for secret in ["secret-token-123", "secret-cookie-456", "secret-body-789"] {
            XCTAssertFalse(text.contains(secret), "\(secret) leaked:\n\(text)")
        }

        lines.write { $0.removeAll() }
        let open = LoggingEventMonitor(logger: logger(), logsBodies: true, logsSecrets: true)
        manager.eventMonitors = [open]
        _ = try await manager.post("/post", parameters: ["password": "secret-body-789"], headers: headers)
        await withCheckedContinuation { continuation in open.queue.async { continuation.resume() } }
        let openText = lines.wrappedValue.joined(separator: "\n")
        for secret in ["secret-token-123", "secret-cookie-456", "secret-body-789"] {
            XCTAssertTrue(openText.contains(secret), "\(secret) asked for:\n\(openText)")
        }
    }
}

/// A swift-log handler that keeps every message.
struct CapturingLogHandler: LogHandler {
    let lines: LockedBox<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(
        level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
        function: String, line: UInt
    ) {
        lines.write { $0.append("[\(level)] \(message)") }
    }
}
