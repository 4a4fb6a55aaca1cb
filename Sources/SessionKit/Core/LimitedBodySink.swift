import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Bounds the body another ``BodySink`` takes (``ResponseBodyLimits``): past the limit, the chunk is refused (the
/// task is cancelled), what was kept is discarded (no partial body in memory, no partial file, no resume data), and
/// the task ends with `URLError.dataLengthExceedsMaximum`.
final class LimitedBodySink: BodySink {
    private let inner: any BodySink
    /// Which limit this is, for the error ("the in-memory limit").
    private let name: String
    private let url: URL?
    /// The limit (nil: none) and the bytes taken so far; the limit may change before the body starts
    /// (`URLSessionManager.setResponseBodyLimits(_:for:)`, from any thread).
    private let state: Protected<(limit: Int64?, taken: Int64, exceeded: URLError?)>

    /// Bounds `inner` to `limit` bytes.
    init(_ inner: any BodySink, limit: Int64?, name: String, url: URL?) {
        self.inner = inner
        self.name = name
        self.url = url
        self.state = Protected((limit, 0, nil))
    }

    /// Changes the limit.
    func setLimit(_ limit: Int64?) {
        state.write { $0.limit = limit }
    }

    func receive(_ response: ReceivedResponse) -> Int64? {
        inner.receive(response)
    }

    func append(_ data: Data) -> BodySinkReceipt {
        let admitted = state.write { state -> Bool in
            guard state.exceeded == nil else { return false }
            state.taken += Int64(data.count)
            if let limit = state.limit, state.taken > limit {
                state.exceeded = ResponseBodyLimits.exceeded(name, limit: limit, url: url)
                return false
            }
            return true
        }
        return admitted ? inner.append(data) : .refused
    }

    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool {
        inner.produceResumeData(handler)
    }

    func finish(error: Error?, moveFile: (URL, URL?) -> Void) -> Error? {
        guard let exceeded = state.read({ $0.exceeded }) else { return inner.finish(error: error, moveFile: moveFile) }
        // An error outside NSURLErrorDomain: a file sink then deletes its file instead of keeping it to resume.
        _ = inner.finish(error: SessionKitError.session(.cannotMoveDownloadedFile, "discarded"), moveFile: moveFile)
        _ = inner.takeBody()
        return exceeded
    }

    /// Whether a chunk went past the limit (the task is being cancelled for it).
    var hasRefused: Bool { state.read { $0.exceeded != nil } }

    /// Starts the body over, for another attempt of the task: what was kept is dropped and the count restarts.
    func restart() {
        _ = inner.takeBody()
        state.write { ($0.taken, $0.exceeded) = (0, nil) }
    }

    func takeBody() -> Data {
        let body = inner.takeBody()
        return state.read({ $0.exceeded }) == nil ? body : Data()
    }
}
