import Foundation
import XCTest

@testable import SessionKit

/// permessage-deflate (RFC 7692) without I/O: the strict check of the server's answer, zlib's raw streams against
/// the RFC's examples, inflating in bounded steps, and the message reader's RSV1 rules.
final class WebSocketDeflateTests: XCTestCase {
    private typealias Parameters = WebSocketDeflateParameters

    func testTheServersAnswerIsNegotiatedParameterByParameter() throws {
        XCTAssertNil(try Parameters.negotiate([]).get(), "no extension")
        XCTAssertEqual(try Parameters.negotiate(["permessage-deflate"]).get(), Parameters())
        XCTAssertEqual(
            try Parameters.negotiate([
                "Permessage-Deflate; server_no_context_takeover ; client_no_context_takeover;"
                    + " server_max_window_bits=10; client_max_window_bits=\"9\""
            ]).get(),
            Parameters(
                serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 10,
                clientMaxWindowBits: 9))
        XCTAssertEqual(
            try Parameters.negotiate(["permessage-deflate; client_max_window_bits=8"]).get()?.clientMaxWindowBits, 8)
    }

    func testAnUnofferedOrMalformedAnswerIsRefused() {
        let refused = [
            "x-webkit-deflate-frame", "permessage-deflate; x=1", "permessage-deflate; client_max_window_bits",
            "permessage-deflate; server_max_window_bits", "permessage-deflate; server_max_window_bits=7",
            "permessage-deflate; server_max_window_bits=16", "permessage-deflate; client_max_window_bits=09",
            "permessage-deflate; client_max_window_bits=+9", "permessage-deflate; client_max_window_bits=\"9",
            "permessage-deflate; server_no_context_takeover=true",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate, permessage-deflate", "permessage-deflate; ", "permessage-deflate;;",
        ]
        for answer in refused {
            if case .success(let parameters) = Parameters.negotiate([answer]) {
                XCTFail("\(answer) accepted as \(String(describing: parameters))")
            }
        }
        if case .success = Parameters.negotiate(["permessage-deflate", "permessage-deflate"]) {
            XCTFail("two fields with one element each accepted")
        }
    }

    func testOnlyASCIINamesAndHTTPWhitespaceAreAccepted() throws {
        // Unicode's lowercasing turns KELVIN SIGN (U+212A) into `k`, and Foundation's whitespace includes NO-BREAK
        // SPACE and IDEOGRAPHIC SPACE: neither is HTTP's.
        for answer in [
            "permessage-deflate; server_no_context_ta\u{212A}eover", "PERMESSAGE-DEFLATE\u{00A0}",
            "permessage-deflate;\u{3000}client_no_context_takeover", "\u{00A0}permessage-deflate",
        ] {
            if case .success(let parameters) = Parameters.negotiate([answer]) {
                XCTFail("\(answer.debugDescription) accepted as \(String(describing: parameters))")
            }
        }
        let accepted = try Parameters.negotiate(["\tPerMessage-Deflate ;\tSERVER_NO_CONTEXT_TAKEOVER \t"]).get()
        XCTAssertEqual(accepted?.serverNoContextTakeover, true)
    }

    func testTheUpgradeRequestOffersDeflateUnlessTurnedOff() {
        var handshake = WebSocketHandshake(url: URL(string: "ws://h/")!, key: "k", protocols: [], fields: [])
        let offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
        XCTAssertTrue(String(decoding: handshake.requestBytes, as: UTF8.self).contains(offer))
        handshake.offersDeflate = false
        XCTAssertFalse(String(decoding: handshake.requestBytes, as: UTF8.self).contains("Sec-WebSocket-Extensions"))
    }

    func testCompressionMatchesRFC7692sExamplesWithAndWithoutContext() throws {
        let deflater = try XCTUnwrap(RawDeflateStream(.compress, windowBits: 15))
        XCTAssertEqual(deflater.compress(Data("Hello".utf8)), Data([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]))
        // 7.2.3.2: the same message again refers back to the first.
        XCTAssertEqual(deflater.compress(Data("Hello".utf8)), Data([0xF2, 0x00, 0x11, 0x00, 0x00]))
        deflater.reset()
        XCTAssertEqual(deflater.compress(Data("Hello".utf8)), Data([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]))
        XCTAssertEqual(deflater.compress(Data()), Data([0x00]), "7.2.3.6: an empty message")
        XCTAssertNil(RawDeflateStream(.compress, windowBits: 8), "zlib's raw deflate has no 256-byte window")
    }

    func testInflatingKeepsTheContextUntilReset() throws {
        let inflater = try XCTUnwrap(RawDeflateStream(.decompress, windowBits: 15))
        let tail = Data([0x00, 0x00, 0xFF, 0xFF])
        XCTAssertEqual(
            try inflater.decompress(Data([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]) + tail, limit: 100),
            Data("Hello".utf8))
        XCTAssertEqual(
            try inflater.decompress(Data([0xF2, 0x00, 0x11, 0x00, 0x00]) + tail, limit: 100), Data("Hello".utf8))
        inflater.reset()
        XCTAssertThrowsError(
            try inflater.decompress(Data([0xF2, 0x00, 0x11, 0x00, 0x00]) + tail, limit: 100),
            "a reference to a window that was reset")
    }

    func testAMessageEndingWithAFinalBlockKeepsTheContextForTheNext() throws {
        let inflater = try XCTUnwrap(RawDeflateStream(.decompress, windowBits: 15))
        let tail = Data([0x00, 0x00, 0xFF, 0xFF])
        // RFC 7692 7.2.3.3: "Hello" in a block with BFINAL set.
        XCTAssertEqual(
            try inflater.decompress(Data([0xF3, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00, 0x00]) + tail, limit: 100),
            Data("Hello".utf8))
        XCTAssertEqual(
            try inflater.decompress(Data([0xF2, 0x00, 0x11, 0x00, 0x00]) + tail, limit: 100), Data("Hello".utf8),
            "the next message refers back to the first")
    }

    func testABombStopsOneBytePastTheLimitWithMessageTooBig() throws {
        let deflater = try XCTUnwrap(RawDeflateStream(.compress, windowBits: 15))
        let bomb = try XCTUnwrap(deflater.compress(Data(count: 20_000_000)))
        XCTAssertLessThan(bomb.count, 30_000)
        let inflater = try XCTUnwrap(RawDeflateStream(.decompress, windowBits: 15))
        XCTAssertThrowsError(try inflater.decompress(bomb + Data([0, 0, 0xFF, 0xFF]), limit: 100_000)) { error in
            XCTAssertEqual((error as? WebSocketFailure)?.code, 1009)
        }
        let garbage = try XCTUnwrap(RawDeflateStream(.decompress, windowBits: 15))
        XCTAssertThrowsError(try garbage.decompress(Data([0xFF, 0xFF, 0xFF, 0xFF]), limit: 100)) { error in
            XCTAssertEqual((error as? WebSocketFailure)?.code, 1007)
        }
    }

    func testTheReaderInflatesFragmentsAndRefusesRSV1ElsewhereAndWithoutNegotiation() {
        func frame(_ first: UInt8, _ payload: [UInt8]) -> Data { Data([first, UInt8(payload.count)] + payload) }
        var reader = WebSocketMessageReader(maximumMessageSize: 1_000, deflate: Parameters())
        // RFC 7692 7.2.3.1's fragmented "Hello": RSV1 on the first fragment only.
        let events = reader.read(frame(0x41, [0xF2, 0x48, 0xCD]) + frame(0x80, [0xC9, 0xC9, 0x07, 0x00]))
        XCTAssertEqual(events, [.text("Hello")])
        XCTAssertEqual(reader.read(frame(0x81, Array("plain".utf8))), [.text("plain")], "uncompressed is allowed")
        var continuation = WebSocketMessageReader(maximumMessageSize: 1_000, deflate: Parameters())
        _ = continuation.read(frame(0x41, [0xF2, 0x48, 0xCD]) + frame(0xC0, [0xC9, 0xC9, 0x07, 0x00]))
        XCTAssertEqual(continuation.failure?.code, 1002, "RSV1 on a continuation")
        var control = WebSocketMessageReader(maximumMessageSize: 1_000, deflate: Parameters())
        _ = control.read(frame(0xC9, []))
        XCTAssertEqual(control.failure?.code, 1002, "RSV1 on a ping")
        var plain = WebSocketMessageReader(maximumMessageSize: 1_000)
        _ = plain.read(frame(0xC1, [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]))
        XCTAssertEqual(plain.failure?.code, 1002, "RSV1 without negotiation")
    }

    func testTheLifecycleCompressesQueuedAndLaterMessagesInTheirOrderAsNegotiated() {
        let hello = Data([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
        let cases: [(String, Data?, Data?)] = [
            ("permessage-deflate", hello, Data([0xF2, 0x00, 0x11, 0x00, 0x00])),
            ("permessage-deflate; client_no_context_takeover", hello, hello),
            ("permessage-deflate; client_max_window_bits=8", nil, nil),
        ]
        for (answer, first, second) in cases {
            var lifecycle = WebSocketLifecycle(
                handshake: WebSocketHandshake(
                    url: URL(string: "ws://h/")!, key: "dGhlIHNhbXBsZSBub25jZQ==", protocols: [], fields: []))
            _ = lifecycle.resume()
            _ = lifecycle.send(.string("Hello"), id: 1)
            let head =
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: \(answer)\r\n\r\n"
            var actions = lifecycle.received(Data(head.utf8), atEOF: false, error: nil)
            actions += lifecycle.send(.string("Hello"), id: 2) + lifecycle.sendPing(id: 3)
            let frames = actions.compactMap { action -> WebSocketFrame? in
                if case .write(let frame, _) = action { return frame } else { return nil }
            }
            func expected(_ payload: Data?) -> WebSocketFrame {
                WebSocketFrame(rsv1: payload != nil, opcode: .text, payload: payload ?? Data("Hello".utf8))
            }
            XCTAssertEqual(Array(frames.prefix(2)), [expected(first), expected(second)], answer)
            XCTAssertEqual(frames.last?.rsv1, false, "\(answer): a ping is never compressed")
        }
    }
}
