import Foundation

/// Carries a ``RequestBodyPipe`` in `URLRequest.httpBodyStream` through the request pipeline (interceptors see an
/// ordinary request) to the curl transport, which reads the pipe itself without blocking. Read as an `InputStream` it
/// is empty: only the curl transport sends it (the Foundation transport gets the body buffered instead).
final class PipeInputStream: InputStream {
    /// The body.
    let pipe: RequestBodyPipe

    init(pipe: RequestBodyPipe) {
        self.pipe = pipe
        super.init(data: Data())
    }
}
