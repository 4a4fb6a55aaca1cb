import Foundation

/// Bounds on a response body: how much SessionKit keeps in memory, writes to a download's file or hands to a stream
/// reader, and how far a compressed body may inflate. Crossing one ends the task with
/// `URLError.dataLengthExceedsMaximum` and a reason; the partial body is not kept.
///
/// The defaults keep a decompression bomb (a small gzip body that inflates to gigabytes) and an endless body from
/// exhausting memory, while leaving downloads to a file and streamed bodies unbounded:
///
/// ```swift
/// manager.responseBodyLimits.maximumInMemory = 512 << 20       // a manager that loads large documents
/// manager.setResponseBodyLimits(.init(maximumInMemory: nil), for: task)   // one task without a bound
/// ```
public struct ResponseBodyLimits: Sendable, Equatable {
    /// The largest body kept in memory (data tasks, the verbs, the async forms), after decoding; nil for no bound.
    /// Default 64 MiB.
    public var maximumInMemory: Int64?
    /// The largest body written to a download's file; nil (the default) for no bound.
    public var maximumToFile: Int64?
    /// The largest body handed to a stream reader (`bytes(for:)`, `stream`); nil (the default) for no bound.
    public var maximumStreamed: Int64?
    /// How many times larger than on the wire a `Content-Encoding` body may grow when decoded (curl transport),
    /// checked once 1 MiB was decoded; nil for no bound. Default 100.
    public var maximumDecompressionRatio: Int?
    /// The largest decoded size of a `Content-Encoding` body (curl transport); nil (the default) for no bound beyond
    /// the others.
    public var maximumDecompressedSize: Int64?

    /// Limits; every parameter has the default documented on its property.
    public init(
        maximumInMemory: Int64? = 64 << 20, maximumToFile: Int64? = nil, maximumStreamed: Int64? = nil,
        maximumDecompressionRatio: Int? = 100, maximumDecompressedSize: Int64? = nil
    ) {
        self.maximumInMemory = maximumInMemory
        self.maximumToFile = maximumToFile
        self.maximumStreamed = maximumStreamed
        self.maximumDecompressionRatio = maximumDecompressionRatio
        self.maximumDecompressedSize = maximumDecompressedSize
    }

    /// The default limits.
    public static let `default` = ResponseBodyLimits()

    /// The error of a body that crossed `limit` bytes (`what` names the limit).
    static func exceeded(_ what: String, limit: Int64, url: URL?) -> URLError {
        URLError(
            .dataLengthExceedsMaximum,
            userInfo: [
                NSLocalizedDescriptionKey:
                    "The response body exceeded \(what) (\(limit) bytes); the task was stopped and "
                    + "the partial body discarded. Raise `responseBodyLimits` if the body is expected.",
                NSURLErrorFailingURLErrorKey: url as Any,
            ])
    }
}
