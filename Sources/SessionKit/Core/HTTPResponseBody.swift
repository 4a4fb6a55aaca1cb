import Foundation
public import HTTPTypes

/// The body of a response of the HTTP core API (``URLSessionManager/perform(_:body:_:)``): its chunks in order, as
/// they arrive, then its trailers.
///
/// Reading slowly slows the transfer down (back-pressure); cancelling the reading task cancels the request, and a
/// read then throws `URLError.cancelled`. A loop over the body ends without an error only when the whole body arrived.
///
/// ```swift
/// for try await chunk in body { try handle.write(contentsOf: chunk) }
/// let checksum = try await body.trailers?[HTTPField.Name("X-Checksum")!]
/// ```
public struct HTTPResponseBody: AsyncSequence, Sendable {
    // Sendable, checked by the compiler: the only field is Sendable.

    /// A chunk of the body.
    public typealias Element = Data

    /// Reads the chunks of an ``HTTPResponseBody``, one at a time.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: StreamedBody.AsyncIterator

        /// The next chunk; nil at the end of the body.
        ///
        /// - Throws: The transport error that cut the body, or `URLError.cancelled` when the reading task was
        ///   cancelled.
        public mutating func next() async throws -> Data? {
            try await base.next()
        }
    }

    let body: StreamedBody

    /// An iterator over the body. Iterators made from one body share it: each chunk goes to one of them.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: body.makeAsyncIterator())
    }

    /// The response's trailer fields (chunked HTTP/1.1 and HTTP/2), nil when it had none. Read the body to its end
    /// first: this waits for the end of the body.
    ///
    /// - Throws: The error that ended the response.
    public var trailers: HTTPFields? {
        get async throws {
            try await body.trailers().map(HTTPTypesBridge.fields(from:))
        }
    }
}
