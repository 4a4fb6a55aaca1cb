#if OpenAPI  // the package's `OpenAPI` trait: `swift build --build-tests --traits OpenAPI`
    import Foundation
    import HTTPTypes
    import OpenAPIRuntime
    import OpenAPISessionKit
    import SessionKit
    import SessionKitTestSupport
    import XCTest

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// Bodies through the generated client stream both ways with bounded memory, and cancelling the calling task stops
    /// the transfer.
    final class SessionKitTransportStreamingTests: OpenAPITestCase {
        func testA100MiBResponseIsReadThroughTheTransportWithBoundedMemory() async throws {
            let count = 100 << 20
            let client = try client()
            let started = Date()
            let before = Self.residentBytes()
            let body = try await client.downloadBytes(path: .init(count: Int64(count))).ok.body.binary
            XCTAssertEqual(body.length, .known(Int64(count)), "the Content-Length, as the body's length")
            let block = ByteGenerator.block(seed: 42)
            var received = 0
            var peak = before
            var mismatches = 0
            var chunks = 0
            for try await chunk in body {
                // Spot checks: a chunk's first byte is the generator's byte at its offset.
                if let first = chunk.first, first != block[received % block.count] { mismatches += 1 }
                received += chunk.count
                chunks += 1
                if chunks % 64 == 0 {
                    peak = max(peak, Self.residentBytes())
                    XCTAssertLessThan(Date().timeIntervalSince(started), 120, "bounded in time")
                    if Date().timeIntervalSince(started) > 120 { break }
                }
            }
            peak = max(peak, Self.residentBytes())
            let growth = peak - before
            let seconds = Date().timeIntervalSince(started)
            print(
                "OpenAPI 100 MiB download (\(Self.testTransport)): RSS before \(before >> 20) MiB, "
                    + "peak \(peak >> 20) MiB, "
                    + "growth \(growth >> 20) MiB, \(chunks) chunks in \(String(format: "%.1f", seconds)) s")
            XCTAssertEqual(received, count)
            XCTAssertEqual(mismatches, 0)
            XCTAssertLessThan(growth, 48 << 20, "the body was never held whole (100 MiB)")
        }

        func testA10MiBChunkedRequestBodyStreamsOut() async throws {
            let count = 10 << 20
            let block = ByteGenerator.block(seed: 42)
            let produced = LockedBox(0)
            // A producer of unknown length, making one 64 KiB block at a time as the transport asks for it.
            let blocks = GeneratedBlocks(block: block[...], count: count / block.count, produced: produced)
            let body = HTTPBody(blocks, length: .unknown, iterationBehavior: .single)
            let before = Self.residentBytes()
            let receipt = try await client().uploadBytes(body: .binary(body)).ok.body.json
            print(
                "OpenAPI 10 MiB chunked upload (\(Self.testTransport)): RSS growth "
                    + "\((Self.residentBytes() - before) >> 20) MiB"
            )
            XCTAssertEqual(produced.wrappedValue, count / block.count)
            XCTAssertEqual(receipt.bytes, Int64(count))
            XCTAssertTrue(receipt.matchesGenerator, "every byte in order")
            if Self.testTransport == .curl {
                XCTAssertTrue(receipt.chunked, "no length: chunked")
                XCTAssertNil(receipt.contentLength)
            }
        }

        func testCancellingTheCallingTaskStopsTheTransfer() async throws {
            let id = "openapi-cancel-\(UUID())"
            let client = try client()
            let bodyReading = LockedBox(false)
            let reading = Task {
                var received = 0
                let body = try await client.streamBytes(path: .init(streamID: id)).ok.body.binary
                bodyReading.write { $0 = true }  // the call returned: what is cancelled now is the body's read
                for try await chunk in body { received += chunk.count }
                return received
            }
            // The stream is flowing (more than 1 MiB went out) and the client is reading the body: a slow client
            // (under valgrind) may still be in the call, whose cancellation the runtime wraps in a `ClientError`.
            try await eventually { bodyReading.wrappedValue && (server.openAPIStream(id)?.sentBytes ?? 0) > 1 << 20 }
            XCTAssertTrue(bodyReading.wrappedValue, "the call returned its response")
            XCTAssertGreaterThan(server.openAPIStream(id)?.sentBytes ?? 0, 1 << 20, "the stream started")
            reading.cancel()
            do {
                let received = try await reading.value
                XCTFail("a cancelled read ended without an error after \(received) bytes")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)")
            }
            try await eventually { server.openAPIStream(id)?.connectionClosed == true }
            XCTAssertEqual(server.openAPIStream(id)?.connectionClosed, true, "the server saw the connection close")
            let sent = server.openAPIStream(id)?.sentBytes ?? 0
            try await Task.sleep(nanoseconds: 200_000_000)
            XCTAssertEqual(server.openAPIStream(id)?.sentBytes, sent, "nothing more went out")
        }

        func testCancellingTheCallingTaskWhileItWaitsForTheHeadFailsTheCallAtOnce() async throws {
            // `/fault/never-answer/…` reads the request and never answers.
            let client = try client(basePath: "/fault/never-answer")
            let call = Task { try await client.getItem(path: .init(itemID: 1)) }
            try await eventually { server.requestCount > 0 }
            XCTAssertEqual(server.requestCount, 1, "the request went out")
            let cancelled = Date()
            call.cancel()
            do {
                _ = try await call.value
                XCTFail("a cancelled call went through")
            } catch {
                XCTAssertEqual((underlyingError(error) as? URLError)?.code, .cancelled, "\(error)")
            }
            XCTAssertLessThan(Date().timeIntervalSince(cancelled), 2, "at once, not at the timeout")
        }
    }

    /// `count` copies of `block`, each made when it is asked for.
    private struct GeneratedBlocks: AsyncSequence, Sendable {
        typealias Element = ArraySlice<UInt8>

        struct AsyncIterator: AsyncIteratorProtocol {
            let block: ArraySlice<UInt8>
            var remaining: Int
            let produced: LockedBox<Int>

            mutating func next() async throws -> ArraySlice<UInt8>? {
                guard remaining > 0 else { return nil }
                remaining -= 1
                produced.write { $0 += 1 }
                return block
            }
        }

        let block: ArraySlice<UInt8>
        let count: Int
        let produced: LockedBox<Int>

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(block: block, remaining: count, produced: produced)
        }
    }
#endif
