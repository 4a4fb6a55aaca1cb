import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Behaviours of AFNetworking 4.0.1's `AFURLSessionManager.m` that SessionKit once did differently, each checked by
/// name, end to end on the loopback server (on the transport `SESSIONKIT_TEST_TRANSPORT` selects, unless a test needs
/// the curl transport's TLS).
final class AFURLSessionManagerParityTests: LoopbackTestCase {
    private typealias FileOutcome = (response: URLResponse?, fileURL: URL?, error: Error?)

    private func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-parity-\(UUID().uuidString)")
    }

    private func download(_ manager: URLSessionManager, _ path: String, destination: URL) async throws -> FileOutcome {
        try await awaitCallback { done in
            manager.resume(
                manager.downloadTask(
                    with: URLRequest(url: server.url(path)), progress: nil,
                    destination: { _, _ in destination },
                    completionHandler: { done(($0, $1, $2)) }))
        }
    }

    /// Downloads 100 bytes to `target` and returns the outcome and the notifications named `name` whose object is
    /// the task.
    private func download(
        _ manager: URLSessionManager, to target: URL, observing name: Notification.Name
    )
        async throws -> (FileOutcome, [Notification])
    {
        let seen = LockedBox<[Notification]>([])
        let observer = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
            seen.write { $0.append(note) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let box = LockedBox<URLSessionTask?>(nil)
        let outcome: FileOutcome = try await awaitCallback { done in
            let created = manager.downloadTask(
                with: URLRequest(url: server.url("/bytes/100")), progress: nil,
                destination: { _, _ in target }, completionHandler: { done(($0, $1, $2)) })
            box.wrappedValue = created
            manager.resume(created)
        }
        let task = box.wrappedValue
        return (outcome, seen.wrappedValue.filter { ($0.object as AnyObject?) === task })
    }

    // AFURLSessionManager.m:1191-1204: the manager-wide closure is asked first, with the temporary file, and its
    // answer wins over the task's destination.
    func testManagerWideDownloadDestinationIsAskedFirst() async throws {
        let manager = makeManager()
        let managerTarget = temporaryFile()
        let taskTarget = temporaryFile()
        defer { for url in [managerTarget, taskTarget] { try? FileManager.default.removeItem(at: url) } }
        let asked = CallCounter()
        manager.downloadTaskDidFinishDownloading = { _, task, location in
            asked.increment()
            XCTAssertTrue(FileManager.default.fileExists(atPath: location.path), "asked with the downloaded file")
            XCTAssertNotNil(task.originalRequest)
            return managerTarget
        }
        let outcome = try await download(manager, "/bytes/2048", destination: taskTarget)
        XCTAssertNil(outcome.error)
        XCTAssertEqual(asked.count, 1)
        XCTAssertEqual(outcome.fileURL, managerTarget)
        XCTAssertEqual(try Data(contentsOf: managerTarget).count, 2048)
        XCTAssertFalse(FileManager.default.fileExists(atPath: taskTarget.path))

        // A nil answer leaves the choice to the task.
        manager.downloadTaskDidFinishDownloading = { _, _, _ in nil }
        let second = try await download(manager, "/bytes/10", destination: taskTarget)
        XCTAssertEqual(second.fileURL, taskTarget)
    }

    // AFURLSessionManager.m:49 and :311, :1200: a moved download posts the success notification, object the task,
    // no userInfo.
    func testDownloadMovedToItsDestinationPostsTheSuccessNotification() async throws {
        let manager = makeManager()
        let target = temporaryFile()
        defer { try? FileManager.default.removeItem(at: target) }
        let (outcome, notes) = try await download(
            manager, to: target, observing: .sessionKitDownloadTaskDidMoveFileSuccessfully)
        XCTAssertNil(outcome.error)
        XCTAssertEqual(notes.count, 1)
        XCTAssertNil(notes.first?.userInfo)
        XCTAssertEqual(
            Notification.Name.sessionKitDownloadTaskDidMoveFileSuccessfully.rawValue,
            "com.sessionkit.networking.session.download.file-manager-succeed")
    }

    // AFURLSessionManager.m:50 and :309, :1198: a move that fails posts the failure notification, object the task,
    // userInfo the file manager's error's userInfo.
    func testDownloadThatCannotBeMovedPostsTheFailureNotificationWithTheFileManagerUserInfo() async throws {
        let manager = makeManager()
        let target = temporaryFile().appendingPathComponent("no-such-folder").appendingPathComponent("file")
        let (outcome, notes) = try await download(
            manager, to: target, observing: .sessionKitDownloadTaskDidFailToMoveFile)
        let error = try XCTUnwrap(outcome.error as NSError?)
        XCTAssertEqual(error.code, SessionKitError.Code.cannotMoveDownloadedFile.rawValue)
        XCTAssertEqual(notes.count, 1)
        let fileManagerError = try XCTUnwrap(error.userInfo[NSUnderlyingErrorKey] as? NSError)
        let userInfo = try XCTUnwrap(notes.first?.userInfo)
        XCTAssertEqual(Set(userInfo.keys.compactMap { $0 as? String }), Set(fileManagerError.userInfo.keys))
        XCTAssertEqual(
            Notification.Name.sessionKitDownloadTaskDidFailToMoveFile.rawValue,
            "com.sessionkit.networking.session.download.file-manager-error")
    }

    // AFURLSessionManager.m:1009-1030: a server-trust failure reads as CFNetwork's sentence naming the host; SessionKit
    // keeps why as the failure reason. Curl transport: the only one that evaluates a policy.
    func testServerTrustErrorReadsAsAFNetworkingsWithThePreciseFailureReason() async throws {
        let tlsServer = try await LoopbackServer.start(tls: TestCertificates.served("self-signed"))
        defer { Task { try? await tlsServer.shutdown() } }
        let manager = HTTPSessionManager(baseURL: URL(string: "https://127.0.0.1:\(tlsServer.port)"))
        manager.transport = .curl
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            _ = try await manager.get("/get")
            XCTFail("an untrusted server passed the default policy")
        } catch let error as URLError {
            XCTAssertEqual(
                error.localizedDescription,
                "The certificate for this server is invalid. You might be connecting to a server that is "
                    + "pretending to be \u{201C}127.0.0.1\u{201D} which could put your confidential information at risk."
            )
            let reason = (error as NSError).userInfo[NSLocalizedFailureReasonErrorKey] as? String
            XCTAssertTrue(reason?.contains("trusted root") == true, "\(String(describing: reason))")
            XCTAssertEqual(error.failingURL?.host, "127.0.0.1")
        }
        XCTAssertTrue(tlsServer.requests.isEmpty)
    }
}
