import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an async request of ``HTTPSessionManager`` returns: the serialized object, the response and its body.
public struct HTTPResult: @unchecked Sendable {
    // @unchecked Sendable: `object` comes from a response serializer (JSON, property list, `Data`…) and is
    // never mutated after it is handed over.

    /// What the manager's response serializer made of the body (for JSON: dictionaries, arrays, strings, numbers).
    public let object: Any?
    /// The HTTP response head.
    public let response: HTTPURLResponse
    /// The raw body.
    public let data: Data

    /// The status code of ``response``.
    public var statusCode: Int { response.statusCode }
}
