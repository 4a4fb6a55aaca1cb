import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Tries several response serializers in order; the first that succeeds wins.
///
/// When none succeeds, the compound behaves as a plain ``HTTPResponseSerializer`` (its own acceptable status codes
/// and content types), as AFNetworking's `AFCompoundResponseSerializer` does.
///
/// ```swift
/// manager.responseSerializer = CompoundResponseSerializer(responseSerializers: [
///     JSONResponseSerializer(), XMLParserResponseSerializer(), PropertyListResponseSerializer(),
/// ])
/// ```
open class CompoundResponseSerializer: HTTPResponseSerializer, @unchecked Sendable {
    // @unchecked Sendable: `responseSerializers` is immutable; the components guard their own state.

    /// The components, tried in order.
    public let responseSerializers: [HTTPResponseSerializer]

    /// Creates a compound of `responseSerializers`, tried in order.
    public init(responseSerializers: [HTTPResponseSerializer]) {
        self.responseSerializers = responseSerializers
        super.init()
    }

    /// The first component's object, or the base behaviour when every component fails.
    open override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        for serializer in responseSerializers {
            // A component that refuses the content type or the bytes hands over to the next one.
            if let object = try? serializer.responseObject(for: response, data: data) {
                return object
            }
        }
        return try super.responseObject(for: response, data: data)
    }
}
