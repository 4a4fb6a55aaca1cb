import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `ServerSentEventParser` without I/O: the WHATWG event stream interpretation, its examples and edge cases, fed whole
/// and in every split.
final class ServerSentEventParserTests: XCTestCase {
    private func events(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [ServerSentEvent]
    {
        try events(Data(text.utf8), file: file, line: line)
    }

    /// The events of `stream` fed whole, checked equal to those of the same bytes fed one byte at a time and split in
    /// two at every offset: a chunk boundary never changes the result.
    private func events(_ stream: Data, file: StaticString = #filePath, line: UInt = #line) throws -> [ServerSentEvent]
    {
        let whole = try ServerSentEventParser.events(in: stream)
        var byByte = ServerSentEventParser()
        var bytewise: [ServerSentEvent] = []
        for byte in stream { bytewise += try byByte.parse(Data([byte])) }
        XCTAssertEqual(bytewise, whole, "fed one byte at a time", file: file, line: line)
        for cut in 0...stream.count {
            var parser = ServerSentEventParser()
            let split = try parser.parse(stream.prefix(cut)) + parser.parse(stream.dropFirst(cut))
            XCTAssertEqual(split, whole, "split at \(cut)", file: file, line: line)
        }
        return whole
    }

    // MARK: - The standard's examples

    func testStockTickerExampleJoinsDataLinesWithLineFeeds() throws {
        XCTAssertEqual(
            try events("data: YHOO\ndata: +2\ndata: 10\n\n"), [ServerSentEvent(data: "YHOO\n+2\n10")])
    }

    func testCommentsAndTheLastEventIDCarryOverToLaterEvents() throws {
        let stream = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
        XCTAssertEqual(
            try events(stream),
            [
                ServerSentEvent(id: "1", data: "first event"),
                // `id` without a colon resets the last event ID to empty.
                ServerSentEvent(id: nil, data: "second event"),
            ],
            "the third block has no blank line after it: not dispatched at the end of the stream")
    }

    func testEmptyDataLinesMakeEmptyAndNewlineData() throws {
        XCTAssertEqual(
            try events("data\n\ndata\ndata\n\ndata:\n"),
            [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
    }

    func testOneSpaceAfterTheColonIsRemovedAndNoMore() throws {
        XCTAssertEqual(
            try events("data:test\n\ndata: test\n\ndata:  test\n\n"),
            [ServerSentEvent(data: "test"), ServerSentEvent(data: "test"), ServerSentEvent(data: " test")])
    }

    // MARK: - Fields

    func testEventFieldNamesTheTypeAndTheDefaultIsNil() throws {
        XCTAssertEqual(
            try events("event: add\ndata: 73857293\n\nevent:\ndata: plain\n\ndata: after\n\n"),
            [
                ServerSentEvent(event: "add", data: "73857293"),
                ServerSentEvent(event: nil, data: "plain"),
                ServerSentEvent(event: nil, data: "after"),
            ])
    }

    func testABlockWithoutDataIsNotDispatchedButItsIDStillCounts() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.parse(Data("id: 7\nevent: ignored\n\n".utf8)), [])
        XCTAssertEqual(parser.lastEventID, "7")
        XCTAssertEqual(try parser.parse(Data("data: x\n\n".utf8)), [ServerSentEvent(id: "7", data: "x")])
    }

    func testIDContainingNULIsIgnored() throws {
        XCTAssertEqual(
            try events("id: 1\ndata: a\n\nid: 2\u{0}3\ndata: b\n\n"),
            [ServerSentEvent(id: "1", data: "a"), ServerSentEvent(id: "1", data: "b")])
    }

    func testRetryIsTakenOnlyWhenAllASCIIDigits() throws {
        var parser = ServerSentEventParser()
        let stream = "retry: 1500\n\nretry: 12a\n\nretry: -5\n\nretry: \n\nretry:  200\n\nretry: ３\n\ndata: x\n\n"
        XCTAssertEqual(try parser.parse(Data(stream.utf8)), [ServerSentEvent(data: "x")])
        XCTAssertEqual(parser.reconnectionTime, 1500, "only the first retry was all ASCII digits")
        XCTAssertEqual(
            try events("retry: 50\ndata: x\n\ndata: y\n\n"),
            [ServerSentEvent(data: "x", retry: 50), ServerSentEvent(data: "y")],
            "an event reports the retry of its own block")
        var huge = ServerSentEventParser()
        _ = try huge.parse(Data("retry: 99999999999999999999999\n\n".utf8))
        XCTAssertNil(huge.reconnectionTime, "a value past Int is ignored")
    }

    func testAFieldWithoutColonIsANameWithAnEmptyValue() throws {
        XCTAssertEqual(try events("data\n\n"), [ServerSentEvent(data: "")])
        XCTAssertEqual(try events("event\ndata: x\n\n"), [ServerSentEvent(data: "x")])
    }

    func testUnknownFieldsAndCommentsAreIgnored() throws {
        XCTAssertEqual(
            try events(": comment\nfoo: bar\nDATA: shouted\ndata : spaced\ndata: kept\n:another\n\n"),
            [ServerSentEvent(data: "kept")])
    }

    // MARK: - Line ends and decoding

    func testLFAndCRAndCRLFEachEndALine() throws {
        XCTAssertEqual(
            try events("data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\rdata: e\n\n"),
            [ServerSentEvent(data: "a\nb\nc"), ServerSentEvent(data: "d"), ServerSentEvent(data: "e")])
    }

    func testCRLFSplitAcrossChunksIsOneLineEnd() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.parse(Data("data: a\r".utf8)), [])
        XCTAssertEqual(
            try parser.parse(Data("\n\r".utf8)), [ServerSentEvent(data: "a")],
            "the CR ended the data line, the LF after it ended nothing, the next CR is the blank line")
        XCTAssertEqual(try parser.parse(Data("\ndata: b\r\n\r\n".utf8)), [ServerSentEvent(data: "b")])
    }

    func testAnEventIsDispatchedAsSoonAsItsBlankLineEndsWithCR() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            try parser.parse(Data("data: now\r\r".utf8)), [ServerSentEvent(data: "now")],
            "not held back waiting to see whether an LF follows")
    }

    func testALeadingByteOrderMarkIsSkippedOnce() throws {
        let bom = Data([0xEF, 0xBB, 0xBF])
        XCTAssertEqual(try events(bom + Data("data: x\n\n".utf8)), [ServerSentEvent(data: "x")])
        XCTAssertEqual(
            try events(bom + bom + Data("data: x\n\ndata: y\n\n".utf8)), [ServerSentEvent(data: "y")],
            "a second mark is part of the first line's field name")
        XCTAssertEqual(
            try events(Data("data: \u{FEFF}x\n\n".utf8)), [ServerSentEvent(data: "\u{FEFF}x")],
            "a mark inside the stream is data")
    }

    func testInvalidUTF8BecomesReplacementCharacters() throws {
        let stream = Data("data: a".utf8) + Data([0xFF, 0xE2, 0x82]) + Data("\ndata: \u{20AC}\n\n".utf8)
        XCTAssertEqual(try events(stream), [ServerSentEvent(data: "a\u{FFFD}\u{FFFD}\n\u{20AC}")])
    }

    func testAMultibyteCharacterSplitAcrossChunksIsDecodedWhole() throws {
        var parser = ServerSentEventParser()
        let euro = Array("\u{20AC}".utf8)
        XCTAssertEqual(try parser.parse(Data("data: ".utf8) + Data(euro.prefix(1))), [])
        XCTAssertEqual(
            try parser.parse(Data(euro.dropFirst()) + Data("\n\n".utf8)), [ServerSentEvent(data: "\u{20AC}")])
    }

    // MARK: - End of stream

    func testAnEventWithoutItsBlankLineIsNotDispatchedAtTheEnd() throws {
        XCTAssertEqual(try events("data: complete\n\ndata: cut"), [ServerSentEvent(data: "complete")])
        XCTAssertEqual(try events("data: complete\n\ndata: cut\n"), [ServerSentEvent(data: "complete")])
    }

    func testEndOfStreamDiscardsThePendingEventAndItsIDButKeepsTheLastEventID() throws {
        var parser = ServerSentEventParser()
        _ = try parser.parse(Data("id: 1\ndata: a\n\nid: 2\ndata: cut\n".utf8))
        parser.endOfStream()
        XCTAssertEqual(parser.lastEventID, "1", "the next connection resumes after the last event delivered")
        let bom = Data([0xEF, 0xBB, 0xBF])
        XCTAssertEqual(
            try parser.parse(bom + Data("data: b\n\n".utf8)), [ServerSentEvent(id: "1", data: "b")],
            "the next stream starts afresh: its mark is skipped, nothing of the cut event remains")
    }

    func testLastEventIDGivenAtTheStartIsCarried() throws {
        var parser = ServerSentEventParser(lastEventID: "41")
        XCTAssertEqual(try parser.parse(Data("data: x\n\n".utf8)), [ServerSentEvent(id: "41", data: "x")])
    }

    // MARK: - Size limit

    func testAnEventPastTheMaximumSizeThrowsAndIsDropped() throws {
        var parser = ServerSentEventParser(maximumEventSize: 64)
        XCTAssertEqual(
            try parser.parse(Data("data: \(String(repeating: "a", count: 50))\n\n".utf8)).first?.data.count, 50)
        XCTAssertEqual(try parser.parse(Data("data: \(String(repeating: "b", count: 40))\n".utf8)), [])
        do {
            _ = try parser.parse(Data("data: \(String(repeating: "c", count: 40))\n".utf8))
            XCTFail("two data lines of 40 bytes pass 64 bytes")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .dataLengthExceedsMaximum, "\(error)")
        }
        XCTAssertEqual(
            try parser.parse(Data("data: d\n\n".utf8)), [ServerSentEvent(data: "d")],
            "nothing of the dropped event stays")
    }

    func testALineWithoutEndIsBoundedByTheMaximumSize() throws {
        var parser = ServerSentEventParser(maximumEventSize: 1024)
        let chunk = Data(repeating: UInt8(ascii: "z"), count: 100)
        var threw = false
        for _ in 0..<20 {
            do {
                _ = try parser.parse(chunk)
            } catch {
                threw = true
                break
            }
        }
        XCTAssertTrue(threw, "an endless line is refused once it passes the limit")
    }

    func testCommentsDoNotAccumulateTowardsTheLimit() throws {
        var parser = ServerSentEventParser(maximumEventSize: 64)
        for _ in 0..<100 { XCTAssertEqual(try parser.parse(Data(": keep-alive heartbeat\n".utf8)), []) }
        XCTAssertEqual(try parser.parse(Data("data: x\n\n".utf8)), [ServerSentEvent(data: "x")])
    }

    func testEventsArriveInOrderAcrossManySmallChunks() throws {
        var stream = Data()
        for number in 1...200 { stream += Data("id: \(number)\r\nevent: n\r\ndata: \(number)\r\n\r\n".utf8) }
        var parser = ServerSentEventParser()
        var received: [ServerSentEvent] = []
        var offset = 0
        var size = 1
        while offset < stream.count {
            received += try parser.parse(stream.subdata(in: offset..<min(offset + size, stream.count)))
            offset += size
            size = size % 13 + 1
        }
        XCTAssertEqual(received, (1...200).map { ServerSentEvent(id: "\($0)", event: "n", data: "\($0)") })
    }
}
