import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Streamed bodies: in order and complete, back-pressure towards a slow reader, cancellation by the reader.
final class StreamingTests: LoopbackTestCase {
    func testStreamedBodyArrivesInOrderAndComplete() async throws {
        let manager = makeManager()
        let streamed = try await manager.stream("/bytes/3000000?seed=9")
        XCTAssertEqual(streamed.response.statusCode, 200)
        var body = Data()
        var chunks = 0
        for try await chunk in streamed.body {
            body.append(chunk)
            chunks += 1
        }
        XCTAssertEqual(body, ByteGenerator.bytes(count: 3_000_000, seed: 9))
        XCTAssertGreaterThan(chunks, 1, "delivered as it arrived, not at the end")
    }

    func testStreamEndsWithTheTransportError() async throws {
        let manager = makeManager()
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/fault/close-mid-body")))
        do {
            for try await _ in streamed.body {}
            XCTFail("the server closed the connection in the middle of the body")
        } catch {
            // URLSession's own transport reports every such failure as -1.
            if LoopbackTestCase.testTransport == .curl {
                XCTAssertEqual((error as? URLError)?.code, .networkConnectionLost, "\(error)")
            }
        }
    }

    func testAnAdaptersRefusalEndsTheStreamBeforeAnythingIsSent() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(adapt: { _, _ in throw URLError(.userAuthenticationRequired) })
        do {
            _ = try await manager.stream("/bytes/100")
            XCTFail("refused by the adapter")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .userAuthenticationRequired, "\(error)")
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testSlowReaderPausesTheTransferInsteadOfBuffering() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "back-pressure is the curl transport's")
        let manager = makeManager(timeout: 60)
        let size = 192 << 20
        let before = residentBytes()
        let streamed = try await manager.stream("/bytes/\(size)")
        var received = 0
        var peak = 0
        for try await chunk in streamed.body {
            received += chunk.count
            if received < 32 << 20 {
                try await Task.sleep(nanoseconds: 2_000_000)  // slow at first: the transfer must wait for it
            }
            peak = max(peak, residentBytes() - before)
        }
        XCTAssertEqual(received, size)
        // Without back-pressure the first 32 MiB of slow reading would let most of the body pile up in memory.
        XCTAssertLessThan(peak, 96 << 20, "peak growth \(peak >> 20) MiB for a \(size >> 20) MiB body")
    }

    func testCancellingTheReaderCancelsTheRequest() async throws {
        let manager = makeManager()
        let reader = Task { () -> Int in
            let streamed = try await manager.stream("/drip?numbytes=100&duration=10")
            var count = 0
            for try await chunk in streamed.body { count += chunk.count }
            return count
        }
        while manager.tasks.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Task.sleep(nanoseconds: 300_000_000)
        reader.cancel()
        do {
            let count = try await reader.value
            XCTFail("a cancelled reader ended normally after \(count) bytes")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)")
        }
        for _ in 0..<200 where !manager.tasks.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(manager.tasks.isEmpty, "the request ended with its reader")
    }

    func testReaderCancelledBeforeItsFirstReadThrowsCancelled() async throws {
        let manager = makeManager()
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/drip?numbytes=10&duration=20")))
        let reader = Task { () -> Int in
            try? await Task.sleep(nanoseconds: 10_000_000_000)  // ends early, at the cancellation below
            var count = 0
            for try await chunk in streamed.body { count += chunk.count }
            return count
        }
        reader.cancel()
        try await assertEndsCancelled(reader, manager)
    }

    func testReaderCancelledWhileAReadWaitsThrowsCancelled() async throws {
        let manager = makeManager()
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/drip?numbytes=10&duration=20")))
        let firstChunk = OnceBox<Void>()
        let reader = Task { () -> Int in
            var count = 0
            for try await chunk in streamed.body {
                count += chunk.count
                firstChunk.resolve(())  // the next piece comes 2 s later: the next read waits for it
            }
            return count
        }
        try await firstChunk.value(timeout: 10, file: #filePath, line: #line)
        try await Task.sleep(nanoseconds: 200_000_000)
        reader.cancel()
        try await assertEndsCancelled(reader, manager)
    }

    func testReaderCancelledBetweenReadsThrowsCancelled() async throws {
        let manager = makeManager()
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/drip?numbytes=10&duration=20")))
        let firstChunk = OnceBox<Void>()
        let reader = Task { () -> Int in
            var count = 0
            for try await chunk in streamed.body {
                count += chunk.count
                firstChunk.resolve(())
                // Busy with the chunk, not reading, when the cancellation comes: the sleep ends early at it.
                try? await Task.sleep(nanoseconds: 10_000_000_000)
            }
            return count
        }
        try await firstChunk.value(timeout: 10, file: #filePath, line: #line)
        reader.cancel()
        try await assertEndsCancelled(reader, manager)
    }

    /// `reader` throws `URLError.cancelled` instead of returning a short body, and its request ends.
    private func assertEndsCancelled(
        _ reader: Task<Int, Error>, _ manager: URLSessionManager, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        do {
            let count = try await reader.value
            XCTFail("the cancelled reader ended normally, as if the body had \(count) bytes", file: file, line: line)
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)", file: file, line: line)
        }
        for _ in 0..<300 where !manager.tasks.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(manager.tasks.isEmpty, "the request ended with its reader", file: file, line: line)
    }

    func testDroppingTheStreamUnreadCancelsTheRequest() async throws {
        let manager = makeManager()
        do {
            let streamed = try await manager.stream("/drip?numbytes=100&duration=10")
            XCTAssertEqual(streamed.response.statusCode, 200)
        }
        for _ in 0..<300 where !manager.tasks.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(manager.tasks.isEmpty)
    }

    func testClosureFormHandsChunksInOrderThenCompletes() async throws {
        let manager = makeManager()
        let body = LockedBox(Data())
        let outcome: (URLResponse?, Error?) = try await awaitCallback { done in
            let task = manager.streamTask(
                with: URLRequest(url: server.url("/stream-bytes/500000?chunk_size=7000")),
                chunk: { chunk in body.write { $0.append(chunk) } },
                completion: { response, error in done((response, error)) })
            manager.resume(task)
        }
        XCTAssertNil(outcome.1)
        XCTAssertEqual((outcome.0 as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(body.wrappedValue, ByteGenerator.bytes(count: 500_000, seed: 42))
    }

    private func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
        return 0
    }
}
