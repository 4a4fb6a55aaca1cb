import Foundation

/// Writes a streamed request body (``HTTPRequestBody/stream(length:_:)``), handed to its closure.
public struct HTTPBodyWriter: Sendable {
    let pipe: RequestBodyPipe

    /// Sends `bytes` as the body's next chunk; suspends while the transport has enough waiting to be sent.
    ///
    /// - Throws: The request's error once it failed or was cancelled (writing stops there), `CancellationError` when
    ///   the writing task is cancelled, or ``SessionKitError/Code/streamedBodyUnavailable`` after the closure returned.
    public func write(_ bytes: Data) async throws {
        try await pipe.write(bytes)
    }
}
