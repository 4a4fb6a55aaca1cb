import Foundation
import XCTest

@testable import SessionKit

/// `EventStreamLifecycle` without I/O: what a response head means, the reconnection delays, the bound on failures.
final class EventStreamLifecycleTests: XCTestCase {
    private func connected(_ lifecycle: inout EventStreamLifecycle) {
        lifecycle.connecting()
        XCTAssertEqual(lifecycle.responseArrived(status: 200, contentType: "text/event-stream"), .read)
    }

    func testResponseHeadsAreJudgedByStatusThenContentType() {
        let cases: [(Int, String?, EventStreamLifecycle.Verdict)] = [
            (200, "text/event-stream", .read),
            (200, "Text/Event-Stream; charset=utf-8", .read),
            (200, " text/event-stream ", .read),
            (201, "text/event-stream", .refuseStatus),  // "if res's status is not 200 … fail the connection"
            (205, "text/event-stream", .refuseStatus),
            (299, "text/event-stream", .refuseStatus),
            (204, nil, .end),
            (204, "text/event-stream", .end),
            (200, "text/plain", .refuseContentType),
            (200, nil, .refuseContentType),
            (200, "text/event-streams", .refuseContentType),
            (500, "text/event-stream", .refuseStatus),
            (404, "text/html", .refuseStatus),
            (301, nil, .refuseStatus),
        ]
        for (status, type, verdict) in cases {
            var lifecycle = EventStreamLifecycle(reconnectionTime: 3, maximumReconnectionAttempts: 5)
            lifecycle.connecting()
            XCTAssertEqual(
                lifecycle.responseArrived(status: status, contentType: type), verdict, "\(status) \(type ?? "-")")
            XCTAssertEqual(lifecycle.state == .finished, verdict != .read)
        }
    }

    func testAStreamThatBroughtBytesReconnectsAfterTheReconnectionTimePlusJitter() {
        var lifecycle = EventStreamLifecycle(reconnectionTime: 3, maximumReconnectionAttempts: 5)
        connected(&lifecycle)
        lifecycle.receivedBytes()
        XCTAssertEqual(lifecycle.connectionEnded(jitter: 0), .reconnect(after: 3))
        connected(&lifecycle)
        lifecycle.receivedBytes()
        lifecycle.reconnectionTime = 0.05  // a `retry: 50`
        guard case .reconnect(let delay) = lifecycle.connectionEnded(jitter: 0.999) else {
            return XCTFail("a productive connection reconnects")
        }
        XCTAssertEqual(delay, 0.05 * 1.2, accuracy: 0.001, "at most 20 % of jitter")
        XCTAssertEqual(lifecycle.consecutiveFailures, 0)
    }

    func testConnectionsThatBringNothingBackOffAndAreBounded() {
        var lifecycle = EventStreamLifecycle(reconnectionTime: 1, maximumReconnectionAttempts: 3)
        var delays: [EventStreamLifecycle.Next] = []
        lifecycle.connecting()
        delays.append(lifecycle.connectionEnded(jitter: 0))  // failed before a head
        connected(&lifecycle)
        delays.append(lifecycle.connectionEnded(jitter: 0))  // a head, then nothing
        lifecycle.connecting()
        delays.append(lifecycle.connectionEnded(jitter: 0))
        lifecycle.connecting()
        delays.append(lifecycle.connectionEnded(jitter: 0))
        XCTAssertEqual(delays, [.reconnect(after: 1), .reconnect(after: 2), .reconnect(after: 4), .giveUp])
        XCTAssertEqual(lifecycle.state, .finished)
    }

    func testBytesResetTheFailureCount() {
        var lifecycle = EventStreamLifecycle(reconnectionTime: 1, maximumReconnectionAttempts: 2)
        for _ in 0..<10 {
            lifecycle.connecting()
            XCTAssertNotEqual(lifecycle.connectionEnded(jitter: 0), .giveUp)
            connected(&lifecycle)
            lifecycle.receivedBytes()
            XCTAssertEqual(lifecycle.connectionEnded(jitter: 0), .reconnect(after: 1))
        }
    }

    func testWaitsAreCappedWhateverTheServerAsks() {
        var lifecycle = EventStreamLifecycle(reconnectionTime: 1e12, maximumReconnectionAttempts: 100)
        for _ in 0..<40 {
            lifecycle.connecting()
            guard case .reconnect(let delay) = lifecycle.connectionEnded(jitter: 0.5) else {
                return XCTFail("within the bound of failures")
            }
            XCTAssertEqual(delay, EventStreamLifecycle.maximumDelay)
        }
    }
}
