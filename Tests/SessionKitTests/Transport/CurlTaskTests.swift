import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The curl transport's own task objects: they keep URLSession's promises, including those URLSession on Linux
/// breaks, when called directly on the task.
final class CurlTaskTests: LoopbackTestCase {
    /// Collects the resume and suspend notifications of one task, in order.
    private final class SuspensionLog: @unchecked Sendable {
        // @unchecked Sendable: `entries` is a `LockedBox`; the observers are only added and removed.
        let entries = LockedBox<[String]>([])
        private var observers: [NSObjectProtocol] = []

        init(for task: URLSessionTask) {
            for (name, label) in [
                (Notification.Name.sessionKitTaskDidResume, "resume"), (.sessionKitTaskDidSuspend, "suspend"),
            ] {
                observers.append(
                    NotificationCenter.default.addObserver(forName: name, object: task, queue: nil) { [entries] _ in
                        entries.write { $0.append(label) }
                    })
            }
        }

        deinit { observers.forEach(NotificationCenter.default.removeObserver) }
    }

    func testResumeSuspendAndCancelCalledOnTheTaskItself() async throws {
        let manager = makeManager(timeout: 10, transport: .curl)
        let completions = CallCounter()
        let done = OnceBox<Error?>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/drip?numbytes=50&duration=5")),
            completionHandler: { _, _, error in
                completions.increment()
                done.resolve(error)
            })
        let log = SuspensionLog(for: task)
        XCTAssertEqual(task.state, .suspended)
        task.resume()
        XCTAssertEqual(task.state, .running)
        while task.countOfBytesReceived == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertNotNil(task.response)
        task.suspend()
        XCTAssertEqual(task.state, .suspended)
        task.resume()
        XCTAssertEqual(task.state, .running)
        task.cancel()
        let error = try await done.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(String(describing: error))")
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual((task.error as? URLError)?.code, .cancelled)
        task.cancel()
        task.resume()
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(completions.count, 1, "one completion, whatever is called after it")
        XCTAssertEqual(log.entries.wrappedValue, ["resume", "suspend", "resume"])
    }

    func testCancelByProducingResumeDataOnTheTaskContinuesByteExact() async throws {
        let manager = makeManager(timeout: 30, transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-task-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let total = 64 << 20
        let started = OnceBox<Void>()
        let task = manager.downloadTask(
            with: URLRequest(url: server.url("/bytes/\(total)?seed=4")),
            progress: { _ in started.resolve(()) },
            destination: { _, _ in destination }, completionHandler: nil)
        let download = try XCTUnwrap(task as? URLSessionDownloadTask, "a download task is a URLSessionDownloadTask")
        download.resume()
        try await started.value(timeout: 10, file: #filePath, line: #line)
        let resumeData: Data? = try await awaitCallback { done in download.cancel(byProducingResumeData: { done($0) }) }
        let data = try XCTUnwrap(resumeData, "a download cancelled midway has resume data")
        let finished: (URL?, Error?) = try await awaitCallback(timeout: 60) { done in
            manager.downloadTask(
                withResumeData: data, destination: { _, _ in destination },
                completionHandler: { _, url, error in done((url, error)) }
            ).resume()
        }
        XCTAssertNil(finished.1)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: total, seed: 4))
        XCTAssertEqual(server.requests.last?.header("Range")?.hasPrefix("bytes="), true)
    }

    func testStateAndCountersReadFromAnotherThreadWhileRunning() async throws {
        let manager = makeManager(timeout: 30, transport: .curl)
        manager.responseSerializer = HTTPResponseSerializer()
        let size = 32 << 20
        let done = OnceBox<Error?>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/bytes/\(size)")),
            completionHandler: { _, _, error in
                done.resolve(error)
            })
        // A thread of its own (never a global-queue thread) reads while the engine and the delegate queue write.
        let samples = LockedBox<[(URLSessionTask.State, Int64)]>([])
        let reader = Thread {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                let state = task.state
                samples.write { $0.append((state, task.countOfBytesReceived)) }
                if state == .completed { return }
                _ = task.response
                _ = task.currentRequest
                _ = task.countOfBytesExpectedToReceive
                usleep(200)
            }
        }
        task.resume()
        reader.start()
        let error = try await done.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(error)
        while reader.isExecuting { try await Task.sleep(nanoseconds: 5_000_000) }
        let counts = samples.wrappedValue.map(\.1)
        XCTAssertEqual(counts, counts.sorted(), "the received count never goes back")
        XCTAssertTrue(samples.wrappedValue.contains { $0.0 == .running })
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(task.countOfBytesReceived, Int64(size))
        XCTAssertEqual(task.countOfBytesExpectedToReceive, Int64(size))
        XCTAssertEqual((task.response as? HTTPURLResponse)?.statusCode, 200)
    }

    func testCurrentRequestFollowsRedirectsAndProgressIsTheDelegates() async throws {
        let manager = makeManager(transport: .curl)
        let done = OnceBox<Error?>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/redirect/2")),
            completionHandler: { _, _, error in
                done.resolve(error)
            })
        XCTAssertTrue(task.progress === manager.downloadProgress(for: task), "the task's progress is the one reported")
        task.resume()
        let error = try await done.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual(task.originalRequest?.url?.path, "/redirect/2")
        XCTAssertEqual(task.currentRequest?.url?.path, "/get")
        XCTAssertEqual(task.response?.url?.path, "/get")
    }

    func testIdentifiersAreUniqueAndTaskKindsAreFoundations() throws {
        let manager = makeManager(transport: .curl)
        let request = URLRequest(url: server.url("/get"))
        let tasks =
            (0..<50).map { _ in manager.dataTask(with: request) }
            + [manager.uploadTask(with: request, from: Data("x".utf8)), manager.downloadTask(with: request)]
        XCTAssertEqual(Set(tasks.map(\.taskIdentifier)).count, tasks.count)
        XCTAssertEqual(manager.dataTasks.count, 50, "upload tasks are listed apart")
        XCTAssertEqual(manager.uploadTasks.count, 1)
        XCTAssertEqual(manager.downloadTasks.count, 1)
        tasks.forEach { $0.cancel() }
    }

    func testTwoManagersWithDifferentPoliciesRunAtOnce() async throws {
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await tls.shutdown() } }
        func manager(pinning name: String) throws -> HTTPSessionManager {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 10
            let manager = HTTPSessionManager(baseURL: tls.baseURL, sessionConfiguration: configuration)
            manager.transport = .curl
            let pin = try TestCertificates.derCertificate(
                at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
            manager.securityPolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pin])
            manager.securityPolicy.allowInvalidCertificates = true
            return manager
        }
        let trusting = try manager(pinning: "root-ca")
        let refusing = try manager(pinning: "untrusted-root")
        let results = await withTaskGroup(of: (Bool, Result<Int, Error>).self) { group in
            for index in 0..<40 {
                let good = index % 2 == 0
                group.addTask {
                    do {
                        return (
                            good, .success(try await (good ? trusting : refusing).get("/get?i=\(index)").statusCode)
                        )
                    } catch {
                        return (good, .failure(error))
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        for (good, result) in results {
            switch result {
            case .success(let status):
                XCTAssertTrue(good, "the refusing policy let a request through")
                XCTAssertEqual(status, 200)
            case .failure(let error):
                XCTAssertFalse(good, "\(error)")
                XCTAssertEqual((error as? URLError)?.code, .serverCertificateUntrusted, "\(error)")
            }
        }
        XCTAssertEqual(tls.requests.count, 20, "only the trusting manager's requests reached the server")
    }
}
