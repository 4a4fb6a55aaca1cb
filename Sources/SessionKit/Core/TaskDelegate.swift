import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one object that follows a single task from creation to completion.
///
/// It accumulates the body, owns the upload and download `Progress` (cancelling, pausing or resuming them acts on
/// the task), moves a download to its destination, runs the response serializer off the delegate queue, and
/// calls the completion on the completion queue inside the completion group, exactly once. The delegate hub
/// routes every callback of its task here; all of them arrive on the session's serial delegate queue.
final class TaskDelegate: @unchecked Sendable {
    // @unchecked Sendable: `lifecycle` and `body` are guarded by `lock`; the rest is immutable after `init`
    // apart from `Progress`, which is thread-safe.

    /// Where the task's completion goes and what decodes its body.
    struct Delivery {
        let responseSerializer: URLResponseSerialization
        let completionQueue: DispatchQueue
        let completionGroup: DispatchGroup
        let processingQueue: DispatchQueue
    }

    let task: URLSessionTask
    let uploadProgress: Progress
    let downloadProgress: Progress

    private let delivery: Delivery
    private let uploadProgressHandler: ((Progress) -> Void)?
    private let downloadProgressHandler: ((Progress) -> Void)?
    private let destination: ((URL, URLResponse) -> URL)?
    /// For a download this delegate streams to a file (curl transport): asks the manager-wide
    /// `downloadTaskDidFinishDownloading` closure, which URLSession's download callback asks on the Foundation one.
    private let managerDestination: ((URLSessionTask, URL) -> URL?)?
    private let completion: (TaskOutcome) -> Void
    private let forcedError: NSError?
    private let bodyStream: Protected<InputStream?>

    private let lock = NSLock()
    private var lifecycle = TaskLifecycle()
    private var body = Data()
    /// For a download run as a data task (curl transport): the body goes to this file instead of memory.
    private let bodyFile: BodyFile?
    /// Told how many body bytes were handled (back-pressure on the curl transport).
    private let onConsumed: ((Int) -> Void)?
    /// The `ETag` (or `Last-Modified`) of the download, for resume data.
    private var validator: String?
    /// Set by `URLSessionManager.cancel(_:producingResumeData:)`: called once with the resume data.
    private let resumeDataHandler = Protected<((Data?) -> Void)?>(nil)
    /// Where a streamed body goes instead of memory; nil for every other task.
    private let streamSink: DataStreamSink?

    /// The pipeline request this task is an attempt of, and who watches it.
    struct Observation {
        let request: SessionRequest
        let monitor: CompositeEventMonitor
    }

    /// Set at creation, before the task can run: read without a lock.
    private let observation: Observation?

    /// Creates the delegate of `task`.
    ///
    /// - Parameters:
    ///   - task:        The task; the delegate keeps it alive until it completes.
    ///   - delivery:    The serializer and the queues of the completion.
    ///   - uploadProgressHandler:   Called on the delegate queue as bytes are sent.
    ///   - downloadProgressHandler: Called on the delegate queue as bytes arrive.
    ///   - destination: For downloads, where to move the file.
    ///   - managerDestination: For downloads streamed to a file by this delegate, the manager-wide destination,
    ///     asked first.
    ///   - bodyStream:  For streamed uploads, the stream to hand URLSession when it asks for one.
    ///   - uploadLength: The size of the request body when known before sending.
    ///   - forcedError: When set, the task ends with this error whatever URLSession reports.
    ///   - control:     Resumes or suspends the task on behalf of its `Progress`, with notifications.
    ///   - completion:  Called once, on the completion queue.
    init(
        task: URLSessionTask,
        delivery: Delivery,
        uploadProgressHandler: ((Progress) -> Void)?,
        downloadProgressHandler: ((Progress) -> Void)?,
        destination: ((URL, URLResponse) -> URL)?,
        managerDestination: ((URLSessionTask, URL) -> URL?)? = nil,
        bodyStream: InputStream?,
        uploadLength: Int64?,
        forcedError: NSError?,
        streamsBodyToFile: Bool = false,
        resumingFile: (url: URL, length: Int64)? = nil,
        onConsumed: ((Int) -> Void)? = nil,
        streamSink: DataStreamSink? = nil,
        observation: Observation? = nil,
        control: TaskControl,
        completion: @escaping (TaskOutcome) -> Void
    ) {
        self.streamSink = streamSink
        self.observation = observation
        self.task = task
        self.delivery = delivery
        self.uploadProgressHandler = uploadProgressHandler
        self.downloadProgressHandler = downloadProgressHandler
        self.destination = destination
        self.managerDestination = managerDestination
        self.bodyStream = Protected(bodyStream)
        self.forcedError = forcedError
        self.onConsumed = onConsumed
        if let resumingFile {
            self.bodyFile = BodyFile(resuming: resumingFile.url, length: resumingFile.length)
        } else {
            self.bodyFile = streamsBodyToFile ? BodyFile() : nil
        }
        self.completion = completion
        self.uploadProgress = Progress(totalUnitCount: -1)
        self.downloadProgress = Progress(totalUnitCount: -1)

        for progress in [uploadProgress, downloadProgress] {
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
            uploadProgress.totalUnitCount = expected
        }
    }

    // MARK: - Observation by the request pipeline

    /// libcurl's timings of one transfer of this task (engine thread).
    func didCollect(_ timings: TransferTimings) {
        if let observation {
            observation.request.collected(timings)
            observation.monitor.request(observation.request, didGather: timings)
        }
    }

    /// The task follows a redirect from `response` to `request` (as decided by the manager's closure).
    func willRedirect(_ response: HTTPURLResponse, to request: URLRequest) {
        guard let observation else { return }
        observation.monitor.request(observation.request, willRedirectWith: response, to: request)
    }

    // MARK: - Events from the hub (delegate queue)

    /// The response head arrived: the expected length sizes the download progress.
    func didReceive(response: URLResponse) {
        var expected = response.expectedContentLength
        if let bodyFile, let http = response as? HTTPURLResponse {
            validator = http.value(forHTTPHeaderField: "ETag") ?? http.value(forHTTPHeaderField: "Last-Modified")
            if http.statusCode == 206 {
                // The rest of a resumed download: the file already holds the beginning.
                downloadProgress.completedUnitCount = bodyFile.length
                if expected > 0 { expected += bodyFile.length }
            } else if bodyFile.length > 0 {
                bodyFile.truncate()  // the server sent the whole entity again
                downloadProgress.completedUnitCount = 0
            }
        }
        downloadProgress.totalUnitCount = expected > 0 ? expected : -1
        streamSink?.receive(response)
        if bodyFile == nil, streamSink == nil, expected > 0 {
            // One allocation of the announced size (at most 1 GiB; pages are only touched as bytes arrive)
            // instead of doubling: a body in memory then peaks near its own size, not twice it.
            lock.withLock { body.reserveCapacity(Int(min(expected, 1 << 30))) }
        }
    }

    /// Asks for resume data when the task ends (it is then cancelled by the caller).
    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool {
        guard bodyFile != nil else { return false }
        resumeDataHandler.wrappedValue = handler
        return true
    }

    /// A chunk of the body arrived.
    func didReceive(data: Data) {
        let accepted: Bool = lock.withLock {
            guard lifecycle.acceptsData else { return false }
            if bodyFile == nil && streamSink == nil { body.append(data) }
            return true
        }
        // A streamed body counts as consumed when its reader takes it, not when it is queued for the reader.
        defer { if streamSink == nil || !accepted { onConsumed?(data.count) } }
        guard accepted else { return }
        if let observation {
            observation.monitor.request(observation.request, didReceive: data)
        }
        if let streamSink {
            streamSink.push(data)
            return
        }
        if let bodyFile, !bodyFile.append(data) {
            task.cancel()  // the disk refused the bytes: the completion reports the write error
            return
        }
        let completed = downloadProgress.completedUnitCount + Int64(data.count)
        // A decoded (gzip) body outgrows the length on the wire: the total is then unknown until the end.
        if downloadProgress.totalUnitCount > 0 && completed > downloadProgress.totalUnitCount {
            downloadProgress.totalUnitCount = -1
        }
        downloadProgress.completedUnitCount = completed
        downloadProgressHandler?(downloadProgress)
    }

    /// Body bytes were sent.
    func didSendBodyData(totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        // A stream body is sent chunked and URLSession does not know its size; keep the size known at creation.
        if totalBytesExpectedToSend > 0 { uploadProgress.totalUnitCount = totalBytesExpectedToSend }
        uploadProgress.completedUnitCount = totalBytesSent
        uploadProgressHandler?(uploadProgress)
    }

    /// A download wrote bytes to its temporary file.
    func didWriteData(totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        downloadProgress.totalUnitCount = totalBytesExpectedToWrite > 0 ? totalBytesExpectedToWrite : -1
        downloadProgress.completedUnitCount = totalBytesWritten
        downloadProgressHandler?(downloadProgress)
    }

    /// URLSession asks for the body stream of a streamed upload. The stream can be handed out once: a second
    /// request for it (a redirect that resends the body) gets nil and the task fails rather than send a
    /// half-read stream.
    func takeBodyStream() -> InputStream? {
        bodyStream.write { stream in
            defer { stream = nil }
            return stream
        }
    }

    /// A download finished into the temporary `location`, which URLSession deletes once this returns: move it to
    /// the destination now. `override` is the manager-wide destination closure's answer, if it has one. A move
    /// posts `sessionKitDownloadTaskDidMoveFileSuccessfully` or `sessionKitDownloadTaskDidFailToMoveFile`, on the
    /// delegate queue, as AFNetworking does.
    func didFinishDownloading(to location: URL, override: URL?) {
        var fileURL: URL?
        var moveError: NSError?
        let target: URL?
        if let override {
            target = override
        } else if let destination, let response = task.response {
            target = destination(location, response)
        } else {
            target = nil
        }
        if let target {
            do {
                try FileManager.default.moveItem(at: location, to: target)
                fileURL = target
                NotificationCenter.default.post(name: .sessionKitDownloadTaskDidMoveFileSuccessfully, object: task)
            } catch {
                moveError = SessionKitError.session(
                    .cannotMoveDownloadedFile,
                    "The downloaded file could not be moved to \(target.path): \(error.localizedDescription)",
                    underlying: error)
                NotificationCenter.default.post(
                    name: .sessionKitDownloadTaskDidFailToMoveFile, object: task, userInfo: (error as NSError).userInfo)
            }
        }
        _ = lock.withLock { lifecycle.didFinishDownloading(fileURL: fileURL, moveError: moveError) }
    }

    /// The task ended. Serializes the body off the delegate queue, then calls the completion and posts
    /// `Notification.Name.sessionKitTaskDidComplete` on the completion queue.
    func didComplete(error: Error?) {
        var error = error
        if let bodyFile {
            // A download streamed by this delegate: finish the file and move it as URLSession would.
            let handler = resumeDataHandler.write { handler -> ((Data?) -> Void)? in
                defer { handler = nil }
                return handler
            }
            if let writeError = bodyFile.close() {
                error = SessionKitError.session(.cannotMoveDownloadedFile, "The download could not be written: \(writeError)", underlying: writeError)
            } else if error == nil {
                // As AFNetworking: the manager-wide destination is asked first, then the task's own.
                didFinishDownloading(to: bodyFile.url, override: managerDestination?(task, bodyFile.url))
            } else if let failure = error as NSError?, failure.domain == NSURLErrorDomain {
                // Cancelled or cut: keep what arrived, as resume data in the error (and for a waiting caller).
                let resume = resumeData(from: bodyFile)
                handler?(resume)
                if let resume {
                    var userInfo = failure.userInfo
                    userInfo[URLSessionDownloadTaskResumeData] = resume
                    error = NSError(domain: failure.domain, code: failure.code, userInfo: userInfo)
                }
            } else {
                handler?(nil)
            }
            bodyFile.remove()
        }
        let (action, data): (TaskLifecycle.CompletionAction, Data) = lock.withLock {
            let action = lifecycle.didComplete(error: error.map { $0 as NSError }, forcedError: forcedError)
            let data = body
            body = Data()
            return (action, data)
        }
        guard case .deliver(let fileURL, let finalError) = action else { return }

        if finalError == nil {
            if downloadProgress.totalUnitCount < 0 || downloadProgress.completedUnitCount > downloadProgress.totalUnitCount {
                downloadProgress.totalUnitCount = downloadProgress.completedUnitCount
            }
            if uploadProgress.totalUnitCount <= 0 && uploadProgress.completedUnitCount > 0 {
                uploadProgress.totalUnitCount = uploadProgress.completedUnitCount
                uploadProgressHandler?(uploadProgress)
            } else if uploadProgress.totalUnitCount > 0 && uploadProgress.completedUnitCount < uploadProgress.totalUnitCount {
                uploadProgress.completedUnitCount = uploadProgress.totalUnitCount
                uploadProgressHandler?(uploadProgress)
            }
            downloadProgressHandler?(downloadProgress)
        }

        let delivery = self.delivery
        let task = self.task
        let completion = self.completion
        let response = task.response
        let observation = self.observation
        if let observation {
            observation.monitor.request(observation.request, didCompleteTask: task, error: finalError.map(Self.swiftError))
        }
        delivery.completionGroup.enter()
        delivery.processingQueue.async {
            var object: Any? = nil
            var resultError: Error? = finalError.map(Self.swiftError)
            if finalError == nil {
                do {
                    object = try delivery.responseSerializer.responseObject(for: response, data: fileURL == nil ? data : nil)
                } catch {
                    resultError = error
                    // As AFNetworking: what the serializer still made of a body whose status failed goes to the
                    // completion handler and the notification, next to the error.
                    object = (error as NSError).userInfo[SessionKitError.failingResponseObjectKey]
                }
                if let observation { observation.monitor.request(observation.request, didSerialize: object, error: resultError) }
            }
            if let fileURL { object = fileURL }
            let outcome = TaskOutcome(
                task: task, response: response, data: data, object: object, fileURL: fileURL, error: resultError)
            delivery.completionQueue.async {
                defer { delivery.completionGroup.leave() }
                completion(outcome)
                NotificationCenter.default.post(
                    name: .sessionKitTaskDidComplete, object: task,
                    userInfo: Self.notificationUserInfo(outcome, serializer: delivery.responseSerializer))
            }
        }
    }

    // MARK: - Helpers

    /// Resume data for the bytes `file` holds, keeping the file; nil without a validator or a byte.
    private func resumeData(from file: BodyFile) -> Data? {
        guard let validator, file.length > 0, let url = task.originalRequest?.url, let kept = file.keep() else { return nil }
        return ResumeData(url: url.absoluteString, partialFile: kept.path, bytes: file.length, validator: validator).encoded()
    }

    /// URLSession on Linux reports transport failures as `NSError`s that Swift's `catch let error as URLError`
    /// does not match: hand them over as `URLError`s, with the same code and `userInfo`.
    static func swiftError(_ error: NSError) -> Error {
        guard error.domain == NSURLErrorDomain, let code = URLError.Code(rawValue: error.code) else { return error }
        return URLError(code, userInfo: error.userInfo)
    }

    /// AFNetworking's `userInfo` for the task-did-complete notification.
    private static func notificationUserInfo(_ outcome: TaskOutcome, serializer: URLResponseSerialization) -> [String: Any] {
        var userInfo: [String: Any] = [SessionKitNotificationKey.responseSerializer: serializer]
        if let fileURL = outcome.fileURL {
            userInfo[SessionKitNotificationKey.assetPath] = fileURL
        } else if !outcome.data.isEmpty {
            userInfo[SessionKitNotificationKey.responseData] = outcome.data
        }
        if let error = outcome.error { userInfo[SessionKitNotificationKey.error] = error }
        if let object = outcome.object { userInfo[SessionKitNotificationKey.serializedResponse] = object }
        return userInfo
    }
}
