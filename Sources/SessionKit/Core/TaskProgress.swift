import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The upload and download `Progress` of one task, and the handlers that watch them.
///
/// Both are cancellable and pausable: cancelling, pausing or resuming either acts on the task. The updates arrive
/// on the session's delegate queue; `Progress` itself is thread-safe, so anyone may read them.
struct TaskProgress {
    /// The progress of sending the request body.
    let upload: Progress
    /// The progress of receiving the response body.
    let download: Progress
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
        task: URLSessionTask,
        uploadLength: Int64?,
        control: TaskControl,
        uploadHandler: (@Sendable (Progress) -> Void)?,
        downloadHandler: (@Sendable (Progress) -> Void)?
    ) {
        upload = Progress(totalUnitCount: -1)
        download = Progress(totalUnitCount: -1)
        self.uploadHandler = uploadHandler
        self.downloadHandler = downloadHandler
        for progress in [upload, download] {
            progress.isCancellable = true
            progress.isPausable = true
            progress.cancellationHandler = { [weak task] in task?.cancel() }
            progress.pausingHandler = { [weak task] in
                if let task { control.suspend(task) }
            }
            progress.resumingHandler = { [weak task] in
                if let task { control.resume(task) }
            }
        }
        if let expected = uploadLength, expected > 0 {
            upload.totalUnitCount = expected
        }
    }

    /// The response head announced `expectedLength` bytes (-1 when unknown). `held` is what the body sink already
    /// holds when that is news (a resumed download's beginning, or 0 for one restarted): it counts as received,
    /// and toward the total.
    func didReceiveResponse(expectedLength: Int64, held: Int64?) {
        var expected = expectedLength
        if let held {
            download.completedUnitCount = held
            if expected > 0 { expected += held }
        }
        download.totalUnitCount = expected > 0 ? expected : -1
    }

    /// `count` body bytes arrived and were stored.
    func didReceiveBody(count: Int) {
        let completed = download.completedUnitCount + Int64(count)
        // A decoded (gzip) body outgrows the length on the wire: the total is then unknown until the end.
        if download.totalUnitCount > 0 && completed > download.totalUnitCount {
            download.totalUnitCount = -1
        }
        download.completedUnitCount = completed
        downloadHandler?(download)
    }

    /// Body bytes were sent.
    func didSendBodyData(totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        // A stream body is sent chunked and URLSession does not know its size; keep the size known at creation.
        if totalBytesExpectedToSend > 0 { upload.totalUnitCount = totalBytesExpectedToSend }
        upload.completedUnitCount = totalBytesSent
        uploadHandler?(upload)
    }

    /// A download wrote bytes to its temporary file (URLSession's download machinery).
    func didWriteData(totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        download.totalUnitCount = totalBytesExpectedToWrite > 0 ? totalBytesExpectedToWrite : -1
        download.completedUnitCount = totalBytesWritten
        downloadHandler?(download)
    }

    /// The task succeeded: unknown or outgrown totals become what was counted, an upload reads complete, and the
    /// handlers see the final values.
    func didSucceed() {
        if download.totalUnitCount < 0 || download.completedUnitCount > download.totalUnitCount {
            download.totalUnitCount = download.completedUnitCount
        }
        if upload.totalUnitCount <= 0 && upload.completedUnitCount > 0 {
            upload.totalUnitCount = upload.completedUnitCount
            uploadHandler?(upload)
        } else if upload.totalUnitCount > 0 && upload.completedUnitCount < upload.totalUnitCount {
            upload.completedUnitCount = upload.totalUnitCount
            uploadHandler?(upload)
        }
        downloadHandler?(download)
    }
}
