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

    /// Creates a compound without components (the base behaviour only).
    public required init() {
        self.responseSerializers = []
        super.init()
    }

    /// Restores the components, in order, and the base validation rules of an archive.
    public required init?(coder: NSCoder) {
        // One key per component: Foundation's array decoder stops the process when an element fails to decode.
        guard let count = coder.number("responseSerializers.count")?.intValue, (0...64).contains(count) else {
            return nil
        }
        var serializers: [HTTPResponseSerializer] = []
        for index in 0..<count {
            guard let serializer = coder.object("responseSerializers.\(index)") as? HTTPResponseSerializer else {
                return nil
            }
            serializers.append(serializer)
        }
        self.responseSerializers = serializers
        super.init(coder: coder)
    }

    /// Archives the components, in order, and the base validation rules.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        coder.encode(NSNumber(value: responseSerializers.count), forKey: "responseSerializers.count")
        for (index, serializer) in responseSerializers.enumerated() {
            coder.encode(serializer, forKey: "responseSerializers.\(index)")
        }
    }

    /// An independent compound with copies of the components.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let components = responseSerializers.compactMap { $0.copy(with: zone) as? HTTPResponseSerializer }
        let copy = CompoundResponseSerializer(responseSerializers: components)
        copy.acceptableStatusCodes = acceptableStatusCodes
        copy.acceptableContentTypes = acceptableContentTypes
        return copy
    }

    /// The first component's object, or the base behaviour when every component fails. A component that decoded the
    /// body but refused the status gives its object next to the status error (under
    /// ``SessionKitError/failingResponseObjectKey``), as AFNetworking's compound returns it with the error.
    open override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        for serializer in responseSerializers {
            do {
                if let object = try serializer.responseObject(for: response, data: data) { return object }
            } catch {
                if (error as NSError).userInfo[SessionKitError.failingResponseObjectKey] != nil { throw error }
                // A component that refuses the content type or the bytes hands over to the next one.
            }
        }
        return try super.responseObject(for: response, data: data)
    }
}
