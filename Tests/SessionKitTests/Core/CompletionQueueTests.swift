import Dispatch
import Foundation
import XCTest

@testable import SessionKit

/// The manager's own completion queue shares its hops (``CompletionQueue``): work runs in the order it was handed
/// over, inside its group until it has run, and work handed over while a hop waits goes with that hop.
final class CompletionQueueTests: XCTestCase {
    /// What the pieces recorded, in the order they ran.
    private final class Record: @unchecked Sendable {
        // @unchecked Sendable: `lock` guards `entries`.
        private let lock = NSLock()
        private var entries: [String] = []
        func add(_ entry: String) { lock.withLock { entries.append(entry) } }
        var all: [String] { lock.withLock { entries } }
    }

    func testPiecesRunInTheOrderTheyWereHandedOverAndTheGroupWaitsForAllOfThem() async throws {
        let batch = CompletionQueue.Batch(serial: DispatchQueue(label: "test.completion.order"))
        let group = DispatchGroup()
        let queue = CompletionQueue(own: batch, group: group)
        let record = Record()
        for index in 0..<1000 { queue.async { record.add(String(index)) } }
        let ranBeforeNotify: Int = try await awaitCallback { done in
            group.notify(queue: .global()) { done(record.all.count) }
        }
        XCTAssertEqual(ranBeforeNotify, 1000, "the group counted every piece until it had run")
        XCTAssertEqual(record.all, (0..<1000).map(String.init))
    }

    func testWorkHandedOverWhileAHopWaitsGoesWithThatHop() async throws {
        let serial = DispatchQueue(label: "test.completion.coalesce")
        let batch = CompletionQueue.Batch(serial: serial)
        let queue = CompletionQueue(own: batch, group: DispatchGroup())
        let record = Record()
        serial.suspend()  // the first hop waits
        queue.async { record.add("first") }
        serial.async { record.add("other work") }  // queued after the first hop
        queue.async { record.add("second") }
        queue.async { record.add("third") }
        serial.resume()
        let _: Void = try await awaitCallback { done in serial.async { done(()) } }
        // With one hop per piece, "other work" would run between "first" and "second".
        XCTAssertEqual(record.all, ["first", "second", "third", "other work"])
    }

    func testAPieceThatHandsOverAnotherRunsItAfterItselfInTheNextHop() async throws {
        let serial = DispatchQueue(label: "test.completion.reentrant")
        let batch = CompletionQueue.Batch(serial: serial)
        let group = DispatchGroup()
        let queue = CompletionQueue(own: batch, group: group)
        let record = Record()
        queue.async {
            queue.async { record.add("inner") }
            serial.async { record.add("between") }  // queued after the next hop, before its run
            record.add("outer")
        }
        let _: Void = try await awaitCallback { done in group.notify(queue: .global()) { done(()) } }
        let _: Void = try await awaitCallback { done in serial.async { done(()) } }
        // Run by the hop it was handed over in, "inner" would come before "between".
        XCTAssertEqual(record.all, ["outer", "inner", "between"])
    }

    func testAPieceIsReleasedBeforeItsGroupIsLeft() async throws {
        final class Held: Sendable {}
        final class Weak: @unchecked Sendable {
            // @unchecked Sendable: set once before it is shared, then only read.
            weak var held: Held?
        }
        let serial = DispatchQueue(label: "test.completion.release")
        let batch = CompletionQueue.Batch(serial: serial)
        let (first, second) = (DispatchGroup(), DispatchGroup())
        let weak = Weak()
        let record = Record()
        serial.suspend()  // both pieces go in one hop
        do {
            let held = Held()
            weak.held = held
            batch.async(group: first) { _ = held }
        }
        // Looks, within the same hop, at the first piece's group (without waiting) and at what the piece captured.
        batch.async(group: second) {
            record.add(first.wait(timeout: .now()) == .success ? "left" : "not left")
            record.add(weak.held == nil ? "released" : "still held")
        }
        serial.resume()
        let _: Void = try await awaitCallback { done in second.notify(queue: .global()) { done(()) } }
        XCTAssertEqual(record.all, ["left", "released"])
    }

    func testACallersQueueGetsOneHopPerPieceInsideTheGroup() async throws {
        let serial = DispatchQueue(label: "test.completion.callers")
        let group = DispatchGroup()
        let queue = CompletionQueue(callers: serial, group: group)
        let record = Record()
        serial.suspend()
        queue.async { record.add("first") }
        serial.async { record.add("other work") }
        queue.async { record.add("second") }
        serial.resume()
        let _: Void = try await awaitCallback { done in group.notify(queue: .global()) { done(()) } }
        XCTAssertEqual(record.all, ["first", "other work", "second"])
    }
}
