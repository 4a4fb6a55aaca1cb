import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The four notifications and their AFNetworking-shaped userInfo.
final class NotificationTests: LoopbackTestCase {
    /// Runs `action` and waits for the first notification named `name` whose object is `task`.
    private func notification(
        _ name: Notification.Name, for task: URLSessionTask, after action: () -> Void
    ) async throws -> Notification {
        let box = OnceBox<Notification>()
        let observer = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
            if (note.object as AnyObject?) === task { box.resolve(note) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        action()
        return try await box.value(timeout: 10, file: #filePath, line: #line)
    }

    func testDidCompleteCarriesSerializerDataAndSerializedResponse() async throws {
        let manager = makeManager()
        let task = manager.dataTask(with: URLRequest(url: server.url("/get?n=1")))
        let note = try await notification(.sessionKitTaskDidComplete, for: task) { manager.resume(task) }
        let info = try XCTUnwrap(note.userInfo)
        XCTAssertTrue(info[SessionKitNotificationKey.responseSerializer] is JSONResponseSerializer)
        let data = try XCTUnwrap(info[SessionKitNotificationKey.responseData] as? Data)
        XCTAssertFalse(data.isEmpty)
        let object = try echo(info[SessionKitNotificationKey.serializedResponse])
        XCTAssertEqual(object["args"] as? [String: String], ["n": "1"])
        XCTAssertNil(info[SessionKitNotificationKey.error])
    }

    func testDidCompleteCarriesTheError() async throws {
        let manager = makeManager()
        let task = manager.dataTask(with: URLRequest(url: server.url("/status/503")))
        let note = try await notification(.sessionKitTaskDidComplete, for: task) { manager.resume(task) }
        let error = try XCTUnwrap(note.userInfo?[SessionKitNotificationKey.error] as? NSError)
        XCTAssertEqual(error.code, URLError.badServerResponse.rawValue)
    }

    func testDidCompleteOfADownloadCarriesTheAssetPath() async throws {
        let manager = makeManager()
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("sk-note-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let task = manager.downloadTask(
            with: URLRequest(url: server.url("/bytes/100")), destination: { _, _ in destination })
        let note = try await notification(.sessionKitTaskDidComplete, for: task) { manager.resume(task) }
        XCTAssertEqual(note.userInfo?[SessionKitNotificationKey.assetPath] as? URL, destination)
        XCTAssertNil(note.userInfo?[SessionKitNotificationKey.responseData])
    }

    func testDidResumeAndDidSuspendArePosted() async throws {
        let manager = makeManager()
        let task = manager.dataTask(with: URLRequest(url: server.url("/get")))
        let suspend = try await notification(.sessionKitTaskDidSuspend, for: task) {
            XCTAssertTrue(manager.suspend(task))
        }
        XCTAssertTrue((suspend.object as AnyObject?) === task)
        let resume = try await notification(.sessionKitTaskDidResume, for: task) {
            manager.resume(task)  // suspended twice: the first resume leaves it suspended
            manager.resume(task)
        }
        XCTAssertTrue((resume.object as AnyObject?) === task)
        task.cancel()
    }
}

/// Invalidation: cancelling running tasks, resetting the session, refusing tasks afterwards.
final class InvalidationTests: LoopbackTestCase {
    func testInvalidationCancelsRunningTasksAndPostsNotification() async throws {
        let manager = makeManager()
        let invalidated = OnceBox<Notification>()
        let oldSession = manager.session
        let observer = NotificationCenter.default.addObserver(
            forName: .sessionKitSessionDidInvalidate, object: nil, queue: nil
        ) { note in
            if (note.object as AnyObject?) === oldSession { invalidated.resolve(note) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let errors = LockedBox<[Error?]>([])
        let allDone = OnceBox<Void>()
        for _ in 0..<3 {
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/delay/5")),
                    completionHandler: { _, _, error in
                        let count = errors.write {
                            $0.append(error); return $0.count
                        }
                        if count == 3 { allDone.resolve(()) }
                    }))
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        try await allDone.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertTrue(errors.wrappedValue.allSatisfy { ($0 as? URLError)?.code == .cancelled })
        _ = try await invalidated.value(timeout: 10, file: #filePath, line: #line)

        // Reset: a new session serves new tasks.
        XCTAssertFalse(manager.session === oldSession)
        let result = try await manager.get("/get")
        XCTAssertEqual(result.statusCode, 200)
    }

    func testInvalidationWithoutResetRefusesNewTasksWithClearError() async throws {
        let manager = makeManager()
        let invalidatedSession = manager.session
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        XCTAssertTrue(manager.session === invalidatedSession, "without a reset the invalidated session stays")
        let counter = CallCounter()
        let error: Error? = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/get")),
                completionHandler: { _, _, error in
                    counter.increment()
                    done(error)
                })
            manager.resume(task)
        }
        let nsError = try XCTUnwrap(error as NSError?)
        XCTAssertEqual(nsError.domain, SessionKitError.sessionDomain)
        XCTAssertEqual(nsError.code, SessionKitError.Code.sessionInvalidated.rawValue)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(counter.count, 1)
        XCTAssertEqual(server.requestCount, 0)
    }

    func testFinishingInvalidationLetsRunningTasksComplete() async throws {
        let manager = makeManager()
        let outcome: (Any?, Error?) = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/delay/1")),
                    completionHandler: { _, object, error in done((object, error)) }))
            manager.invalidateSessionCancelingTasks(false, resetSession: false)
        }
        XCTAssertNil(outcome.1)
        XCTAssertNotNil(outcome.0)
    }

    func testReleasedManagerStillCompletesItsRunningTask() async throws {
        var manager: HTTPSessionManager? = makeManager()
        weak var weakManager = manager
        let outcome: Error? = try await awaitCallback { done in
            manager?.get(
                "/delay/1", parameters: nil, headers: nil, progress: nil,
                success: { _, _ in done(nil) }, failure: { _, error in done(error) })
            manager = nil
        }
        XCTAssertNil(outcome)
        XCTAssertNil(weakManager, "a manager is not kept alive by its session")
    }
}

/// The closure overrides of delegate callbacks.
final class DelegateOverrideTests: LoopbackTestCase {
    func testRedirectsAreFollowedByDefault() async throws {
        let manager = makeManager()
        let result = try await manager.get("/redirect/3")
        XCTAssertEqual(result.response.url?.path, "/get")
        XCTAssertEqual(server.requests.map(\.uri), ["/redirect/3", "/redirect/2", "/redirect/1", "/get"])
    }

    func testRedirectClosureCanStopARedirect() async throws {
        let manager = makeManager()
        manager.responseSerializer = HTTPResponseSerializer()
        (manager.responseSerializer as? HTTPResponseSerializer)?.acceptableStatusCodes = IndexSet(200..<400)
        let seen = LockedBox<[String]>([])
        manager.taskWillPerformHTTPRedirection = { _, _, response, request in
            seen.write { $0.append(request.url?.path ?? "") }
            return nil
        }
        let result = try await manager.get("/redirect/2")
        XCTAssertEqual(result.statusCode, 302)
        XCTAssertEqual(seen.wrappedValue, ["/redirect/1"])
        XCTAssertEqual(server.requests.count, 1)
    }

    func testRedirectClosureCanRewriteTheRequest() async throws {
        let manager = makeManager()
        manager.taskWillPerformHTTPRedirection = { _, _, _, request in
            var rewritten = request
            rewritten.setValue("rewritten", forHTTPHeaderField: "X-Redirected")
            return rewritten
        }
        _ = try await manager.get("/redirect/1")
        XCTAssertEqual(server.requests.last?.header("X-Redirected"), "rewritten")
    }

    func testObservingClosuresSeeEveryCallbackAndTheDelegateStillWorks() async throws {
        let manager = makeManager()
        let received = CallCounter()
        let responses = CallCounter()
        let completed = CallCounter()
        manager.dataTaskDidReceiveData = { _, _, _ in received.increment() }
        manager.dataTaskDidReceiveResponse = { _, _, _ in
            responses.increment(); return .allow
        }
        manager.taskDidComplete = { _, _, _ in completed.increment() }
        let result = try await manager.get("/get")
        XCTAssertNotNil(result.object)
        XCTAssertGreaterThan(received.count, 0)
        XCTAssertEqual(responses.count, 1)
        XCTAssertEqual(completed.count, 1)
    }

    func testUploadProgressObserverSeesBytesSent() async throws {
        let manager = makeManager()
        let sent = LockedBox<Int64>(0)
        manager.taskDidSendBodyData = { _, _, _, total, _ in sent.wrappedValue = total }
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        let _: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(
                    with: request, from: Data(count: 100_000), completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertEqual(sent.wrappedValue, 100_000)
    }

    func testUploadProgressObserverGetsEachReportsBytesAndTheyAddUpToTheTotal() async throws {
        let manager = makeManager()
        let reports = LockedBox<[(sent: Int64, total: Int64)]>([])
        manager.taskDidSendBodyData = { _, _, sent, total, _ in reports.write { $0.append((sent, total)) } }
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        let _: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(
                    with: request, from: Data(count: 300_000), completionHandler: { _, _, error in done(error) }))
        }
        let seen = reports.wrappedValue
        XCTAssertFalse(seen.isEmpty)
        // As URLSession reports it: the bytes since the last report, and the running total they add up to.
        var running: Int64 = 0
        for report in seen {
            XCTAssertGreaterThan(report.sent, 0, "\(seen)")
            running += report.sent
            XCTAssertEqual(report.total, running, "\(seen)")
        }
        XCTAssertEqual(running, 300_000)
    }

    func testBasicAuthChallengeAnsweredByClosure() async throws {
        let manager = makeManager()
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            guard challenge.previousFailureCount == 0 else { return (.cancelAuthenticationChallenge, nil) }
            return (.useCredential, URLCredential(user: "u", password: "p", persistence: .none))
        }
        let result = try await manager.get("/basic-auth/u/p")
        XCTAssertEqual((result.object as? [String: Any])?["authenticated"] as? Bool, true)
    }
}
