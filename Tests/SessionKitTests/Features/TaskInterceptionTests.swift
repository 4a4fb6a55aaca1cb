import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The manager's adapters and retriers on the APIs that hand the caller a task (the AFNetworking closure verbs, the
/// task API), against the loopback server: the task the caller holds carries every attempt, and completes once.
///
/// The curl transport runs them (decision 35 of `Docs/Architecture.md`); URLSession starts its own tasks before an
/// adapter could run, so on the Foundation transport only the pipeline's calls are adapted and retried.
final class TaskInterceptionTests: LoopbackTestCase {
    override func setUp() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession starts its own tasks: the Foundation transport adapts and retries the pipeline's calls only")
        try await super.setUp()
    }

    private func flakyPath(failures: Int, query: String = "") -> String {
        "/flaky/\(UUID().uuidString)?failures=\(failures)" + (query.isEmpty ? "" : "&\(query)")
    }

    /// An interceptor that sends the first attempt to a path that never answers (it times out) and every retry to
    /// `path`, counting the attempts; it retries timeouts only, at most twice.
    private func timingOutOnce(then path: String, counting attempts: LockedBox<Int>) -> Interceptor {
        Interceptor(
            adapt: { request, _ in
                let attempt = attempts.write { attempt -> Int in
                    attempt += 1
                    return attempt
                }
                var request = request
                if attempt > 1 { request.url = self.server.url(path) }
                return request
            },
            retry: { request, error in
                (error as? URLError)?.code == .timedOut && request.retryCount < 2 ? .retry : .doNotRetry
            })
    }

    /// A manager on the curl transport whose session's resource timeout is one second.
    private func managerWithOneSecondResourceTimeout() -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = 1
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        return manager
    }

    /// The closure verb `get`, awaited: its task, and what `success` (the object) or `failure` (the error) got.
    private func closureGet(
        _ manager: HTTPSessionManager, _ path: String
    ) async throws -> (task: URLSessionDataTask?, object: Any?, error: Error?, calls: Int) {
        let once = OnceBox<(Any?, Error?)>()
        let task = manager.get(
            path, parameters: nil, headers: nil, progress: nil, success: { _, object in once.resolve((object, nil)) },
            failure: { _, error in once.resolve((nil, error)) })
        let (object, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        // A second call would have to come from the same completion: give it the time a completion hop takes.
        try await Task.sleep(nanoseconds: 50_000_000)
        return (task, object, error, once.deliveries)
    }

    func testTheClosureVerbIsAdaptedAndItsTaskShowsTheAdaptedRequest() async throws {
        let manager = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        manager.interceptor = Interceptor(adapt: { request, _ in
            var request = request
            request.setValue("Bearer adapted", forHTTPHeaderField: "Authorization")
            return request
        })
        let outcome = try await closureGet(manager, "/headers")
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.calls, 1)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(server.requests.last?.header("Authorization"), "Bearer adapted")
        XCTAssertEqual(outcome.task?.currentRequest?.value(forHTTPHeaderField: "Authorization"), "Bearer adapted")
        XCTAssertNil(
            outcome.task?.originalRequest?.value(forHTTPHeaderField: "Authorization"),
            "the task's original request is the caller's")
        await recorder.flush()
        XCTAssertEqual(recorder.events.filter { $0 == "adapted" }.count, 1, "\(recorder.events)")
    }

    func testAnAdaptersRefusalFailsTheTaskAndSendsNothing() async throws {
        let manager = makeManager()
        let refusal = NSError(domain: "test.adapter", code: 7, userInfo: [NSLocalizedDescriptionKey: "no token"])
        manager.interceptor = Interceptor(adapt: { _, _ in throw refusal })
        let once = OnceBox<(URLResponse?, Error?)>()
        let request = URLRequest(url: server.url("/get"))
        let task = manager.dataTask(with: request) { response, _, error in
            once.resolve((response, error))
        }
        task.resume()
        let (response, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(response)
        XCTAssertEqual((error as NSError?)?.domain, "test.adapter")
        XCTAssertEqual((error as NSError?)?.code, 7)
        XCTAssertEqual(task.state, .completed)
        XCTAssertTrue(server.requests.isEmpty, "a refused request sends nothing")
    }

    func testAnAdaptedRequestWithAFieldThatCannotGoOnTheWireFailsAndSendsNothing() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(adapt: { request, _ in
            var request = request
            request.allHTTPHeaderFields = ["Bad Name": "x"]  // not a token: it would split the head on the wire
            return request
        })
        let once = OnceBox<Error?>()
        manager.dataTask(with: URLRequest(url: server.url("/get"))) { _, _, error in once.resolve(error) }.resume()
        let error = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual((error as NSError?)?.domain, SessionKitError.sessionDomain)
        XCTAssertEqual((error as NSError?)?.code, SessionKitError.Code.invalidRequestField.rawValue)
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testRetryPolicyRetriesTheClosureVerbOnItsOneTask() async throws {
        let manager = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        manager.interceptor = RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.1, jitters: false)
        let outcome = try await closureGet(manager, flakyPath(failures: 2))
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.calls, 1, "one completion for the three attempts")
        XCTAssertEqual((outcome.object as? [String: Any])?["attempt"] as? Int, 3, "the last attempt's body")
        XCTAssertEqual(outcome.task?.state, .completed)
        XCTAssertEqual((outcome.task?.response as? HTTPURLResponse)?.statusCode, 200, "the last attempt's response")
        let times = server.requests.map(\.receivedAt)
        guard times.count == 3 else { return XCTFail("\(times.count) requests instead of 3") }
        XCTAssertGreaterThanOrEqual(times[1].timeIntervalSince(times[0]), 0.1)
        XCTAssertGreaterThanOrEqual(times[2].timeIntervalSince(times[1]), 0.2)
        await recorder.flush()
        XCTAssertEqual(recorder.retryDelays, [0.1, 0.2])
        XCTAssertEqual(recorder.events.filter { $0 == "taskCreated" }.count, 1, "one task: \(recorder.events)")
        XCTAssertEqual(recorder.events.filter { $0 == "finished" }.count, 1, "\(recorder.events)")
    }

    func testARetryGivesUpWithTheLastAttemptsResponseAndBody() async throws {
        let manager = makeManager()
        manager.interceptor = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01)
        let outcome = try await closureGet(manager, flakyPath(failures: 5))
        XCTAssertEqual(outcome.calls, 1)
        let error = try XCTUnwrap(outcome.error as NSError?)
        let response = error.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse
        XCTAssertEqual(response?.statusCode, 503)
        let body = error.userInfo[SessionKitError.failingURLResponseDataKey] as? Data
        let attempt = body.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }?["attempt"]
        XCTAssertEqual(attempt as? Int, 2, "the body of the attempt whose error the caller gets")
        XCTAssertEqual(server.requests.count, 2)
    }

    func testARetrierCanReplaceTheErrorAndAPOSTBodyIsSentAgainWhole() async throws {
        let manager = makeManager()
        let replaced = NSError(domain: "test.retrier", code: 9)
        let asked = LockedBox(0)
        manager.interceptor = Interceptor(retry: { request, _ in
            asked.write { $0 += 1 }
            return request.retryCount == 0 ? .retry : .doNotRetryWithError(replaced)
        })
        var request = URLRequest(url: server.url(flakyPath(failures: 5)))
        request.httpMethod = "POST"
        let body = Data((0..<100_000).map { UInt8($0 % 251) })
        let once = OnceBox<Error?>()
        manager.uploadTask(with: request, from: body) { _, _, error in once.resolve(error) }.resume()
        let error = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual((error as NSError?)?.domain, "test.retrier", "the error the retrier chose")
        XCTAssertEqual(asked.wrappedValue, 2)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(server.requests.map(\.bodyLength), [body.count, body.count], "the whole body, twice")
    }

    func testAFileUploadIsRetriedWithTheWholeFileAgain() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(retry: { request, _ in request.retryCount == 0 ? .retry : .doNotRetry })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let body = Data((0..<200_000).map { UInt8($0 % 241) })
        try body.write(to: file)
        var request = URLRequest(url: server.url(flakyPath(failures: 1)))
        request.httpMethod = "POST"
        let once = OnceBox<(URLResponse?, Error?)>()
        manager.uploadTask(with: request, fromFile: file) { response, _, error in once.resolve((response, error)) }
            .resume()
        let (response, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(server.requests.map(\.bodyLength), [body.count, body.count], "the file, read anew")
    }

    func testCancellingBetweenAttemptsCompletesOnceAsCancelled() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(retry: { _, _ in .retryAfter(30) })
        let once = OnceBox<Error?>()
        let request = URLRequest(url: server.url(flakyPath(failures: 5)))
        var task: URLSessionDataTask? = manager.dataTask(with: request) { _, _, error in
            once.resolve(error)
        }
        weak let released = task
        task?.resume()
        // The first attempt's answer reached the retrier, which asks for a long wait (the cancel below comes while the
        // task concludes that attempt or waits for the next: both must complete it once, as cancelled).
        for _ in 0..<250 where server.requests.isEmpty { try await Task.sleep(nanoseconds: 20_000_000) }
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(task?.state, .running, "a task waiting to retry has not completed")
        task?.cancel()
        let error = try await once.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .cancelled)
        task = nil
        for _ in 0..<100 where released != nil { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertNil(released, "a cancelled task waiting to retry is released once its caller lets it go")
        XCTAssertEqual(once.deliveries, 1)
        XCTAssertEqual(server.requests.count, 1, "nothing is sent after the cancel")
    }

    func testATransportErrorIsRetriedOnTheSameTask() async throws {
        let manager = makeManager(timeout: 1)
        let attempts = LockedBox(0)
        manager.interceptor = timingOutOnce(then: "/get", counting: attempts)
        let once = OnceBox<(URLResponse?, Error?)>()
        let request = URLRequest(url: server.url("/fault/never-answer"))
        let task = manager.dataTask(with: request) { response, _, error in
            once.resolve((response, error))
        }
        task.resume()
        let (response, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(attempts.wrappedValue, 2)
        XCTAssertEqual(task.currentRequest?.url?.path, "/get")
    }

    func testADownloadIsAdaptedButNotRetried() async throws {
        let manager = makeManager()
        let retried = LockedBox(0)
        manager.interceptor = Interceptor(
            adapt: { request, _ in
                var request = request
                request.setValue("yes", forHTTPHeaderField: "X-Adapted")
                return request
            },
            retry: { _, _ in
                retried.write { $0 += 1 }
                return .retry
            })
        let once = OnceBox<(URL?, Error?)>()
        manager.downloadTask(
            with: URLRequest(url: server.url(flakyPath(failures: 5))), progress: nil, destination: nil
        ) { _, url, error in once.resolve((url, error)) }.resume()
        _ = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual(server.requests.count, 1, "a download's file is written once: it is not sent again")
        XCTAssertEqual(server.requests.last?.header("X-Adapted"), "yes")
        XCTAssertEqual(retried.wrappedValue, 0)
    }

    func testTheAsyncVerbIsAdaptedOnceNotTwice() async throws {
        let manager = makeManager()
        let adaptations = LockedBox(0)
        manager.interceptor = Interceptor(adapt: { request, _ in
            adaptations.write { $0 += 1 }
            return request
        })
        _ = try await manager.get("/get")
        XCTAssertEqual(adaptations.wrappedValue, 1, "the pipeline's own task is not intercepted again")
    }

    func testAStreamedBodyIsNeverSentAgainToItsReader() async throws {
        let manager = makeManager()
        let retried = LockedBox(0)
        manager.interceptor = Interceptor(retry: { request, _ in
            retried.write { $0 += 1 }
            return request.retryCount < 3 ? .retry : .doNotRetry  // bounded, should this test ever fail
        })
        let received = LockedBox(Data())
        let once = OnceBox<Error?>()
        manager.streamTask(
            with: URLRequest(url: server.url("/fault/close-mid-body")),
            chunk: { data in received.write { $0.append(data) } },
            completion: { _, error in once.resolve(error) }
        ).resume()
        let error = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNotNil(error, "the body was cut")
        XCTAssertEqual(retried.wrappedValue, 0, "its reader has the first attempt's bytes: no second attempt")
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(String(decoding: received.wrappedValue, as: UTF8.self), "{\"partial\": [1, 2, 3, ")
    }

    func testCancellingWhileAdaptingSendsNothing() async throws {
        let manager = makeManager()
        let release = LockedBox(false)
        manager.interceptor = Interceptor(adapt: { request, _ in
            // Bounded: the adapter returns once the test released it, or after 10 s.
            for _ in 0..<1000 where !release.wrappedValue { try await Task.sleep(nanoseconds: 10_000_000) }
            return request
        })
        let once = OnceBox<Error?>()
        let task = manager.dataTask(with: URLRequest(url: server.url("/get"))) { _, _, error in once.resolve(error) }
        task.resume()
        XCTAssertEqual(task.state, .running, "adapting")
        task.cancel()
        let error = try await once.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .cancelled)
        release.write { $0 = true }
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertTrue(server.requests.isEmpty, "the adapter's late answer starts nothing")
        XCTAssertEqual(once.deliveries, 1)
    }

    func testARetryPastTheResourceTimeoutEndsTheTaskAsTimedOut() async throws {
        let manager = managerWithOneSecondResourceTimeout()
        manager.interceptor = Interceptor(retry: { _, _ in .retryAfter(30) })
        let once = OnceBox<Error?>()
        let request = URLRequest(url: server.url(flakyPath(failures: 5)))
        manager.dataTask(with: request) { _, _, error in once.resolve(error) }.resume()
        // Far less than the 30 s asked for: the task's resource timeout ends it.
        let error = try await once.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .timedOut)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testThePipelinesRetriesRunOnOneTaskWithinItsResourceTimeout() async throws {
        let manager = managerWithOneSecondResourceTimeout()
        // Bounded: at most two retries, should the resource timeout not end the request.
        manager.interceptor = Interceptor(retry: { request, _ in
            request.retryCount < 2 ? .retryAfter(30) : .doNotRetry
        })
        let created = LockedBox<SessionRequest?>(nil)
        let once = OnceBox<Error?>()
        Task {
            do {
                _ = try await manager.perform(
                    URLRequest(url: server.url(flakyPath(failures: 5))),
                    onCreate: { request in created.wrappedValue = request })
                once.resolve(nil)
            } catch {
                once.resolve(error)
            }
        }
        // Far less than the 30 s asked for: the task's resource timeout spans its attempts, as for the task API.
        let error = try await once.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .timedOut, "\(String(describing: error))")
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(created.wrappedValue?.tasks.count, 1, "one task carries the request")
        XCTAssertEqual(created.wrappedValue?.retryCount, 0, "a retry that would start past the deadline is not made")
    }

    func testAStreamedResponseIsRetriedOnItsTaskWhileNoHeadReachedItsReader() async throws {
        let manager = makeManager(timeout: 1)
        let attempts = LockedBox(0)
        manager.interceptor = timingOutOnce(then: "/bytes/1000", counting: attempts)
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/fault/never-answer")))
        var body = Data()
        for try await chunk in streamed.body { body += chunk }
        XCTAssertEqual(streamed.response.statusCode, 200)
        XCTAssertEqual(body.count, 1000)
        XCTAssertEqual(attempts.wrappedValue, 2)
    }

    func testSuspendedBetweenAttemptsTheRetryHoldsItsBodyUntilResumed() async throws {
        let manager = makeManager()
        let holder = LockedBox<URLSessionTask?>(nil)
        manager.interceptor = Interceptor(retry: { _, _ in
            _ = holder.wrappedValue.map { manager.suspend($0) }  // the caller suspends while the retriers decide
            return .retry
        })
        let once = OnceBox<(URLResponse?, Error?)>()
        let task = manager.dataTask(with: URLRequest(url: server.url(flakyPath(failures: 1)))) { response, _, error in
            once.resolve((response, error))
        }
        holder.write { $0 = task }
        task.resume()
        for _ in 0..<250 where server.requests.count < 2 { try await Task.sleep(nanoseconds: 20_000_000) }
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(once.deliveries, 0, "the second attempt's body is held while the task is suspended")
        XCTAssertEqual(task.state, .suspended)
        manager.resume(task)
        let (response, error) = try await once.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(server.requests.count, 2)
    }
}
