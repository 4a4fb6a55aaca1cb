import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The lifecycle of one task on the curl transport, from creation to its one completion, as a value: each event
/// returns the action the task must perform, and an event that does not apply in the current state returns
/// ``Action/none`` (it changes nothing).
///
/// ```
/// created ──resume──▶ connecting ──sent──▶ sending ──head──▶ receiving ──end──▶ finished / failed
///    │                    │  ▲                │                 │
///    │                    ▼  │ (suspend/resume, any loading state: paused)
///    │                  redirecting / challenged ──next transfer──▶ connecting
///    └──────── cancel (any state but the three terminal ones) ──▶ cancelled
/// ```
struct TransferLifecycle: Equatable {
    /// Where the task is.
    enum State: Equatable {
        /// Created, not started: it starts when `resume()` was called once more than `suspend()` (URLSession's
        /// suspend count, which starts at one).
        case created(extraSuspensions: Int)
        /// A transfer is connecting (DNS, TCP, TLS with the policy's check).
        case connecting
        /// The request head and body are going out.
        case sending
        /// The response head arrived; its body is arriving.
        case receiving
        /// Held by the caller (`suspend()`), in `from`.
        indirect case paused(from: State)
        /// A redirect response ended a transfer; the manager decides whether to follow it.
        case redirecting
        /// A challenge (401 or 407) ended a transfer; the manager decides how to answer.
        case challenged
        /// Ended with a response.
        case finished
        /// Ended with an error.
        case failed
        /// Ended by `cancel()`.
        case cancelled
    }

    /// What the task does after an event.
    enum Action: Equatable {
        /// Nothing.
        case none
        /// A task that has not started counted a `suspend()` or a `resume()` and still waits: nothing to do but say so.
        case countedSuspension
        case countedResume
        /// Start a transfer of the current request.
        case startTransfer
        /// Hold the running transfer in libcurl.
        case pauseTransfer
        /// Let the held transfer go on.
        case resumeTransfer
        /// Stop the running transfer (if any) and complete with `URLError.cancelled`.
        case stopAndCompleteCancelled
        /// Complete (the transfer already ended).
        case complete
    }

    private(set) var state: State = .created(extraSuspensions: 0)

    /// Whether the task has ended (its completion is or was delivered).
    var isTerminal: Bool {
        switch state {
        case .finished, .failed, .cancelled: return true
        default: return false
        }
    }

    /// What URLSession calls this state.
    var taskState: URLSessionTask.State {
        switch state {
        case .created, .paused: return .suspended
        case .connecting, .sending, .receiving, .redirecting, .challenged: return .running
        case .cancelled: return .canceling
        case .finished, .failed: return .completed
        }
    }

    /// `resume()`: the first one starts the task; on a paused task, the transfer goes on.
    mutating func resume() -> Action {
        switch state {
        case .created(let extra) where extra > 0:
            state = .created(extraSuspensions: extra - 1)
            return .countedResume
        case .created:
            state = .connecting
            return .startTransfer
        case .paused(let from):
            state = from
            return .resumeTransfer
        default:
            return .none
        }
    }

    /// `suspend()`: a loading task holds its transfer; a task that never started needs one more `resume()`.
    mutating func suspend() -> Action {
        switch state {
        case .created(let extra):
            state = .created(extraSuspensions: extra + 1)
            return .countedSuspension
        case .connecting, .sending, .receiving, .redirecting, .challenged:
            state = .paused(from: state)
            return .pauseTransfer
        default:
            return .none
        }
    }

    /// `cancel()`: any task that has not ended ends cancelled.
    mutating func cancel() -> Action {
        guard !isTerminal else { return .none }
        state = .cancelled
        return .stopAndCompleteCancelled
    }

    /// The request went out (its head, and its body when it has one).
    mutating func requestSent() -> Action {
        transition(ifIn: .connecting, to: .sending)
    }

    /// The final response head arrived.
    mutating func headReceived() -> Action {
        switch state {
        case .connecting, .sending:
            state = .receiving
        case .paused(.connecting), .paused(.sending):
            state = .paused(from: .receiving)
        default:
            break
        }
        return .none
    }

    /// A transfer ended with a redirect (`challenge == false`) or a challenge response held for a decision.
    mutating func heldResponseEnded(challenge: Bool) -> Action {
        switch state {
        case .connecting, .sending, .receiving, .paused:
            state = challenge ? .challenged : .redirecting
        default:
            break
        }
        return .none
    }

    /// The manager decided to send another request (the redirect's, or the same one with a credential).
    mutating func nextTransfer() -> Action {
        switch state {
        case .redirecting, .challenged:
            state = .connecting
            return .startTransfer
        default:
            return .none
        }
    }

    /// The task's last transfer ended: with its response (`failed == false`) or with an error.
    mutating func ended(failed: Bool) -> Action {
        if case .created = state { return .none }
        guard !isTerminal else { return .none }
        state = failed ? .failed : .finished
        return .complete
    }

    private mutating func transition(ifIn from: State, to: State) -> Action {
        if state == from {
            state = to
        } else if state == .paused(from: from) {
            state = .paused(from: to)
        }
        return .none
    }
}
