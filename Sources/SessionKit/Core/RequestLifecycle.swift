import Foundation

/// The states of a ``SessionRequest`` and the transitions between them, without I/O.
///
///     initialized → adapting → running → finished
///                       ↑          ↓
///                       └─ waitingToRetry
///
/// `cancelled` can be reached from every state but `finished`; nothing leaves `finished` or `cancelled`.
struct RequestLifecycle: Equatable {
    enum State: Equatable {
        case initialized
        case adapting(attempt: Int)
        case running(attempt: Int)
        case waitingToRetry(attempt: Int)
        case finished
        case cancelled
    }

    private(set) var state: State = .initialized

    /// The number of attempts started so far.
    var attempts: Int {
        switch state {
        case .initialized, .finished, .cancelled: return lastAttempt
        case .adapting(let attempt), .running(let attempt), .waitingToRetry(let attempt): return attempt
        }
    }

    private var lastAttempt = 0

    /// Starts adapting the next attempt; false when the request is over (cancelled) or in the wrong state.
    mutating func beginAttempt() -> Bool {
        switch state {
        case .initialized:
            state = .adapting(attempt: 1)
        case .waitingToRetry(let attempt):
            state = .adapting(attempt: attempt + 1)
        case .adapting, .running, .finished, .cancelled:
            return false
        }
        lastAttempt = attempts
        return true
    }

    /// The adapted request's task starts; false when the request was cancelled meanwhile.
    mutating func taskStarted() -> Bool {
        guard case .adapting(let attempt) = state else { return false }
        state = .running(attempt: attempt)
        return true
    }

    /// The attempt failed and will be retried; false when the request was cancelled meanwhile.
    mutating func willRetry() -> Bool {
        guard case .running(let attempt) = state else { return false }
        state = .waitingToRetry(attempt: attempt)
        return true
    }

    /// The request ended (success, or a failure that is not retried); false when it had already ended.
    mutating func finish() -> Bool {
        switch state {
        case .finished, .cancelled: return false
        default:
            state = .finished
            return true
        }
    }

    /// The caller cancelled; false when the request had already ended.
    mutating func cancel() -> Bool {
        switch state {
        case .finished, .cancelled: return false
        default:
            state = .cancelled
            return true
        }
    }

    var isCancelled: Bool { state == .cancelled }
}
