import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Everything a finished task produced, handed to its completion.
///
/// `@unchecked Sendable`: every field is a `let`; `object` (the serializer's result, `Any?`) is made on the processing
/// queue and handed over once to the completion queue, which is its only reader from then on.
struct TaskOutcome: @unchecked Sendable {
    let task: URLSessionTask
    /// The response as received; its Foundation object is built when ``response`` is first read.
    let received: ReceivedResponse?
    let data: Data
    let object: Any?
    let fileURL: URL?
    let error: Error?

    /// The task's response, as Foundation's API hands it out.
    var response: URLResponse? { received?.urlResponse }
}
