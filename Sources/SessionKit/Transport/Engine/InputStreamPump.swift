import Foundation

/// Reads a caller's request body stream on a thread of its own into a ``RequestBodyPipe``, which the transfer reads
/// without ever waiting: a stream whose `read` waits (a socket's, or one a producer feeds) then holds
/// back its own upload only, never the engine thread and every other transfer on it.
///
/// One thread per such upload, for as long as the stream gives bytes: `read` cannot be interrupted, so a thread that
/// waits in it when the transfer ends stays until the stream gives something or ends, then stops. SessionKit's own
/// streams (a multipart body, an upload task's file) never wait and are read by the transfer in place.
enum InputStreamPump {
    /// The error a pumped body fails with when its stream failed; the transfer reports it as the stream's failure.
    struct ReadFailure: Error {
        /// The stream's own error, when it gave one.
        let streamError: Error?
    }

    /// Whether a transfer pumps `stream` rather than read it in place: every stream but SessionKit's own, which never
    /// wait (the HTTP core API's pipe, a multipart body, and an upload task's file, said by `readInPlace`).
    static func pumps(_ stream: InputStream, readInPlace: Bool) -> Bool {
        !readInPlace && !(stream is PipeInputStream) && !(stream is MultipartBodyStream)
    }

    /// Bytes read from the stream at a time.
    static let chunkSize = 64 * 1024

    /// A pipe that a new thread fills from `stream` (opened and closed there) until its end, an error, or the pipe's
    /// failure (the transfer ended); `length` is the body's `Content-Length`, nil for chunked.
    static func pipe(reading stream: InputStream, length: Int64?) -> RequestBodyPipe {
        let pipe = RequestBodyPipe(length: length)
        let box = StreamBox(stream)
        let thread = Thread { pump(box.stream, into: pipe) }
        thread.name = "com.sessionkit.body-stream"
        thread.start()
        return pipe
    }

    /// Hands the stream to the pump's thread, which alone uses it from then on.
    private final class StreamBox: @unchecked Sendable {
        // @unchecked Sendable: the stream moves to the pump's thread and is used there only.
        let stream: InputStream
        init(_ stream: InputStream) { self.stream = stream }
    }

    private static func pump(_ stream: InputStream, into pipe: RequestBodyPipe) {
        if stream.streamStatus == .notOpen { stream.open() }
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: $0.count) }
            if count < 0 { return pipe.fail(ReadFailure(streamError: stream.failure)) }
            if count == 0 { return pipe.finish(trailers: []) }
            guard write(Data(buffer[0..<count]), to: pipe) else { return }  // the transfer ended: stop reading
        }
    }

    /// Writes `data` into `pipe`, waiting (on the pump's own thread) while the transfer has enough to read; false
    /// when the body failed or was cancelled.
    private static func write(_ data: Data, to pipe: RequestBodyPipe) -> Bool {
        let written = DispatchSemaphore(value: 0)
        let succeeded = Protected(false)
        Task {
            do {
                try await pipe.write(data)
                succeeded.wrappedValue = true
            } catch {}
            written.signal()
        }
        written.wait()
        return succeeded.wrappedValue
    }
}
