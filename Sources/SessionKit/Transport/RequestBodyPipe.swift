import Foundation

/// A request body written while it is sent: the writer (``HTTPBodyWriter``, any Swift task) suspends while
/// ``capacity`` bytes wait; the transfer (the engine thread) takes what is there and never waits for more, pausing
/// instead until ``onReadable`` says bytes (or the end) arrived. The writer's trailers travel with its end.
///
/// Used once: a body that went out cannot be sent again (``claim()``), so a redirect or a retry that needs it fails
/// instead of sending something else. A body with a ``length`` is exactly that long: a write past it fails the
/// writer and the body, and an end before it fails the body (``LengthMismatch``), rather than send a request whose
/// `Content-Length` does not match what follows (the server would wait for the rest, or read the excess as the
/// connection's next request).
final class RequestBodyPipe: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is in `state`, a `Protected` box; `onReadable` is set before the
    // transfer starts and read under the box's lock.

    /// What a read of the transfer got.
    enum ReadResult: Equatable {
        /// This many bytes were copied.
        case bytes(Int)
        /// Nothing waits yet: pause, ``onReadable`` will be called.
        case wouldBlock
        /// The writer finished and every byte was read.
        case end
        /// The writer failed (or the body was cancelled): the transfer must fail.
        case failed
    }

    private struct State {
        var chunks: [Data] = []
        var offset = 0
        var buffered = 0
        var finished = false
        var failure: Error?
        var trailers: [(String, String)] = []
        var readerWaiting = false
        var writers: [CheckedContinuation<Void, Error>] = []
        var claimed = false
        var onReadable: (@Sendable () -> Void)?
        /// Bytes written, and bytes read by the transfer.
        var written: Int64 = 0
        var delivered: Int64 = 0
    }

    /// A body whose bytes did not match its declared length.
    struct LengthMismatch: Error, CustomStringConvertible {
        /// The declared length (`Content-Length`).
        let declared: Int64
        /// Bytes written when the body ended, or the count a write would have reached past the length.
        let written: Int64

        var description: String {
            written < declared
                ? "The request body ended after \(written) of its declared \(declared) bytes (Content-Length)."
                : "The request body was written past its declared \(declared) bytes (Content-Length), to \(written)."
        }

        /// The error a request with such a body fails with: `URLError.cannotDecodeRawData`, saying why, with
        /// `userInfo` (the failing URL).
        func urlError(userInfo: [String: Any] = [:]) -> URLError {
            URLError(.cannotDecodeRawData, userInfo: userInfo.merging([NSLocalizedDescriptionKey: description]) { $1 })
        }
    }

    /// Bytes that may wait before the writer suspends.
    let capacity: Int
    /// The body's length when the caller knows it (sent as `Content-Length`), nil for chunked.
    let length: Int64?
    private let state = Protected(State())

    init(length: Int64?, capacity: Int = 256 * 1024) {
        self.length = length
        self.capacity = capacity
    }

    /// Called when bytes or the end arrive while the transfer waits for them (on the writer's thread).
    var onReadable: (@Sendable () -> Void)? {
        get { state.read { $0.onReadable } }
        set { state.write { $0.onReadable = newValue } }
    }

    /// Marks the body as used by a transfer; false when one used it already.
    func claim() -> Bool {
        state.write { state -> Bool in
            defer { state.claimed = true }
            return !state.claimed
        }
    }

    // MARK: - Writer

    /// Appends `data`, suspending while the transfer has ``capacity`` bytes to read.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled, or the error that ended the body (the
    ///   request failed or was cancelled).
    func write(_ data: Data) async throws {
        guard !data.isEmpty else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let (wake, outcome) = state.write { state -> ((@Sendable () -> Void)?, Result<Void, Error>?) in
                    if let failure = state.failure { return (nil, .failure(failure)) }
                    if state.finished { return (nil, .failure(Self.writtenAfterEnd)) }
                    if let length, state.written + Int64(data.count) > length {
                        return (
                            nil, .failure(LengthMismatch(declared: length, written: state.written + Int64(data.count)))
                        )
                    }
                    state.written += Int64(data.count)
                    state.chunks.append(data)
                    state.buffered += data.count
                    let wake = state.readerWaiting ? state.onReadable : nil
                    state.readerWaiting = false
                    if state.buffered < capacity { return (wake, .success(())) }
                    state.writers.append(continuation)
                    return (wake, nil)
                }
                wake?()
                if case .failure(let mismatch as LengthMismatch)? = outcome {
                    fail(mismatch)
                    return continuation.resume(throwing: mismatch.urlError())
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            fail(CancellationError())
        }
    }

    /// Ends the body, with `trailers` to send after it (chunked bodies and HTTP/2 only).
    func finish(trailers: [(String, String)]) {
        let wake = state.write { state -> (@Sendable () -> Void)? in
            guard !state.finished, state.failure == nil else { return nil }
            state.finished = true
            state.trailers = trailers
            defer { state.readerWaiting = false }
            return state.readerWaiting ? state.onReadable : nil
        }
        wake?()
    }

    /// Ends the body with `error`: the transfer fails, and a writer waiting (or writing later) gets the error.
    func fail(_ error: Error) {
        let (writers, wake) = state.write { state -> ([CheckedContinuation<Void, Error>], (@Sendable () -> Void)?) in
            guard state.failure == nil else { return ([], nil) }
            state.failure = error
            state.chunks = []
            state.buffered = 0
            defer { (state.writers, state.readerWaiting) = ([], false) }
            return (state.writers, state.readerWaiting ? state.onReadable : nil)
        }
        for writer in writers { writer.resume(throwing: error) }
        wake?()
    }

    // MARK: - Transfer (engine thread)

    /// Copies up to `count` waiting bytes to `buffer`.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> ReadResult {
        let (result, resumed) = state.write { state -> (ReadResult, [CheckedContinuation<Void, Error>]) in
            if state.failure != nil { return (.failed, []) }
            var copied = 0
            while copied < count, let first = state.chunks.first {
                let available = first.count - state.offset
                let take = min(available, count - copied)
                first.withUnsafeBytes { bytes in
                    if let base = bytes.baseAddress {
                        (buffer + copied).copyMemory(from: base + state.offset, byteCount: take)
                    }
                }
                copied += take
                state.offset += take
                if state.offset == first.count {
                    state.chunks.removeFirst()
                    state.offset = 0
                }
            }
            state.buffered -= copied
            state.delivered += Int64(copied)
            var resumed: [CheckedContinuation<Void, Error>] = []
            if state.buffered < capacity {
                resumed = state.writers
                state.writers = []
            }
            if copied > 0 { return (.bytes(copied), resumed) }
            if state.finished, let length, state.delivered < length {
                state.failure = LengthMismatch(declared: length, written: state.delivered)
                return (.failed, resumed)
            }
            if state.finished { return (.end, resumed) }
            state.readerWaiting = true
            return (.wouldBlock, resumed)
        }
        for writer in resumed { writer.resume() }
        return result
    }

    private static var writtenAfterEnd: NSError {
        SessionKitError.session(
            .streamedBodyUnavailable, "The request body was written after its writing closure returned.")
    }

    /// The error of a body needed a second time.
    static var notReplayable: NSError {
        SessionKitError.session(
            .streamedBodyUnavailable,
            "The streamed request body was needed again (a redirect that keeps the body, an authentication round or a "
                + "retry) and is never sent twice; send it with a .data or .file body to allow that.")
    }

    /// The error of a request whose streamed body was needed a second time: `URLError.requestBodyStreamExhausted`
    /// with ``notReplayable`` under it, and `userInfo` (the failing URL).
    static func notReplayableError(userInfo: [String: Any]) -> URLError {
        let refusal = notReplayable
        return URLError(
            .requestBodyStreamExhausted,
            userInfo: userInfo.merging([
                NSLocalizedDescriptionKey: refusal.localizedDescription, NSUnderlyingErrorKey: refusal,
            ]) { $1 })
    }

    /// Every byte written so far, taken out of the pipe (a body collected before it is sent).
    ///
    /// - Throws: ``LengthMismatch``'s `URLError` when the body has a ``length`` and fewer bytes were written.
    func collected() throws -> Data {
        try state.write { state -> Data in
            if let length, state.written < length {
                throw LengthMismatch(declared: length, written: state.written).urlError()
            }
            var data = Data(capacity: state.buffered)
            for (index, chunk) in state.chunks.enumerated() {
                data.append(index == 0 ? chunk.dropFirst(state.offset) : chunk)
            }
            (state.chunks, state.offset, state.buffered) = ([], 0, 0)
            return data
        }
    }

    /// Whether a transfer used the body already.
    var isClaimed: Bool { state.read { $0.claimed } }

    /// The error that ended the body, if one did.
    var failure: Error? { state.read { $0.failure } }

    /// The trailers the writer gave with its end.
    var trailers: [(String, String)] { state.read { $0.trailers } }
}
