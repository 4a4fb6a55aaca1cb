import Foundation

/// Back-pressure for one task on the curl transport: body bytes handed on by the transfer but not yet consumed by
/// the per-task delegate. Above ``highWater`` the transfer pauses (`CURL_WRITEFUNC_PAUSE`, before taking more bytes);
/// once the delegate has
/// consumed down to ``lowWater`` it asks the engine to resume it. So a download into a file, or a slow consumer,
/// never piles the body up in memory between the engine thread and the delegate queue.
final class FlowControl: Sendable {
    // Sendable, checked by the compiler: `state` and `resumeAction` are `Protected` boxes.

    static let highWater = 8 << 20
    static let lowWater = 4 << 20

    private struct State {
        var pending = 0
        var paused = false
        /// The caller paused the task (``hold()``): the transfer stays paused whatever was consumed.
        var held = false
    }

    private let state = Protected(State())
    private let resumeAction = Protected<(@Sendable () -> Void)?>(nil)
    /// Resumes the paused transfer (set by the task each time it starts one; read by whichever thread consumes).
    var resume: (@Sendable () -> Void)? {
        get { resumeAction.wrappedValue }
        set { resumeAction.wrappedValue = newValue }
    }

    /// Whether the transfer must pause before handing on more (it then is marked paused).
    func shouldPause() -> Bool {
        state.write { state in
            guard state.held || state.pending > Self.highWater else { return false }
            state.paused = true
            return true
        }
    }

    /// Whether the transfer is paused (for back-pressure or by the caller): not idle, whatever the clock says.
    var isPaused: Bool { state.read { $0.paused || $0.held } }

    /// Pauses the transfer at its next body bytes until ``release()``; false when it was already held.
    func hold() -> Bool {
        state.write { state in
            defer { state.held = true }
            return !state.held
        }
    }

    /// Ends a ``hold()``: the transfer resumes unless back-pressure still holds it; false when it was not held.
    @discardableResult
    func release() -> Bool {
        let (wasHeld, resume) = state.write { state -> (Bool, Bool) in
            guard state.held else { return (false, false) }
            state.held = false
            guard state.paused, state.pending <= Self.lowWater else { return (true, false) }
            state.paused = false
            return (true, true)
        }
        if resume { self.resume?() }
        return wasHeld
    }

    /// The transfer handed on `count` bytes.
    func produced(_ count: Int) {
        state.write { $0.pending += count }
    }

    /// The delegate consumed `count` bytes; resumes a paused transfer once enough is consumed.
    func consumed(_ count: Int) {
        let resume = state.write { state -> Bool in
            state.pending = max(0, state.pending - count)
            guard state.paused, !state.held, state.pending <= Self.lowWater else { return false }
            state.paused = false
            return true
        }
        if resume { self.resume?() }
    }
}
