import Foundation
import XCTest

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `WebSocketLifecycle` without I/O: the handshake, the order of deliveries, the close handshake both ways, the
/// failure codes, one completion per operation and one finish, and the events that make no sense in a phase.
final class WebSocketLifecycleTests: XCTestCase {
    private typealias Lifecycle = WebSocketLifecycle
    private static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    private func makeLifecycle(limit: Int = 1 << 20) -> Lifecycle {
        Lifecycle(
            handshake: WebSocketHandshake(url: URL(string: "ws://h/")!, key: Self.key, protocols: [], fields: []),
            maximumMessageSize: limit, handshakeTimeout: 5, closeTimeout: 3)
    }

    private let head = Data(
        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n").utf8)

    private func frame(_ opcode: UInt8, _ payload: [UInt8] = [], fin: Bool = true) -> Data {
        Data([(fin ? 0x80 : 0) | opcode, UInt8(payload.count)] + payload)
    }

    /// A lifecycle whose handshake succeeded.
    private func open(limit: Int = 1 << 20) -> Lifecycle {
        var lifecycle = makeLifecycle(limit: limit)
        _ = lifecycle.resume()
        let actions = lifecycle.received(head, atEOF: false, error: nil)
        XCTAssertTrue(actions.contains { if case .opened = $0 { return true } else { return false } })
        XCTAssertEqual(lifecycle.phase, .open)
        return lifecycle
    }

    private func finishes(_ actions: [Lifecycle.Action]) -> [URLError?] {
        actions.compactMap { if case .finish(let error) = $0 { return .some(error) } else { return nil } }
    }

    private func closeFrames(_ actions: [Lifecycle.Action]) -> [Data] {
        actions.compactMap { action in
            if case .write(let frame, _) = action, frame.opcode == .close { return frame.payload }
            return nil
        }
    }

    func testResumeConnectsAndReadsTheAnswerOnce() {
        var lifecycle = makeLifecycle()
        let actions = lifecycle.resume()
        guard case .connect(let request)? = actions.first else { return XCTFail("no connect") }
        XCTAssertTrue(String(decoding: request, as: UTF8.self).contains("Sec-WebSocket-Key: \(Self.key)"))
        XCTAssertEqual(actions.last, .read(timeout: 5), "the handshake's read has the handshake timeout")
        XCTAssertEqual(lifecycle.resume(), [], "a second resume does nothing")
    }

    func testAnAdaptedUpgradeRequestIsSentOnceTheAdaptersAnswer() {
        var lifecycle = makeLifecycle()
        XCTAssertEqual(lifecycle.resume(adapts: true), [.adapt], "nothing connects while the request is adapted")
        XCTAssertEqual(lifecycle.phase, .adapting)
        XCTAssertEqual(lifecycle.resume(adapts: true), [], "a second resume does nothing")
        XCTAssertEqual(lifecycle.send(.string("early"), id: 1), [], "queued until the connection opens")
        XCTAssertEqual(lifecycle.received(head, atEOF: false, error: nil), [], "no read runs while adapting")
        let adapted = WebSocketHandshake(
            url: URL(string: "ws://h/")!, key: Self.key, protocols: [], fields: [("Authorization", "Bearer t")])
        let actions = lifecycle.adapted(adapted)
        guard case .connect(let request)? = actions.first else { return XCTFail("no connect: \(actions)") }
        XCTAssertTrue(String(decoding: request, as: UTF8.self).contains("Authorization: Bearer t\r\n"))
        XCTAssertEqual(lifecycle.phase, .handshaking)
        XCTAssertEqual(lifecycle.adapted(adapted), [], "the adapters answer once")
        XCTAssertEqual(lifecycle.adaptationFailed(URLError(.cancelled)), [], "a late failure changes nothing")
        let opened = lifecycle.received(head, atEOF: false, error: nil)
        XCTAssertTrue(
            opened.contains(.write(WebSocketFrame(opcode: .text, payload: Data("early".utf8)), .message(id: 1))))
    }

    func testARefusedAdaptationOrACancelWhileAdaptingEndsTheTaskWithoutAConnection() {
        var refused = makeLifecycle()
        _ = refused.receive(id: 1)
        _ = refused.resume(adapts: true)
        let actions = refused.adaptationFailed(URLError(.userAuthenticationRequired))
        XCTAssertEqual(finishes(actions).first??.code, .userAuthenticationRequired)
        XCTAssertTrue(actions.contains { if case .deliver(1, .failure) = $0 { return true } else { return false } })
        XCTAssertFalse(actions.contains(.abort), "nothing was connected")
        XCTAssertEqual(refused.adapted(makeHandshake()), [], "an answer after the end connects nothing")

        var cancelled = makeLifecycle()
        _ = cancelled.resume(adapts: true)
        let cancel = cancelled.cancel()
        XCTAssertEqual(finishes(cancel).first??.code, .cancelled)
        XCTAssertFalse(cancel.contains(.abort))
        XCTAssertEqual(cancelled.adapted(makeHandshake()), [])
        XCTAssertEqual(cancelled.phase, .closed)
    }

    private func makeHandshake() -> WebSocketHandshake {
        WebSocketHandshake(url: URL(string: "ws://h/")!, key: Self.key, protocols: [], fields: [])
    }

    func testAnswerSplitAcrossReadsAndFramesInTheSameReadAreKept() {
        var lifecycle = makeLifecycle()
        _ = lifecycle.resume()
        XCTAssertEqual(lifecycle.received(head.prefix(10), atEOF: false, error: nil), [.read(timeout: 5)])
        let rest = Data(head.dropFirst(10)) + frame(0x1, Array("hi".utf8))
        let actions = lifecycle.received(rest, atEOF: false, error: nil)
        XCTAssertEqual(lifecycle.phase, .open)
        XCTAssertEqual(lifecycle.receive(id: 1), [.deliver(receive: 1, .success(.string("hi")))])
        XCTAssertEqual(actions.last, .read(timeout: 0), "an open connection reads without a timeout")
    }

    func testOperationsQueuedBeforeTheHandshakeRunOnceItSucceeds() {
        var lifecycle = makeLifecycle()
        XCTAssertEqual(lifecycle.send(.string("early"), id: 1), [])
        XCTAssertEqual(lifecycle.receive(id: 2), [])
        _ = lifecycle.resume()
        let actions = lifecycle.received(head, atEOF: false, error: nil)
        XCTAssertTrue(
            actions.contains(.write(WebSocketFrame(opcode: .text, payload: Data("early".utf8)), .message(id: 1))))
        XCTAssertEqual(lifecycle.written(.message(id: 1), error: nil), [.completeSend(id: 1, nil)])
        XCTAssertEqual(lifecycle.written(.message(id: 1), error: nil), [], "a send completes once")
    }

    func testRefusedHandshakeFailsQueuedOperationsAndFinishesOnce() {
        var lifecycle = makeLifecycle()
        _ = lifecycle.send(.string("x"), id: 1)
        _ = lifecycle.receive(id: 2)
        _ = lifecycle.sendPing(id: 3)
        _ = lifecycle.resume()
        let bad = Data("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
        let actions = lifecycle.received(bad, atEOF: false, error: nil)
        XCTAssertEqual(lifecycle.phase, .closed)
        XCTAssertEqual(
            actions.filter { if case .deliver(2, .failure) = $0 { return true } else { return false } }.count, 1)
        XCTAssertEqual(
            actions.filter { if case .completeSend(1, _?) = $0 { return true } else { return false } }.count, 1)
        XCTAssertEqual(
            actions.filter { if case .completePing(3, _?) = $0 { return true } else { return false } }.count, 1)
        XCTAssertEqual(finishes(actions).count, 1)
        XCTAssertEqual(finishes(actions).first??.code, .badServerResponse)
        XCTAssertTrue(actions.contains(.abort))
        XCTAssertTrue(closeFrames(actions).isEmpty, "no close frame before the connection opened")
        XCTAssertEqual(lifecycle.received(head, atEOF: false, error: nil), [], "bytes after the end change nothing")
        XCTAssertEqual(lifecycle.cancel(), [], "nor does a cancel")
    }

    func testAWrongPinFailsTheHandshakeWriteWithThePolicysError() {
        var lifecycle = makeLifecycle()
        _ = lifecycle.resume()
        let refusal = URLError(.serverCertificateUntrusted)
        let actions = lifecycle.written(.handshake, error: refusal)
        XCTAssertEqual(finishes(actions), [refusal])
        XCTAssertEqual(
            lifecycle.received(nil, atEOF: false, error: refusal), [], "the read's failure after it is the same end")
    }

    func testHandshakeTimeoutFailsWithTimedOut() {
        var lifecycle = makeLifecycle()
        _ = lifecycle.resume()
        let actions = lifecycle.received(nil, atEOF: false, error: URLError(.timedOut))
        XCTAssertEqual(finishes(actions).first??.code, .timedOut)
    }

    func testMessagesWaitForReceivesInOrder() {
        var lifecycle = open()
        _ = lifecycle.received(frame(0x1, Array("a".utf8)) + frame(0x2, [1, 2]), atEOF: false, error: nil)
        XCTAssertEqual(lifecycle.receive(id: 1), [.deliver(receive: 1, .success(.string("a")))])
        XCTAssertEqual(lifecycle.receive(id: 2).first, .deliver(receive: 2, .success(.data(Data([1, 2])))))
        XCTAssertEqual(lifecycle.receive(id: 3), [])
        let actions = lifecycle.received(frame(0x1, Array("b".utf8)), atEOF: false, error: nil)
        XCTAssertEqual(actions.first, .deliver(receive: 3, .success(.string("b"))))
    }

    func testReadingPausesWhileUnreceivedMessagesFillTheInbox() {
        var lifecycle = open(limit: 1000)
        let big = Data([0x82, 126, 0x03, 0xE8]) + Data(count: 1000)
        var paused = false
        for _ in 0..<100 {
            let actions = lifecycle.received(big, atEOF: false, error: nil)
            if !actions.contains(.read(timeout: 0)) {
                paused = true
                break
            }
        }
        XCTAssertTrue(paused, "reading stops once the inbox holds the limit")
        XCTAssertLessThanOrEqual(lifecycle.bufferedByteCount, 64 * 1024 + 1004)
        let actions = lifecycle.receive(id: 1)
        XCTAssertTrue(
            actions.contains(.read(timeout: 0)) || lifecycle.bufferedByteCount >= 64 * 1024, "a receive resumes it")
    }

    func testPingsAreAnsweredWithTheirPayload() {
        var lifecycle = open()
        let actions = lifecycle.received(frame(0x9, Array("abc".utf8)), atEOF: false, error: nil)
        XCTAssertEqual(
            actions.first, .write(WebSocketFrame(opcode: .pong, payload: Data("abc".utf8)), .pong(bytes: 9)))
    }

    func testReadingPausesWhileUnsentPongsPileUp() {
        var lifecycle = open()
        // A peer that pings and never reads: each ping read asks for a pong, whose write never completes.
        let pings = Data((0..<100).flatMap { _ in frame(0x9, Array(repeating: 0x70, count: 125)) })
        var pongs: [Int] = []
        var reads = 0
        for _ in 0..<100 {
            let actions = lifecycle.received(pings, atEOF: false, error: nil)
            for case .write(_, .pong(let bytes)) in actions { pongs.append(bytes) }
            guard actions.contains(.read(timeout: 0)) else { break }
            reads += 1
        }
        XCTAssertLessThan(reads, 100, "reading stops while pongs wait to be sent")
        let unsent = pongs.reduce(0, +)
        XCTAssertGreaterThanOrEqual(unsent, WebSocketLifecycle.pongBacklogLimit)
        XCTAssertLessThan(unsent, WebSocketLifecycle.pongBacklogLimit + 100 * 131, "one read's pongs past the limit")
        // As the pongs are sent, reading resumes once the backlog is under the limit.
        var resumed = false
        for bytes in pongs where !resumed {
            resumed = lifecycle.written(.pong(bytes: bytes), error: nil).contains(.read(timeout: 0))
        }
        XCTAssertTrue(resumed, "a sent pong resumes reading")
        XCTAssertEqual(lifecycle.phase, .open)
    }

    func testAPongAnswersItsPingAndEveryEarlierOne() {
        var lifecycle = open()
        var payloads: [Data] = []
        for id in 1...3 {
            for case .write(let frame, .ping(id)) in lifecycle.sendPing(id: id) { payloads.append(frame.payload) }
        }
        XCTAssertEqual(payloads.count, 3)
        XCTAssertEqual(
            lifecycle.received(frame(0xA, Array("stray".utf8)), atEOF: false, error: nil), [.read(timeout: 0)])
        let actions = lifecycle.received(frame(0xA, [UInt8](payloads[1])), atEOF: false, error: nil)
        XCTAssertEqual(Array(actions.prefix(2)), [.completePing(id: 1, nil), .completePing(id: 2, nil)])
        let end = lifecycle.cancel()
        XCTAssertEqual(end.filter { if case .completePing(3, _?) = $0 { return true } else { return false } }.count, 1)
    }

    /// An unsolicited pong (RFC 6455 5.5.3: a heartbeat) answers no ping, even when its 8-byte payload (a timestamp,
    /// say) reads as a number larger than every ping's.
    func testAnUnsolicitedPongAnswersNoPing() {
        var lifecycle = open()
        var payloads: [Data] = []
        for case .write(let frame, .ping(1)) in lifecycle.sendPing(id: 1) { payloads.append(frame.payload) }
        let timestamp: [UInt8] = [0, 0, 1, 0x8C, 0x4E, 0x2A, 0x11, 0x07]
        XCTAssertEqual(lifecycle.received(frame(0xA, timestamp), atEOF: false, error: nil), [.read(timeout: 0)])
        let actions = lifecycle.received(frame(0xA, [UInt8](payloads[0])), atEOF: false, error: nil)
        XCTAssertEqual(actions.first, .completePing(id: 1, nil), "the ping's own pong answers it")
    }

    func testPeerCloseIsEchoedAndEndsWithoutError() {
        var lifecycle = open()
        _ = lifecycle.receive(id: 1)
        let actions = lifecycle.received(frame(0x8, [0x03, 0xE9] + Array("bye".utf8)), atEOF: false, error: nil)
        XCTAssertEqual(closeFrames(actions), [Data([0x03, 0xE9])], "the code echoed")
        XCTAssertEqual(lifecycle.closeCode, 1001)
        XCTAssertEqual(lifecycle.closeReason, Data("bye".utf8))
        XCTAssertTrue(actions.contains { if case .deliver(1, .failure) = $0 { return true } else { return false } })
        XCTAssertEqual(finishes(actions), [nil])
        XCTAssertTrue(actions.contains(.shutdown))
        XCTAssertEqual(Array(actions.suffix(2)), [.closed(code: 1001, reason: Data("bye".utf8)), .finish(nil)])
        XCTAssertEqual(lifecycle.send(.string("late"), id: 2).count, 1, "a send after the close fails at once")
    }

    func testOurCloseWaitsForThePeersAndFailsPendingReceives() {
        var lifecycle = open()
        _ = lifecycle.receive(id: 1)
        let actions = lifecycle.close(code: 1000, reason: Data("done".utf8))
        XCTAssertEqual(closeFrames(actions), [Data([0x03, 0xE8]) + Data("done".utf8)])
        XCTAssertEqual(
            actions.filter {
                if case .deliver(1, .failure(let e)) = $0 { return e.code == .cancelled } else { return false }
            }.count, 1)
        XCTAssertTrue(actions.contains(.scheduleCloseTimeout(3)))
        XCTAssertEqual(lifecycle.phase, .closing)
        XCTAssertEqual(lifecycle.close(code: 1000, reason: nil), [], "a second close does nothing")
        XCTAssertEqual(
            lifecycle.received(frame(0x1, Array("ignored".utf8)), atEOF: false, error: nil), [.read(timeout: 0)])
        let reply = lifecycle.received(frame(0x8, [0x03, 0xE8]), atEOF: false, error: nil)
        XCTAssertEqual(closeFrames(reply), [], "no second close frame")
        XCTAssertEqual(finishes(reply), [nil])
        XCTAssertEqual(Array(reply.suffix(2)), [.closed(code: 1000, reason: nil), .finish(nil)], "the peer's frame")
        XCTAssertEqual(lifecycle.closeCode, 1000, "the code we sent")
        XCTAssertEqual(lifecycle.closeTimedOut(), [], "a timeout after the close completed does nothing")
    }

    /// Our close frame's answer is read even when unreceived messages filled the inbox and reading had paused: what
    /// arrives after our close is dropped, and the peer's close frame ends the task (RFC 6455 7.1.1), not the timeout.
    func testOurCloseReadsThePeersCloseWhenTheInboxIsFull() {
        var lifecycle = open(limit: 1000)
        let big = Data([0x82, 126, 0x03, 0xE8]) + Data(count: 1000)
        var paused = false
        for _ in 0..<100 where !paused {
            paused = !lifecycle.received(big, atEOF: false, error: nil).contains(.read(timeout: 0))
        }
        XCTAssertTrue(paused, "reading paused on a full inbox")
        let actions = lifecycle.close(code: 1000, reason: nil)
        XCTAssertTrue(actions.contains(.read(timeout: 0)), "the peer's close is read")
        XCTAssertEqual(
            lifecycle.received(big, atEOF: false, error: nil), [.read(timeout: 0)], "dropped; reading goes on")
        let reply = lifecycle.received(frame(0x8, [0x03, 0xE8]), atEOF: false, error: nil)
        XCTAssertEqual(Array(reply.suffix(2)), [.closed(code: 1000, reason: nil), .finish(nil)])
    }

    func testOurCloseTimesOutWhenThePeerNeverAnswers() {
        var lifecycle = open()
        _ = lifecycle.close(code: 1000, reason: nil)
        let actions = lifecycle.closeTimedOut()
        XCTAssertEqual(actions, [.abort, .finish(nil)])
    }

    func testViolationsFailWithTheirCodeAndDeliverNothingOfTheFrame() {
        let cases: [(String, Data, UInt16, URLError.Code)] = [
            ("masked", Data([0x81, 0x82, 1, 2, 3, 4, 0x60, 0x6B]), 1002, .badServerResponse),
            ("bad UTF-8", frame(0x1, [0xFF]), 1007, .badServerResponse),
            ("too big", Data([0x82, 126, 0x01, 0x00]) + Data(count: 256), 1009, .dataLengthExceedsMaximum),
            ("unknown opcode", frame(0x3), 1002, .badServerResponse),
        ]
        for (name, bytes, code, errorCode) in cases {
            var lifecycle = open(limit: 200)
            _ = lifecycle.receive(id: 1)
            let actions = lifecycle.received(bytes, atEOF: false, error: nil)
            XCTAssertEqual(closeFrames(actions).first?.prefix(2), Data([UInt8(code >> 8), UInt8(code & 0xFF)]), name)
            XCTAssertEqual(lifecycle.closeCode, code, name)
            let delivered = actions.compactMap {
                if case .deliver(1, let result) = $0 { return result } else { return nil }
            }
            XCTAssertEqual(delivered.count, 1, name)
            if case .success = delivered.first { XCTFail("data of a rejected frame delivered: \(name)") }
            XCTAssertEqual(finishes(actions).first??.code, errorCode, name)
            XCTAssertTrue(actions.contains(.shutdown), name)
            XCTAssertFalse(
                actions.contains { if case .closed = $0 { return true } else { return false } },
                "\(name): a failure is no close handshake")
        }
    }

    func testAPeerCloseWithoutACodeIsReportedAsNoStatusReceived() {
        var lifecycle = open()
        let actions = lifecycle.received(frame(0x8), atEOF: false, error: nil)
        XCTAssertEqual(Array(actions.suffix(2)), [.closed(code: 1005, reason: nil), .finish(nil)])
        XCTAssertEqual(lifecycle.closeCode, 1005)
    }

    func testEndOfStreamWithoutCloseIsAnAbnormalClosure() {
        var lifecycle = open()
        _ = lifecycle.receive(id: 1)
        let actions = lifecycle.received(nil, atEOF: true, error: nil)
        XCTAssertEqual(lifecycle.closeCode, 1006)
        XCTAssertEqual(finishes(actions).first??.code, .networkConnectionLost)
        XCTAssertTrue(closeFrames(actions).isEmpty)
    }

    func testCancelFailsEveryPendingOperationOnceAndFinishesOnce() {
        var lifecycle = open()
        _ = lifecycle.receive(id: 1)
        _ = lifecycle.receive(id: 2)
        _ = lifecycle.send(.data(Data([1])), id: 3)
        _ = lifecycle.sendPing(id: 4)
        let actions = lifecycle.cancel()
        XCTAssertEqual(actions.count, 6, "\(actions)")
        XCTAssertEqual(finishes(actions).first??.code, .cancelled)
        XCTAssertEqual(
            lifecycle.written(.message(id: 3), error: URLError(.cancelled)), [], "the stream's own failure comes after")
        XCTAssertEqual(lifecycle.cancel(), [])
        XCTAssertEqual(
            lifecycle.receive(id: 5),
            [
                .deliver(
                    receive: 5,
                    .failure(
                        URLError(.cancelled, userInfo: [NSLocalizedDescriptionKey: "The WebSocket task was cancelled."])
                    ))
            ])
    }

    func testIllegalEventsChangeNothing() {
        var lifecycle = makeLifecycle()
        XCTAssertEqual(lifecycle.received(head, atEOF: false, error: nil), [], "bytes before resume")
        XCTAssertEqual(lifecycle.closeTimedOut(), [], "a close timeout while idle")
        XCTAssertEqual(lifecycle.written(.control, error: nil), [])
        XCTAssertEqual(lifecycle.phase, .idle)
        var opened = open()
        XCTAssertEqual(opened.resume(), [], "resume once open")
        XCTAssertEqual(opened.closeTimedOut(), [], "a close timeout while open")
        XCTAssertEqual(opened.written(.handshake, error: URLError(.timedOut)), [], "a late handshake write failure")
        XCTAssertEqual(opened.phase, .open)
    }

    func testCancelBeforeResumeEndsWithoutConnecting() {
        var lifecycle = makeLifecycle()
        _ = lifecycle.receive(id: 1)
        let actions = lifecycle.close(code: 1000, reason: nil)
        XCTAssertFalse(actions.contains(.abort))
        XCTAssertEqual(finishes(actions).first??.code, .cancelled)
        XCTAssertEqual(lifecycle.resume(), [], "no connection after the end")
    }
}
