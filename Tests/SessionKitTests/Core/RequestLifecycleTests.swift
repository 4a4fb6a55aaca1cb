import Foundation
@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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

    /// A request's identifier is made when first read (a `UUID` costs three system calls on Linux), and is then the
    /// same at every read, from any thread; two requests never share one.
    func testARequestsIdentifierIsTheSameAtEveryReadAndItsOwn() {
        let request = SessionRequest(URLRequest(url: URL(string: "http://example.com/")!))
        let other = SessionRequest(URLRequest(url: URL(string: "http://example.com/")!))
        let reads = LockedReads()
        DispatchQueue.concurrentPerform(iterations: 32) { _ in reads.add(request.id) }
        XCTAssertEqual(reads.distinct, [request.id])
        XCTAssertEqual(request.id, request.id)
        XCTAssertNotEqual(request.id, other.id)
    }
}

/// Identifiers read from several threads.
private final class LockedReads: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: Set<UUID> = []
    func add(_ id: UUID) { lock.withLock { _ = seen.insert(id) } }
    var distinct: Set<UUID> { lock.withLock { seen } }
}
