import Foundation

/// Back-pressure for one task on the curl transport: body bytes handed on by the transfer but not yet consumed by
/// the per-task delegate. Above ``highWater`` the transfer pauses (`CURL_WRITEFUNC_PAUSE`, before taking more bytes);
/// once the delegate has
/// consumed down to ``lowWater`` it asks the engine to resume it. So a download into a file, or a slow consumer,
/// never piles the body up in memory between the engine thread and the delegate queue.
final class FlowControl: @unchecked Sendable {
    // @unchecked Sendable: `state` is a `Protected` box; `resume` is set once before the transfer starts.

    static let highWater = 8 << 20
    static let lowWater = 4 << 20

    private struct State {
        var pending = 0
        var paused = false
    }

    private let state = Protected(State())
    /// Resumes the paused transfer (set by the protocol when it starts one).
    var resume: (() -> Void)?

    /// Whether the transfer must pause before handing on more (it then is marked paused).
    func shouldPause() -> Bool {
        state.write { state in
            guard state.pending > Self.highWater else { return false }
            state.paused = true
            return true
        }
    }

    /// The transfer handed on `count` bytes.
    func produced(_ count: Int) {
        state.write { $0.pending += count }
    }

    /// The delegate consumed `count` bytes; resumes a paused transfer once enough is consumed.
    func consumed(_ count: Int) {
        let resume = state.write { state -> Bool in
            state.pending = max(0, state.pending - count)
            guard state.paused, state.pending <= Self.lowWater else { return false }
            state.paused = false
            return true
        }
        if resume { self.resume?() }
    }
}
