import Foundation
import XCTest

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The WebSocket wire types without I/O: the frame parser, the incremental UTF-8 check, the message reader and the
/// handshake's check, each against RFC 6455's rules and the failure code each violation takes.
final class WebSocketProtocolTests: XCTestCase {
    /// A server frame (unmasked unless `mask` is given).
    private func frame(
        _ opcode: UInt8, _ payload: [UInt8] = [], fin: Bool = true, rsv: UInt8 = 0, mask: [UInt8]? = nil
    ) -> Data {
        var out: [UInt8] = [(fin ? 0x80 : 0) | rsv << 4 | opcode]
        let bit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(bit | UInt8(payload.count))
        } else {
            out += [bit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        if let mask {
            out += mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            out += payload
        }
        return Data(out)
    }

    private func failure(of data: Data, limit: Int = 1 << 20) -> UInt16? {
        WebSocketFrameParser.frames(in: data, maximumPayloadLength: limit).failure?.code
    }

    private func read(_ data: Data, limit: Int = 1 << 20) -> ([WebSocketMessageReader.Event], UInt16?) {
        var reader = WebSocketMessageReader(maximumMessageSize: limit)
        let events = reader.read(data)
        return (events, reader.failure?.code)
    }

    // MARK: - Frame parser

    func testParserReadsFramesArrivingOneByteAtATime() throws {
        let bytes = frame(0x1, Array("hello".utf8)) + frame(0x2, [UInt8](repeating: 7, count: 300))
        var parser = WebSocketFrameParser(maximumPayloadLength: 1000)
        var frames: [WebSocketFrame] = []
        for byte in bytes {
            parser.append(Data([byte]))
            if let frame = try parser.next() { frames.append(frame) }
        }
        XCTAssertEqual(frames.map(\.opcode), [.text, .binary])
        XCTAssertEqual(frames[0].payload, Data("hello".utf8))
        XCTAssertEqual(frames[1].payload.count, 300)
        XCTAssertEqual(parser.bufferedByteCount, 0)
    }

    func testParserFailsAMaskedServerFrameWith1002() {
        XCTAssertEqual(failure(of: frame(0x1, Array("hi".utf8), mask: [1, 2, 3, 4])), 1002)
    }

    func testParserFailsReservedBitsWithoutAnExtensionWith1002() {
        XCTAssertEqual(failure(of: frame(0x1, Array("hi".utf8), rsv: 0b100)), 1002, "RSV1")
        XCTAssertEqual(failure(of: frame(0x1, Array("hi".utf8), rsv: 0b010)), 1002, "RSV2")
        XCTAssertEqual(failure(of: frame(0x1, Array("hi".utf8), rsv: 0b001)), 1002, "RSV3")
    }

    func testParserFailsUnknownOpcodesWith1002() {
        for opcode: UInt8 in [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            XCTAssertEqual(failure(of: frame(opcode)), 1002, "opcode \(opcode)")
        }
    }

    func testParserFailsLongOrFragmentedControlFramesWith1002() {
        XCTAssertEqual(failure(of: frame(0x9, [UInt8](repeating: 0, count: 126))), 1002, "ping of 126 bytes")
        XCTAssertEqual(failure(of: frame(0x8, [0x03, 0xE8], fin: false)), 1002, "fragmented close")
        XCTAssertNil(failure(of: frame(0x9, [UInt8](repeating: 0, count: 125))), "125 bytes is allowed")
    }

    func testParserFailsNonMinimalAndNegativeLengthsWith1002() {
        XCTAssertEqual(failure(of: Data([0x82, 126, 0, 5]) + Data(count: 5)), 1002)
        XCTAssertEqual(failure(of: Data([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1])), 1002)
    }

    func testParserRefusesAFrameOverTheLimitFromItsHeaderWith1009() {
        // The header alone says 1 GiB: refused before any payload byte is buffered.
        XCTAssertEqual(failure(of: Data([0x82, 127, 0, 0, 0, 0, 0x40, 0, 0, 0]), limit: 1 << 20), 1009)
        XCTAssertEqual(failure(of: frame(0x2, [UInt8](repeating: 0, count: 200)), limit: 100), 1009)
    }

    func testControlFramesPassUnderAnyMessageLimit() {
        XCTAssertNil(failure(of: frame(0x8, [0x03, 0xE8]), limit: 1), "a close frame with its code")
        XCTAssertNil(failure(of: frame(0x9, Array("hello".utf8)), limit: 1), "a ping")
        XCTAssertEqual(failure(of: frame(0x2, [1, 2]), limit: 1), 1009, "a message over the limit")
    }

    func testParserStaysFailedAndDropsItsBuffer() {
        var parser = WebSocketFrameParser(maximumPayloadLength: 100)
        parser.append(frame(0x1, [], mask: [1, 2, 3, 4]) + frame(0x1, Array("after".utf8)))
        XCTAssertThrowsError(try parser.next())
        XCTAssertThrowsError(try parser.next(), "nothing after a refused frame is read")
        XCTAssertEqual(parser.bufferedByteCount, 0)
    }

    func testEncodedClientFramesAreMaskedAndRoundTrip() {
        let payload = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0) })
        for size in [0, 5, 125, 126, 65_535, 65_536, 70_000] {
            let encoded = WebSocketFrame(opcode: .binary, payload: payload.prefix(size)).encoded(maskKey: 0xA1B2_C3D4)
            XCTAssertEqual(encoded[1] & 0x80, 0x80, "the mask bit is set")
            // Unmask and parse as a server frame.
            var bytes = [UInt8](encoded)
            let lengthBytes = size < 126 ? 0 : size <= 0xFFFF ? 2 : 8
            let keyStart = 2 + lengthBytes
            let key = Array(bytes[keyStart..<keyStart + 4])
            XCTAssertEqual(key, [0xA1, 0xB2, 0xC3, 0xD4])
            bytes[1] &= 0x7F
            let body = bytes[(keyStart + 4)...].enumerated().map { $0.element ^ key[$0.offset % 4] }
            let parsed = WebSocketFrameParser.frames(in: Data(bytes[..<keyStart] + body), maximumPayloadLength: 1 << 20)
            XCTAssertNil(parsed.failure)
            XCTAssertEqual(parsed.frames.first?.payload, payload.prefix(size), "size \(size)")
        }
    }

    func testCloseFrameReasonIsCutOnACodePointBoundary() {
        let reason = Data(String(repeating: "é", count: 100).utf8)  // 200 bytes
        let close = WebSocketFrame.close(code: 1000, reason: reason)
        XCTAssertLessThanOrEqual(close.payload.count, 125)
        XCTAssertTrue(UTF8Validator.isValid(Data(close.payload.dropFirst(2))))
    }

    // MARK: - UTF-8

    func testUTF8ValidatorAcceptsTextSplitAnywhere() {
        let bytes = Array("aé€😀z".utf8)
        for split in 0...bytes.count {
            var validator = UTF8Validator()
            XCTAssertTrue(validator.consume(bytes[..<split]))
            XCTAssertTrue(validator.consume(bytes[split...]))
            XCTAssertTrue(validator.isComplete, "split at \(split)")
        }
    }

    func testUTF8ValidatorRefusesWhatRFC3629Forbids() {
        let invalid: [[UInt8]] = [
            [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF],
            [
                0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65, 0x64, 0x69,
                0x74, 0x65, 0x64,
            ],
        ]
        for bytes in invalid { XCTAssertFalse(UTF8Validator.isValid(Data(bytes)), "\(bytes)") }
        XCTAssertFalse(UTF8Validator.isValid(Data([0xE2, 0x82])), "cut short at the end")
        XCTAssertTrue(UTF8Validator.isValid(Data([0xF4, 0x8F, 0xBF, 0xBF])), "U+10FFFF")
        XCTAssertTrue(UTF8Validator.isValid(Data([0xED, 0x9F, 0xBF])), "U+D7FF")
    }

    func testUTF8ValidatorFailsAtTheFirstBadByteBeforeTheMessageEnds() {
        var validator = UTF8Validator()
        XCTAssertTrue(validator.consume(Array("ok".utf8)))
        XCTAssertFalse(validator.consume([0xC0]), "an overlong lead fails at once")
        XCTAssertFalse(validator.consume(Array("more".utf8)), "and stays failed")
    }

    // MARK: - Message reader

    func testReaderJoinsFragmentsWithControlFramesBetween() {
        let bytes = Array("héllo".utf8)
        let data =
            frame(0x1, Array(bytes[0..<2]), fin: false) + frame(0x9, Array("p".utf8))
            + frame(0x0, Array(bytes[2..<4]), fin: false) + frame(0xA, []) + frame(0x0, Array(bytes[4...]))
        let (events, failure) = read(data)
        XCTAssertNil(failure)
        XCTAssertEqual(events, [.ping(Data("p".utf8)), .pong(Data()), .text("héllo")])
    }

    func testReaderFailsContinuationErrorsWith1002() {
        XCTAssertEqual(read(frame(0x0, [1])).1, 1002, "continuation with no message")
        XCTAssertEqual(read(frame(0x1, [0x61], fin: false) + frame(0x1, [0x62])).1, 1002, "new message mid-message")
        XCTAssertEqual(read(frame(0x2, [1], fin: false) + frame(0x2, [2])).1, 1002)
    }

    func testReaderFailsInvalidUTF8With1007EvenSplitAcrossFragments() {
        XCTAssertEqual(read(frame(0x1, [0xFF])).1, 1007)
        // A surrogate split across fragments: each fragment alone could be a valid start.
        let (events, failure) = read(frame(0x1, [0x61, 0xED], fin: false) + frame(0x0, [0xA0, 0x80]))
        XCTAssertEqual(failure, 1007)
        XCTAssertEqual(events, [], "the rejected message is not delivered")
        XCTAssertEqual(read(frame(0x1, [0x61, 0xE2, 0x82])).1, 1007, "a final fragment cut inside a code point")
        XCTAssertNil(read(frame(0x1, [0xE2], fin: false) + frame(0x0, [0x82, 0xAC])).1, "€ split in two")
    }

    func testReaderFailsAMessageOverTheLimitAcrossFragmentsWith1009() {
        let data =
            frame(0x2, [UInt8](repeating: 1, count: 60), fin: false) + frame(0x0, [UInt8](repeating: 1, count: 60))
        let (events, failure) = read(data, limit: 100)
        XCTAssertEqual(failure, 1009)
        XCTAssertEqual(events, [])
    }

    func testReaderChecksCloseFrames() {
        XCTAssertEqual(
            read(frame(0x8, [0x03, 0xE8] + Array("bye".utf8))).0, [.close(code: 1000, reason: Data("bye".utf8))])
        XCTAssertEqual(read(frame(0x8, [])).0, [.close(code: nil, reason: Data())])
        XCTAssertEqual(read(frame(0x8, [0x03])).1, 1002, "one-byte payload")
        XCTAssertEqual(read(frame(0x8, [0x03, 0xED])).1, 1002, "1005 is never sent")
        XCTAssertEqual(read(frame(0x8, [0x03, 0xEE])).1, 1002, "1006 is never sent")
        XCTAssertEqual(read(frame(0x8, [0x03, 0xE7])).1, 1002, "999")
        XCTAssertEqual(read(frame(0x8, [0x03, 0xE8, 0xFF])).1, 1007, "reason not UTF-8")
        XCTAssertNil(read(frame(0x8, [0x0F, 0xA0])).1, "4000 is an application's code")
    }

    func testReaderDeliversMessagesBeforeAViolationButNothingAfter() {
        let (events, failure) = read(frame(0x1, Array("first".utf8)) + frame(0x1, [0xFF]) + frame(0x1, Array("x".utf8)))
        XCTAssertEqual(failure, 1007)
        XCTAssertEqual(events, [.text("first")])
    }

    // MARK: - Handshake

    func testAcceptValueMatchesRFC6455Example() {
        XCTAssertEqual(WebSocketHandshake.acceptValue(for: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func testKeysAreFreshSixteenByteNonces() {
        let keys = Set((0..<100).map { _ in WebSocketHandshake.makeKey() })
        XCTAssertEqual(keys.count, 100)
        XCTAssertTrue(keys.allSatisfy { Data(base64Encoded: $0)?.count == 16 })
    }

    private func handshake(protocols: [String] = []) -> WebSocketHandshake {
        WebSocketHandshake(
            url: URL(string: "ws://example.com:8080/chat?room=1")!, key: "dGhlIHNhbXBsZSBub25jZQ==",
            protocols: protocols, fields: [("X-Extra", "1"), ("Upgrade", "h2c")])
    }

    private func answer(_ lines: [String]) -> Data { Data((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) }

    private let good = [
        "HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
    ]

    func testRequestCarriesTheHandshakeFieldsAndNotTheCallersCopies() {
        // A subprotocol offered twice goes out once (RFC 6455 4.1: the values must all be unique).
        let text = String(decoding: handshake(protocols: ["chat", "superchat", "chat"]).requestBytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("GET /chat?room=1 HTTP/1.1\r\nHost: example.com:8080\r\n"))
        XCTAssertTrue(text.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"))
        XCTAssertTrue(text.contains("Sec-WebSocket-Version: 13\r\n"))
        XCTAssertTrue(text.contains("Sec-WebSocket-Protocol: chat, superchat\r\n"))
        XCTAssertTrue(text.contains("X-Extra: 1\r\n"))
        XCTAssertFalse(text.contains("h2c"), "the caller's Upgrade does not replace the handshake's")
        XCTAssertTrue(
            text.contains("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"),
            "permessage-deflate is offered by default")
        XCTAssertTrue(text.hasSuffix("\r\n\r\n"))
    }

    func testHandshakeAcceptsAConformingAnswer() throws {
        let accepted = try handshake(protocols: ["chat"]).accept(head: answer(good + ["Sec-WebSocket-Protocol: chat"]))
            .get()
        XCTAssertEqual(accepted.negotiatedProtocol, "chat")
        XCTAssertEqual(accepted.response.statusCode, 101)
        let tokens = good.map {
            $0.replacingOccurrences(of: "Connection: Upgrade", with: "connection: keep-alive, UPGRADE")
        }
        XCTAssertNoThrow(try handshake().accept(head: answer(tokens)).get(), "tokens, any case")
    }

    func testHandshakeRefusesEveryDeviation() {
        let cases: [(String, [String], [String])] = [
            ("status 200", ["HTTP/1.1 200 OK"] + good.dropFirst(), []),
            ("no Upgrade", good.filter { !$0.hasPrefix("Upgrade") }, []),
            ("Upgrade: h2c", good.map { $0.hasPrefix("Upgrade") ? "Upgrade: h2c" : $0 }, []),
            ("Upgrade: h2c, websocket", good.map { $0.hasPrefix("Upgrade") ? "Upgrade: h2c, websocket" : $0 }, []),
            ("a second Upgrade", good + ["Upgrade: h2c"], []),
            ("no Connection", good.filter { !$0.hasPrefix("Connection") }, []),
            // Unicode's lowercasing makes KELVIN SIGN `k`; NO-BREAK SPACE is not HTTP's whitespace.
            ("Upgrade: WEBSOC\u{212A}ET", good.map { $0.hasPrefix("Upgrade") ? "Upgrade: WEBSOC\u{212A}ET" : $0 }, []),
            (
                "Connection: \u{A0}Upgrade", good.map { $0.hasPrefix("Connection") ? "Connection: \u{A0}Upgrade" : $0 },
                []
            ),
            ("protocol with a no-break space", good + ["Sec-WebSocket-Protocol: chat\u{A0}"], ["chat"]),
            ("wrong accept", good.map { $0.hasPrefix("Sec-WebSocket-Accept") ? "Sec-WebSocket-Accept: AAAA" : $0 }, []),
            ("missing accept", good.filter { !$0.hasPrefix("Sec-WebSocket-Accept") }, []),
            ("unoffered protocol", good + ["Sec-WebSocket-Protocol: other"], ["chat"]),
            ("protocol with none offered", good + ["Sec-WebSocket-Protocol: chat"], []),
            ("two protocols", good + ["Sec-WebSocket-Protocol: chat, b"], ["chat", "b"]),
            ("unoffered extension", good + ["Sec-WebSocket-Extensions: x-webkit-deflate-frame"], []),
            ("unoffered deflate parameter", good + ["Sec-WebSocket-Extensions: permessage-deflate; x=1"], []),
            ("not HTTP", ["SSH-2.0-OpenSSH"], []),
        ]
        for (name, lines, protocols) in cases {
            guard case .failure(let error) = handshake(protocols: protocols).accept(head: answer(lines)) else {
                XCTFail("accepted: \(name)")
                continue
            }
            XCTAssertEqual(error.code, .badServerResponse, name)
        }
    }

    func testHeadLengthFindsTheEmptyLineAndKeepsWhatFollows() {
        let data = answer(good) + frame(0x1, Array("x".utf8))
        XCTAssertEqual(WebSocketHandshake.headLength(in: data), answer(good).count)
        XCTAssertNil(WebSocketHandshake.headLength(in: answer(good).dropLast(1)))
    }

    func testFieldsThatCannotGoOnTheWireAreRefused() {
        let bad = WebSocketHandshake(
            url: URL(string: "ws://a/")!, key: "k", protocols: [], fields: [("X", "a\r\nB: c")])
        XCTAssertNotNil(bad.fieldError)
        let badProtocol = WebSocketHandshake(url: URL(string: "ws://a/")!, key: "k", protocols: ["a b"], fields: [])
        XCTAssertNotNil(badProtocol.fieldError)
    }
}
