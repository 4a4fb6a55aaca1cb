import Foundation

/// The body of a multipart request as an `InputStream` that produces each part when it is read: files are opened
/// and read in chunks only when their turn comes, so memory stays flat whatever the size of the body.
///
/// Its length is known in advance (``contentLength``), which gives the request an exact `Content-Length`.
/// With ``MultipartFormData/throttleBandwidth(withPacketSize:delay:)`` each read returns at most one packet and
/// waits `delay` before the next, as AFNetworking's stream does; the wait happens on the thread that reads.
final class MultipartBodyStream: InputStream {
    // A stream is read by one thread at a time (InputStream's own contract); `state` is still kept under a lock
    // so that `streamStatus` can be asked from anywhere.

    /// Errors a body can meet while it is read.
    enum Failure: Error, CustomStringConvertible {
        case unreadableFile(URL)
        case shortPart(expected: Int64, got: Int64)

        var description: String {
            switch self {
            case .unreadableFile(let url): return "The file \(url.path) could not be opened while the body was sent."
            case .shortPart(let expected, let got):
                return "A part ended after \(got) of its declared \(expected) bytes."
            }
        }
    }

    static func unreadableFile(_ url: URL) -> Error {
        SessionKitError.requestSerialization(.fileDoesNotExist, Failure.unreadableFile(url).description)
    }

    static func shortPart(expected: Int64, got: Int64) -> Error {
        SessionKitError.requestSerialization(
            .cannotDecodeRawData, Failure.shortPart(expected: expected, got: got).description)
    }

    private struct State {
        var parts: [MultipartBodyPart]
        var index = 0
        var status: Stream.Status = .notOpen
        var error: Error?
        var throttle: (packetSize: Int, delay: TimeInterval)?
        var emptyOffset = 0
        var claimed = false
    }

    let boundary: String
    /// The exact number of bytes the stream produces.
    let contentLength: Int64
    private let state: Protected<State>

    init(parts: [MultipartBodyPart], boundary: String, throttle: (packetSize: Int, delay: TimeInterval)?) {
        var parts = parts
        if !parts.isEmpty {
            parts[0].isFirst = true
            parts[parts.count - 1].isLast = true
        }
        self.boundary = boundary
        // A body without parts is still a valid multipart body: the closing delimiter alone.
        self.emptyBody = parts.isEmpty ? Data("--\(boundary)--\r\n".utf8) : nil
        self.contentLength =
            emptyBody.map { Int64($0.count) }
            ?? parts.reduce(0) { $0 + $1.contentLength(boundary: boundary) }
        self.state = Protected(State(parts: parts, throttle: throttle))
        self.unreadParts = parts
        self.throttle = throttle
        super.init(data: Data())
    }

    private let emptyBody: Data?
    /// The parts as they were before the first read, and the throttle: what ``replay()`` starts again from.
    private let unreadParts: [MultipartBodyPart]
    private let throttle: (packetSize: Int, delay: TimeInterval)?

    /// Takes the stream for one transfer: true the first time only. A stream once given to a transfer is read (often
    /// to its end) by it; a later transfer of the same request (a 307 or 308 redirect, an authentication round, a
    /// retry, the same `URLRequest` sent again) sends a ``replay()``, never the rest.
    func claim() -> Bool {
        state.write { state in
            defer { state.claimed = true }
            return !state.claimed
        }
    }

    /// A new stream of the same body from its first byte; nil when a part is a caller's `InputStream`, which can be
    /// read once only.
    func replay() -> MultipartBodyStream? {
        for part in unreadParts {
            if case .stream = part.source { return nil }
        }
        return MultipartBodyStream(parts: unreadParts, boundary: boundary, throttle: throttle)
    }

    // MARK: - InputStream

    override func open() {
        state.write { if $0.status == .notOpen { $0.status = .open } }
    }

    override func close() {
        state.write { state in
            for index in state.parts.indices { state.parts[index].close() }
            state.status = .closed
        }
    }

    override var streamStatus: Stream.Status { state.read { $0.status } }

    override var streamError: Error? { state.read { $0.error } }

    override var hasBytesAvailable: Bool {
        state.read { state in
            guard state.status == .open || state.status == .reading else { return false }
            if let emptyBody { return state.emptyOffset < emptyBody.count }
            return state.index < state.parts.count
        }
    }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        let throttle = state.read { $0.throttle }
        let limit = throttle.map { min(maxLength, max(1, $0.packetSize)) } ?? maxLength
        let count = state.write { state -> Int in
            guard state.status == .open || state.status == .reading else { return state.status == .error ? -1 : 0 }
            if let emptyBody {
                let offset = state.emptyOffset
                let count = min(limit, emptyBody.count - offset)
                emptyBody.withUnsafeBytes { raw in
                    if let base = raw.bindMemory(to: UInt8.self).baseAddress, count > 0 {
                        buffer.update(from: base + offset, count: count)
                    }
                }
                state.emptyOffset += count
                state.status = state.emptyOffset >= emptyBody.count ? .atEnd : .reading
                return count
            }
            var written = 0
            while written < limit && state.index < state.parts.count {
                do {
                    written += try state.parts[state.index].read(
                        into: buffer + written, maxLength: limit - written, boundary: boundary)
                } catch {
                    state.parts[state.index].close()
                    state.error = error
                    state.status = .error
                    return -1
                }
                if state.parts[state.index].phase == .done { state.index += 1 }
            }
            state.status = state.index < state.parts.count ? .reading : .atEnd
            return written
        }
        if let throttle, count > 0, throttle.delay > 0 {
            Thread.sleep(forTimeInterval: throttle.delay)
        }
        return count
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
        length len: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
}
