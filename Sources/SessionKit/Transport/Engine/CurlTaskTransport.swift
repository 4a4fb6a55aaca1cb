import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// SessionKit's own tasks over libcurl (``CurlDataTask``, ``CurlUploadTask``, ``CurlDownloadTask``, run by a
/// ``CurlTaskDriver``): the policy in the handshake, resumable downloads, the configuration's timeouts kept by the
/// transfer.
final class CurlTaskTransport: TaskTransport, Sendable {
    // Sendable, checked by the compiler: `identifiers` is a `Protected` box; the rest is immutable after `init`.

    private let settings: CurlSessionSettings
    /// How its tasks reach the delegate queue from the engine thread and callers' threads (and the queue itself).
    private let hop: DelegateQueueHop
    /// The last identifier given to a task of this manager.
    private let identifiers = Protected(0)

    /// A transport for one manager: its configuration, read once, and the serial queue under its delegate queue.
    init(settings: CurlSessionSettings, delegateQueue: DispatchQueue) {
        self.settings = settings
        hop = DelegateQueueHop(to: delegateQueue)
    }

    func refusal(for request: URLRequest, policy: SecurityPolicy) -> NSError? {
        Transport.pinningRefusal(for: request, policy: policy)
    }

    func refusal(for request: URLRequest, connection: ConnectionOptions) -> NSError? {
        if let refusal = Self.refusal(for: request.url) { return refusal as NSError }
        guard let problem = connection.problem else { return nil }
        return URLError(
            .badURL, userInfo: [NSLocalizedDescriptionKey: problem, NSURLErrorFailingURLErrorKey: request.url as Any])
            as NSError
    }

    /// This transport speaks HTTP: a URL of another scheme is refused before anything is sent (`file`, `gopher`,
    /// `dict`… libcurl would run them), and so is an HTTP URL without a host (libcurl would take the path's first
    /// word as one), and a Unix socket URL that names no socket. Asked for every request of a task (each redirect's
    /// too): the URL's scheme is read once.
    static func refusal(for url: URL?) -> URLError? {
        func refused(_ code: URLError.Code, _ reason: String) -> URLError {
            URLError(code, userInfo: [NSLocalizedDescriptionKey: reason, NSURLErrorFailingURLErrorKey: url as Any])
        }
        guard let url, let written = url.scheme else {
            let given = url?.absoluteString ?? "none"
            return refused(.badURL, "The request has no absolute URL (a scheme and a host): \(given).")
        }
        let scheme = written.asciiLowercased
        switch scheme {
        case "http", "https":
            // Encoded: whether there is a host, without decoding it.
            guard let host = url.host(percentEncoded: true), !host.isEmpty else {
                return refused(.badURL, "\(url.absoluteString) has no host.")
            }
            return nil
        case _ where UnixSocketURL.schemes.contains(scheme):
            return UnixSocketURL.refusal(for: url)
        default:
            return refused(
                .unsupportedURL,
                "\(url.absoluteString): the scheme \(scheme) is not HTTP; SessionKit sends http, https, http+unix and "
                    + "https+unix requests.")
        }
    }

    var clientIdentityRefusal: NSError? { nil }

    /// SessionKit's own resume data (``ResumeData``): the partial file must still be there, its size unchanged.
    func resumedDownload(from resumeData: Data) -> Result<ResumedDownload, NSError> {
        guard let resume = ResumeData.decode(resumeData), let url = URL(string: resume.url) else {
            return .failure(
                SessionKitError.session(
                    .resumeDataUnavailable,
                    "The resume data is not SessionKit's, or its partial file is gone or changed."))
        }
        var request = URLRequest(url: url)
        request.setValue("bytes=\(resume.bytes)-", forHTTPHeaderField: "Range")
        request.setValue(resume.validator, forHTTPHeaderField: "If-Range")
        return .success(
            ResumedDownload(
                request: request, partialFile: URL(fileURLWithPath: resume.partialFile), length: resume.bytes))
    }

    var interceptsTasks: Bool { true }

    var streamsRequestBodies: Bool { true }

    // Its tasks keep URLSession's `resume()`/`suspend()` promises themselves, in every state (a loading task holds its
    // transfer in libcurl), and report each change, with its notification, through the event sink.

    func resume(_ task: any TaskReference, announces: Bool) {
        if let driver = task as? CurlTaskDriver { return driver.resume() }
        task.task.asTransportDriven?.transportResume()
    }

    func suspend(_ task: any TaskReference, announces: Bool) -> Bool {
        if let driver = task as? CurlTaskDriver { return driver.suspend() }
        return task.task.asTransportDriven?.transportSuspend() ?? false
    }

    func cancel(_ task: any TaskReference) {
        task.cancel()
    }

    var reportsSuspension: Bool { true }

    var sessionCancelsTasks: Bool { false }

    func setClientIdentity(_ identity: ClientIdentity?, for task: any TaskReference, running: Bool) {
        if let driver = task as? CurlTaskDriver {
            _ = driver.clientIdentity.set(identity)
            return
        }
        task.task.asTransportDriven?.transportSetClientIdentity(identity)
    }

    func makeTask(
        for source: TaskSource, uploadLength: Int64?, options: TransportTaskOptions, session: URLSession,
        sink: TaskEventSink
    )
        -> TransportTask?
    {
        guard var request = source.request else { return nil }
        var bodyFile: URL?
        switch source {
        case .uploadData(_, let data):
            request.httpBody = data
        case .uploadFile(_, let fileURL):
            // libcurl reads the file as a stream, with an exact Content-Length; each transfer opens it anew.
            request.httpBodyStream = InputStream(url: fileURL)
            if let length = uploadLength { request.setValue(String(length), forHTTPHeaderField: "Content-Length") }
            bodyFile = fileURL
        default:
            break
        }
        let identifier = identifiers.write { identifier -> Int in
            identifier += 1
            return identifier
        }
        let isUpload = source.isUpload
        let kind: CurlTaskDriver.Kind
        switch source {
        case .data: kind = .data
        case .uploadData, .uploadFile, .uploadStream: kind = .upload
        case .download: kind = .download
        case .refused: return nil
        }
        let driver = CurlTaskDriver(
            taskIdentifier: identifier, request: request, kind: kind, bodyFile: bodyFile, isUpload: isUpload,
            expectedToSend: uploadLength ?? 0,
            environment: .init(
                policy: options.policy, tlsVersions: options.tlsVersions,
                decodingLimits: options.decodingLimits, settings: settings, sink: sink, session: session,
                hop: hop, connectionEvents: options.connectionEvents,
                connection: options.connection, clientIdentity: options.clientIdentity,
                intercepted: options.intercepted))
        // libcurl has no download machinery: the body is written to a file of the transport's own.
        var downloadSink: FileBodySink?
        if source.isDownload {
            let file = options.resumedDownload.map { BodyFile(resuming: $0.partialFile, length: $0.length) }
            downloadSink = FileBodySink(
                file: file ?? BodyFile(), task: driver.task, managerDestination: options.downloadDestinationOverride)
        }
        // The driver stands for its task: the `URLSessionTask` is made when someone asks (``CurlTaskDriver/task``).
        return TransportTask(
            reference: driver, flowControl: driver.flowControl, downloadSink: downloadSink,
            adoptProgress: { upload, download in driver.progressSource = isUpload ? upload : download })
    }

    /// A stream task to `host`:`port` under `options`, reporting to `sink`, not resumed.
    func makeStreamTask(
        host: String, port: Int, options: TransportTaskOptions, session: URLSession, sink: TaskEventSink,
        refusal: NSError? = nil
    ) -> SessionStreamTask {
        let identifier = identifiers.write { identifier -> Int in
            identifier += 1
            return identifier
        }
        let driver = CurlStreamDriver(
            taskIdentifier: identifier, host: host, port: port,
            environment: .init(
                policy: options.policy, tlsVersions: options.tlsVersions, connectTimeout: settings.idleTimeout,
                sink: sink, session: session, delegateQueue: hop.queue, refusal: refusal,
                proxies: settings.proxies, connection: options.connection, clientIdentity: options.clientIdentity))
        return SessionStreamTask(driver: driver)
    }
}
