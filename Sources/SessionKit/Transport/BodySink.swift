import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where the body of one task goes as it arrives: into memory (``MemoryBodySink``), to a streamed reader
/// (``StreamBodySink``), or into the download file of a transport without URLSession's download machinery, which can
/// become resume data (the curl transport's ``FileBodySink``, which the transport hands over with its task).
///
/// ``TaskDelegate`` picks one when it is created and from then on only calls these methods, all on the session's
/// serial delegate queue except ``takeBody()``, which may run wherever the completion is decided.
protocol BodySink: AnyObject {
    /// The response head arrived. Returns how many bytes of the body the sink already holds when that is news to
    /// the download progress (the beginning of a resumed download, or 0 once a restarted one is emptied); nil when
    /// the progress is right as it is.
    func receive(_ response: ReceivedResponse) -> Int64?

    /// Takes a chunk of the body and says who counts it.
    func append(_ data: Data) -> BodySinkReceipt

    /// Asks for resume data when the task ends; false when the sink keeps nothing to resume from.
    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool

    /// The task ended with `error` (nil for success). A sink that wrote the download itself hands the finished file
    /// to `moveFile`, with the manager-wide destination's answer, before it cleans up. Returns the error the task
    /// ends with (a failed write, or a cancellation that now carries resume data).
    func finish(error: Error?, moveFile: (_ location: URL, _ override: URL?) -> Void) -> Error?

    /// The body kept in memory, handed over once; empty for a sink that keeps none.
    func takeBody() -> Data
}

/// What a ``BodySink`` did with a chunk.
enum BodySinkReceipt {
    /// Stored: the bytes count as consumed and as download progress now.
    case stored
    /// Handed to a reader, which reports them consumed when it takes them.
    case handedOver
    /// Could not be stored (the disk refused them): the task must end, and its completion reports why.
    case refused
}
