import Foundation

/// Decodes a validated keyed archive without Foundation's `NSKeyedUnarchiver`.
///
/// Even after the structure check, `NSKeyedUnarchiver` on Linux stops the process in cases a damaged archive can
/// reach (an object shared by two fields whose first decoding failed; an array element that fails to decode), as
/// the mutation tests showed. This `NSCoder` reads the object table that ``KeyedArchiveValidator`` already parsed:
/// plain values and Foundation containers are built directly, SessionKit objects are created through their
/// `init?(coder:)` with a decoder scoped to their own fields, every object is decoded at most once, nesting is
/// bounded, and every failure is recorded as an error instead of trapping.
final class ArchiveDecoder: NSCoder {
    typealias UID = BinaryPropertyListReader.UID

    /// How deeply SessionKit objects may nest (a manager holds serializers, a compound holds components).
    static let maximumDepth = 16

    /// State shared by the decoders of one archive.
    final class Context {
        let objects: [Any]
        let classes: [String: AnyClass]
        var cache: [Int: Any] = [:]
        var failed: Set<Int> = []
        var inProgress: Set<Int> = []
        var error: Error?

        init(objects: [Any], classes: [String: AnyClass]) {
            self.objects = objects
            self.classes = classes
        }
    }

    private let context: Context
    private let fields: [String: Any]
    private let depth: Int

    init(context: Context, fields: [String: Any], depth: Int) {
        self.context = context
        self.fields = fields
        self.depth = depth
        super.init()
    }

    /// The object at `index` of the table, or nil with ``Context/error`` set.
    static func decodeRoot(_ contents: KeyedArchiveValidator.Contents, classes: [String: AnyClass]) -> (Any?, Error?) {
        let context = Context(objects: contents.objects, classes: classes)
        let decoder = ArchiveDecoder(context: context, fields: [:], depth: 0)
        let object = decoder.resolve(contents.root)
        return (object, context.error)
    }

    // MARK: - NSCoder

    override var allowsKeyedCoding: Bool { true }
    override var requiresSecureCoding: Bool { true }
    override var decodingFailurePolicy: NSCoder.DecodingFailurePolicy { .setErrorAndReturn }
    override var error: Error? { context.error }

    override func failWithError(_ error: Error) {
        if context.error == nil { context.error = error }
    }

    override func containsValue(forKey key: String) -> Bool {
        fields[key] != nil
    }

    override func decodeObject(forKey key: String) -> Any? {
        value(forKey: key)
    }

    override func decodeObject(of classes: [AnyClass]?, forKey key: String) -> Any? {
        guard let object = value(forKey: key) else { return nil }
        guard let classes, let instance = object as? NSObject, !(object is String || object is NSNumber) else {
            return object
        }
        guard classes.contains(where: { instance.isKind(of: $0) }) else {
            fail("\(key) holds a \(type(of: instance)), which is not allowed there")
            return nil
        }
        return object
    }

    override func decodeBool(forKey key: String) -> Bool { (value(forKey: key) as? NSNumber)?.boolValue ?? false }
    override func decodeInteger(forKey key: String) -> Int { (value(forKey: key) as? NSNumber)?.intValue ?? 0 }
    override func decodeInt32(forKey key: String) -> Int32 { (value(forKey: key) as? NSNumber)?.int32Value ?? 0 }
    override func decodeInt64(forKey key: String) -> Int64 { (value(forKey: key) as? NSNumber)?.int64Value ?? 0 }
    override func decodeDouble(forKey key: String) -> Double { (value(forKey: key) as? NSNumber)?.doubleValue ?? 0 }
    override func decodeFloat(forKey key: String) -> Float { (value(forKey: key) as? NSNumber)?.floatValue ?? 0 }

    // MARK: - Resolution

    private func fail(_ reason: String) {
        failWithError(SecureArchiveError.decodingFailed(reason))
    }

    /// The value of one of this object's fields.
    private func value(forKey key: String) -> Any? {
        guard let raw = fields[key] else { return nil }
        if let uid = raw as? UID { return resolve(uid.value) }
        return raw
    }

    /// Object `index` of the table, decoded once.
    fileprivate func resolve(_ index: Int) -> Any? {
        guard index > 0 else { return nil }  // $null
        if let cached = context.cache[index] { return cached }
        guard !context.failed.contains(index), !context.inProgress.contains(index), index < context.objects.count else {
            return nil
        }
        context.inProgress.insert(index)
        defer { context.inProgress.remove(index) }
        let object = build(context.objects[index])
        if let object { context.cache[index] = object } else { context.failed.insert(index) }
        return object
    }

    private func build(_ entry: Any) -> Any? {
        guard let instance = entry as? [String: Any] else { return entry }  // a plain value
        guard let classUID = instance["$class"] as? UID,
            let description = context.objects[safe: classUID.value] as? [String: Any],
            let name = description["$classname"] as? String
        else {
            fail("an object without a class")
            return nil
        }
        switch name {
        case "NSArray", "NSMutableArray":
            return plainList(instance["NS.objects"])
        case "NSDictionary", "NSMutableDictionary":
            guard let keys = plainList(instance["NS.keys"]), let values = plainList(instance["NS.objects"]),
                keys.count == values.count
            else { return nil }
            var dictionary: [String: Any] = [:]
            for (key, value) in zip(keys, values) {
                guard let key = key as? String else { return nil }
                dictionary[key] = value
            }
            return dictionary
        case "NSURL":
            guard
                let relative = (instance["NS.relative"] as? UID).flatMap({ context.objects[safe: $0.value] as? String }
                ),
                let url = URL(string: relative)
            else { return nil }
            return url
        case "NSString", "NSMutableString":
            return instance["NS.string"] as? String
        case "NSData", "NSMutableData":
            return instance["NS.data"] as? Data
        default:
            return sessionKitObject(named: name, fields: instance)
        }
    }

    /// The plain values a container's reference list points to.
    private func plainList(_ raw: Any?) -> [Any]? {
        guard let references = raw as? [Any] else { return nil }
        var values: [Any] = []
        for reference in references {
            guard let uid = reference as? UID, let value = context.objects[safe: uid.value], !(value is [String: Any])
            else {
                fail("a container holds something other than plain values")
                return nil
            }
            values.append(value)
        }
        return values
    }

    private func sessionKitObject(named name: String, fields: [String: Any]) -> Any? {
        guard let aClass = context.classes[name], let codingType = aClass as? NSCoding.Type else {
            fail("the class \(name) is not allowed")
            return nil
        }
        guard depth < Self.maximumDepth else {
            fail("objects nested too deeply")
            return nil
        }
        let decoder = ArchiveDecoder(context: context, fields: fields, depth: depth + 1)
        guard let object = codingType.init(coder: decoder) else {
            fail("\(name) could not be decoded")
            return nil
        }
        return object
    }
}
