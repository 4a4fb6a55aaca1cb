import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SessionStreamTask` against a loopback echo server, over TCP and TLS: echo, the policy in the handshake, timeouts,
/// the peer's end of stream, half-close, cancellation, the async forms and 100 streams at once. The manager's
/// transport is the one `SESSIONKIT_TEST_TRANSPORT` selects: stream tasks run on libcurl on both.
final class StreamTaskTests: XCTestCase {
    private var servers: [EchoServer] = []

    override func tearDown() async throws {
        for server in servers { try await server.shutdown() }
        servers = []
        try await super.tearDown()
    }

    private func startServer(
        tls: TestCertificates.Identity? = nil, behaviour: EchoServer.Behaviour = .echo
    ) async throws -> EchoServer {
        let server = try await EchoServer.start(tls: tls, behaviour: behaviour)
        servers.append(server)
        return server
    }

    private func makeManager(
        policy: SecurityPolicy? = nil, requestTimeout: TimeInterval = 10
    ) -> (URLSessionManager, TaskCompletionObserver) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = requestTimeout
        let manager = URLSessionManager(sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        if let policy { manager.securityPolicy = policy }
        let observer = TaskCompletionObserver(observing: manager)
        return (manager, observer)
    }

    /// A policy that trusts only chains holding the pinned certificate `name` (certificate mode, the test root being
    /// unknown to the system store), as LiveTLSTests pins.
    private func pinning(_ name: String) throws -> SecurityPolicy {
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der(name)])
        policy.allowInvalidCertificates = true
        return policy
    }

    private func der(_ name: String) throws -> Data {
        try TestCertificates.derCertificate(at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
    }

    private func write(_ task: SessionStreamTask, _ data: Data, timeout: TimeInterval = 10) async throws -> Error? {
        try await awaitCallback { done in task.write(data, timeout: timeout) { error in done(error) } }
    }

    private func read(
        _ task: SessionStreamTask, min: Int, max: Int, timeout: TimeInterval = 10
    ) async throws -> (data: Data?, atEOF: Bool, error: Error?) {
        try await awaitCallback { done in
            task.readData(ofMinLength: min, maxLength: max, timeout: timeout) { data, atEOF, error in
                if !TaskCompletionObserver.isOnDelegateQueue {
                    XCTFail("a read's completion ran off the delegate queue")
                }
                done((data, atEOF, error))
            }
        }
    }

    /// Reads until the end of stream.
    private func readToEnd(_ task: SessionStreamTask) async throws -> Data {
        var received = Data()
        while true {
            let (data, atEOF, error) = try await read(task, min: 1, max: 65_536)
            if let error { throw error }
            received.append(data ?? Data())
            if atEOF { return received }
        }
    }

    // MARK: - Echo

    func testEchoOverTCP() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        XCTAssertEqual(task.state, .suspended)
        XCTAssertTrue(manager.tasks.contains { $0 === task })
        task.resume()
        let message = Data("hello, stream".utf8)
        let writeError = try await write(task, message)
        XCTAssertNil(writeError)
        let (data, atEOF, error) = try await read(task, min: message.count, max: message.count)
        XCTAssertNil(error)
        XCTAssertFalse(atEOF)
        XCTAssertEqual(data, message)
        XCTAssertEqual(task.state, .running)
        XCTAssertEqual(task.countOfBytesSent, Int64(message.count))
        XCTAssertEqual(task.countOfBytesReceived, Int64(message.count))
        XCTAssertEqual(server.connections.count, 1)
        XCTAssertEqual(server.connections.first?.received, message)
        task.cancel()
        let completion = await observer.completion(of: task)
        XCTAssertEqual((completion as? URLError)?.code, .cancelled)
        XCTAssertEqual(task.state, .completed)
        XCTAssertFalse(manager.tasks.contains { $0 === task })
        XCTAssertEqual(observer.offQueueCallbacks, 0)
    }

    func testEchoOverTLSWithAPinnedCertificate() async throws {
        let server = try await startServer(tls: TestCertificates.localhost)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.startSecureConnection()
        task.resume()
        let message = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let writeError = try await write(task, message)
        XCTAssertNil(writeError)
        var received = Data()
        while received.count < message.count {
            let (data, _, error) = try await read(task, min: 1, max: message.count - received.count)
            XCTAssertNil(error)
            guard let data, error == nil else { break }
            received.append(data)
        }
        XCTAssertEqual(received, message)
        XCTAssertEqual(server.receivedByteCount, message.count)
        task.cancel()
        _ = await observer.completion(of: task)
    }

    func testWrongPinRefusesTheHandshakeBeforeAnyApplicationByte() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .silent)
        let (manager, observer) = makeManager(policy: try pinning("untrusted-root"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.startSecureConnection()
        task.resume()
        let writeError = try await write(task, Data("secret".utf8)) as? URLError
        let refusal = try XCTUnwrap(writeError)
        XCTAssertEqual(refusal.code, .serverCertificateUntrusted)
        XCTAssertNotNil(refusal.userInfo[NSLocalizedFailureReasonErrorKey], "the policy's reason is carried")
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, refusal.code)
        XCTAssertEqual(task.state, .completed)
        let (data, _, error) = try await read(task, min: 1, max: 10)
        XCTAssertNil(data)
        XCTAssertEqual((error as? URLError)?.code, refusal.code, "operations after the refusal fail at once")
        XCTAssertEqual(server.connections.count, 1, "the client did connect")
        XCTAssertEqual(server.receivedByteCount, 0, "no application byte reached the server")
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    // MARK: - Timeouts and failures

    func testReadTimesOutWhenThePeerSendsNothing() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let (data, atEOF, error) = try await read(task, min: 1, max: 10, timeout: 0.3)
        XCTAssertNil(data)
        XCTAssertFalse(atEOF)
        XCTAssertEqual((error as? URLError)?.code, .timedOut)
        XCTAssertEqual(task.state, .running, "a read's timeout fails that read only")
        let writeError = try await write(task, Data("still open".utf8))
        XCTAssertNil(writeError)
        task.cancel()
        _ = await observer.completion(of: task)
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    func testTimeoutsRunOnATaskNeverResumedAndOnASuspendedOne() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let idle = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        let idleRead = OnceBox<Error?>()
        idle.readData(ofMinLength: 1, maxLength: 1, timeout: 0.3) { _, _, error in idleRead.resolve(error) }
        let idleWrite = OnceBox<Error?>()
        idle.write(Data("x".utf8), timeout: 0.3) { error in idleWrite.resolve(error) }
        let idleReadError = try await idleRead.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertEqual((idleReadError as? URLError)?.code, .timedOut, "never resumed: the timeout still fires")
        let idleWriteError = try await idleWrite.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertEqual((idleWriteError as? URLError)?.code, .timedOut)
        XCTAssertEqual(idle.state, .suspended)

        let suspended = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        suspended.resume()
        suspended.suspend()
        let suspendedRead = OnceBox<Error?>()
        suspended.readData(ofMinLength: 1, maxLength: 1, timeout: 0.3) { _, _, error in suspendedRead.resolve(error) }
        let suspendedError = try await suspendedRead.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertEqual((suspendedError as? URLError)?.code, .timedOut, "suspended before its first operation")
        XCTAssertEqual(server.connections.count, 0, "neither connected")
        idle.cancel()
        suspended.cancel()
        _ = await observer.completion(of: idle)
        _ = await observer.completion(of: suspended)
    }

    func testWriteTimesOutWhenThePeerDoesNotRead() async throws {
        let server = try await startServer(behaviour: .unread)
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        // More than loopback's socket buffers on both sides can hold.
        let big = OnceBox<Error?>()
        let later = OnceBox<Error?>()
        task.write(Data(count: 64 << 20), timeout: 0.5) { error in big.resolve(error) }
        task.write(Data("later".utf8), timeout: 0) { error in later.resolve(error) }
        let timedOut = try await big.value(timeout: 10, file: #filePath, line: #line) as? URLError
        XCTAssertEqual(timedOut?.code, .timedOut)
        XCTAssertGreaterThan(task.countOfBytesSent, 0)
        XCTAssertLessThan(task.countOfBytesSent, 64 << 20)
        // Part of it went out: the stream is out of step, so the task ends and the later write fails too.
        let laterError = try await later.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((laterError as? URLError)?.code, .timedOut)
        XCTAssertEqual(later.deliveries, 1)
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .timedOut)
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    func testInvalidatingTheSessionCancelsOpenStreams() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let pendingRead = OnceBox<Error?>()
        task.readData(ofMinLength: 1, maxLength: 1, timeout: 0) { _, _, error in pendingRead.resolve(error) }
        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        let completion = await observer.completion(of: task)
        XCTAssertEqual((completion as? URLError)?.code, .cancelled)
        let readError = try await pendingRead.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual((readError as? URLError)?.code, .cancelled)
    }

    func testAStreamTaskOfAnInvalidatedSessionFailsEveryOperationWithSessionInvalidated() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        XCTAssertFalse(manager.tasks.contains { $0 === task }, "a refused task is not listed")
        task.resume()
        let writeError = try await write(task, Data("x".utf8)) as NSError?
        XCTAssertEqual(writeError?.domain, SessionKitError.sessionDomain)
        XCTAssertEqual(writeError?.code, SessionKitError.Code.sessionInvalidated.rawValue)
        let (data, _, readError) = try await read(task, min: 1, max: 1)
        XCTAssertNil(data)
        XCTAssertEqual((readError as NSError?)?.code, SessionKitError.Code.sessionInvalidated.rawValue)
        let completion = await observer.completion(of: task) as NSError?
        XCTAssertEqual(completion?.domain, SessionKitError.sessionDomain)
        XCTAssertEqual(completion?.code, SessionKitError.Code.sessionInvalidated.rawValue)
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual((task.error as NSError?)?.code, SessionKitError.Code.sessionInvalidated.rawValue)
        task.cancel()
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(observer.completionCount(of: task), 1)
        XCTAssertEqual(server.connections.count, 0, "nothing connected")
    }

    func testNoStreamTaskMadeDuringAnInvalidationEscapesIt() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, _) = makeManager()
        _ = manager.session
        let boxes = (0..<40).map { _ in OnceBox<Error?>() }
        let port = server.port
        // Tasks are made on other threads while the session is invalidated: each is cancelled or refused, none
        // keeps a read pending on a session that is gone.
        await Task.detached {
            // The invalidation comes in the middle: tasks are made before, during and after it.
            let middle = boxes.count / 2
            DispatchQueue.concurrentPerform(iterations: boxes.count + 1) { index in
                guard index != middle else {
                    return manager.invalidateSessionCancelingTasks(true, resetSession: false)
                }
                let box = boxes[index < middle ? index : index - 1]
                let task = manager.streamTask(withHostName: "127.0.0.1", port: port)
                task.resume()
                task.readData(ofMinLength: 1, maxLength: 1, timeout: 0) { _, _, error in box.resolve(error) }
            }
        }.value
        for box in boxes {
            let error = try await box.value(timeout: 10, file: #filePath, line: #line) as NSError?
            XCTAssertNotNil(error)
            XCTAssertTrue(
                error?.code == URLError.Code.cancelled.rawValue
                    || error?.code == SessionKitError.Code.sessionInvalidated.rawValue,
                "\(String(describing: error))")
        }
        for _ in 0..<100 where !manager.tasks.isEmpty { try await Task.sleep(nanoseconds: 50_000_000) }
        XCTAssertTrue(manager.tasks.isEmpty, "every task completed")
    }

    func testRefusedConnectionFailsPendingAndLaterOperations() async throws {
        let port = try Self.closedPort()
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: port)
        task.resume()
        async let pendingRead = read(task, min: 1, max: 10)
        let writeError = try await write(task, Data("x".utf8)) as? URLError
        XCTAssertEqual(writeError?.code, .cannotConnectToHost)
        let readError = try await pendingRead.error as? URLError
        XCTAssertEqual(readError?.code, .cannotConnectToHost)
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .cannotConnectToHost)
        XCTAssertEqual((task.error as? URLError)?.code, .cannotConnectToHost)
        let laterError = try await write(task, Data("y".utf8)) as? URLError
        XCTAssertEqual(laterError?.code, .cannotConnectToHost)
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    func testAnInvalidPortFailsTheFirstOperation() async throws {
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: 70_000)
        task.resume()
        let error = try await write(task, Data("x".utf8)) as? URLError
        XCTAssertEqual(error?.code, .badURL)
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .badURL)
    }

    func testAHostThatIsNotANameNorAnAddressFailsTheFirstOperationWithBadURL() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        // Each would change libcurl's URL: another port, another host (`x@` is a user name), a path.
        for host in ["127.0.0.1/", "x@127.0.0.1", "127.0.0.1:\(server.port)", "127.0.0.1 ", "[127.0.0.1]", "", "a?b"] {
            let task = manager.streamTask(withHostName: host, port: server.port)
            task.resume()
            let error = try await write(task, Data("x".utf8)) as? URLError
            XCTAssertEqual(error?.code, .badURL, host)
            let completion = await observer.completion(of: task) as? URLError
            XCTAssertEqual(completion?.code, .badURL, host)
        }
        XCTAssertEqual(server.connections.count, 0, "nothing connected")
        for host in ["::1", "[::1]"] {
            let task = manager.streamTask(withHostName: host, port: server.port)
            task.resume()
            let error = try await write(task, Data("x".utf8)) as? URLError
            XCTAssertNotEqual(error?.code, .badURL, "an IPv6 literal is accepted: \(host)")
            task.cancel()
            _ = await observer.completion(of: task)
        }
        let named = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        named.resume()
        let namedError = try await write(named, Data("x".utf8))
        XCTAssertNil(namedError)
        named.cancel()
        _ = await observer.completion(of: named)
    }

    func testPeerCloseInTheMiddleOfAReadDeliversWhatCameWithTheEndOfStream() async throws {
        let sent = Data(repeating: 0x2A, count: 10)
        let server = try await startServer(behaviour: .send(sent, thenClose: true))
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let (data, atEOF, error) = try await read(task, min: 100, max: 1000)
        XCTAssertNil(error)
        XCTAssertEqual(data, sent, "fewer than the minimum at the end of stream")
        XCTAssertTrue(atEOF)
        let (later, laterAtEOF, laterError) = try await read(task, min: 1, max: 10)
        XCTAssertEqual(later ?? Data(), Data())
        XCTAssertTrue(laterAtEOF)
        XCTAssertNil(laterError)
        XCTAssertEqual(observer.readClosed, 1)
        XCTAssertEqual(task.state, .running, "the write side is still open")
        task.closeWrite()
        let completion = await observer.completion(of: task)
        XCTAssertNil(completion, "both directions closed: the task completes without error")
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(observer.writeClosed, 1)
    }

    func testCloseWriteIsSeenAsEndOfStreamByTheServer() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let message = Data("last words".utf8)
        task.write(message, timeout: 10) { _ in }
        task.closeWrite()
        let afterClose = try await write(task, Data("too late".utf8)) as? URLError
        XCTAssertNotNil(afterClose, "a write after closeWrite fails")
        // The echo server answers the half-close by closing: the echo, then the end of stream.
        let echoed = try await readToEnd(task)
        XCTAssertEqual(echoed, message)
        let completion = await observer.completion(of: task)
        XCTAssertNil(completion)
        XCTAssertEqual(server.connections.first?.inputClosed, true)
        XCTAssertEqual(server.connections.first?.received, message)
        XCTAssertEqual(observer.writeClosed, 1)
        XCTAssertEqual(observer.readClosed, 1)
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    func testCancelCompletesEachPendingOperationOnce() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let boxes = (0..<3).map { _ in OnceBox<Error?>() }
        for box in boxes {
            task.readData(ofMinLength: 1, maxLength: 10, timeout: 0) { _, _, error in box.resolve(error) }
        }
        let writeBox = OnceBox<Error?>()
        task.write(Data("queued".utf8), timeout: 0) { error in writeBox.resolve(error) }
        task.cancel()
        task.cancel()
        let completion = await observer.completion(of: task)
        XCTAssertEqual((completion as? URLError)?.code, .cancelled)
        for box in boxes {
            let error = try await box.value(timeout: 10, file: #filePath, line: #line)
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
            XCTAssertEqual(box.deliveries, 1)
        }
        _ = try await writeBox.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual(writeBox.deliveries, 1)
        XCTAssertEqual(observer.completionCount(of: task), 1)
        XCTAssertEqual(task.state, .completed)
    }

    func testStartTLSUpgradesAPlainStreamOnceEarlierOperationsAreDone() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        // Queued at once: the handshake waits for the plain write and read before it, the secret waits for it.
        let plainWrite = OnceBox<Error?>()
        task.write(Data("STARTTLS\n".utf8), timeout: 10) { error in plainWrite.resolve(error) }
        let answer = OnceBox<Data?>()
        task.readData(ofMinLength: 3, maxLength: 3, timeout: 10) { data, _, _ in answer.resolve(data) }
        task.startSecureConnection()
        let secret = Data("secret".utf8)
        let secretWrite = try await write(task, secret)
        XCTAssertNil(secretWrite)
        let plainWriteError = try await plainWrite.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(plainWriteError)
        let answerData = try await answer.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual(answerData, Data("GO\n".utf8))
        let (echo, _, error) = try await read(task, min: secret.count, max: secret.count)
        XCTAssertNil(error)
        XCTAssertEqual(echo, secret)
        XCTAssertEqual(server.connections.first?.received, Data("STARTTLS\nsecret".utf8))
        task.cancel()
        _ = await observer.completion(of: task)
    }

    func testAnUpgradedStreamWhosePeerClosesWithoutCloseNotifyReadsTheEndOfStream() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
        XCTAssertNil(plainWrite)
        let (answer, _, _) = try await read(task, min: 3, max: 3)
        XCTAssertEqual(answer, Data("GO\n".utf8))
        task.startSecureConnection()
        let echo = try await write(task, Data("ping".utf8))
        XCTAssertNil(echo)
        let (pong, _, _) = try await read(task, min: 4, max: 4)
        XCTAssertEqual(pong, Data("ping".utf8))
        let drop = try await write(task, Data("DROP\n".utf8))
        XCTAssertNil(drop)
        // OpenSSL 3 would call this an error (unexpected EOF); like libcurl's TLS, SessionKit reads it as the end.
        let (data, atEOF, error) = try await read(task, min: 1, max: 10)
        XCTAssertNil(error)
        XCTAssertEqual(data ?? Data(), Data())
        XCTAssertTrue(atEOF)
        task.cancel()
        _ = await observer.completion(of: task)
        // Delivered after the read's handler on the delegate queue, before the completion.
        XCTAssertEqual(observer.readClosed, 1)
    }

    func testStartTLSWithAWrongPinSendsNothingAfterTheUpgrade() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("untrusted-root"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
        XCTAssertNil(plainWrite)
        let (answer, _, _) = try await read(task, min: 3, max: 3)
        XCTAssertEqual(answer, Data("GO\n".utf8))
        task.startSecureConnection()
        let refused = try await write(task, Data("secret".utf8)) as? URLError
        XCTAssertEqual(refused?.code, .serverCertificateUntrusted)
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .serverCertificateUntrusted)
        XCTAssertEqual(server.connections.first?.received, Data("STARTTLS\n".utf8), "nothing after the refusal")
    }

    func testStartTLSAfterATimedOutReadLeftPlaintextFailsWithoutDeliveringIt() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
        XCTAssertNil(plainWrite)
        // The plain answer arrives, but the read wants more and times out: "GO\n" stays unread.
        let (timedOut, _, timeoutError) = try await read(task, min: 10, max: 10, timeout: 0.5)
        XCTAssertNil(timedOut)
        XCTAssertEqual((timeoutError as? URLError)?.code, .timedOut)
        task.startSecureConnection()
        let (data, _, error) = try await read(task, min: 1, max: 10, timeout: 5)
        XCTAssertNil(data, "plaintext from before the handshake is never handed out as TLS data")
        XCTAssertEqual((error as? URLError)?.code, .secureConnectionFailed)
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .secureConnectionFailed)
        XCTAssertEqual(observer.completionCount(of: task), 1)
    }

    func testStartTLSWithUnreadPlaintextWaitingInTheSocketFailsBeforeTheHandshake() async throws {
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
        XCTAssertNil(plainWrite)
        // "GO\n" arrives and nobody reads it: it waits in the socket when the handshake is due.
        try await Task.sleep(nanoseconds: 300_000_000)
        task.startSecureConnection()
        let (data, _, error) = try await read(task, min: 1, max: 10, timeout: 5)
        XCTAssertNil(data)
        let failure = try XCTUnwrap(error as? URLError)
        XCTAssertEqual(failure.code, .secureConnectionFailed)
        XCTAssertTrue(failure.localizedDescription.contains("Plaintext bytes arrived before the TLS handshake"))
        _ = await observer.completion(of: task)
        XCTAssertEqual(server.connections.first?.received, Data("STARTTLS\n".utf8), "no ClientHello was sent")
    }

    func testStartSecureConnectionAfterCloseWriteFailsTheFollowingOperations() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let first = try await write(task, Data("plain".utf8))
        XCTAssertNil(first)
        task.closeWrite()
        task.startSecureConnection()
        let (data, _, error) = try await read(task, min: 1, max: 1)
        XCTAssertNil(data)
        XCTAssertEqual((error as? URLError)?.code, .secureConnectionFailed)
        task.cancel()
        _ = await observer.completion(of: task)
    }

    func testStartTLSHandshakeThatPeerNeverAnswersTimesOut() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager(requestTimeout: 1)
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
        XCTAssertNil(plainWrite)
        task.startSecureConnection()
        // Without an operation timeout, only the handshake's deadline (the request timeout) can end the wait.
        let secureWrite = OnceBox<Error?>()
        let started = Date()
        task.write(Data("secret".utf8), timeout: 0) { error in secureWrite.resolve(error) }
        let error = try await secureWrite.value(timeout: 8, file: #filePath, line: #line) as? URLError
        XCTAssertEqual(error?.code, .timedOut)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.9, "not before the request timeout")
        let completion = await observer.completion(of: task) as? URLError
        XCTAssertEqual(completion?.code, .timedOut)
        XCTAssertEqual(observer.completionCount(of: task), 1)
        let received = server.connections.first?.received ?? Data()
        XCTAssertGreaterThan(received.count, "STARTTLS\n".utf8.count, "the ClientHello went out")
        XCTAssertNil(received.range(of: Data("secret".utf8)), "nothing of the write after the upgrade")
    }

    func testCloseWriteAfterPeerClosedIsEndOfStreamNotError() async throws {
        // The server says goodbye and closes, and the client's goodbye is answered with a reset, as a closed
        // socket's is (an upgraded stream's close_notify is, racing with the shutdown): here the reset is always in
        // the client's socket before it closes.
        let goodbye = Data("bye".utf8)
        let server = try await startServer(behaviour: .sendThenCloseResettingOnRead(goodbye))
        let (manager, observer) = makeManager()
        let rounds = 50
        for round in 0..<rounds {
            let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
            task.resume()
            let (data, _, error) = try await read(task, min: goodbye.count, max: goodbye.count)
            XCTAssertNil(error)
            XCTAssertEqual(data, goodbye)
            let clientGoodbye = try await write(task, Data("x".utf8))
            XCTAssertNil(clientGoodbye)
            try await waitUntil("round \(round): the server reset the connection") {
                server.connections.count > round && server.connections[round].closed
            }
            let last: (data: Data?, atEOF: Bool, error: Error?)
            if round.isMultiple(of: 2) {
                // The client saw the end of stream, then closes.
                last = try await read(task, min: 1, max: 10)
                task.closeWrite()
            } else {
                // The client closes with a read pending: the read still gets the end of stream.
                let pending = OnceBox<(data: Data?, atEOF: Bool, error: Error?)>()
                task.readData(ofMinLength: 1, maxLength: 10, timeout: 10) { data, atEOF, error in
                    pending.resolve((data, atEOF, error))
                }
                task.closeWrite()
                last = try await pending.value(timeout: 10, file: #filePath, line: #line)
            }
            XCTAssertNil(last.error, "round \(round)")
            XCTAssertTrue(last.atEOF, "round \(round)")
            XCTAssertEqual(last.data ?? Data(), Data(), "round \(round)")
            let completion = await observer.completion(of: task)
            XCTAssertNil(completion, "round \(round): \(String(describing: completion))")
        }
        XCTAssertEqual(observer.writeClosed, rounds)
        XCTAssertEqual(observer.readClosed, rounds)
    }

    func testCloseWriteOfAnUpgradedStreamAfterPeerClosedIsEndOfStreamNotError() async throws {
        // The close_notify of closeWrite reaches a closed socket, whose reset races with the client's shutdown:
        // a number of rounds lets the reset come first in some.
        let server = try await startServer(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        let (manager, observer) = makeManager(policy: try pinning("root-ca"))
        let rounds = 50
        for round in 0..<rounds {
            let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
            task.resume()
            let plainWrite = try await write(task, Data("STARTTLS\n".utf8))
            XCTAssertNil(plainWrite)
            let (answer, _, _) = try await read(task, min: 3, max: 3)
            XCTAssertEqual(answer, Data("GO\n".utf8))
            task.startSecureConnection()
            let drop = try await write(task, Data("DROP\n".utf8))
            XCTAssertNil(drop)
            let (data, atEOF, error) = try await read(task, min: 1, max: 10)
            XCTAssertNil(error, "round \(round)")
            XCTAssertEqual(data ?? Data(), Data())
            XCTAssertTrue(atEOF)
            try await waitUntil("round \(round): the server closed") {
                server.connections.count > round && server.connections[round].closed
            }
            task.closeWrite()
            let completion = await observer.completion(of: task)
            XCTAssertNil(completion, "round \(round): \(String(describing: completion))")
        }
        XCTAssertEqual(observer.writeClosed, rounds)
    }

    // MARK: - Memory

    func testReadingReleasesConsumedBytesSoMemoryIsBoundedByUnreadBytes() async throws {
        // A stream that kept the bytes it handed out would grow by about what it streamed after the warm-up (112 MiB).
        let total = 128 << 20
        let warmUp = 16 << 20
        for readSize in [64 << 10, 4 << 20] {
            let server = try await startServer(behaviour: .stream(byteCount: total))
            let (manager, observer) = makeManager()
            let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
            task.resume()
            var received = 0
            var baseline: Int?
            var peak = 0
            let started = Date()
            for _ in 0..<(total / readSize) {
                let (data, _, error) = try await read(task, min: readSize, max: readSize, timeout: 30)
                XCTAssertNil(error)
                guard let data, error == nil else { break }
                received += data.count
                // After the warm-up, the allocator's arenas and the socket buffers are in place.
                let resident = try XCTUnwrap(Self.residentBytes())
                guard received >= warmUp else { continue }
                baseline = baseline ?? resident
                peak = max(peak, resident)
            }
            XCTAssertEqual(received, total)
            let growth = peak - (baseline ?? 0)
            print(
                "stream of \(total >> 20) MiB in \(readSize >> 10) KiB reads: resident memory grew by "
                    + "\(growth >> 10) KiB after the first \(warmUp >> 20) MiB, in "
                    + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s")
            XCTAssertLessThan(growth, 32 << 20, "\(readSize >> 10) KiB reads: grew by \(growth >> 20) MiB")
            task.cancel()
            _ = await observer.completion(of: task)
        }
    }

    /// The process's resident memory in bytes (`/proc/self/statm`).
    private static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    // MARK: - Async forms

    func testAsyncWritesAndTheChunksSequence() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        var sent = Data()
        for index in 0..<16 {
            let chunk = Data((0..<16_384).map { UInt8(truncatingIfNeeded: $0 &+ index) })
            try await task.write(chunk, timeout: 10)
            sent.append(chunk)
        }
        task.closeWrite()
        var received = Data()
        for try await chunk in task.chunks(maxLength: 10_000, timeout: 10) {
            XCTAssertLessThanOrEqual(chunk.count, 10_000)
            received.append(chunk)
        }
        XCTAssertEqual(received, sent)
        let completion = await observer.completion(of: task)
        XCTAssertNil(completion)
    }

    func testCancellingTheConsumingSwiftTaskCancelsTheStream() async throws {
        let server = try await startServer(behaviour: .silent)
        let (manager, observer) = makeManager()
        let stream = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        stream.resume()
        let consumer = Task {
            for try await _ in stream.chunks() {}
        }
        try await stream.write(Data("hello".utf8), timeout: 10)  // connected: the consumer's read is pending
        consumer.cancel()
        let result = await consumer.result
        XCTAssertThrowsError(try result.get()) { error in
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
        }
        let completion = await observer.completion(of: stream)
        XCTAssertEqual((completion as? URLError)?.code, .cancelled)
    }

    // MARK: - Many streams

    func testHundredConcurrentStreamsEachEchoAndCompleteOnce() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        let tasks = (0..<100).map { _ in manager.streamTask(withHostName: "127.0.0.1", port: server.port) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, task) in tasks.enumerated() {
                group.addTask {
                    task.resume()
                    let message = Data("stream \(index) ".utf8) + Data(repeating: UInt8(index), count: 1_000)
                    try await task.write(message, timeout: 20)
                    task.closeWrite()
                    var received = Data()
                    for try await chunk in task.chunks(timeout: 20) { received.append(chunk) }
                    XCTAssertEqual(received, message, "stream \(index)")
                }
            }
            try await group.waitForAll()
        }
        for task in tasks {
            let completion = await observer.completion(of: task)
            XCTAssertNil(completion)
            XCTAssertEqual(observer.completionCount(of: task), 1)
        }
        XCTAssertEqual(Set(tasks.map(\.taskIdentifier)).count, 100)
        XCTAssertEqual(server.connections.count, 100)
        XCTAssertEqual(observer.offQueueCallbacks, 0)
    }

    func testAnIdleStreamStaysOpenWhileOthersConnectAndClose() async throws {
        let server = try await startServer()
        let (manager, observer) = makeManager()
        let idle = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        idle.resume()
        try await idle.write(Data("one".utf8), timeout: 10)
        // The echo arrives while nobody reads: it waits in the socket through the others' connections.
        for round in 0..<3 {
            try await Task.sleep(nanoseconds: 1_100_000_000)
            for _ in 0..<5 {
                let other = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
                other.resume()
                try await other.write(Data("round \(round)".utf8), timeout: 10)
                other.cancel()
                _ = await observer.completion(of: other)
            }
        }
        let first = try await idle.read(minLength: 3, maxLength: 3, timeout: 10)
        XCTAssertEqual(first.data, Data("one".utf8))
        try await idle.write(Data("two".utf8), timeout: 10)
        let second = try await idle.read(minLength: 3, maxLength: 3, timeout: 10)
        XCTAssertEqual(second.data, Data("two".utf8))
        idle.cancel()
        _ = await observer.completion(of: idle)
    }

    func testAHalfClosedStreamKeepsItsDataAndEndOfStreamWhileOthersConnect() async throws {
        // libcurl's connection cache prunes connections it finds dead (readable: data or a FIN) when another
        // connects, at most once a second: a stream whose peer half-closed must survive it.
        let sent = Data("before the half-close".utf8)
        let halfClosing = try await startServer(behaviour: .sendThenHalfClose(sent))
        let echo = try await startServer()
        let (manager, observer) = makeManager()
        let stream = manager.streamTask(withHostName: "127.0.0.1", port: halfClosing.port)
        stream.resume()
        try await stream.write(Data("hello".utf8), timeout: 10)
        for round in 0..<3 {
            try await Task.sleep(nanoseconds: 1_100_000_000)
            let other = manager.streamTask(withHostName: "127.0.0.1", port: echo.port)
            other.resume()
            try await other.write(Data("round \(round)".utf8), timeout: 10)
            let answer = try await other.read(minLength: 7, maxLength: 7, timeout: 10)
            XCTAssertEqual(answer.data, Data("round \(round)".utf8))
            other.cancel()
            _ = await observer.completion(of: other)
        }
        XCTAssertEqual(halfClosing.connections.first?.closed, false, "the server only half-closed")
        var received = Data()
        var atEOF = false
        while !atEOF {
            let chunk = try await stream.read(minLength: 1, maxLength: 1024, timeout: 10)
            received.append(chunk.data)
            atEOF = chunk.atEOF
        }
        XCTAssertEqual(received, sent, "the data, then the end of stream")
        try await stream.write(Data("still writable".utf8), timeout: 10)
        stream.closeWrite()
        let completion = await observer.completion(of: stream)
        XCTAssertNil(completion, "both directions closed")
        XCTAssertEqual(observer.readClosed, 1)
        // The completion says the bytes and the end of stream are in the kernel, not that the server's event loop read
        // them: on a busy machine it reads them later. It closes once it read the end of stream, after the bytes.
        try await waitUntil("the server read the client's end of stream") {
            halfClosing.connections.first?.closed == true
        }
        XCTAssertEqual(halfClosing.connections.first?.received, Data("hellostill writable".utf8))
    }

    func testAStreamThatDidNoIOSinceConnectingKeepsItsConnectionAndTouchesNoOtherWhileAnotherConnects() async throws {
        // libcurl 7.88 closes a connection of its cache that it finds dead (readable, and a peek reads the end of
        // stream) when another transfer of the cache connects, at most once a second, unless a transfer is attached
        // to it; a stream is attached by its first curl_easy_send or curl_easy_recv. This stream's only write times
        // out before the connection is up, so nothing attaches it, and its peer half-closes at once. A closed
        // socket's descriptor goes to the next socket opened, the other stream's, which the first stream's
        // closeWrite would then shut down.
        let halfClosing = try await startServer(behaviour: .sendThenHalfClose(Data()))
        let echo = try await startServer()
        let (manager, observer) = makeManager()
        let stream = manager.streamTask(withHostName: "127.0.0.1", port: halfClosing.port)
        stream.resume()
        // The engine applies deadlines before any I/O, and a connection takes longer than a microsecond to open.
        let expired = try await write(stream, Data("never sent".utf8), timeout: 0.000_001)
        XCTAssertEqual((expired as? URLError)?.code, .timedOut)
        try await waitUntil("the half-closing server accepted the stream") { halfClosing.connections.count == 1 }
        try await Task.sleep(nanoseconds: 1_100_000_000)
        let other = manager.streamTask(withHostName: "127.0.0.1", port: echo.port)
        other.resume()
        try await other.write(Data("ping".utf8), timeout: 10)
        let ping = try await other.read(minLength: 4, maxLength: 4, timeout: 10)
        XCTAssertEqual(ping.data, Data("ping".utf8))

        stream.closeWrite()
        // Having half-closed, the server closes once it read the end of stream.
        try await waitUntil("the half-closing server read the stream's end of stream") {
            halfClosing.connections.first?.closed == true
        }
        XCTAssertEqual(echo.connections.first?.inputClosed, false, "the other stream's server got no end of stream")
        try await other.write(Data("pong".utf8), timeout: 10)
        let pong = try await other.read(minLength: 4, maxLength: 4, timeout: 10)
        XCTAssertEqual(pong.data, Data("pong".utf8), "the other stream's connection still works")
        XCTAssertEqual(echo.connections.first?.received, Data("pingpong".utf8))

        let (data, atEOF, error) = try await read(stream, min: 1, max: 10)
        XCTAssertNil(error)
        XCTAssertEqual(data ?? Data(), Data())
        XCTAssertTrue(atEOF, "the peer's end of stream")
        let completion = await observer.completion(of: stream)
        XCTAssertNil(completion, "both directions closed")
        XCTAssertEqual(halfClosing.connections.first?.received, Data())
        other.cancel()
        _ = await observer.completion(of: other)
    }

    /// A loopback port nothing listens on (bound, then closed).
    private static func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw URLError(.cannotConnectToHost) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress -> Bool in
                bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard bound else { throw URLError(.cannotConnectToHost) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
