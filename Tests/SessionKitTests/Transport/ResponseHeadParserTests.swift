import XCTest

@testable import SessionKit

/// The curl transport's response-head reader, line by line as libcurl hands the lines over, without I/O (RFC 9112 4,
/// 5, 5.2; RFC 9110 5.5).
final class ResponseHeadParserTests: XCTestCase {
    private func read(_ lines: [String]) -> (ResponseHeadParser, [ResponseHeadParser.Outcome]) {
        var parser = ResponseHeadParser()
        var outcomes: [ResponseHeadParser.Outcome] = []
        for line in lines {
            var text = line
            outcomes.append(text.withUTF8 { parser.read(UnsafeRawBufferPointer($0)) })
        }
        return (parser, outcomes)
    }

    func testAHeadIsItsStatusLineFieldsAndBlankLine() {
        let (parser, outcomes) = read([
            "HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "Set-Cookie: a=1\r\n", "Set-Cookie: b=2\r\n",
            "X-Empty:\r\n", "X-Spaces:   padded value \t\r\n", "\r\n",
        ])
        XCTAssertEqual(outcomes.first, .status(StatusLine("HTTP/1.1 200 OK")!))
        XCTAssertEqual(outcomes.last, .end)
        XCTAssertEqual(parser.fields.map(\.0), ["Content-Type", "Set-Cookie", "Set-Cookie", "X-Empty", "X-Spaces"])
        XCTAssertEqual(parser.fields.map(\.1), ["text/plain", "a=1", "b=2", "", "padded value"])
    }

    func testObsoleteLineFoldingBecomesASpace() {
        let (parser, outcomes) = read([
            "HTTP/1.0 200 OK\r\n", "X-Folded: first\r\n", "  second\r\n", "\tthird\r\n", "\r\n",
        ])
        XCTAssertEqual(parser.fields.first?.1, "first second third")
        XCTAssertEqual(parser.fields.count, 1)
        XCTAssertEqual(outcomes[2], .field(name: "X-Folded", value: "first second"))
    }

    func testANewStatusLineStartsANewHead() {
        let (parser, _) = read([
            "HTTP/1.1 100 Continue\r\n", "X-Interim: 1\r\n", "\r\n", "HTTP/1.1 201 Created\r\n", "X-Final: 2\r\n",
        ])
        XCTAssertEqual(parser.status?.code, 201)
        XCTAssertEqual(parser.fields.map(\.0), ["X-Final"])
    }

    func testWhatIsNotHTTPIsMalformedNeverDropped() {
        let cases: [[String]] = [
            ["HTTP/1.1 2000 OK\r\n"], ["X-Before: status\r\n"], ["\r\n"], ["HTTP/1.1 200 OK\r\n", "No colon here\r\n"],
            ["HTTP/1.1 200 OK\r\n", "Bad Name: x\r\n"], ["HTTP/1.1 200 OK\r\n", "X-Space : x\r\n"],
            ["HTTP/1.1 200 OK\r\n", ": no name\r\n"], ["HTTP/1.1 200 OK\r\n", "  fold without a field\r\n"],
            ["HTTP/1.1 200 OK\r\n", "Nön-ASCII: x\r\n"],
        ]
        for lines in cases {
            let (_, outcomes) = read(lines)
            guard case .malformed(let reason)? = outcomes.last else {
                return XCTFail("\(lines) was accepted: \(outcomes)")
            }
            XCTAssertFalse(reason.isEmpty)
        }
    }

    func testCRLFAndNULInsideAValueBecomeSpaces() {
        let (parser, _) = read(["HTTP/1.1 200 OK\r\n", "X-Odd: a\u{0}b\rc\r\n"])
        XCTAssertEqual(parser.fields.first?.1, "a b c")
        // Found by the `head` fuzz target: a CR right after the colon's space left the value starting with a space.
        let (leading, _) = read(["HTTP/2 200 \r\n", "c-Length: \r15\n"])
        XCTAssertEqual(leading.fields.first?.1, "15")
    }

    func testTrailerLinesAreFieldLines() {
        func line(_ text: String) -> ResponseHeadParser.FieldLine {
            var text = text
            return text.withUTF8 { ResponseHeadParser.fieldLine(UnsafeRawBufferPointer($0)) }
        }
        XCTAssertEqual(line("X-Checksum: 7\r\n"), .field(name: "X-Checksum", value: "7"))
        XCTAssertEqual(line("\r\n"), .blank)
        XCTAssertEqual(line(" more\r\n"), .fold("more"))
        guard case .invalid = line("not a field\r\n") else { return XCTFail("accepted") }
    }

    /// Field names match without case, byte by byte: only ASCII letters fold, and a name of another length or with a
    /// byte that differs beyond case does not match (`@` and `` ` `` sit next to `A` and `a`; `[` next to `Z`).
    func testFieldNamesCompareWithoutASCIICaseOnly() {
        XCTAssertTrue("Content-Length".equalsIgnoringASCIICase("content-length"))
        XCTAssertTrue("CONTENT-LENGTH".equalsIgnoringASCIICase("Content-Length"))
        XCTAssertTrue("".equalsIgnoringASCIICase(""))
        XCTAssertFalse("Content-Length".equalsIgnoringASCIICase("Content-Lengths"))
        XCTAssertFalse("Content-Length".equalsIgnoringASCIICase("Content_Length"))
        XCTAssertFalse("@".equalsIgnoringASCIICase("`"))
        XCTAssertFalse("Z".equalsIgnoringASCIICase("["))
        XCTAssertFalse("X-\u{C9}t\u{E9}".equalsIgnoringASCIICase("x-\u{E9}t\u{E9}"), "only ASCII letters fold")
        XCTAssertTrue(
            "A-Much-Longer-Field-Name-Than-Fifteen".equalsIgnoringASCIICase("a-much-longer-FIELD-name-than-fifteen"))
    }

    /// A final head's `Content-Length`: digits that fit 64 bits, the same in every field and list member (RFC 9110
    /// 8.6, RFC 9112 6.3), optional whitespace around each; a `Transfer-Encoding` makes it irrelevant.
    func testContentLengthMustBeOneNumber() {
        func problem(_ values: [String], _ extra: [(String, String)] = []) -> String? {
            CurlTransfer.contentLengthProblem(in: values.map { ("content-length", $0) } + extra)
        }
        for fine in [["5"], [" 5 "], ["5", "5"], ["5, 5"], ["5,5"], ["0"], ["9223372036854775807"]] {
            XCTAssertNil(problem(fine), "\(fine)")
        }
        for bad in [
            ["5", "6"], ["5, 6"], ["5 5"], ["5abc"], ["-5"], ["+5"], [""], [",5"], ["5,"], ["0x10"],
            ["9223372036854775808"], ["99999999999999999999"],
        ] {
            XCTAssertNotNil(problem(bad), "\(bad)")
        }
        XCTAssertNil(problem(["5", "6"], [("Transfer-Encoding", "chunked")]), "the chunked framing wins")
        XCTAssertNil(CurlTransfer.contentLengthProblem(in: [("Content-Type", "text/plain")]), "none at all")
    }
}
