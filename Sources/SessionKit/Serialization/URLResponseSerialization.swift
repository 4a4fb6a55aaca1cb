import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates a response and decodes its body into an object.
///
/// A manager holds one response serializer and never knows which: implement this protocol to decode bodies your
/// own way. It runs off the session's delegate queue, once per task.
public protocol URLResponseSerialization: Sendable {
    /// Returns the object decoded from `data`, or nil for a body that carries none.
    ///
    /// - Parameters:
    ///   - response: The response, nil when the task failed before one arrived.
    ///   - data:     The body, possibly empty.
    /// - Throws: An error that says why the response is unacceptable; it reaches the task's failure handler.
    func responseObject(for response: URLResponse?, data: Data?) throws -> Any?
}
