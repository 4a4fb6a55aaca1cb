import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// permessage-deflate (RFC 7692) against real peers on loopback: the NIO WebSocket server with zlib of its own,
/// which resets its contexts as it negotiated (so a client that keeps one it was told to reset is not understood),
/// and a raw server sending RFC 7692's pre-compressed frames and the RSV1 a client must refuse.
final class WebSocketCompressionTests: WebSocketTestCase {
    /// 2,000 letters that do not compress alone (a linear congruential sequence), so that what a message costs on
    /// the wire shows whether the context of the one before was used.
    private static let noise: String = {
        var state: UInt32 = 12_345
        return String(
            (0..<2_000).map { _ -> Character in
                state = state &* 1_103_515_245 &+ 12_345
                return Character(Unicode.Scalar(UInt8(97 + (state >> 16) % 26)))
            })
    }()

    /// Sends `noise` five times and checks each echo: the bytes the client sent for the first, and for the four
    /// after it.
    private func echoNoiseFiveTimes(_ task: SessionWebSocketTask) async throws -> (first: Int64, rest: Int64) {
        let start = task.countOfBytesSent
        try await task.send(.string(Self.noise))
        let first = try await task.receive()
        XCTAssertEqual(first, .string(Self.noise))
        let afterFirst = task.countOfBytesSent
        for index in 1..<5 {
            try await task.send(.string(Self.noise))
            let echoed = try await task.receive()
            XCTAssertEqual(echoed, .string(Self.noise), "echo \(index)")
        }
        return (afterFirst - start, task.countOfBytesSent - afterFirst)
    }

    func testCompressedEchoBothWaysKeepsTheContextAcrossMessages() async throws {
        let server = try await startServer(deflate: .init())
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let sent = try await echoNoiseFiveTimes(task)
        XCTAssertTrue(task.isCompressed)
        XCTAssertGreaterThan(sent.first, 1_000, "noise does not compress alone")
        XCTAssertLessThan(sent.rest, 200, "the next four refer back to the first")
        let binary = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
        try await task.send(.data(binary))
        let echoed = try await task.receive()
        XCTAssertEqual(echoed, .data(binary))
        try await task.send(.string(""))
        let empty = try await task.receive()
        XCTAssertEqual(empty, .string(""), "an empty message is one empty stored block")
        XCTAssertEqual(server.seen.compressedMessages, 7)
        XCTAssertEqual(server.seen.undecodableMessages, 0)
        XCTAssertLessThan(task.countOfBytesReceived, 10_000, "the server's echoes came compressed, with context")
        task.cancel(with: .normalClosure, reason: nil)
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
    }

    /// Sends from many threads at once on one socket, with context takeover: each frame reaches the stream in the
    /// order it was compressed, so the server inflates every message against the right history (a frame handed over
    /// out of that order is inflated against another history: garbled, or not deflate data at all).
    func testConcurrentSendsKeepTheCompressionContextInOrder() async throws {
        let server = try await startServer(deflate: .init())
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        // Open first: frames queued before the handshake are compressed together, in order, when it completes.
        try await task.send(.string("open"))
        let opened = try await task.receive()
        XCTAssertEqual(opened, .string("open"))
        let count = 400
        let message = { (index: Int) in "message \(index) \(Self.noise.prefix(300)) end \(index)" }
        let failures = LockedBox(0)
        let senders = DispatchQueue(label: "senders", attributes: .concurrent)
        let _: Void = try await awaitCallback { done in
            let group = DispatchGroup()
            for index in 0..<count {
                group.enter()
                senders.async {
                    task.send(.string(message(index))) { error in
                        if error != nil { failures.write { $0 += 1 } }
                        group.leave()
                    }
                }
            }
            group.notify(queue: .global()) { done(()) }
        }
        XCTAssertEqual(failures.wrappedValue, 0, "every send completed without an error")
        var received = Set<String>()
        for _ in 0..<count {
            guard case .string(let text) = try await task.receive() else { return XCTFail("a binary echo") }
            received.insert(text)
        }
        let garbled = received.subtracting((0..<count).map(message))
        XCTAssertEqual(received.count, count, "every message echoed once")
        XCTAssertTrue(garbled.isEmpty, "\(garbled.count) echoes are not what was sent, e.g. \(garbled.first ?? "")")
        XCTAssertEqual(server.seen.undecodableMessages, 0)
        XCTAssertEqual(server.seen.compressedMessages, count + 1)
        task.cancel(with: .normalClosure, reason: nil)
        let completion = try await awaitCompletion(of: task, in: completions)
        XCTAssertNil(completion)
    }

    func testNoContextTakeoverResetsBothContextsAfterEachMessage() async throws {
        let server = try await startServer(
            deflate: .init(serverNoContextTakeover: true, clientNoContextTakeover: true))
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let sent = try await echoNoiseFiveTimes(task)
        XCTAssertGreaterThan(sent.rest, 4 * 1_000, "each message compressed on its own")
        XCTAssertEqual(server.seen.compressedMessages, 5)
        XCTAssertEqual(server.seen.undecodableMessages, 0, "the server, which reset its inflater, understood each")
        task.cancel(with: .normalClosure, reason: nil)
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testCompressionTurnedOffOffersNothingAndSendsPlainFrames() async throws {
        let server = try await startServer(deflate: .init())
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.isCompressionEnabled = false
        task.resume()
        try await task.send(.string("plain"))
        let echoed = try await task.receive()
        XCTAssertEqual(echoed, .string("plain"))
        XCTAssertFalse(task.isCompressed)
        XCTAssertEqual(server.seen.compressedMessages, 0)
        let offered = server.seen.upgrades.first?.headers.contains { $0.0.lowercased() == "sec-websocket-extensions" }
        XCTAssertEqual(offered, false)
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    func testAMessageThatInflatesPastTheLimitFailsWithMessageTooBig() async throws {
        let server = try await startServer(deflate: .init())
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.maximumMessageSize = 64 * 1024
        task.resume()
        try await task.send(.string("bomb 20000000"))
        let result = try await receive(task)
        if case .success = result { XCTFail("a 20 MB message delivered under a 64 KiB limit") }
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .dataLengthExceedsMaximum)
        XCTAssertEqual(task.closeCode, .messageTooBig)
        XCTAssertLessThan(task.countOfBytesReceived, 64 * 1024, "the frame itself was under the limit")
        try await waitUntil("the server got 1009") { server.seen.closeCodes == [1009] }
    }

    func testAServerAnsweringAParameterNotOfferedFailsTheHandshake() async throws {
        let server = try await startServer(deflate: .init(extra: "; x_unknown=1"))
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        let result = try await receive(task)
        if case .success = result { XCTFail("received over a refused handshake") }
        let completion = try await awaitCompletion(of: task, in: completions) as? URLError
        XCTAssertEqual(completion?.code, .badServerResponse)
        XCTAssertFalse(task.isCompressed)
    }

    // MARK: - Pre-compressed frames

    /// A raw server that accepts permessage-deflate, then sends `frames`.
    private func deflateServer(_ frames: Data) async throws -> RawWebSocketServer {
        try await startRaw {
            RawWebSocketServer.upgradeResponse(for: $0, fields: ["Sec-WebSocket-Extensions": "permessage-deflate"])
                + frames
        }
    }

    func testRFC7692sCompressedHelloArrivesWholeAndFragmented() async throws {
        let hello: [UInt8] = [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]
        let server = try await deflateServer(
            RawWebSocketServer.frame(opcode: 0x1, payload: hello, rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x1, payload: [0xF2, 0x00, 0x11, 0x00, 0x00], rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x1, payload: [0xF2, 0x48, 0xCD], fin: false, rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x0, payload: [0xC9, 0xC9, 0x07, 0x00]))
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        task.resume()
        for what in ["whole", "with the context of the first", "fragmented"] {
            let received = try await task.receive()
            XCTAssertEqual(received, .string("Hello"), what)
        }
        XCTAssertTrue(task.isCompressed)
        task.cancel()
        _ = try await awaitCompletion(of: task, in: completions)
    }

    /// The connection must fail with `code` (1002 unless said) after `frames`, and nothing of them be delivered.
    private func assertFails(
        with code: URLSessionWebSocketTask.CloseCode = .protocolError, _ frames: Data, negotiated: Bool = true,
        maximumMessageSize: Int? = nil, _ what: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let server =
            negotiated
            ? try await deflateServer(frames)
            : try await startRaw { RawWebSocketServer.upgradeResponse(for: $0) + frames }
        let (manager, completions) = makeManager()
        let task = manager.webSocketTask(with: server.url())
        if let maximumMessageSize { task.maximumMessageSize = maximumMessageSize }
        task.resume()
        let result = try await receive(task)
        if case .success(let message) = result { XCTFail("\(what): delivered \(message)", file: file, line: line) }
        _ = try await awaitCompletion(of: task, in: completions)
        XCTAssertEqual(task.closeCode, code, what, file: file, line: line)
        try await waitUntil("\(what): the client's close frame") { server.clientFrames().contains { $0.opcode == 0x8 } }
        XCTAssertEqual(
            server.clientFrames().first { $0.opcode == 0x8 }?.closeCode, code.rawValue, what, file: file, line: line)
        XCTAssertEqual(completions.completionCount(of: task), 1, what, file: file, line: line)
    }

    func testRSV1OnAControlFrameAContinuationOrWithoutNegotiationFailsWithProtocolError() async throws {
        try await assertFails(RawWebSocketServer.frame(opcode: 0x9, payload: [1], rsv: 0b100), "RSV1 on a ping")
        try await assertFails(
            RawWebSocketServer.frame(opcode: 0x1, payload: [0xF2, 0x48, 0xCD], fin: false, rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x0, payload: [0xC9, 0xC9, 0x07, 0x00], rsv: 0b100),
            "RSV1 on a continuation")
        try await assertFails(
            RawWebSocketServer.frame(opcode: 0x1, payload: [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00], rsv: 0b100),
            negotiated: false, "RSV1 without permessage-deflate")
    }

    /// A decompression bomb from a raw server: 10 MB of zeros compressed into about 10 KB, whole and in fragments,
    /// under a 64 KiB limit.
    func testACompressedMessageThatInflatesPastTheLimitFailsWithMessageTooBig() async throws {
        let bomb = [UInt8](RawDeflate(compressing: true).compress(Data(count: 10_000_000)))
        XCTAssertLessThan(bomb.count, 64 * 1024, "the frame itself is under the limit")
        try await assertFails(
            with: .messageTooBig, RawWebSocketServer.frame(opcode: 0x2, payload: bomb, rsv: 0b100),
            maximumMessageSize: 64 * 1024, "a bomb in one frame")
        let half = bomb.count / 2
        try await assertFails(
            with: .messageTooBig,
            RawWebSocketServer.frame(opcode: 0x1, payload: Array(bomb[..<half]), fin: false, rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x0, payload: Array(bomb[half...])),
            maximumMessageSize: 64 * 1024, "a bomb in two fragments")
        // 80,000 letters that hardly compress, in two fragments of about 40,000 each: each fragment inflates under
        // the limit, the message does not.
        var state: UInt32 = 54_321
        let letters = Data(
            (0..<80_000).map { _ -> UInt8 in
                state = state &* 1_103_515_245 &+ 12_345
                return UInt8(97 + (state >> 16) % 26)
            })
        let noise = [UInt8](RawDeflate(compressing: true).compress(letters))
        XCTAssertGreaterThan(noise.count, 40_000, "the letters hardly compress")
        try await assertFails(
            with: .messageTooBig,
            RawWebSocketServer.frame(opcode: 0x1, payload: Array(noise[..<(noise.count / 2)]), fin: false, rsv: 0b100)
                + RawWebSocketServer.frame(opcode: 0x0, payload: Array(noise[(noise.count / 2)...])),
            maximumMessageSize: 64 * 1024, "fragments that inflate past the limit together")
    }

    func testCompressedTextThatInflatesToInvalidUTF8FailsWithInvalidFramePayloadData() async throws {
        let deflater = RawDeflate(compressing: true)
        try await assertFails(
            with: .invalidFramePayloadData,
            RawWebSocketServer.frame(
                opcode: 0x1, payload: Array(deflater.compress(Data([0x61, 0xED, 0xA0, 0x80]))), rsv: 0b100),
            "a surrogate, compressed")
    }

    func testACompressedMessageThatIsNotDeflateDataFailsWithInvalidFramePayloadData() async throws {
        // BTYPE 11 is reserved (RFC 1951 3.2.3).
        try await assertFails(
            with: .invalidFramePayloadData,
            RawWebSocketServer.frame(opcode: 0x2, payload: [0xFF, 0xFF, 0xFF, 0xFF], rsv: 0b100), "reserved block type")
    }
}
