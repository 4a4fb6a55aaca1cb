import Foundation

/// One part of a multipart body and the state of reading it, as a value: the stream asks it for bytes and it moves
/// through its phases in one place.
///
/// ```
/// boundary ──▶ headers ──▶ body ──▶ closing CRLF (+ final boundary on the last part) ──▶ done
/// ```
/// The body of a file part is opened only when its phase starts and closed when it ends, so that a body of many
/// large files holds one open file and one chunk at a time.
struct MultipartBodyPart {
    /// Where the part's bytes come from.
    enum Source {
        case data(Data)
        case file(URL, length: Int64)
        case stream(InputStream, length: Int64)
    }

    /// The phase being read.
    enum Phase: Equatable {
        case boundary, headers, body, closing, done
    }

    let headers: [(String, String)]
    let source: Source
    var isFirst = false
    var isLast = false

    private(set) var phase: Phase = .boundary
    private var offset = 0
    private var bodyRead: Int64 = 0
    private var bodyStream: InputStream?

    init(headers: [(String, String)], source: Source) {
        self.headers = headers
        self.source = source
    }

    var bodyLength: Int64 {
        switch source {
        case .data(let data): return Int64(data.count)
        case .file(_, let length), .stream(_, let length): return length
        }
    }

    /// The bytes of the framing phases.
    private func framing(_ phase: Phase, boundary: String) -> Data {
        switch phase {
        case .boundary:
            return Data("\(isFirst ? "" : "\r\n")--\(boundary)\r\n".utf8)
        case .headers:
            return Data((headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n").utf8)
        case .closing:
            return isLast ? Data("\r\n--\(boundary)--\r\n".utf8) : Data()
        case .body, .done:
            return Data()
        }
    }

    /// The total number of bytes this part contributes to the body.
    func contentLength(boundary: String) -> Int64 {
        Int64(
            framing(.boundary, boundary: boundary).count + framing(.headers, boundary: boundary).count
                + framing(.closing, boundary: boundary).count) + bodyLength
    }

    /// Copies up to `maxLength` bytes into `buffer`. Returns the count (0 once the part is done) or throws.
    mutating func read(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int, boundary: String) throws -> Int {
        var written = 0
        while written < maxLength && phase != .done {
            switch phase {
            case .boundary, .headers, .closing:
                let bytes = framing(phase, boundary: boundary)
                let count = min(bytes.count - offset, maxLength - written)
                if count > 0 {
                    bytes.withUnsafeBytes { raw in
                        guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return }
                        (buffer + written).update(from: base + offset, count: count)
                    }
                }
                written += count
                offset += count
                if offset >= bytes.count { advance() }
            case .body:
                let count = try readBody(into: buffer + written, maxLength: maxLength - written)
                written += count
                if bodyRead >= bodyLength { finishBody() }
                if count == 0 && bodyRead < bodyLength {
                    throw MultipartBodyStream.shortPart(expected: bodyLength, got: bodyRead)
                }
            case .done:
                break
            }
        }
        return written
    }

    private mutating func advance() {
        offset = 0
        switch phase {
        case .boundary: phase = .headers
        case .headers: phase = bodyLength > 0 ? .body : .closing
        case .body: phase = .closing
        case .closing, .done: phase = .done
        }
    }

    private mutating func readBody(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) throws -> Int {
        let wanted = Int(min(Int64(maxLength), bodyLength - bodyRead))
        guard wanted > 0 else { return 0 }
        switch source {
        case .data(let data):
            let start = Int(bodyRead)
            data.withUnsafeBytes { raw in
                guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return }
                buffer.update(from: base + start, count: wanted)
            }
            bodyRead += Int64(wanted)
            return wanted
        case .file(let url, _):
            if bodyStream == nil {
                guard let stream = InputStream(url: url) else { throw MultipartBodyStream.unreadableFile(url) }
                stream.open()
                bodyStream = stream
            }
            return try readStream(into: buffer, wanted: wanted)
        case .stream(let stream, _):
            if bodyStream == nil {
                if stream.streamStatus == .notOpen { stream.open() }
                bodyStream = stream
            }
            return try readStream(into: buffer, wanted: wanted)
        }
    }

    private mutating func readStream(into buffer: UnsafeMutablePointer<UInt8>, wanted: Int) throws -> Int {
        guard let stream = bodyStream else { return 0 }
        let count = stream.read(buffer, maxLength: wanted)
        if count < 0 {
            throw stream.failure ?? MultipartBodyStream.shortPart(expected: bodyLength, got: bodyRead)
        }
        bodyRead += Int64(count)
        return count
    }

    private mutating func finishBody() {
        if case .file = source { bodyStream?.close() }
        bodyStream = nil
        advance()
    }

    /// Closes a file left open by a read that stopped early.
    mutating func close() {
        if case .file = source { bodyStream?.close() }
        bodyStream = nil
    }
}
