import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Task creation, per-task delegates, progress, cancellation and the task registry of `URLSessionManager`.
final class URLSessionManagerTests: LoopbackTestCase {
    typealias Outcome = (response: URLResponse?, object: Any?, error: Error?)
    typealias FileOutcome = (response: URLResponse?, fileURL: URL?, error: Error?)

    private func temporaryFile(_ name: String = UUID().uuidString) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-test-\(name)")
    }

    private func post(_ path: String) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "POST"
        return request
    }

    // MARK: - Data tasks

    func testDataTaskDownloadProgressReachesOne() async throws {
        let manager = makeManager()
        let fractions = LockedBox<[Double]>([])
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/bytes/300000")),
                downloadProgress: { progress in
                    fractions.write { $0.append(progress.fractionCompleted) }
                }
            ) { done(($0, $1, $2)) }
            manager.resume(task)
        }
        // The default JSON serializer refuses octet-stream: the body still arrived in full.
        XCTAssertEqual((outcome.error as NSError?)?.code, URLError.cannotDecodeContentData.rawValue)
        let data = (outcome.error as NSError?)?.userInfo[SessionKitError.failingURLResponseDataKey] as? Data
        XCTAssertEqual(data, ByteGenerator.bytes(count: 300_000))
        let seen = fractions.wrappedValue
        XCTAssertEqual(seen.last ?? 0, 1.0, accuracy: 0.0001)
        XCTAssertEqual(seen, seen.sorted(), "progress never goes backwards")
    }

    func testChunkedBodyIsAccumulatedWhole() async throws {
        let manager = makeManager()
        manager.responseSerializer = HTTPResponseSerializer()
        let outcome: Outcome = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/stream-bytes/100000?chunk_size=777")),
                    completionHandler: {
                        done(($0, $1, $2))
                    }))
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.object as? Data, ByteGenerator.bytes(count: 100_000))
    }

    func testGzipBodyIsDecoded() async throws {
        let manager = makeManager()
        let outcome: Outcome = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(with: URLRequest(url: server.url("/gzip")), completionHandler: { done(($0, $1, $2)) }))
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(try echo(outcome.object)["gzipped"] as? Bool, true)
    }

    // MARK: - Uploads

    func testUploadFromDataReportsProgressToOne() async throws {
        let manager = makeManager()
        let body = Data(repeating: 7, count: 1_000_000)
        let last = LockedBox<Double>(0)
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.uploadTask(
                with: post("/post"), from: body,
                progress: { progress in
                    last.wrappedValue = progress.fractionCompleted
                }
            ) { done(($0, $1, $2)) }
            manager.resume(task)
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(try echo(outcome.object)["bodyLength"] as? Int, body.count)
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)
        XCTAssertEqual(server.requests.last?.bodyLength, body.count)
    }

    func testUploadFromFileSendsTheFile() async throws {
        let manager = makeManager()
        let file = temporaryFile()
        let body = ByteGenerator.bytes(count: 200_000, seed: 9)
        try body.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let progress = LockedBox<Progress?>(nil)
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.uploadTask(with: post("/post"), fromFile: file, progress: { progress.wrappedValue = $0 })
            {
                done(($0, $1, $2))
            }
            XCTAssertEqual(manager.uploadTasks.count, 1)
            XCTAssertTrue(task is URLSessionUploadTask)
            manager.resume(task)
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(server.requests.last?.body, body)
        XCTAssertEqual(progress.wrappedValue?.fractionCompleted ?? 0, 1.0, accuracy: 0.0001)
    }

    func testUploadFromMissingFileFailsWithClearError() async throws {
        let manager = makeManager()
        let outcome: Outcome = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(
                    with: post("/post"), fromFile: temporaryFile("missing"), completionHandler: { done(($0, $1, $2)) }))
        }
        let error = try XCTUnwrap(outcome.error as NSError?)
        XCTAssertEqual(error.domain, SessionKitError.requestSerializationDomain)
        XCTAssertTrue(error.localizedDescription.contains("cannot be read"), error.localizedDescription)
        XCTAssertEqual(server.requestCount, 0)
    }

    func testUploadFromStreamSendsTheStream() async throws {
        let manager = makeManager()
        var request = post("/post")
        let body = Data("streamed body ".utf8) + ByteGenerator.bytes(count: 50_000)
        request.httpBodyStream = InputStream(data: body)
        let outcome: Outcome = try await awaitCallback { done in
            manager.resume(manager.uploadTask(withStreamedRequest: request, completionHandler: { done(($0, $1, $2)) }))
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(server.requests.last?.body, body)
    }

    // MARK: - Downloads

    func testDownloadMovesFileToDestinationWithProgress() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        let last = LockedBox<Double>(0)
        let outcome: FileOutcome = try await awaitCallback { done in
            let task = manager.downloadTask(
                with: URLRequest(url: server.url("/bytes/500000?seed=3")),
                progress: { last.wrappedValue = $0.fractionCompleted },
                destination: { _, _ in destination }
            ) { done(($0, $1, $2)) }
            XCTAssertEqual(manager.downloadTasks.count, 1)
            XCTAssertTrue(task is URLSessionDownloadTask)
            manager.resume(task)
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.fileURL, destination)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: 500_000, seed: 3))
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)
    }

    func testDownloadToExistingFileFailsWithMoveError() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        try Data("already here".utf8).write(to: destination)
        defer { try? FileManager.default.removeItem(at: destination) }
        let outcome: FileOutcome = try await awaitCallback { done in
            manager.resume(
                manager.downloadTask(
                    with: URLRequest(url: server.url("/bytes/10")),
                    destination: { _, _ in destination }
                ) { done(($0, $1, $2)) })
        }
        let error = try XCTUnwrap(outcome.error as NSError?)
        XCTAssertEqual(error.domain, SessionKitError.sessionDomain)
        XCTAssertEqual(error.code, SessionKitError.Code.cannotMoveDownloadedFile.rawValue)
        XCTAssertNil(outcome.fileURL)
        XCTAssertEqual(try Data(contentsOf: destination), Data("already here".utf8), "an existing file is never lost")
    }

    func testManagerWideDownloadDestinationOverride() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        manager.downloadTaskDidFinishDownloading = { _, _, _ in destination }
        let outcome: FileOutcome = try await awaitCallback { done in
            manager.resume(
                manager.downloadTask(
                    with: URLRequest(url: server.url("/bytes/1000")), completionHandler: { done(($0, $1, $2)) }))
        }
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.fileURL, destination)
        XCTAssertEqual(try Data(contentsOf: destination).count, 1000)
    }

    func testDownloadWithResumeDataFailsClearlyOnFoundationTransport() async throws {
        let manager = makeManager()
        let counter = CallCounter()
        let outcome: FileOutcome = try await awaitCallback { done in
            let task = manager.downloadTask(
                withResumeData: Data("not resume data".utf8),
                completionHandler: { response, url, error in
                    counter.increment()
                    done((response, url, error))
                })
            manager.resume(task)
        }
        let error = try XCTUnwrap(outcome.error as NSError?)
        XCTAssertEqual(error.domain, SessionKitError.sessionDomain)
        XCTAssertEqual(error.code, SessionKitError.Code.resumeDataUnavailable.rawValue)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(counter.count, 1)
    }

    // MARK: - Cancellation and Progress control

    func testCancelGivesURLErrorCancelled() async throws {
        let manager = makeManager()
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/delay/5")), completionHandler: { done(($0, $1, $2)) })
            manager.resume(task)
            DispatchQueue(label: "test.cancel").asyncAfter(deadline: .now() + 0.2) { task.cancel() }
        }
        XCTAssertEqual((outcome.error as? URLError)?.code, .cancelled)
        XCTAssertNotNil((outcome.error as? URLError)?.failingURL)
    }

    func testCancellingTheProgressCancelsTheTask() async throws {
        let manager = makeManager()
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/delay/5")), completionHandler: { done(($0, $1, $2)) })
            manager.resume(task)
            manager.downloadProgress(for: task)?.cancel()
        }
        XCTAssertEqual((outcome.error as? URLError)?.code, .cancelled)
    }

    func testPausingAndResumingTheProgressActsOnTheTask() async throws {
        let manager = makeManager()
        let suspendedOnce = OnceBox<Void>()
        let resumed = CallCounter()
        let observers = [
            NotificationCenter.default.addObserver(forName: .sessionKitTaskDidSuspend, object: nil, queue: nil) { _ in
                suspendedOnce.resolve(())
            },
            NotificationCenter.default.addObserver(forName: .sessionKitTaskDidResume, object: nil, queue: nil) { _ in
                resumed.increment()
            },
        ]
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let completion = OnceBox<Outcome>()
        let task = manager.dataTask(
            with: URLRequest(url: server.url("/get")), completionHandler: { completion.resolve(($0, $1, $2)) })
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        progress.pause()
        try await suspendedOnce.value(timeout: 10, file: #filePath, line: #line)
        manager.resume(task)  // undoes the creation state; the pause still holds the task
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(server.requestCount, 0, "a paused task sends nothing")
        progress.resume()
        let outcome = try await completion.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(outcome.error)
        XCTAssertEqual(server.requestCount, 1)
        XCTAssertEqual(suspendedOnce.deliveries, 1)
        XCTAssertEqual(resumed.count, 2)
    }

    func testSuspendingALoadingTaskIsRefusedOnTheFoundationTransport() async throws {
        // URLSession on Linux stops the process when a loading task is resumed before its suspension ran.
        let manager = makeManager(transport: .foundation)
        for _ in 0..<5 {
            let outcome: Outcome = try await awaitCallback { done in
                let task = manager.dataTask(
                    with: URLRequest(url: server.url("/get")), completionHandler: { done(($0, $1, $2)) })
                manager.resume(task)
                for _ in 0..<20 {
                    XCTAssertFalse(manager.suspend(task))
                    manager.resume(task)
                }
            }
            XCTAssertNil(outcome.error)
        }
    }

    // MARK: - Registry

    func testPerTaskStateIsReleasedWhenTheTaskEnds() async throws {
        let manager = makeManager()
        weak var weakTask: URLSessionTask?
        let outcome: Outcome = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/get")), completionHandler: { done(($0, $1, $2)) })
            weakTask = task
            XCTAssertEqual(manager.tasks.map(\.taskIdentifier), [task.taskIdentifier])
            XCTAssertEqual(manager.dataTasks.count, 1)
            XCTAssertNotNil(manager.uploadProgress(for: task))
            manager.resume(task)
        }
        XCTAssertNil(outcome.error)
        XCTAssertTrue(manager.tasks.isEmpty)
        // The completion handler and the delegate let go of the task once the completion ran.
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertNil(weakTask, "the task must not be kept alive after it completed")
    }

    func testAThousandConcurrentRequestsEachCompleteExactlyOnce() async throws {
        let manager = makeManager(timeout: 60)
        let total = 1_000
        let counts = LockedBox<[Int: Int]>([:])
        let failures = CallCounter()
        let finished = CallCounter()
        let allDone = OnceBox<Void>()
        for index in 0..<total {
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/get?i=\(index)")),
                completionHandler: { _, object, error in
                    if error != nil || ((object as? [String: Any])?["args"] as? [String: String])?["i"] != String(index)
                    {
                        failures.increment()
                    }
                    counts.write { $0[index, default: 0] += 1 }
                    finished.increment()
                    if finished.count == total { allDone.resolve(()) }
                })
            manager.resume(task)
        }
        try await allDone.value(timeout: 120, file: #filePath, line: #line)
        // Time for any second completion to show up.
        try await Task.sleep(nanoseconds: 300_000_000)
        let seen = counts.wrappedValue
        XCTAssertEqual(seen.count, total)
        XCTAssertTrue(seen.values.allSatisfy { $0 == 1 }, "every completion exactly once")
        XCTAssertEqual(failures.count, 0)
        XCTAssertTrue(manager.tasks.isEmpty)
    }

    func testCompletionRunsOnTheConfiguredQueueInsideTheGroup() async throws {
        let manager = makeManager()
        let queue = DispatchQueue(label: "test.completion.queue")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "mine")
        let group = DispatchGroup()
        manager.completionQueue = queue
        manager.completionGroup = group
        let onQueue: Bool = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/get")),
                    completionHandler: { _, _, _ in
                        done(DispatchQueue.getSpecific(key: key) == "mine")
                    }))
        }
        XCTAssertTrue(onQueue)
        let _: Void = try await awaitCallback { done in group.notify(queue: queue) { done(()) } }
    }

    func testDefaultCompletionQueueIsNotTheMainQueue() async throws {
        let manager = makeManager()
        let onMain: Bool = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/get")),
                    completionHandler: { _, _, _ in done(Thread.isMainThread) }))
        }
        XCTAssertFalse(onMain)
    }
}

extension URLSessionManagerTests {
    /// A body without a `Content-Type` goes as URLSession on Linux sends it: a POST's `httpBody` as
    /// `application/x-www-form-urlencoded` (its long-standing default), any other method's, and an upload's file,
    /// with none (libcurl would give every one the form type).
    func testABodyWithoutAContentTypeGetsTheFormTypeOnlyAsAPOSTsHTTPBody() async throws {
        let manager = makeManager()
        let file = temporaryFile()
        try Data("abc".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            var request = URLRequest(url: server.url("/anything"))
            request.httpMethod = method
            request.httpBody = Data("abc".utf8)
            let error: Error? = try await awaitCallback { done in
                manager.dataTask(with: request) { _, _, error in done(error) }.resume()
            }
            XCTAssertNil(error)
            XCTAssertEqual(server.requests.last?.bodyLength, 3)
            let expected = method == "POST" ? "application/x-www-form-urlencoded" : nil
            XCTAssertEqual(server.requests.last?.header("Content-Type"), expected, method)
            request.httpBody = nil
            let uploaded: Error? = try await awaitCallback { done in
                manager.uploadTask(with: request, fromFile: file) { _, _, error in done(error) }.resume()
            }
            XCTAssertNil(uploaded)
            XCTAssertEqual(server.requests.last?.bodyLength, 3)
            XCTAssertNil(server.requests.last?.header("Content-Type"), "\(method) upload of a file")
            let uploadedData: Error? = try await awaitCallback { done in
                manager.uploadTask(with: request, from: Data("abc".utf8)) { _, _, error in done(error) }.resume()
            }
            XCTAssertNil(uploadedData)
            XCTAssertEqual(server.requests.last?.bodyLength, 3)
            XCTAssertNil(server.requests.last?.header("Content-Type"), "\(method) upload of data")
        }
    }
}
