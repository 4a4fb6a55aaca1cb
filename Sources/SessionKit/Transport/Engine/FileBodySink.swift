import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The curl transport's download machinery: writes a download task's body to a temporary ``BodyFile`` (a new one, or
/// the partial file of resume data), and at the end hands the file on to be moved, or keeps it as resume data
/// (``ResumeData``) when the task was cancelled or cut. The transport makes it with the task; the per-task delegate
/// feeds it, on the delegate queue, as it feeds any ``BodySink``.
final class FileBodySink: BodySink {
    private let file: BodyFile
    /// The download task: its original URL goes into resume data, and the manager-wide destination is asked about it.
    private let task: URLSessionTask
    /// The manager-wide `downloadTaskDidFinishDownloading` closure, which URLSession's download callback asks on the
    /// Foundation transport; asked here when the download ends, before the task's own destination.
    private let managerDestination: (@Sendable (URLSessionTask, URL) -> URL?)?
    /// The `ETag` (or `Last-Modified`) of the download, for resume data. Written and read on the delegate queue.
    private var validator: String?
    /// Set by `URLSessionManager.cancel(_:producingResumeData:)` from any thread: called once with the resume data.
    private let resumeDataHandler = Protected<((Data?) -> Void)?>(nil)

    /// Writes the body of `task` to `file` (a new one, or the partial file of resume data).
    init(file: BodyFile, task: URLSessionTask, managerDestination: (@Sendable (URLSessionTask, URL) -> URL?)?) {
        self.file = file
        self.task = task
        self.managerDestination = managerDestination
    }

    /// Keeps the validator; a `206` continues the file, any other status restarts it empty.
    func receive(_ response: ReceivedResponse) -> Int64? {
        guard let http = response.httpResponse else { return nil }
        validator = http.value(forHTTPHeaderField: "ETag") ?? http.value(forHTTPHeaderField: "Last-Modified")
        if http.statusCode == 206 {
            return file.length  // the rest of a resumed download: the file already holds the beginning
        }
        guard file.length > 0 else { return nil }
        file.truncate()  // the server sent the whole entity again
        return 0
    }

    func append(_ data: Data) -> BodySinkReceipt {
        file.append(data) ? .stored : .refused
    }

    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool {
        resumeDataHandler.wrappedValue = handler
        return true
    }

    /// Finishes the file: moves it on success (as URLSession would), keeps it as resume data when the transfer was
    /// cancelled or cut, and deletes whatever is left.
    func finish(error: Error?, moveFile: (URL, URL?) -> Void) -> Error? {
        var error = error
        let handler = resumeDataHandler.write { handler -> ((Data?) -> Void)? in
            defer { handler = nil }
            return handler
        }
        if let writeError = file.close() {
            error = SessionKitError.session(
                .cannotMoveDownloadedFile, "The download could not be written: \(writeError)", underlying: writeError)
        } else if error == nil {
            // As AFNetworking: the manager-wide destination is asked first, then the task's own.
            moveFile(file.url, managerDestination?(task, file.url))
        } else if let failure = error as NSError?, failure.domain == NSURLErrorDomain {
            // Cancelled or cut: keep what arrived, as resume data in the error (and for a waiting caller).
            let resume = resumeData()
            handler?(resume)
            if let resume {
                var userInfo = failure.userInfo
                userInfo[URLSessionDownloadTaskResumeData] = resume
                error = NSError(domain: failure.domain, code: failure.code, userInfo: userInfo)
            }
        } else {
            handler?(nil)
        }
        file.remove()
        return error
    }

    func takeBody() -> Data { Data() }

    /// Resume data for the bytes the file holds, keeping the file; nil without a validator or a byte.
    private func resumeData() -> Data? {
        guard let validator, file.length > 0, let url = task.originalRequest?.url, let kept = file.keep() else {
            return nil
        }
        return ResumeData(url: url.absoluteString, partialFile: kept.path, bytes: file.length, validator: validator)
            .encoded()
    }
}
