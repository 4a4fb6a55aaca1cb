import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a streamed task's body goes: chunks wait here until the reader takes them, and only then count as consumed
/// (``FlowControl`` on the curl transport pauses the transfer while too much waits). The reader is either an async
/// iterator (``next()``) or a closure run on a serial queue of its own (``deliver(on:chunk:)``).
final class DataStreamSink: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is inside `state`, a `Protected` box; `onConsumed` and `cancelTask`
    // are set before the task starts.

    private enum Reader {
        case none
        /// An async reader waiting for the next chunk.
        case waiting(CheckedContinuation<Data?, Error>)
        /// A closure that takes every chunk on `queue`.
        case closure(DispatchQueue, @Sendable (Data) -> Void)
    }

    private struct State {
        var chunks: [Data] = []
        var head = 0
        var end: Result<Void, Error>?
        var reader = Reader.none
        var response: ReceivedResponse?
        var responseWaiters: [CheckedContinuation<ReceivedResponse, Error>] = []
        var trailers: [(String, String)]?
        var endWaiters: [CheckedContinuation<Void, Error>] = []
    }

    private let state = Protected(State())
    /// Reports bytes the reader took (back-pressure); a no-op without a transport that pauses.
    var onConsumed: @Sendable (Int) -> Void = { _ in }
    /// Cancels the task (set by the manager).
    var cancelTask: @Sendable () -> Void = {}

    /// Whether a response head arrived: from then on the reader may have seen the response, and the request is never
    /// sent again.
    var hasResponse: Bool { state.read { $0.response != nil } }

    // MARK: - From the task delegate (delegate queue)

    func receive(_ response: ReceivedResponse) {
        let waiters = state.write { state -> [CheckedContinuation<ReceivedResponse, Error>] in
            state.response = response
            defer { state.responseWaiters.removeAll() }
            return state.responseWaiters
        }
        waiters.forEach { $0.resume(returning: response) }
    }

    func push(_ chunk: Data) {
        enum Action {
            case resume(CheckedContinuation<Data?, Error>)
            case run(DispatchQueue, @Sendable (Data) -> Void)
            case queued
        }
        let action = state.write { state -> Action in
            switch state.reader {
            case .waiting(let continuation):
                state.reader = .none
                return .resume(continuation)
            case .closure(let queue, let body):
                return .run(queue, body)
            case .none:
                state.chunks.append(chunk)
                return .queued
            }
        }
        switch action {
        case .resume(let continuation):
            onConsumed(chunk.count)
            continuation.resume(returning: chunk)
        case .run(let queue, let body):
            queue.async { body(chunk) }  // `body` reports the bytes consumed once it returned
        case .queued:
            break
        }
    }

    /// The response's trailers arrived (before the end).
    func receive(trailers: [(String, String)]) {
        state.write { $0.trailers = trailers }
    }

    /// The task ended: the reader sees the rest, then the end (or the error).
    func finish(_ error: Error?) {
        let (waiting, responseWaiters, endWaiters) = state.write {
            state -> (
                CheckedContinuation<Data?, Error>?, [CheckedContinuation<ReceivedResponse, Error>],
                [CheckedContinuation<Void, Error>]
            ) in
            guard state.end == nil else { return (nil, [], []) }
            state.end = error.map { .failure($0) } ?? .success(())
            let waiters = state.responseWaiters
            let endWaiters = state.endWaiters
            state.responseWaiters.removeAll()
            state.endWaiters.removeAll()
            guard case .waiting(let continuation) = state.reader else { return (nil, waiters, endWaiters) }
            state.reader = .none
            return (continuation, waiters, endWaiters)  // a waiting reader has taken every queued chunk
        }
        let failure = error ?? URLError(.badServerResponse)
        responseWaiters.forEach { $0.resume(throwing: failure) }
        for waiter in endWaiters {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
        if let waiting {
            if let error { waiting.resume(throwing: error) } else { waiting.resume(returning: nil) }
        }
    }

    // MARK: - For the reader

    /// The response head, once it arrived; throws when the task ended without one.
    func response() async throws -> ReceivedResponse {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.write { state -> Result<ReceivedResponse, Error>? in
                if let response = state.response { return .success(response) }
                if case .failure(let error) = state.end { return .failure(error) }
                if state.end != nil { return .failure(URLError(.badServerResponse)) }
                state.responseWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// The next chunk, nil at the end of the body; throws the task's error. Cancelling the calling Swift task
    /// cancels the request.
    func next() async throws -> Data? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data?, Error>) in
                let ready = state.write { state -> Result<Data?, Error>? in
                    if state.head < state.chunks.count {
                        let chunk = state.chunks[state.head]
                        state.head += 1
                        if state.head > 64 && state.head * 2 > state.chunks.count {
                            state.chunks.removeFirst(state.head)
                            state.head = 0
                        }
                        return .success(chunk)
                    }
                    switch state.end {
                    case .success?: return .success(nil)
                    case .failure(let error)?: return .failure(error)
                    case nil:
                        state.reader = .waiting(continuation)
                        return nil
                    }
                }
                if let ready {
                    if case .success(let chunk?) = ready { onConsumed(chunk.count) }
                    continuation.resume(with: ready)
                }
            }
        } onCancel: {
            cancelTask()
        }
    }

    /// The response's trailers once the task ended (nil when it had none); throws the task's error.
    func trailers() async throws -> [(String, String)]? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            let ended = state.write { state -> Result<Void, Error>? in
                if let end = state.end { return end }
                state.endWaiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(with: ended) }
        }
        return state.read { $0.trailers }
    }

    /// Hands every chunk (those waiting first) to `chunk` on `queue`, one at a time; each counts as consumed once
    /// the closure returned. The end is not reported here: the task's completion reports it.
    func deliver(on queue: DispatchQueue, chunk: @escaping @Sendable (Data) -> Void) {
        let consumed = onConsumed
        let wrapped: @Sendable (Data) -> Void = { data in
            chunk(data)
            consumed(data.count)
        }
        let waiting = state.write { state -> [Data] in
            state.reader = .closure(queue, wrapped)
            defer {
                state.chunks.removeAll()
                state.head = 0
            }
            return Array(state.chunks[state.head...])
        }
        for data in waiting { queue.async { wrapped(data) } }
    }
}
