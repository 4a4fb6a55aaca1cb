@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The curl task's lifecycle, transition by transition, without I/O: the action each event returns in each state,
/// and the events that do not apply (they change nothing and return `.none`).
final class TransferLifecycleTests: XCTestCase {
    private func loading() -> TransferLifecycle {
        var lifecycle = TransferLifecycle()
        XCTAssertEqual(lifecycle.resume(), .startTransfer)
        return lifecycle
    }

    func testACreatedTaskStartsOnItsFirstResumeAndCountsSuspensions() {
        var lifecycle = TransferLifecycle()
        XCTAssertEqual(lifecycle.taskState, .suspended)
        XCTAssertEqual(lifecycle.suspend(), .countedSuspension)
        XCTAssertEqual(lifecycle.suspend(), .countedSuspension)
        XCTAssertEqual(lifecycle.resume(), .countedResume)
        XCTAssertEqual(lifecycle.resume(), .countedResume, "suspended twice: two resumes are owed before it starts")
        XCTAssertEqual(lifecycle.resume(), .startTransfer)
        XCTAssertEqual(lifecycle.state, .connecting)
        XCTAssertEqual(lifecycle.taskState, .running)
        XCTAssertEqual(lifecycle.resume(), .none, "resuming a running task does nothing")
    }

    func testAHappyTransfer() {
        var lifecycle = loading()
        XCTAssertEqual(lifecycle.requestSent(), .none)
        XCTAssertEqual(lifecycle.state, .sending)
        XCTAssertEqual(lifecycle.headReceived(), .none)
        XCTAssertEqual(lifecycle.state, .receiving)
        XCTAssertEqual(lifecycle.ended(failed: false), .complete)
        XCTAssertEqual(lifecycle.state, .finished)
        XCTAssertEqual(lifecycle.taskState, .completed)
        XCTAssertTrue(lifecycle.isTerminal)
    }

    func testEndingTwiceCompletesOnce() {
        var lifecycle = loading()
        XCTAssertEqual(lifecycle.ended(failed: true), .complete)
        XCTAssertEqual(lifecycle.state, .failed)
        XCTAssertEqual(lifecycle.ended(failed: false), .none)
        XCTAssertEqual(lifecycle.cancel(), .none, "cancelling an ended task does nothing")
        XCTAssertEqual(lifecycle.state, .failed)
    }

    func testCancelBeatsALateEnd() {
        var lifecycle = loading()
        XCTAssertEqual(lifecycle.headReceived(), .none)
        XCTAssertEqual(lifecycle.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(lifecycle.taskState, .canceling)
        XCTAssertEqual(lifecycle.ended(failed: false), .none, "the transfer's own end, arriving later, is ignored")
        XCTAssertEqual(lifecycle.cancel(), .none)
        XCTAssertEqual(lifecycle.state, .cancelled)
    }

    func testACreatedTaskCanBeCancelledButNotEnded() {
        var lifecycle = TransferLifecycle()
        XCTAssertEqual(lifecycle.ended(failed: false), .none, "no transfer ran")
        XCTAssertEqual(lifecycle.requestSent(), .none)
        XCTAssertEqual(lifecycle.nextTransfer(), .none)
        XCTAssertEqual(lifecycle.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(lifecycle.resume(), .none, "a cancelled task never starts")
    }

    func testPauseHoldsWhereTheTransferWasAndGoesOnFromThere() {
        var lifecycle = loading()
        XCTAssertEqual(lifecycle.requestSent(), .none)
        XCTAssertEqual(lifecycle.suspend(), .pauseTransfer)
        XCTAssertEqual(lifecycle.state, .paused(from: .sending))
        XCTAssertEqual(lifecycle.taskState, .suspended)
        XCTAssertEqual(lifecycle.suspend(), .none, "already paused")
        XCTAssertEqual(lifecycle.headReceived(), .none, "the head may still arrive while paused")
        XCTAssertEqual(lifecycle.state, .paused(from: .receiving))
        XCTAssertEqual(lifecycle.resume(), .resumeTransfer)
        XCTAssertEqual(lifecycle.state, .receiving)
        XCTAssertEqual(lifecycle.suspend(), .pauseTransfer)
        XCTAssertEqual(lifecycle.ended(failed: true), .complete, "a paused task still ends (its timeout)")
        XCTAssertEqual(lifecycle.resume(), .none)
    }

    func testRedirectAndChallengeStartTheNextTransfer() {
        var lifecycle = loading()
        XCTAssertEqual(lifecycle.nextTransfer(), .none, "no decision pending")
        XCTAssertEqual(lifecycle.heldResponseEnded(challenge: false), .none)
        XCTAssertEqual(lifecycle.state, .redirecting)
        XCTAssertEqual(lifecycle.taskState, .running)
        XCTAssertEqual(lifecycle.nextTransfer(), .startTransfer)
        XCTAssertEqual(lifecycle.state, .connecting)
        XCTAssertEqual(lifecycle.heldResponseEnded(challenge: true), .none)
        XCTAssertEqual(lifecycle.state, .challenged)
        XCTAssertEqual(lifecycle.cancel(), .stopAndCompleteCancelled, "a challenge answered by cancelling")
        XCTAssertEqual(lifecycle.nextTransfer(), .none, "nothing starts after a cancel")
        XCTAssertEqual(lifecycle.heldResponseEnded(challenge: false), .none)
        XCTAssertEqual(lifecycle.state, .cancelled)
    }
}
