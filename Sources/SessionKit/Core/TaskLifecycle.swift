import Foundation

/// The life of one task as its per-task delegate sees it, as a value: the delegate asks it what to do with each
/// event and performs only the action it returns.
///
/// ```
/// running ──didFinishDownloading──▶ downloaded ──didComplete──▶ completed
///    └──────────────────────didComplete───────────────────────────▲
/// ```
/// `completed` is terminal: a second completion (from invalidation racing a normal end, say) is ignored, so the
/// completion handler runs exactly once.
struct TaskLifecycle {
    /// Where the task is.
    enum State: Equatable {
        /// Sending or receiving.
        case running
        /// A download's file was moved (to `fileURL`, or nowhere when `moveError` is set or nobody wanted it).
        case downloaded(fileURL: URL?, moveError: NSError?)
        /// The completion was delivered.
        case completed
    }

    /// What the delegate must do for a completion event.
    enum CompletionAction: Equatable {
        /// Deliver the completion with this file (for downloads) and error.
        case deliver(fileURL: URL?, error: NSError?)
        /// Already completed: do nothing.
        case ignore
    }

    private(set) var state: State = .running

    /// Whether data and progress events still count.
    var acceptsData: Bool { state == .running }

    /// Records where a finished download went. Returns false when the event came too late to count.
    mutating func didFinishDownloading(fileURL: URL?, moveError: NSError?) -> Bool {
        guard state == .running else { return false }
        state = .downloaded(fileURL: fileURL, moveError: moveError)
        return true
    }

    /// The task ended with `error` (nil for success); `forcedError` replaces it when set (a task the manager
    /// refused before it could start).
    mutating func didComplete(error: NSError?, forcedError: NSError?) -> CompletionAction {
        switch state {
        case .completed:
            return .ignore
        case .running:
            state = .completed
            return .deliver(fileURL: nil, error: forcedError ?? error)
        case .downloaded(let fileURL, let moveError):
            state = .completed
            return .deliver(fileURL: fileURL, error: forcedError ?? error ?? moveError)
        }
    }
}
