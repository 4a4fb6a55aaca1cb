import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SessionWebSocketTask` against real peers on loopback: SwiftNIO's WebSocket server (plain and TLS) for the
/// conversation, and a raw server for every handshake and frame a client must refuse, with the close code each
/// failure sends. WebSocket tasks run on libcurl whatever `SESSIONKIT_TEST_TRANSPORT` selects.
final class WebSocketTaskTests: WebSocketTestCase {
    private func pinning(_ name: String) throws -> SecurityPolicy {
        let der = try TestCertificates.derCertificate(
            at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [der])
        policy.allowInvalidCertificates = true
        return policy
    }

    // MARK: - Conversation

    func testEchoesTextAndBinaryMessagesOverWS() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url("/echo"))
        XCTAssertEqual(task.state, .suspended)
        task.resume()
        try await task.send(.string("hello ✓"))
        let received = try await task.receive()
        XCTAssertEqual(received, .string("hello ✓"))
        let binary = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0) })
        try await task.send(.data(binary))
        let echoed = try await task.receive()
        XCTAssertEqual(echoed, .data(binary))
        XCTAssertEqual((task.response as? HTTPURLResponse)?.statusCode, 101)
        XCTAssertTrue(manager.tasks.contains { $0 === task }, "listed while open")
        XCTAssertEqual(server.seen.upgrades.first?.target, "/echo")
        task.cancel(with: .normalClosure, reason: nil)
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
        XCTAssertEqual(task.state, .completed)
        XCTAssertFalse(manager.tasks.contains { $0 === task }, "not listed once completed")
        XCTAssertEqual(completions.offQueueCallbacks, 0)
    }

    func testAnEventMonitorSeesTheConnectionAsOneRequest() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        let task = manager.webSocketTask(with: server.url("/echo"))
        task.resume()
        try await task.send(.string("seen"))
        _ = try await task.receive()
        task.cancel(with: .normalClosure, reason: nil)
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
        for _ in 0..<250 where !recorder.events.contains("finished") { try await Task.sleep(nanoseconds: 20_000_000) }
        await recorder.flush()
        XCTAssertEqual(recorder.events, ["created", "taskCreated", "resumed", "taskCompleted", "finished"])

        // A connection the caller cancels is a cancelled request.
        let cancelled = manager.webSocketTask(with: server.url("/echo"))
        cancelled.resume()
        cancelled.cancel()
        _ = try await awaitCompletion(of: cancelled, in: completions)
        for _ in 0..<250 where recorder.events.filter({ $0.hasPrefix("finished") }).count < 2 {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await recorder.flush()
        XCTAssertEqual(
            Array(recorder.events.dropFirst(5)),
            ["created", "taskCreated", "resumed", "cancelled", "taskFailed", "finishedWithError"])
    }

    func testEchoOverWSSWithAPinnedCertificate() async throws {
        let server = try await startServer(tls: TestCertificates.localhost)
        let (manager, completions) = makeManager(policy: try pinning("root-ca"))
        let task = manager.webSocketTask(with: server.url("/secure"))
        task.resume()
        try await task.send(.string("over TLS"))
        let received = try await task.receive()
        XCTAssertEqual(received, .string("over TLS"))
        task.cancel(with: .goingAway, reason: Data("bye".utf8))
        _ = try await awaitCompletion(of: task, in: completions)
        try await waitUntil("the server saw the close") { server.seen.closeCodes == [1001] }
    }

    func testWrongPinOnWSSSendsNoUpgradeRequest() async throws {
        let server = try await startServer(tls: TestCertificates.localhost)
        let (manager, completions) = makeManager(policy: try pinning("untrusted-root"))
        var request = URLRequest(url: server.url("/secret"))
        request.setValue("Bearer secret-token", forHTTPHeaderField: "Authorization")
        let task = manager.webSocketTask(with: request)
        task.resume()
        let result = try await receive(task)
        guard case .failure(let error) = result else { return XCTFail("received over a refused chain") }
        XCTAssertEqual((error as? URLError)?.code, .serverCertificateUntrusted)
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .serverCertificateUntrusted)
        XCTAssertEqual(server.seen.connections, 1, "the client did connect")
        XCTAssertTrue(server.seen.upgrades.isEmpty, "no upgrade request reached the server")
        XCTAssertEqual(completions.completionCount(of: task), 1)
    }

    func testNegotiatesAnOfferedSubprotocol() async throws {
        let server = try await startServer(protocols: ["v2.chat", "v1.chat"])
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url(), protocols: ["v1.chat", "v2.chat"])
        task.resume()
        try await task.send(.string("x"))
        _ = try await task.receive()
        XCTAssertEqual(task.negotiatedProtocol, "v1.chat")
        let offered = server.seen.upgrades.first?.headers.first { $0.0.lowercased() == "sec-websocket-protocol" }?.1
        XCTAssertEqual(offered, "v1.chat, v2.chat")
        task.cancel()
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .cancelled)
    }

    func testUpgradeRequestCarriesCookiesAuthorizationAndAdditionalHeaders() async throws {
        let server = try await startServer()
        let storage = HTTPCookieStorage.shared
        let cookie = try XCTUnwrap(
            HTTPCookie(properties: [
                .name: "session", .value: "abc", .domain: "127.0.0.1", .path: "/",
                .originURL: URL(string: "http://127.0.0.1/")!,
            ]))
        storage.setCookie(cookie)
        defer { storage.deleteCookie(cookie) }
        let (manager, completions) = makeManager { configuration in
            configuration.httpCookieStorage = storage
            configuration.httpAdditionalHeaders = ["X-Client": "sessionkit", "Authorization": "Basic overridden"]
        }
        var request = URLRequest(url: server.url("/auth?x=1"))
        request.setValue("Bearer token", forHTTPHeaderField: "Authorization")
        let task = manager.webSocketTask(with: request)
        task.resume()
        try await task.send(.string("x"))
        _ = try await task.receive()
        let headers = try XCTUnwrap(server.seen.upgrades.first?.headers)
        func value(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
        XCTAssertEqual(value("authorization"), "Bearer token", "the request's own field wins")
        XCTAssertEqual(value("x-client"), "sessionkit")
        XCTAssertEqual(value("cookie"), "session=abc")
        XCTAssertEqual(server.seen.upgrades.first?.target, "/auth?x=1")
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testTheManagersInterceptorAdaptsTheUpgradeRequest() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let adaptations = CallCounter()
        let task = manager.webSocketTask(with: server.url("/adapted"))
        // The interceptor as it is when the task is resumed.
        manager.interceptor = Interceptor(adapt: { request, _ in
            adaptations.increment()
            var request = request
            request.setValue("Bearer adapted", forHTTPHeaderField: "Authorization")
            return request
        })
        task.resume()
        try await task.send(.string("x"))
        _ = try await task.receive()
        let headers = try XCTUnwrap(server.seen.upgrades.first?.headers)
        XCTAssertEqual(headers.first { $0.0.lowercased() == "authorization" }?.1, "Bearer adapted")
        XCTAssertEqual(adaptations.count, 1)
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testAnAdaptersRefusalOrAMovedEndpointEndsTheTaskBeforeAnyConnection() async throws {
        struct Refused: Error {}
        let server = try await startServer()
        let (manager, completions) = makeManager()
        manager.interceptor = Interceptor(adapt: { _, _ in
            try await Task.sleep(nanoseconds: 200_000_000)  // the receive below is made while it adapts
            throw Refused()
        })
        let refused = manager.webSocketTask(with: server.url("/refused"))
        refused.resume()
        let receive = try await receive(refused)
        XCTAssertThrowsError(try receive.get(), "a receive made meanwhile fails")
        let error = try await awaitCompletion(of: refused, in: completions)
        XCTAssertTrue(error is Refused, "the adapter's own error: \(String(describing: error))")
        XCTAssertTrue(refused.error is Refused)

        manager.interceptor = Interceptor(adapt: { request, _ in
            var moved = request
            moved.url = URL(string: "ws://127.0.0.2:1/elsewhere")
            return moved
        })
        let moved = manager.webSocketTask(with: server.url("/moved"))
        moved.resume()
        let movedError = try await awaitCompletion(of: moved, in: completions)
        XCTAssertEqual(
            (movedError as NSError?)?.domain, SessionKitError.sessionDomain, "\(String(describing: movedError))")

        // A slow adapter, and the task cancelled meanwhile: it ends cancelled, the adapter's Swift task is cancelled,
        // and nothing connects afterwards.
        let adapterCancelled = OnceBox<Bool>()
        manager.interceptor = Interceptor(adapt: { request, _ in
            try? await Task.sleep(nanoseconds: 2_000_000_000)
            adapterCancelled.resolve(Task.isCancelled)
            return request
        })
        let cancelled = manager.webSocketTask(with: server.url("/cancelled"))
        cancelled.resume()
        try await Task.sleep(nanoseconds: 100_000_000)
        cancelled.cancel()
        let cancelledError = try await awaitCompletion(of: cancelled, in: completions)
        XCTAssertEqual((cancelledError as? URLError)?.code, .cancelled)
        let sawCancellation = try await adapterCancelled.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertTrue(sawCancellation, "the adapters' Swift task was cancelled with the WebSocket task")
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertTrue(server.seen.upgrades.isEmpty, "no upgrade request reached the server")
    }

    func testFragmentedTextWithAPingBetweenArrivesWholeAndThePingIsAnswered() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("fragments"))
        let received = try await task.receive()
        XCTAssertEqual(received, .string("héllo wörld"))
        try await waitUntil("the server got its pong") { server.seen.pongs == 1 }
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testSendPingCallsItsHandlerOnceThePongArrives() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        for _ in 0..<3 {
            let error: Error? = try await awaitCallback { done in task.sendPing { done($0) } }
            XCTAssertNil(error)
        }
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testServerCloseWithACodeAndReasonEndsTheTaskCleanly() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let pending = OnceBox<Result<SessionWebSocketTask.Message, Error>>()
        try await task.send(.string("close 1001 going away"))
        task.receive { pending.resolve($0) }
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
        XCTAssertEqual(task.closeCode, .goingAway)
        XCTAssertEqual(task.closeReason, Data("going away".utf8))
        let result = try await pending.value(timeout: 5, file: #filePath, line: #line)
        if case .success = result { XCTFail("a receive pending at the close succeeded") }
        try await waitUntil("the server got the echoed close") { server.seen.closeCodes == [1001] }
        let late: Error? = try await awaitCallback { done in task.send(.string("late")) { done($0) } }
        XCTAssertNotNil(late, "a send after the close fails")
        XCTAssertEqual(pending.deliveries, 1)
    }

    /// RFC 6455 7.1.1: after the closing handshake the server closes the TCP connection first, so that the server, not
    /// the client, holds TIME_WAIT. The client echoed the server's close frame and then shut its write side at once
    /// (its FIN first, so the client's port sat in TIME_WAIT for a minute); it now reads until the server closes.
    func testAfterTheClosingHandshakeTheServerClosesTheConnectionFirst() async throws {
        let server = try await startRaw(closingAfterClientClose: 0.2) { upgrade in
            RawWebSocketServer.upgradeResponse(for: upgrade)
                + RawWebSocketServer.frame(opcode: 0x8, payload: [0x03, 0xE8] + Array("bye".utf8))
        }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let error = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(error)
        XCTAssertEqual(task.closeCode, .normalClosure)
        try await waitUntil("the connection closed") { server.firstToClose() != nil }
        XCTAssertEqual(server.clientFrames().map(\.closeCode), [1000], "the close frame echoed")
        XCTAssertEqual(server.firstToClose(), .server)
    }

    func testCancelWithACloseCodeRunsTheCloseHandshake() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("up"))
        _ = try await task.receive()
        task.cancel(with: .normalClosure, reason: Data("done".utf8))
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
        XCTAssertEqual(task.closeCode, .normalClosure)
        try await waitUntil("the server got the close") { server.seen.closeCodes == [1000] }
    }

    func testCloseCodesWithoutACloseCodeCaseReadAndGoAsNumbers() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let closed = manager.webSocketTask(with: server.url())
        XCTAssertNil(closed.rawCloseCode, "nil while nothing closed")
        closed.resume()
        try await closed.send(.string("close 4001 application"))
        let closedError = try await awaitCompletion(of: closed, in: completions)
        XCTAssertNil(closedError)
        XCTAssertEqual(closed.closeCode, .invalid, "CloseCode has no case for 4001")
        XCTAssertEqual(closed.rawCloseCode, 4001)
        for (sent, expected) in [(4002, 4002), (1012, 1012), (1005, 1000), (70_000, 1000)] {
            let task = manager.webSocketTask(with: server.url())
            task.resume()
            try await task.send(.string("up"))
            _ = try await task.receive()
            task.cancel(withRawCloseCode: sent, reason: nil)
            let error = try await awaitCompletion(of: task, in: completions)
            XCTAssertNil(error)
            XCTAssertEqual(task.rawCloseCode, expected, "\(sent)")
            try await waitUntil("the server got close \(expected)") { server.seen.closeCodes.last == expected }
        }
    }

    // MARK: - Protocol violations

    /// A server that upgrades correctly, then sends `frames`; the client must fail the connection with `code`.
    private func assertFails(
        with code: URLSessionWebSocketTask.CloseCode, frames: Data, maximumMessageSize: Int? = nil,
        _ what: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let server = try await startRaw { RawWebSocketServer.upgradeResponse(for: $0) + frames }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        if let maximumMessageSize { task.maximumMessageSize = maximumMessageSize }
        task.resume()
        let result = try await receive(task)
        if case .success(let message) = result {
            XCTFail("\(what): delivered \(message) from a connection that had to fail", file: file, line: line)
        }
        _ = try await awaitCompletion(of: task, in: completions)
        XCTAssertEqual(task.closeCode, code, what, file: file, line: line)
        try await waitUntil("\(what): the client's close frame") { server.clientFrames().contains { $0.opcode == 0x8 } }
        let close = server.clientFrames().first { $0.opcode == 0x8 }
        XCTAssertEqual(close?.closeCode, code.rawValue, what, file: file, line: line)
        XCTAssertEqual(close?.masked, true, what, file: file, line: line)
        XCTAssertEqual(completions.completionCount(of: task), 1, what, file: file, line: line)
    }

    private func frame(
        _ opcode: UInt8, _ payload: [UInt8] = [], fin: Bool = true, rsv: UInt8 = 0, mask: [UInt8]? = nil
    )
        -> Data
    {
        RawWebSocketServer.frame(opcode: opcode, payload: payload, fin: fin, rsv: rsv, mask: mask)
    }

    func testAMaskedServerFrameFailsWithProtocolError() async throws {
        try await assertFails(with: .protocolError, frames: frame(0x1, Array("hi".utf8), mask: [9, 8, 7, 6]), "masked")
    }

    func testReservedBitsFailWithProtocolError() async throws {
        try await assertFails(with: .protocolError, frames: frame(0x1, Array("hi".utf8), rsv: 0b100), "RSV1")
        try await assertFails(with: .protocolError, frames: frame(0x1, Array("hi".utf8), rsv: 0b010), "RSV2")
        try await assertFails(with: .protocolError, frames: frame(0x2, [1], rsv: 0b001), "RSV3")
    }

    func testAnUnknownOpcodeFailsWithProtocolError() async throws {
        for opcode: UInt8 in [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            try await assertFails(with: .protocolError, frames: frame(opcode, [1]), "opcode \(opcode)")
        }
    }

    func testALongOrFragmentedControlFrameFailsWithProtocolError() async throws {
        try await assertFails(
            with: .protocolError, frames: frame(0x9, [UInt8](repeating: 1, count: 126)), "ping of 126")
        try await assertFails(with: .protocolError, frames: frame(0x9, [1], fin: false), "fragmented ping")
        try await assertFails(
            with: .protocolError, frames: frame(0xA, [UInt8](repeating: 1, count: 126)), "pong of 126")
        try await assertFails(
            with: .protocolError, frames: frame(0x8, [0x03, 0xE8] + [UInt8](repeating: 0x61, count: 124)),
            "close of 126")
        try await assertFails(with: .protocolError, frames: frame(0xA, [1], fin: false), "fragmented pong")
        try await assertFails(with: .protocolError, frames: frame(0x8, [0x03, 0xE8], fin: false), "fragmented close")
        try await assertFails(
            with: .protocolError,
            frames: frame(0x1, Array("a".utf8), fin: false) + frame(0x9, [1], fin: false) + frame(0x0, Array("b".utf8)),
            "a fragmented ping between the fragments of a message")
    }

    func testContinuationErrorsFailWithProtocolError() async throws {
        try await assertFails(with: .protocolError, frames: frame(0x0, Array("x".utf8)), "continuation first")
        try await assertFails(
            with: .protocolError, frames: frame(0x1, Array("a".utf8), fin: false) + frame(0x1, Array("b".utf8)),
            "new message before the last fragment")
        try await assertFails(
            with: .protocolError, frames: frame(0x1, Array("a".utf8), fin: false) + frame(0x2, [1]),
            "a binary message inside a fragmented text message")
    }

    func testANonMinimalOrNegativeLengthFailsWithProtocolError() async throws {
        try await assertFails(
            with: .protocolError, frames: Data([0x81, 126, 0x00, 0x05] + Array("hello".utf8)),
            "5 bytes in a 16-bit length")
        try await assertFails(
            with: .protocolError,
            frames: Data([0x82, 127, 0, 0, 0, 0, 0, 0, 0x01, 0x00] + [UInt8](repeating: 1, count: 256)),
            "256 bytes in a 64-bit length")
        try await assertFails(
            with: .protocolError, frames: Data([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0x01, 1]),
            "a 64-bit length with the most significant bit set")
    }

    func testInvalidUTF8FailsWithInvalidFramePayloadData() async throws {
        try await assertFails(with: .invalidFramePayloadData, frames: frame(0x1, [0x61, 0xC0, 0xAF]), "overlong")
        try await assertFails(
            with: .invalidFramePayloadData, frames: frame(0x1, [0x61, 0xED], fin: false) + frame(0x0, [0xA0, 0x80]),
            "a surrogate split across fragments")
        try await assertFails(
            with: .invalidFramePayloadData,
            frames: frame(0x1, [0x61, 0xF0], fin: false) + frame(0x9, [1]) + frame(0x0, [0x9F], fin: false)
                + frame(0x0, [0x98, 0x80, 0xFF]),
            "a four-byte character split across three fragments and a ping, then a bad byte")
        try await assertFails(
            with: .invalidFramePayloadData, frames: frame(0x1, [0x61, 0xE2], fin: false) + frame(0x0, [0x82]),
            "a message ending inside a code point")
    }

    func testACloseFrameWithAOneBytePayloadOrANonUTF8ReasonFails() async throws {
        try await assertFails(with: .protocolError, frames: frame(0x8, [0x03]), "a one-byte close payload")
        try await assertFails(
            with: .invalidFramePayloadData, frames: frame(0x8, [0x03, 0xE8, 0x61, 0xFF]), "a reason that is not UTF-8")
    }

    func testAMessageOverTheLimitFailsWithMessageTooBig() async throws {
        try await assertFails(
            with: .messageTooBig, frames: frame(0x2, [UInt8](repeating: 1, count: 2_000)), maximumMessageSize: 1_000,
            "one frame")
        try await assertFails(
            with: .messageTooBig,
            frames: frame(0x2, [UInt8](repeating: 1, count: 600), fin: false)
                + frame(0x0, [UInt8](repeating: 1, count: 600)),
            maximumMessageSize: 1_000, "fragments")
    }

    func testACloseFrameWithAReservedCodeFailsWithProtocolError() async throws {
        try await assertFails(with: .protocolError, frames: frame(0x8, [0x03, 0xED]), "close with 1005")
    }

    func testMessagesBeforeAViolationAreDeliveredAndNothingAfter() async throws {
        let server = try await startRaw { upgrade in
            RawWebSocketServer.upgradeResponse(for: upgrade)
                + RawWebSocketServer.frame(opcode: 0x1, payload: Array("first".utf8))
                + RawWebSocketServer.frame(opcode: 0x1, payload: [0xFF])
        }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let received = try await task.receive()
        XCTAssertEqual(received, .string("first"))
        let second = try await receive(task)
        if case .success = second { XCTFail("invalid text delivered") }
        _ = try await awaitCompletion(of: task, in: completions)
        XCTAssertEqual(task.closeCode, .invalidFramePayloadData)
    }

    // MARK: - Bad handshakes

    private func assertHandshakeRefused(
        _ what: String, protocols: [String] = [], compression: Bool = true, file: StaticString = #filePath,
        line: UInt = #line, _ answer: @escaping @Sendable (RawWebSocketServer.Upgrade) -> Data
    ) async throws {
        let server = try await startRaw { upgrade in
            answer(upgrade) + RawWebSocketServer.frame(opcode: 0x1, payload: Array("must not arrive".utf8))
        }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url(), protocols: protocols)
        task.isCompressionEnabled = compression
        task.resume()
        let sent: Error? = try await awaitCallback { done in task.send(.string("queued")) { done($0) } }
        XCTAssertNotNil(sent, what, file: file, line: line)
        let result = try await receive(task)
        if case .success = result { XCTFail("\(what): a message after a refused handshake", file: file, line: line) }
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .badServerResponse, what, file: file, line: line)
        XCTAssertNotNil(task.response, "\(what): the refusal is the task's response", file: file, line: line)
        XCTAssertNil(task.negotiatedProtocol, what, file: file, line: line)
        XCTAssertEqual(server.upgrades.count, 1, what, file: file, line: line)
        XCTAssertTrue(
            server.clientFrames().isEmpty, "\(what): no frame after a refused handshake", file: file, line: line)
    }

    /// A refused upgrade's answer is the task's response, as URLSession keeps it: a 401 and its challenge can be told
    /// from a broken 101.
    func testARefusedUpgradesAnswerIsTheTasksResponse() async throws {
        let server = try await startRaw { upgrade in
            RawWebSocketServer.upgradeResponse(
                for: upgrade, status: 401, fields: ["WWW-Authenticate": "Bearer realm=\"chat\""])
        }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .badServerResponse)
        let response = try XCTUnwrap(task.response as? HTTPURLResponse)
        XCTAssertEqual(response.statusCode, 401)
        XCTAssertEqual(response.value(forHTTPHeaderField: "WWW-Authenticate"), "Bearer realm=\"chat\"")
    }

    func testAWrongAcceptKeyIsRefused() async throws {
        try await assertHandshakeRefused("wrong accept") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Accept": "dGhlIHNhbXBsZSBub25jZQ=="])
        }
    }

    func testAnAnswerWithoutUpgradeIsRefused() async throws {
        try await assertHandshakeRefused("no Upgrade") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Upgrade": nil])
        }
        try await assertHandshakeRefused("no Connection") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Connection": nil])
        }
        try await assertHandshakeRefused("status 200") { RawWebSocketServer.upgradeResponse(for: $0, status: 200) }
        try await assertHandshakeRefused("Upgrade: h2c") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Upgrade": "h2c"])
        }
        try await assertHandshakeRefused("Connection: keep-alive") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Connection": "keep-alive"])
        }
        try await assertHandshakeRefused("no Sec-WebSocket-Accept") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Accept": nil])
        }
    }

    func testAnUnofferedSubprotocolIsRefused() async throws {
        try await assertHandshakeRefused("unoffered subprotocol", protocols: ["chat"]) {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Protocol": "other"])
        }
        try await assertHandshakeRefused("a subprotocol when none was offered") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Protocol": "chat"])
        }
        try await assertHandshakeRefused("two subprotocols", protocols: ["chat", "v2"]) {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Protocol": "chat, v2"])
        }
    }

    func testAnUnofferedExtensionIsRefused() async throws {
        try await assertHandshakeRefused("unoffered extension") {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Extensions": "x-webkit-deflate-frame"])
        }
        try await assertHandshakeRefused("permessage-deflate with compression off", compression: false) {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Extensions": "permessage-deflate"])
        }
    }

    func testAnUnofferedOrMalformedDeflateParameterIsRefused() async throws {
        for answer in [
            "permessage-deflate; x_unknown=1", "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; client_max_window_bits", "permessage-deflate; server_max_window_bits=010",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
            "permessage-deflate, permessage-deflate",
        ] {
            try await assertHandshakeRefused(answer) {
                RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Extensions": answer])
            }
        }
    }

    func testTheUpgradeRequestOffersDeflateAndEveryFrameIsMaskedWithAFreshKey() async throws {
        let server = try await startRaw { RawWebSocketServer.upgradeResponse(for: $0) }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        for index in 0..<20 { try await task.send(.string("message \(index)")) }
        try await waitUntil("20 frames") { server.clientFrames().count == 20 }
        let frames = server.clientFrames()
        XCTAssertTrue(frames.allSatisfy(\.masked))
        XCTAssertEqual(frames.map { String(decoding: $0.payload, as: UTF8.self) }, (0..<20).map { "message \($0)" })
        XCTAssertGreaterThan(Set(frames.map(\.maskKey)).count, 15, "keys are fresh")
        let upgrade = try XCTUnwrap(server.upgrades.first)
        XCTAssertEqual(upgrade.value(of: "Sec-WebSocket-Extensions"), "permessage-deflate; client_max_window_bits")
        XCTAssertFalse(task.isCompressed, "the server accepted no extension: the frames above went uncompressed")
        XCTAssertEqual(upgrade.value(of: "Sec-WebSocket-Version"), "13")
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    // MARK: - The manager's open and close closures

    /// Records the manager's `webSocketTaskDidOpen`, `webSocketTaskDidClose` and `taskDidComplete` calls in order
    /// (the completion observer's closure still runs), with whether each ran on the delegate queue.
    private func recordWebSocketEvents(of manager: URLSessionManager) -> LockedBox<[String]> {
        let events = LockedBox<[String]>([])
        @Sendable func record(_ event: String) {
            let queue = TaskCompletionObserver.isOnDelegateQueue ? "" : " (off the delegate queue)"
            events.write { $0.append(event + queue) }
        }
        manager.webSocketTaskDidOpen = { _, _, negotiated in record("open \(negotiated ?? "none")") }
        manager.webSocketTaskDidClose = { _, _, code, reason in
            record("close \(code.rawValue) \(reason.map { String(decoding: $0, as: UTF8.self) } ?? "none")")
        }
        let completion = manager.taskDidComplete
        manager.taskDidComplete = { session, task, error in
            record(error == nil ? "complete" : "complete with an error")
            completion?(session, task, error)
        }
        return events
    }

    func testOpenAndCloseClosuresRunOnceWithTheProtocolAndTheServersCloseFrame() async throws {
        let server = try await startServer(protocols: ["v1.chat"])
        let (manager, completions) = makeManager()
        let events = recordWebSocketEvents(of: manager)
        let task = manager.webSocketTask(with: server.url(), protocols: ["v1.chat"])
        task.resume()
        try await task.send(.string("close 1001 going away"))
        _ = try await awaitCompletion(of: task, in: completions)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(events.wrappedValue, ["open v1.chat", "close 1001 going away", "complete"])
    }

    func testCloseClosureReportsTheServersAnswerToOurClose() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let events = recordWebSocketEvents(of: manager)
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("up"))
        _ = try await task.receive()
        task.cancel(with: .normalClosure, reason: Data("done".utf8))
        _ = try await awaitCompletion(of: task, in: completions)
        try await Task.sleep(nanoseconds: 100_000_000)
        // The NIO server answers with the code alone.
        XCTAssertEqual(events.wrappedValue, ["open none", "close 1000 none", "complete"])
    }

    func testNoOpenForARefusedHandshakeAndNoCloseWithoutTheServersCloseFrame() async throws {
        let refusing = try await startRaw {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Accept": "dGhlIHNhbXBsZSBub25jZQ=="])
        }
        let violating = try await startRaw {
            RawWebSocketServer.upgradeResponse(for: $0) + RawWebSocketServer.frame(opcode: 0x1, payload: [0xFF])
        }
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let events = recordWebSocketEvents(of: manager)
        let refused = manager.webSocketTask(with: refusing.url())
        refused.resume()
        _ = try await awaitCompletion(of: refused, in: completions)
        let failed = manager.webSocketTask(with: violating.url())
        failed.resume()
        _ = try await awaitCompletion(of: failed, in: completions)
        XCTAssertEqual(failed.closeCode, .invalidFramePayloadData)
        let cancelled = manager.webSocketTask(with: server.url())
        cancelled.resume()
        try await cancelled.send(.string("up"))
        _ = try await cancelled.receive()
        cancelled.cancel()
        _ = try await awaitCompletion(of: cancelled, in: completions)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(
            events.wrappedValue,
            [
                "complete with an error", "open none", "complete with an error", "open none",
                "complete with an error",
            ])
    }

    // MARK: - Lifecycle

    func testCancelCallsEachPendingHandlerOnce() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("open"))
        _ = try await task.receive()
        let receives = (0..<5).map { _ in OnceBox<Result<SessionWebSocketTask.Message, Error>>() }
        for box in receives { task.receive { box.resolve($0) } }
        let ping = OnceBox<Error?>()
        task.cancel()
        task.sendPing { ping.resolve($0) }
        task.cancel()
        for box in receives {
            let result = try await box.value(timeout: 5, file: #filePath, line: #line)
            guard case .failure(let error) = result else { return XCTFail("a pending receive succeeded") }
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
        }
        let pong = try await ping.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertNotNil(pong)
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .cancelled)
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertEqual(receives.map(\.deliveries), [1, 1, 1, 1, 1])
        XCTAssertEqual(ping.deliveries, 1)
        XCTAssertEqual(completions.completionCount(of: task), 1)
    }

    func testSuspendHoldsTheConnectionUntilResumed() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("open"))
        _ = try await task.receive()
        task.suspend()
        XCTAssertEqual(task.state, .suspended)
        let echoed = OnceBox<Result<SessionWebSocketTask.Message, Error>>()
        task.send(.string("held")) { _ in }
        task.receive { echoed.resolve($0) }
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertEqual(echoed.deliveries, 0, "nothing moves while suspended")
        task.resume()
        XCTAssertEqual(task.state, .running)
        let result = try await echoed.value(timeout: 5, file: #filePath, line: #line)
        XCTAssertEqual(try result.get(), .string("held"))
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testCancellingTheAwaitingSwiftTaskCancelsTheWebSocketTask() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let waiting = Task { try await task.receive() }
        try await Task.sleep(nanoseconds: 100_000_000)
        waiting.cancel()
        do {
            _ = try await waiting.value
            XCTFail("received after cancellation")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
        }
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .cancelled)
    }

    func testInvalidatingTheSessionCancelsOpenWebSocketTasks() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        try await task.send(.string("open"))
        _ = try await task.receive()
        let pending = OnceBox<Result<SessionWebSocketTask.Message, Error>>()
        task.receive { pending.resolve($0) }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .cancelled)
        if case .success = try await pending.value(timeout: 5, file: #filePath, line: #line) {
            XCTFail("a pending receive succeeded")
        }
        let later = manager.webSocketTask(with: server.url())
        XCTAssertFalse(manager.tasks.contains { $0 === later }, "a task of an invalidated session is not listed")
        later.resume()
        let sent: Error? = try await awaitCallback { done in later.send(.string("x")) { done($0) } }
        XCTAssertNotNil(sent)
    }

    func testANonWebSocketURLFailsAtResume() async throws {
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: URL(string: "ftp://127.0.0.1/")!)
        task.resume()
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNotNil(completion)
        let result = try await receive(task)
        if case .success = result { XCTFail("received on a bad URL") }
    }

    // MARK: - Load

    func testHundredConcurrentSocketsEachEchoAndCompleteOnce() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let tasks = (0..<100).map { _ in manager.webSocketTask(with: server.url()) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, task) in tasks.enumerated() {
                group.addTask {
                    task.resume()
                    for round in 0..<5 {
                        let message = "socket \(index) round \(round)"
                        try await task.send(.string(message))
                        let reply = try await task.receive()
                        XCTAssertEqual(reply, .string(message))
                    }
                    task.cancel(with: .normalClosure, reason: nil)
                }
            }
            try await group.waitForAll()
        }
        for task in tasks {
            let completion = try await awaitCompletion(of: task, in: completions)
            XCTAssertNil(completion)
            XCTAssertEqual(completions.completionCount(of: task), 1)
        }
        XCTAssertEqual(Set(tasks.map(\.taskIdentifier)).count, 100)
        XCTAssertEqual(server.seen.upgrades.count, 100)
        XCTAssertEqual(completions.offQueueCallbacks, 0)
        try await waitUntil("every task unlisted") { manager.tasks.isEmpty }
    }

    func testTenThousandMessagesOf64KiBKeepMemoryFlat() async throws {
        try await assertMemoryStaysFlat(compressed: false)
    }

    func testTenThousandCompressedMessagesOf64KiBKeepMemoryFlat() async throws {
        try await assertMemoryStaysFlat(compressed: true)
    }

    /// 10,000 messages of 64 KiB echoed (625 MiB each way) through one task, 16 in flight, with permessage-deflate
    /// negotiated or not: resident memory after the first 1,000 may not grow by 64 MiB, a tenth of what flowed, which
    /// a leak of anything per message (a message, a frame, a buffer) would pass.
    private func assertMemoryStaysFlat(
        compressed: Bool, file: StaticString = #filePath, line: UInt = #line
    )
        async throws
    {
        let server = try await startServer(deflate: compressed ? .init() : nil)
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.isCompressionEnabled = compressed
        task.resume()
        // Compressible, and different from one message to the next.
        var payload = Data((0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 % 251) })
        let total = 10_000
        let warmUp = 1_000
        let inFlight = 16
        let before = Self.residentBytes()
        var baseline = 0
        var peak = 0
        let started = Date()
        for index in 0..<(total + inFlight) {
            if index < total {
                payload.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(index), as: UInt32.self) }
                try await task.send(.data(payload))
            }
            if index >= inFlight {
                let received = try await task.receive()
                guard case .data(let data) = received, data.count == payload.count,
                    data.prefix(4) == withUnsafeBytes(of: UInt32(index - inFlight), { Data($0) }),
                    data.dropFirst(4) == payload.dropFirst(4)
                else { return XCTFail("echo \(index - inFlight) differs", file: file, line: line) }
            }
            if index == warmUp { baseline = Self.residentBytes() }
            if index > warmUp, index % 250 == 0 { peak = max(peak, Self.residentBytes()) }
        }
        let after = Self.residentBytes()
        peak = max(peak, after)
        XCTAssertEqual(task.isCompressed, compressed, file: file, line: line)
        XCTAssertEqual(server.seen.compressedMessages, compressed ? total : 0, file: file, line: line)
        let growth = peak - baseline
        print(
            "websocket\(compressed ? " (permessage-deflate)" : ""): \(total) messages of 64 KiB each way "
                + "(\((total * 64) >> 10) MiB) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s; "
                + "RSS before \(before >> 20) MiB, after \(warmUp) messages \(baseline >> 20) MiB, peak "
                + "\(peak >> 20) MiB, after \(after >> 20) MiB: growth \(growth >> 10) KiB")
        XCTAssertLessThan(growth, 64 << 20, "grew by \(growth >> 20) MiB", file: file, line: line)
        task.cancel(with: .normalClosure, reason: nil)
        _ = try await awaitCompletion(of: task, in: completions)
    }

    /// Resident memory after glibc's `malloc_trim(0)` gave the heap's free pages back: what earlier tests freed stays
    /// resident otherwise, and a leak could fill it without a byte of growth. (Swift's Glibc module does not declare
    /// `malloc_trim`: it is found by name.)
    private static func residentBytes() -> Int {
        typealias Trim = @convention(c) (Int) -> Int32
        if let trim = dlsym(nil, "malloc_trim") { _ = unsafeBitCast(trim, to: Trim.self)(0) }
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
