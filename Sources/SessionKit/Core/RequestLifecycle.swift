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
        case adapting
        case running
        case waitingToRetry
        case finished
        case cancelled
    }

    private(set) var state: State = .initialized
    /// The number of attempts started so far.
    private(set) var attempts = 0

    /// Starts adapting the next attempt; false when the request is over (cancelled) or in the wrong state.
    mutating func beginAttempt() -> Bool {
        guard state == .initialized || state == .waitingToRetry else { return false }
        state = .adapting
        attempts += 1
        return true
    }

    /// The adapted request's task starts; false when the request was cancelled meanwhile.
    mutating func taskStarted() -> Bool {
        move(from: .adapting, to: .running)
    }

    /// The attempt failed and will be retried; false when the request was cancelled meanwhile.
    mutating func willRetry() -> Bool {
        move(from: .running, to: .waitingToRetry)
    }

    /// The request ended (success, or a failure that is not retried); false when it had already ended.
    mutating func finish() -> Bool {
        end(in: .finished)
    }

    /// The caller cancelled; false when the request had already ended.
    mutating func cancel() -> Bool {
        end(in: .cancelled)
    }

    var isCancelled: Bool { state == .cancelled }

    private mutating func move(from expected: State, to next: State) -> Bool {
        guard state == expected else { return false }
        state = next
        return true
    }

    private mutating func end(in final: State) -> Bool {
        guard state != .finished, state != .cancelled else { return false }
        state = final
        return true
    }
}
