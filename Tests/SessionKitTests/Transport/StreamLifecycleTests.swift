import Foundation
import XCTest

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `StreamLifecycle` without I/O: the order of completions, the barriers, the end of stream, timeouts and the one end.
final class StreamLifecycleTests: XCTestCase {
    private typealias Lifecycle = StreamLifecycle

    private func read(_ id: Int, min: Int = 1, max: Int = 100, deadline: UInt64? = nil) -> Lifecycle.Read {
        Lifecycle.Read(id: id, minimum: min, maximum: max, deadline: deadline)
    }

    private func write(_ id: Int, _ text: String, deadline: UInt64? = nil) -> Lifecycle.Write {
        Lifecycle.Write(id: id, data: Data(text.utf8), deadline: deadline)
    }

    /// Completions as text, errors by their code (`URLError`s with different descriptions are not equal).
    private func text(_ completions: [Lifecycle.Completion]) -> [String] {
        completions.map { completion in
            switch completion {
            case .read(let id, let data, let atEOF, let error):
                let bytes = data.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "nil"
                return "read \(id) \(bytes)\(atEOF ? " eof" : "")\(error.map { " error \($0.code.rawValue)" } ?? "")"
            case .write(let id, let error):
                return "write \(id)\(error.map { " error \($0.code.rawValue)" } ?? "")"
            case .readClosed:
                return "readClosed"
            case .writeClosed:
                return "writeClosed"
            case .finished(let error):
                return "finished\(error.map { " error \($0.code.rawValue)" } ?? "")"
            }
        }
    }

    /// A resumed, connected lifecycle.
    private func open() -> Lifecycle {
        var lifecycle = Lifecycle()
        _ = lifecycle.resume()
        _ = lifecycle.write(write(0, "!"))  // the first operation connects
        _ = lifecycle.connected(nil)
        _ = lifecycle.handle(.sent(1))
        return lifecycle
    }

    func testTheConnectionOpensWithTheFirstOperationAfterResume() {
        var lifecycle = Lifecycle()
        XCTAssertFalse(lifecycle.read(read(1)).connect, "not resumed: nothing opens")
        XCTAssertEqual(lifecycle.taskState, .suspended)
        let (step, changed) = lifecycle.resume()
        XCTAssertTrue(changed)
        XCTAssertTrue(step.connect, "an operation was queued before resume")
        XCTAssertEqual(lifecycle.phase, .connecting)
        XCTAssertFalse(lifecycle.write(write(2, "x")).connect, "only once")

        var idle = Lifecycle()
        XCTAssertFalse(idle.resume().0.connect, "resumed without operations: no connection yet")
        XCTAssertTrue(idle.write(write(1, "x")).connect)
    }

    func testStartSecureConnectionBeforeAnyOperationConnectsWithTLS() {
        var lifecycle = Lifecycle()
        _ = lifecycle.resume()
        let step = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        XCTAssertTrue(lifecycle.isSecure)
        XCTAssertTrue(step.connect)
    }

    func testAnUpgradeWaitsForEarlierOperationsAndHoldsLaterOnes() {
        var lifecycle = open()
        _ = lifecycle.write(write(1, "STARTTLS"))
        _ = lifecycle.read(read(2, min: 2, max: 2))
        _ = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        _ = lifecycle.write(write(3, "secret"))
        _ = lifecycle.read(read(4))
        XCTAssertFalse(lifecycle.isSecure)
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .send(Data("STARTTLS".utf8)))
        _ = lifecycle.handle(.sent(8))
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .receive(2), "the read comes first")
        XCTAssertEqual(text(lifecycle.handle(.received(Data("GO".utf8))).completions), ["read 2 \"GO\""])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .handshake)
        XCTAssertEqual(lifecycle.nextIO(readBlocked: true, writeBlocked: true), .none, "waiting for the socket")
        XCTAssertEqual(text(lifecycle.handle(.secured).completions), [])
        XCTAssertTrue(lifecycle.isSecure)
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .send(Data("secret".utf8)))
    }

    func testAnUpgradeAfterCloseWriteFailsTheFollowingOperations() {
        var lifecycle = open()
        _ = lifecycle.closeWrite()
        _ = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        XCTAssertEqual(text(lifecycle.read(read(6)).completions), ["read 6 nil error -1200"])
    }

    func testReadsCompleteInOrderWithTheirMinimumAndMaximum() {
        var lifecycle = open()
        _ = lifecycle.read(read(1, min: 3, max: 4))
        _ = lifecycle.read(read(2, min: 1, max: 10))
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .receive(4))
        XCTAssertEqual(text(lifecycle.handle(.received(Data("ab".utf8))).completions), [], "below the minimum")
        XCTAssertEqual(
            text(lifecycle.handle(.received(Data("cdefg".utf8))).completions),
            ["read 1 \"abcd\"", "read 2 \"efg\""])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .none, "no read pending: no receive")
        XCTAssertEqual(lifecycle.bytesReceived, 7)
    }

    func testEndOfStreamCompletesThePendingReadWithWhatCameAndLaterReadsAtOnce() {
        var lifecycle = open()
        _ = lifecycle.read(read(1, min: 100, max: 1000))
        _ = lifecycle.handle(.received(Data("abc".utf8)))
        XCTAssertEqual(text(lifecycle.handle(.endOfStream).completions), ["read 1 \"abc\" eof", "readClosed"])
        XCTAssertEqual(text(lifecycle.read(read(2)).completions), ["read 2 \"\" eof"])
        XCTAssertEqual(lifecycle.taskState, .running, "the write side is still open")
    }

    func testWritesGoOutInOrderAndCloseWriteWaitsForThem() {
        var lifecycle = open()
        _ = lifecycle.write(write(1, "hello"))
        _ = lifecycle.closeWrite()
        XCTAssertEqual(text(lifecycle.write(write(2, "late")).completions), ["write 2 error -1005"])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .send(Data("hello".utf8)))
        XCTAssertEqual(text(lifecycle.handle(.sent(2)).completions), [])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .send(Data("llo".utf8)))
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: true), .none, "the socket would block")
        XCTAssertEqual(text(lifecycle.handle(.sent(3)).completions), ["write 1"])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .shutdownWrite)
        XCTAssertEqual(text(lifecycle.handle(.shutDownWrite).completions), ["writeClosed"])
        XCTAssertEqual(lifecycle.bytesSent, 6)
    }

    func testBothDirectionsClosedEndTheTaskOnce() {
        var lifecycle = open()
        _ = lifecycle.closeWrite()
        _ = lifecycle.handle(.shutDownWrite)
        _ = lifecycle.read(read(1))
        XCTAssertEqual(text(lifecycle.handle(.endOfStream).completions), ["read 1 \"\" eof", "readClosed", "finished"])
        XCTAssertEqual(lifecycle.taskState, .completed)
        XCTAssertEqual(text(lifecycle.cancel().completions), [], "an ended task does not end again")
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .release)
    }

    func testCloseReadLetsEarlierReadsFinishAndEndsLaterOnes() {
        var lifecycle = open()
        _ = lifecycle.read(read(1, min: 2, max: 2))
        _ = lifecycle.closeRead()
        _ = lifecycle.read(read(2))
        XCTAssertEqual(
            text(lifecycle.handle(.received(Data("ab".utf8))).completions),
            ["read 1 \"ab\"", "readClosed", "read 2 \"\" eof"])
    }

    func testCancelFailsEveryPendingOperationOnceAndEnds() {
        var lifecycle = open()
        _ = lifecycle.read(read(1))
        _ = lifecycle.read(read(2))
        _ = lifecycle.write(write(3, "x"))
        let step = lifecycle.cancel()
        XCTAssertEqual(
            text(step.completions),
            ["read 1 nil error -999", "read 2 nil error -999", "write 3 error -999", "finished error -999"])
        XCTAssertTrue(step.wake, "the engine releases the connection")
        XCTAssertEqual(text(lifecycle.cancel().completions), [])
        XCTAssertEqual(
            text(lifecycle.write(write(4, "y")).completions), ["write 4 error -999"],
            "operations after the end fail at once")
    }

    func testADeadlineFailsOnlyItsOperationAndKeepsTheBytes() {
        var lifecycle = open()
        _ = lifecycle.read(read(1, min: 5, max: 5, deadline: 100))
        _ = lifecycle.read(read(2, min: 1, max: 5))
        _ = lifecycle.handle(.received(Data("ab".utf8)))
        XCTAssertEqual(lifecycle.nextDeadline, 100)
        XCTAssertEqual(text(lifecycle.expire(now: 99).completions), [])
        XCTAssertEqual(text(lifecycle.expire(now: 100).completions), ["read 1 nil error -1001", "read 2 \"ab\""])
        XCTAssertEqual(lifecycle.taskState, .running)
    }

    func testAConnectionFailureFailsEverythingWithItsError() {
        var lifecycle = Lifecycle()
        _ = lifecycle.resume()
        _ = lifecycle.read(read(1))
        XCTAssertEqual(
            text(lifecycle.connected(URLError(.cannotConnectToHost)).completions),
            ["read 1 nil error -1004", "finished error -1004"])
        XCTAssertEqual(lifecycle.error?.code, .cannotConnectToHost)
    }

    func testASuspendedStreamDoesNoIO() {
        var lifecycle = open()
        _ = lifecycle.write(write(1, "x"))
        XCTAssertTrue(lifecycle.suspend())
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .none)
        XCTAssertEqual(lifecycle.taskState, .suspended)
        _ = lifecycle.resume()
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .send(Data("x".utf8)))
    }

    func testAnUpgradeWithUnreadPlaintextFailsInsteadOfHandingItToTheFirstSecureRead() {
        var lifecycle = open()
        _ = lifecycle.read(read(1, min: 10, max: 10, deadline: 100))
        _ = lifecycle.handle(.received(Data("GO\n".utf8)))
        XCTAssertEqual(text(lifecycle.expire(now: 100).completions), ["read 1 nil error -1001"])
        let upgrade = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        XCTAssertEqual(text(upgrade.completions), ["finished error -1200"])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .release, "no handshake")
        XCTAssertEqual(
            text(lifecycle.read(read(2)).completions), ["read 2 nil error -1200"],
            "the plain bytes never reach a read")
    }

    func testAWriteTimingOutAfterPartOfItWentOutEndsTheTask() {
        var lifecycle = open()
        _ = lifecycle.write(write(1, "abcdef", deadline: 100))
        _ = lifecycle.write(write(2, "next"))
        _ = lifecycle.read(read(3))
        _ = lifecycle.handle(.sent(2))
        _ = lifecycle.handle(.sendBlocked)
        XCTAssertEqual(
            text(lifecycle.expire(now: 100).completions),
            ["read 3 nil error -1001", "write 1 error -1001", "write 2 error -1001", "finished error -1001"],
            "the rest of write 1 is not dropped: the stream is out of step, everything fails once")
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .release)

        var plain = open()
        _ = plain.write(write(1, "abc", deadline: 100))
        _ = plain.write(write(2, "d"))
        _ = plain.handle(.sendBlocked)
        XCTAssertEqual(
            text(plain.expire(now: 100).completions), ["write 1 error -1001"],
            "plain TCP, nothing sent: that write alone is dropped")
        XCTAssertEqual(plain.nextIO(readBlocked: false, writeBlocked: false), .send(Data("d".utf8)))
    }

    func testATLSWriteTimingOutAfterItsSendBlockedEndsTheTask() {
        var lifecycle = Lifecycle()
        _ = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        _ = lifecycle.resume()
        _ = lifecycle.connected(nil)
        _ = lifecycle.write(write(1, "abc", deadline: 100))
        _ = lifecycle.handle(.sendBlocked)
        XCTAssertEqual(
            text(lifecycle.expire(now: 100).completions), ["write 1 error -1001", "finished error -1001"],
            "OpenSSL holds a record of it: the next write would send it")
    }

    func testTheInboxLetsGoOfWhatWasReadSoItHoldsAboutTheUnreadBytes() {
        var inbox = StreamInbox()
        let chunk = Data(repeating: 7, count: 65_536)
        // 64 MiB through it, read in pieces that do not line up with what came: a few unread bytes all along.
        inbox.append(chunk.prefix(16_384))
        for _ in 0..<1_024 {
            inbox.append(chunk)
            XCTAssertEqual(inbox.removeFirst(65_536).count, 65_536)
            XCTAssertLessThanOrEqual(inbox.retainedByteCount, 3 * 65_536, "what was read is let go")
        }
        XCTAssertEqual(inbox.count, 16_384)
        XCTAssertEqual(inbox.removeFirst(20_000).count, 16_384, "at most what is there")
        XCTAssertEqual(inbox.retainedByteCount, 0, "an emptied inbox holds nothing")

        // More comes than is read: bytes read stay at most as many as the unread ones, not copied at every read.
        for _ in 0..<1_024 {
            inbox.append(chunk)
            inbox.append(chunk.prefix(32_768))
            _ = inbox.removeFirst(65_536)
            XCTAssertLessThanOrEqual(inbox.retainedByteCount, inbox.count + max(65_536, inbox.count))
        }
        XCTAssertEqual(inbox.count, 1_024 * 32_768, "every unread byte is kept")

        var ordered = StreamInbox()
        ordered.append(Data("abc".utf8))
        XCTAssertEqual(ordered.removeFirst(1), Data("a".utf8))
        ordered.append(Data("de".utf8))
        XCTAssertEqual(ordered.removeFirst(10), Data("bcde".utf8), "in order")
    }

    func testAnUpgradeHandshakePastTheRequestTimeoutEndsTheTaskWithTimedOut() {
        var lifecycle = Lifecycle(handshakeTimeout: 2)
        _ = lifecycle.resume()
        _ = lifecycle.write(write(1, "STARTTLS"))
        _ = lifecycle.connected(nil)
        _ = lifecycle.handle(.sent(8))
        _ = lifecycle.startSecureConnection(error: URLError(.secureConnectionFailed))
        _ = lifecycle.write(write(2, "secret"))
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .handshake)
        XCTAssertNil(lifecycle.nextDeadline, "no operation has a deadline")
        _ = lifecycle.handle(.handshakeStarted(at: 1_000))
        XCTAssertEqual(lifecycle.nextDeadline, 2_000_001_000, "the handshake has one: the engine wakes for it")
        XCTAssertEqual(text(lifecycle.expire(now: 2_000_000_999).completions), [])
        XCTAssertEqual(
            text(lifecycle.expire(now: 2_000_001_000).completions), ["write 2 error -1001", "finished error -1001"])
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .release)

        var secured = Lifecycle(handshakeTimeout: 2)
        _ = secured.resume()
        _ = secured.write(write(1, "STARTTLS"))
        _ = secured.connected(nil)
        _ = secured.handle(.sent(8))
        _ = secured.startSecureConnection(error: URLError(.secureConnectionFailed))
        _ = secured.handle(.handshakeStarted(at: 1_000))
        _ = secured.handle(.secured)
        XCTAssertNil(secured.nextDeadline)
        XCTAssertEqual(text(secured.expire(now: 3_000_000_000).completions), [], "a done handshake has no deadline")
    }

    func testAWriteShutdownFailingWithBytesUnreadLeavesTheEndToTheReads() {
        let failure = URLError(.networkConnectionLost)
        var lifecycle = open()
        _ = lifecycle.closeWrite()
        XCTAssertEqual(lifecycle.nextIO(readBlocked: false, writeBlocked: false), .shutdownWrite)
        XCTAssertEqual(text(lifecycle.handle(.writeShutdownFailed(failure)).completions), ["writeClosed"])
        _ = lifecycle.read(read(1, min: 10))
        _ = lifecycle.handle(.received(Data("bye".utf8)))
        XCTAssertEqual(
            text(lifecycle.handle(.endOfStream).completions), ["read 1 \"bye\" eof", "readClosed", "finished"],
            "the peer had ended: both directions closed, no error")

        var broken = open()
        _ = broken.closeWrite()
        _ = broken.handle(.writeShutdownFailed(failure))
        _ = broken.read(read(1))
        XCTAssertEqual(
            text(broken.handle(.failed(failure)).completions), ["read 1 nil error -1005", "finished error -1005"],
            "the reads find the broken connection")

        var notReading = open()
        _ = notReading.closeRead()
        _ = notReading.closeWrite()
        XCTAssertEqual(
            text(notReading.handle(.writeShutdownFailed(failure)).completions), ["finished error -1005"],
            "with the reads closed, nothing can tell the peer's end")
    }
}
