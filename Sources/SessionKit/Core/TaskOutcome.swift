import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Everything a finished task produced, handed to its completion.
///
/// `@unchecked Sendable`: every field is a `let`; `object` (the serializer's result, `Any?`) is made on the processing
/// queue and handed over once to the completion queue, which is its only reader from then on.
struct TaskOutcome: @unchecked Sendable {
    /// The task (what its transport knows it by: see ``TaskReference``).
    let reference: any TaskReference
    /// The response as received; its Foundation object is built when ``response`` is first read.
    let received: ReceivedResponse?
    let data: Data
    let object: Any?
    let fileURL: URL?
    let error: Error?

    /// The task as URLSession's API hands it out (made now if it had none).
    var task: URLSessionTask { reference.task }

    /// The task's response, as Foundation's API hands it out.
    var response: URLResponse? { received?.urlResponse }
}
