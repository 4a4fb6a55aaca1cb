import Foundation

/// Back-pressure for one task on the curl transport: body bytes handed on by the transfer but not yet consumed by
/// the per-task delegate. Above ``highWater`` the transfer pauses (`CURL_WRITEFUNC_PAUSE`, before taking more bytes);
/// once the delegate has
/// consumed down to ``lowWater`` it asks the engine to resume it. So a download into a file, or a slow consumer,
/// never piles the body up in memory between the engine thread and the delegate queue.
///
/// The caller's pause (`suspend()`) is not kept here: it is the task's ``RequestMachine``'s, read through
/// ``callerHolds``, so that it lives in one place.
final class FlowControl: Sendable {
    // Sendable, checked by the compiler: `state` is a `Protected` box; `callerHolds` is a `let`.

    /// Pending bytes above which the transfer pauses. 2 MiB is a few milliseconds of loopback at full speed: a 100 MiB
    /// download ran as fast as with 8 MiB (the earlier figure), and its peak RSS fell by 5–10 MiB, into a file or memory.
    static let highWater = 2 << 20
    /// Pending bytes down to which the delegate consumes before a paused transfer resumes.
    static let lowWater = 1 << 20

    private struct State {
        var pending = 0
        /// The transfer is paused in libcurl (for back-pressure or for the caller).
        var paused = false
        /// Resumes the paused transfer.
        var resume: (@Sendable () -> Void)?
    }

    private let state = Protected(State())
    /// Whether the caller holds the task (it was suspended while loading): the transfer stays paused whatever was
    /// consumed. Asked on the engine thread at each body write and progress callback: it must be cheap.
    private let callerHolds: @Sendable () -> Bool

    /// Back-pressure for a transfer whose caller's pause `callerHolds` tells.
    init(callerHolds: @escaping @Sendable () -> Bool) {
        self.callerHolds = callerHolds
    }
    /// Resumes the paused transfer (set by the task each time it starts one; read by whichever thread consumes).
    var resume: (@Sendable () -> Void)? {
        get { state.read { $0.resume } }
        set { state.write { $0.resume = newValue } }
    }

    /// Whether the transfer must pause before handing on more (it then is marked paused).
    func shouldPause() -> Bool {
        let held = callerHolds()
        return state.write { state in
            guard held || state.pending > Self.highWater else { return false }
            state.paused = true
            return true
        }
    }

    /// Whether the transfer is paused (for back-pressure or by the caller): not idle, whatever the clock says.
    var isPaused: Bool { state.read { $0.paused } || callerHolds() }

    /// The caller let the task go on: a paused transfer resumes unless back-pressure still holds it.
    func callerReleased() {
        let resume = state.write { state -> (@Sendable () -> Void)? in
            guard state.paused, state.pending <= Self.lowWater else { return nil }
            state.paused = false
            return state.resume
        }
        resume?()
    }

    /// The transfer handed on `count` bytes.
    func produced(_ count: Int) {
        state.write { $0.pending += count }
    }

    /// The delegate consumed `count` bytes; resumes a paused transfer once enough is consumed.
    func consumed(_ count: Int) {
        let held = callerHolds()
        let resume = state.write { state -> (@Sendable () -> Void)? in
            state.pending = max(0, state.pending - count)
            guard state.paused, !held, state.pending <= Self.lowWater else { return nil }
            state.paused = false
            return state.resume
        }
        resume?()
    }
}
