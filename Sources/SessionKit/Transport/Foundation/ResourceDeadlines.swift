import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Enforces a session configuration's `timeoutIntervalForResource` on the Foundation transport, whose URLSession on
/// Linux never does: a task still running that long after it started ends with `URLError.timedOut`.
///
/// A task's clock starts when the transport resumes it, or, for a task resumed directly (`task.resume()`), at the
/// first sweep that sees it running: sweeps run every tenth of the limit (at least every second), only while tasks are
/// watched. The curl transport enforces the timeout itself and is not watched.
final class ResourceDeadlines: Sendable {
    // Sendable, checked by the compiler: `state` is a `Protected` box; `limit`, `delegate` and `queue` are immutable.

    private struct Watched {
        weak var task: URLSessionTask?
        var startedAt: DispatchTime?
    }

    private struct State {
        var watched: [ObjectIdentifier: Watched] = [:]
        var timer: DispatchSourceTimer?
    }

    private let limit: TimeInterval
    /// Cancels an expired task so that it ends with `URLError.timedOut`.
    private let delegate: FoundationSessionDelegate
    private let state = Protected(State())
    private static let queue = DispatchQueue(label: "com.sessionkit.resource-deadlines")

    /// Deadlines of `limit` seconds for the tasks of the session `delegate` serves; nil when the limit is the
    /// default (7 days) or none, so that the common case costs nothing.
    init?(limit: TimeInterval, delegate: FoundationSessionDelegate) {
        guard limit > 0, limit < URLSessionConfiguration.default.timeoutIntervalForResource else { return nil }
        self.limit = limit
        self.delegate = delegate
    }

    /// Starts watching `task`, which has not started yet.
    func watch(_ task: URLSessionTask) {
        let startTimer = state.write { state -> Bool in
            state.watched[ObjectIdentifier(task)] = Watched(task: task, startedAt: nil)
            return state.timer == nil
        }
        if startTimer { scheduleSweeps() }
    }

    /// Starts `task`'s clock now, unless it runs already.
    func started(_ task: URLSessionTask) {
        state.write { state in
            if state.watched[ObjectIdentifier(task)]?.startedAt == nil {
                state.watched[ObjectIdentifier(task)]?.startedAt = .now()
            }
        }
    }

    private func scheduleSweeps() {
        let timer = DispatchSource.makeTimerSource(queue: Self.queue)
        let interval = min(max(limit / 10, 0.02), 1)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.sweep() }
        state.write { $0.timer = timer }
        timer.resume()
    }

    /// Drops finished tasks, starts the clock of those that run now, and ends those past the limit.
    private func sweep() {
        let now = DispatchTime.now()
        let limitNanoseconds = UInt64(limit * 1_000_000_000)
        let expired = state.write { state -> [URLSessionTask] in
            var expired: [URLSessionTask] = []
            for (key, var watched) in state.watched {
                guard let task = watched.task, task.state != .completed else {
                    state.watched[key] = nil
                    continue
                }
                if let startedAt = watched.startedAt {
                    if now.uptimeNanoseconds - startedAt.uptimeNanoseconds >= limitNanoseconds {
                        expired.append(task)
                        state.watched[key] = nil
                    }
                } else if task.state == .running {
                    watched.startedAt = now
                    state.watched[key] = watched
                }
            }
            if state.watched.isEmpty {
                state.timer?.cancel()
                state.timer = nil
            }
            return expired
        }
        for task in expired {
            delegate.cancel(task, meaning: .resourceTimeout)
        }
    }
}
