import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How far a transfer has come: the bytes sent (an upload) or received (a download), and the bytes expected (-1
/// while unknown).
public struct TransferProgress: Sendable, Equatable {
    /// The bytes sent or received so far.
    public let completedUnitCount: Int64
    /// The bytes expected, or -1 while unknown.
    public let totalUnitCount: Int64

    /// Creates a progress report.
    public init(completedUnitCount: Int64, totalUnitCount: Int64) {
        self.completedUnitCount = completedUnitCount
        self.totalUnitCount = totalUnitCount
    }

    /// The fraction done, from 0 to 1; 0 while the total is unknown.
    public var fractionCompleted: Double {
        totalUnitCount > 0 ? min(1, Double(completedUnitCount) / Double(totalUnitCount)) : 0
    }
}

/// An upload or a download started by an async form of the managers: its progress as an `AsyncSequence`, and its
/// result.
///
/// ```swift
/// let transfer = manager.download(URLRequest(url: url), to: file)
/// for await step in transfer.progress { print(Int(step.fractionCompleted * 100), "%") }
/// let (fileURL, response) = try await transfer.value
/// ```
///
/// The task starts at once. ``progress`` ends when the transfer ends; nobody has to read it (it keeps the newest 16
/// reports). Cancelling the Swift task that awaits ``value``, or calling ``cancel()``, cancels the transfer.
public struct Transfer<Value: Sendable>: Sendable {
    /// The progress reports, ending when the transfer ends.
    public let progress: AsyncStream<TransferProgress>
    private let task: Task<Value, Error>

    init(progress: AsyncStream<TransferProgress>, task: Task<Value, Error>) {
        self.progress = progress
        self.task = task
    }

    /// The result, once the transfer ended.
    /// - Throws: The transport, validation or serialization error, or `CancellationError`'s URL counterpart
    ///   (`URLError.cancelled`) when cancelled.
    public var value: Value {
        get async throws {
            let task = self.task
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        }
    }

    /// Cancels the transfer.
    public func cancel() { task.cancel() }
}

extension URLSessionManager {
    // MARK: - Uploads and downloads (async forms)

    /// Uploads `bodyData` as the body of `request`; the result is the serialized response.
    public func upload(_ request: URLRequest, from bodyData: Data) -> Transfer<HTTPResult> {
        transfer(result: Self.httpResult) { progress, completion in
            self.makeTask(.uploadData(request, bodyData), uploadProgress: progress, completion: completion)
        }
    }

    /// Uploads the file at `fileURL` as the body of `request`; the result is the serialized response.
    public func upload(_ request: URLRequest, fromFile fileURL: URL) -> Transfer<HTTPResult> {
        transfer(result: Self.httpResult) { progress, completion in
            self.makeTask(.uploadFile(request, fileURL), uploadProgress: progress, completion: completion)
        }
    }

    /// Downloads the body of `request` into a file at `destination`, which must not exist yet; the result is that
    /// file and the response (validated by ``responseSerializer``, whose failure throws).
    public func download(
        _ request: URLRequest, to destination: URL
    )
        -> Transfer<(fileURL: URL, response: HTTPURLResponse)>
    {
        transfer(result: Self.downloadResult) { progress, completion in
            self.makeTask(
                .download(request), downloadProgress: progress, destination: { _, _ in destination },
                completion: completion)
        }
    }

    /// Starts the task `make` creates, reporting its progress to the returned transfer's stream and its outcome,
    /// through `result`, to its value.
    func transfer<Value: Sendable>(
        result: @escaping @Sendable (TaskOutcome) throws -> Value,
        make:
            @escaping @Sendable (
                _ progress: @escaping @Sendable (Progress) -> Void,
                _ completion: @escaping @Sendable (TaskOutcome) -> Void
            ) -> URLSessionTask
    ) -> Transfer<Value> {
        let (stream, reports) = AsyncStream.makeStream(of: TransferProgress.self, bufferingPolicy: .bufferingNewest(16))
        let report: @Sendable (Progress) -> Void = { progress in
            reports.yield(
                TransferProgress(
                    completedUnitCount: progress.completedUnitCount,
                    totalUnitCount: progress.totalUnitCount))
        }
        let started = Protected<URLSessionTask?>(nil)
        let task = Task<Value, Error> {
            defer { reports.finish() }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, Error>) in
                    let task = make(report) { outcome in
                        reports.finish()
                        continuation.resume(with: Result { try result(outcome) })
                    }
                    started.write { $0 = task }
                    task.resume()
                    if Task.isCancelled { task.cancel() }
                }
            } onCancel: {
                started.read { $0 }?.cancel()
            }
        }
        return Transfer(progress: stream, task: task)
    }

    static func httpResult(_ outcome: TaskOutcome) throws -> HTTPResult {
        if let error = outcome.error { throw error }
        guard let received = outcome.received, received.isHTTP else {
            throw URLError(
                .badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: outcome.reference.originalURL as Any])
        }
        return HTTPResult(object: outcome.object, received: received, data: outcome.data)
    }

    static func downloadResult(_ outcome: TaskOutcome) throws -> (fileURL: URL, response: HTTPURLResponse) {
        if let error = outcome.error { throw error }
        guard let response = outcome.response as? HTTPURLResponse, let fileURL = outcome.fileURL else {
            throw URLError(
                .badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: outcome.reference.originalURL as Any])
        }
        return (fileURL, response)
    }
}

extension HTTPSessionManager {
    /// Uploads a multipart `POST` body: `parameters` become form parts, then `block` appends its own (it runs before
    /// this returns). The async counterpart of `post(_:parameters:headers:constructingBodyWith:progress:success:failure:)`.
    ///
    /// ```swift
    /// let transfer = try manager.multipartUpload("upload", parameters: ["title": "report"]) { form in
    ///     try form.appendPart(withFileURL: fileURL, name: "file")
    /// }
    /// let result = try await transfer.value
    /// ```
    /// - Throws: The error of building the request (a file part that cannot be read, say); the transfer's own
    ///   errors come from its ``Transfer/value``.
    public func multipartUpload(
        _ urlString: String,
        parameters: [String: Any]? = nil,
        headers: [String: String]? = nil,
        constructingBodyWith block: ((MultipartFormData) throws -> Void)? = nil
    ) throws -> Transfer<HTTPResult> {
        var request = try requestSerializer.multipartFormRequest(
            withMethod: "POST", urlString: try absoluteURLString(urlString), parameters: parameters,
            constructingBodyWith: block)
        for (name, value) in headers ?? [:] { request.setValue(value, forHTTPHeaderField: name) }
        let built = request
        return transfer(result: Self.httpResult) { progress, completion in
            self.makeTask(.uploadStream(built), uploadProgress: progress, completion: completion)
        }
    }
}
