import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - Async forms

/// The stream's operations as `async` calls. Cancelling the Swift task that awaits one cancels the stream task (as
/// URLSession's async methods cancel their task).
extension SessionStreamTask {
    /// Writes `data` once the writes queued before were sent.
    ///
    /// - Parameters:
    ///   - data: The bytes to send.
    ///   - timeout: Seconds after which the write fails with `URLError.timedOut`; 0 for none.
    /// - Throws: The write's `URLError` (`.cancelled`, `.timedOut`, `.networkConnectionLost`, a TLS refusal…).
    public func write(_ data: Data, timeout: TimeInterval = 0) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                write(data, timeout: timeout) { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Reads between `minLength` and `maxLength` bytes, after the reads queued before.
    ///
    /// - Parameters:
    ///   - minLength: The read returns once this many bytes arrived (at least one), or at the end of stream.
    ///   - maxLength: The most bytes it returns.
    ///   - timeout: Seconds after which the read fails with `URLError.timedOut`; 0 for none.
    /// - Returns: The bytes, and whether the end of stream was reached (then possibly fewer than `minLength`).
    public func read(
        minLength: Int = 1, maxLength: Int, timeout: TimeInterval = 0
    ) async throws -> (
        data: Data, atEOF: Bool
    ) {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<(data: Data, atEOF: Bool), Error>) in
                readData(ofMinLength: minLength, maxLength: maxLength, timeout: timeout) { data, atEOF, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: (data ?? Data(), atEOF))
                    }
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The bytes the stream receives, chunk by chunk, until the end of stream.
    ///
    /// ```swift
    /// var received = Data()
    /// for try await chunk in task.chunks() { received.append(chunk) }
    /// ```
    ///
    /// - Parameters:
    ///   - maxLength: The most bytes of one chunk.
    ///   - timeout: Seconds each chunk may take before the sequence throws `URLError.timedOut`; 0 for none.
    public func chunks(maxLength: Int = 64 * 1024, timeout: TimeInterval = 0) -> Chunks {
        Chunks(task: self, maxLength: maxLength, timeout: timeout)
    }

    /// The chunks a stream task receives until its end of stream (``SessionStreamTask/chunks(maxLength:timeout:)``);
    /// iterating reads the stream, and cancelling the iterating Swift task cancels the stream task.
    public struct Chunks: AsyncSequence, Sendable {
        /// A chunk of received bytes, never empty.
        public typealias Element = Data

        let task: SessionStreamTask
        let maxLength: Int
        let timeout: TimeInterval

        /// Reads the next chunk; nil at the end of stream.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let task: SessionStreamTask
            let maxLength: Int
            let timeout: TimeInterval
            var finished = false

            /// The next chunk, or nil once the stream ended.
            public mutating func next() async throws -> Data? {
                while !finished {
                    let (data, atEOF) = try await task.read(minLength: 1, maxLength: maxLength, timeout: timeout)
                    finished = atEOF
                    if !data.isEmpty { return data }
                }
                return nil
            }
        }

        /// An iterator that reads the stream.
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(task: task, maxLength: maxLength, timeout: timeout)
        }
    }
}
