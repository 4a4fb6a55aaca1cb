@testable import SessionKit
import XCTest

/// The request pipeline's state machine, without I/O.
final class RequestLifecycleTests: XCTestCase {
    func testAttemptsRetriesAndTheEnd() {
        var lifecycle = RequestLifecycle()
        XCTAssertFalse(lifecycle.taskStarted(), "no task before adapting")
        XCTAssertTrue(lifecycle.beginAttempt())
        XCTAssertFalse(lifecycle.beginAttempt(), "one attempt at a time")
        XCTAssertTrue(lifecycle.taskStarted())
        XCTAssertTrue(lifecycle.willRetry())
        XCTAssertTrue(lifecycle.beginAttempt())
        XCTAssertEqual(lifecycle.attempts, 2)
        XCTAssertTrue(lifecycle.taskStarted())
        XCTAssertTrue(lifecycle.finish())
        XCTAssertFalse(lifecycle.finish())
        XCTAssertFalse(lifecycle.cancel(), "nothing leaves finished")
        XCTAssertFalse(lifecycle.beginAttempt())
        XCTAssertEqual(lifecycle.state, .finished)
    }

    func testCancelStopsEveryFurtherStep() {
        var lifecycle = RequestLifecycle()
        XCTAssertTrue(lifecycle.beginAttempt())
        XCTAssertTrue(lifecycle.cancel())
        XCTAssertFalse(lifecycle.taskStarted(), "a task created while adapting is cancelled at once")
        XCTAssertFalse(lifecycle.willRetry())
        XCTAssertFalse(lifecycle.beginAttempt())
        XCTAssertFalse(lifecycle.finish())
        XCTAssertTrue(lifecycle.isCancelled)
        XCTAssertEqual(lifecycle.attempts, 1)
    }
}
