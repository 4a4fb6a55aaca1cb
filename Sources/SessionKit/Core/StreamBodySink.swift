import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Hands the body to a streamed reader (``DataStreamSink``) instead of keeping it.
///
/// The reader reports the bytes consumed as it takes them, and sees the end from the task's completion, which
/// the manager forwards to the ``DataStreamSink`` itself.
final class StreamBodySink: BodySink {
    private let reader: DataStreamSink

    /// Forwards the body to `reader`.
    init(_ reader: DataStreamSink) {
        self.reader = reader
    }

    func receive(_ response: ReceivedResponse) -> Int64? {
        reader.receive(response)
        return nil
    }

    func append(_ data: Data) -> BodySinkReceipt {
        reader.push(data)
        return .handedOver
    }

    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool { false }

    func finish(error: Error?, moveFile: (URL, URL?) -> Void) -> Error? { error }

    func takeBody() -> Data { Data() }
}
