import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The upload and download progress of one task, and the handlers that watch them.
///
/// The counts are plain numbers; the two `Progress` objects are built only when someone asks for one
/// (`uploadProgress(for:)`, `task.progress`) or a handler needs one to be called with, from the counts so far, and
/// kept up to date from then on: a request nobody watches pays for no `Progress` (two of them, their locks and their
/// handlers cost about a tenth of a small GET). Both are cancellable and pausable: cancelling, pausing or resuming
/// either acts on the task. The updates arrive on the session's delegate queue; the objects may be asked for, and read,
/// from any thread.
final class TaskProgress: Sendable {
    // Sendable, checked by the compiler: `state` is a `Protected` box; the rest is immutable after `init`.

    /// One direction's counts, and its `Progress` once it exists.
    private struct Direction {
        var total: Int64 = -1
        var completed: Int64 = 0
        var object: Progress?

        /// Sets the counts, and the object's when there is one.
        mutating func set(total: Int64? = nil, completed: Int64? = nil) {
            if let total { self.total = total }
            if let completed { self.completed = completed }
            guard let object else { return }
            if object.totalUnitCount != self.total { object.totalUnitCount = self.total }
            if object.completedUnitCount != self.completed { object.completedUnitCount = self.completed }
        }
    }

    private struct State {
        var upload = Direction()
        var download = Direction()
    }

    private let state = Protected(State())
    private weak let task: (any TaskReference)?
    private let control: TaskControl
    private let uploadHandler: (@Sendable (Progress) -> Void)?
    private let downloadHandler: (@Sendable (Progress) -> Void)?

    /// Creates the progress of `task`.
    ///
    /// - Parameters:
    ///   - task:            The task the progress cancels, pauses and resumes (held weakly).
    ///   - uploadLength:    The size of the request body when known before sending.
    ///   - control:         Resumes or suspends the task on behalf of the progress, with notifications.
    ///   - uploadHandler:   Called on the delegate queue as bytes are sent.
    ///   - downloadHandler: Called on the delegate queue as bytes arrive.
    init(
        task: any TaskReference,
        uploadLength: Int64?,
        control: TaskControl,
        uploadHandler: (@Sendable (Progress) -> Void)?,
        downloadHandler: (@Sendable (Progress) -> Void)?
    ) {
        self.task = task
        self.control = control
        self.uploadHandler = uploadHandler
        self.downloadHandler = downloadHandler
        if let expected = uploadLength, expected > 0 {
            state.write { $0.upload.total = expected }
        }
    }

    /// The progress of sending the request body (built on first use).
    var upload: Progress { object(\.upload) }
    /// The progress of receiving the response body (built on first use).
    var download: Progress { object(\.download) }

    /// The download's total so far (-1: unknown).
    var downloadTotal: Int64 { state.read { $0.download.total } }

    /// The response head announced `expectedLength` bytes (-1 when unknown). `held` is what the body sink already
    /// holds when that is news (a resumed download's beginning, or 0 for one restarted): it counts as received,
    /// and toward the total.
    func didReceiveResponse(expectedLength: Int64, held: Int64?) {
        state.write { state in
            var expected = expectedLength
            if let held {
                state.download.set(completed: held)
                if expected > 0 { expected += held }
            }
            state.download.set(total: expected > 0 ? expected : -1)
        }
    }

    /// Another attempt of the task starts: its body is counted from nothing.
    func restartDownload() {
        state.write { $0.download.set(total: -1, completed: 0) }
    }

    /// `count` body bytes arrived and were stored.
    func didReceiveBody(count: Int) {
        state.write { state in
            let completed = state.download.completed + Int64(count)
            // A decoded (gzip) body outgrows the length on the wire: the total is then unknown until the end.
            if state.download.total > 0 && completed > state.download.total { state.download.set(total: -1) }
            state.download.set(completed: completed)
        }
        if let downloadHandler { downloadHandler(download) }
    }

    /// Body bytes were sent.
    func didSendBodyData(totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        state.write { state in
            // A stream body is sent chunked and URLSession does not know its size; keep the size known at creation.
            if totalBytesExpectedToSend > 0 { state.upload.set(total: totalBytesExpectedToSend) }
            state.upload.set(completed: totalBytesSent)
        }
        if let uploadHandler { uploadHandler(upload) }
    }

    /// A download wrote bytes to its temporary file (URLSession's download machinery).
    func didWriteData(totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        state.write { state in
            state.download.set(
                total: totalBytesExpectedToWrite > 0 ? totalBytesExpectedToWrite : -1, completed: totalBytesWritten)
        }
        if let downloadHandler { downloadHandler(download) }
    }

    /// The task succeeded: unknown or outgrown totals become what was counted, an upload reads complete, and the
    /// handlers see the final values.
    func didSucceed() {
        let uploadChanged = state.write { state -> Bool in
            if state.download.total < 0 || state.download.completed > state.download.total {
                state.download.set(total: state.download.completed)
            }
            if state.upload.total <= 0 && state.upload.completed > 0 {
                state.upload.set(total: state.upload.completed)
                return true
            } else if state.upload.total > 0 && state.upload.completed < state.upload.total {
                state.upload.set(completed: state.upload.total)
                return true
            }
            return false
        }
        if uploadChanged, let uploadHandler { uploadHandler(upload) }
        if let downloadHandler { downloadHandler(download) }
    }

    /// The `Progress` of one direction, built from its counts the first time.
    private func object(_ direction: WritableKeyPath<State, Direction>) -> Progress {
        state.write { state in
            if let existing = state[keyPath: direction].object { return existing }
            // Without a parent: built whenever first asked for, on whichever thread, it must not join that thread's
            // current progress by accident.
            let progress = Progress(parent: nil)
            progress.totalUnitCount = state[keyPath: direction].total
            progress.completedUnitCount = state[keyPath: direction].completed
            progress.isCancellable = true
            progress.isPausable = true
            let (task, control) = (task, control)
            progress.cancellationHandler = { [weak task] in task?.cancel() }
            progress.pausingHandler = { [weak task] in
                if let task { control.suspend(task) }
            }
            progress.resumingHandler = { [weak task] in
                if let task { control.resume(task) }
            }
            state[keyPath: direction].object = progress
            return progress
        }
    }
}
