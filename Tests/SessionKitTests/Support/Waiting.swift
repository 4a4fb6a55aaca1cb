import XCTest

extension XCTestCase {
    /// Waits until `condition` holds, 5 s at most, checking every 10 ms without blocking a thread; fails the test
    /// naming `what` when it never does.
    func waitUntil(
        _ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool
    ) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(condition(), "timed out waiting: \(what)", file: file, line: line)
    }
}
