import XCTest

@testable import SessionKit

/// The curl transport's status-line reader against RFC 9112 4's grammar and the lines libcurl hands over, without I/O.
final class StatusLineTests: XCTestCase {
    func testStatusLinesRFC9112AllowsAreRead() {
        let lines: [(String, String, Int)] = [
            ("HTTP/1.1 200 OK\r\n", "HTTP/1.1", 200), ("HTTP/1.1 200\r\n", "HTTP/1.1", 200),
            ("HTTP/1.1 200 \r\n", "HTTP/1.1", 200), ("HTTP/1.0 404 Not Found\r\n", "HTTP/1.0", 404),
            ("HTTP/2 200 \r\n", "HTTP/2", 200), ("HTTP/3 103 \r\n", "HTTP/3", 103), ("HTTP/1.1 999 x", "HTTP/1.1", 999),
            ("HTTP/1.1 100 Continue\n", "HTTP/1.1", 100), ("HTTP/1.1 302 Found: elsewhere\r\n", "HTTP/1.1", 302),
        ]
        for (text, version, code) in lines {
            let line = StatusLine(text)
            XCTAssertEqual(line?.version, version, text.debugDescription)
            XCTAssertEqual(line?.code, code, text.debugDescription)
        }
    }

    func testLinesThatAreNotStatusLinesAreRefused() {
        for text in [
            "HTTP/1.1 2000 OK", "HTTP/1.1 20 OK", "HTTP/1.1 099 Low", "HTTP/1.1 000", "HTTP/1.1  200 OK",
            "HTTP/1.1 2OO OK", "HTTP/1.1\t200 OK", "HTTP/x.1 200 OK", "HTTP/1. 200 OK", "HTTP/11 200 OK",
            "HTTP/1.1 200OK", "HTTP/1.1", "HTTP/", "", "http/1.1 200 OK", "HTTP/1.1 -20 OK",
        ] {
            XCTAssertNil(StatusLine(text), text.debugDescription)
        }
    }
}
