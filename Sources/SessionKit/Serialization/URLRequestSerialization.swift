import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns a request and its parameters into the request that goes on the wire.
///
/// A manager holds one request serializer and never knows which: implement this protocol to encode
/// parameters your own way.
public protocol URLRequestSerialization {
    /// Returns `request` with `parameters` encoded into it (its URL, its body or both).
    ///
    /// - Parameters:
    ///   - request:    The request to start from; headers it already has are kept.
    ///   - parameters: The parameters to encode, or nil.
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain`` when the parameters cannot be encoded.
    func request(bySerializingRequest request: URLRequest, withParameters parameters: Any?) throws -> URLRequest
}
