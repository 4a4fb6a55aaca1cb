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
    /// The HTTP response head (Foundation's object for it is built when first read).
    public var response: HTTPURLResponse { received.httpResponseOrMinimal }
    /// The raw body.
    public let data: Data
    /// libcurl's timings of every transfer the request took (each attempt, each redirect step), oldest first;
    /// empty on the Foundation transport (URLSession on Linux never delivers metrics).
    public let timings: [TransferTimings]
    /// How many times an interceptor sent the request again.
    public let retryCount: Int

    /// The response as the transport received it.
    private let received: ReceivedResponse

    /// A result whose `received` response is an HTTP response (the callers check it).
    init(object: Any?, received: ReceivedResponse, data: Data, timings: [TransferTimings] = [], retryCount: Int = 0) {
        self.object = object
        self.received = received
        self.data = data
        self.timings = timings
        self.retryCount = retryCount
    }

    /// The status code of ``response``.
    public var statusCode: Int { received.statusCode }

    /// When the steps of the last transfer happened (DNS, connect, TLS, first byte, completion), nil without
    /// timings.
    public var timeline: TransferTimings? { timings.last }
}
