import Foundation

/// AFNetworking's query-string encoding: the rules both the URL query and form bodies use.
///
/// Pairs are sorted by key; a nested dictionary gives `a[b]=c`, an array `a[]=x&a[]=y`, a set its sorted members
/// under the same key, a null value the bare key, a `Bool` `1` or `0`, and any other value its `description`.
/// Parameters that are not a dictionary (a string, say) are one pair with an empty key: `=value`.
enum QueryStringEncoding {
    /// Characters of the URL query allowed set that are still escaped, because they delimit query components.
    private static let delimiters = ":#[]@!$&'()*+,;="

    /// The URL query allowed set minus ``delimiters``: `?` and `/` stay as they are, a space becomes `%20`.
    static let allowedCharacters: CharacterSet = {
        var set = CharacterSet.urlQueryAllowed
        set.remove(charactersIn: delimiters)
        return set
    }()

    /// Percent-escapes `string` for a query key or value.
    ///
    /// Escaping works on whole Unicode scalars encoded as UTF-8, so an escaped sequence never splits a
    /// composed character or an emoji.
    static func percentEscaped(_ string: String) -> String {
        string.addingPercentEncoding(withAllowedCharacters: allowedCharacters) ?? string
    }

    /// The query string for `parameters`, pairs joined by `&`.
    ///
    /// - Throws: A request-serialization error when collections nest more deeply than
    ///   ``NestingLimit/maximumDepth``.
    static func queryString(from parameters: Any) throws -> String {
        try pairs(key: nil, value: parameters).map(\.encoded).joined(separator: "&")
    }

    /// One key and its value, before escaping.
    struct Pair {
        let key: String
        let value: Any?

        /// `key=value`, escaped; the bare key for a null value.
        var encoded: String {
            guard let value, !(value is NSNull) else { return QueryStringEncoding.percentEscaped(key) }
            return QueryStringEncoding.percentEscaped(key) + "=" + QueryStringEncoding.percentEscaped(text(of: value))
        }
    }

    /// Flattens `value` under `key` into pairs, in AFNetworking's order.
    ///
    /// The walk keeps its own stack rather than recursing, so that deep input cannot overflow the thread's.
    ///
    /// - Throws: A request-serialization error when collections nest more deeply than
    ///   ``NestingLimit/maximumDepth``.
    static func pairs(key: String?, value: Any?) throws -> [Pair] {
        var result: [Pair] = []
        // Entries still to flatten, the next one last; `depth` counts the collections around the entry.
        var pending: [(key: String?, value: Any?, depth: Int)] = [(key, value, 0)]
        while let (key, value, depth) = pending.popLast() {
            guard let members = members(key: key, value: value) else {
                // A top-level value that is not a collection is a pair with an empty key, "=value", as in AFNetworking.
                result.append(Pair(key: key ?? "", value: value))
                continue
            }
            guard depth < NestingLimit.maximumDepth else {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeRawData, NestingLimit.reason("The parameters are"))
            }
            pending += members.reversed().map { ($0.key, $0.value, depth + 1) }
        }
        return result
    }

    /// The keys and values a collection flattens into, in order, or nil when `value` is not a collection.
    private static func members(key: String?, value: Any?) -> [(key: String?, value: Any?)]? {
        if let dictionary = value as? [AnyHashable: Any] {
            let sortedKeys = dictionary.keys.sorted { ascending("\($0.base)", "\($1.base)") }
            return sortedKeys.map { nestedKey in
                let name = "\(nestedKey.base)"
                return (key.map { "\($0)[\(name)]" } ?? name, dictionary[nestedKey])
            }
        }
        if let array = value as? [Any] {
            return array.map { (key.map { "\($0)[]" }, $0) }
        }
        if let set = value as? Set<AnyHashable> {
            return set.sorted { ascending("\($0.base)", "\($1.base)") }.map { (key, $0.base) }
        }
        if let set = value as? NSSet {
            return set.allObjects.sorted { ascending("\($0)", "\($1)") }.map { (key, $0) }
        }
        return nil
    }

    /// AFNetworking's order: descriptions compared with `NSString`'s `compare:`, without options. It orders a letter
    /// with an accent by its decomposed form (`é` with the `e`s, before `z`), where Swift's `<` compares composed
    /// scalars (`é` after `z`); in ASCII the two agree.
    private static func ascending(_ first: String, _ second: String) -> Bool {
        first.compare(second) == .orderedAscending
    }

    /// The text of a scalar value: `1`/`0` for a Boolean, `description` otherwise, a floating-point number as
    /// `NSNumber`'s `description` writes it (`%0.16g`, `%0.7g` for a `Float`: `10`, not Swift's `10.0`; `0.3`, not
    /// `0.30000000000000004`), as AFNetworking, which reads every value through Objective-C, sends it.
    static func text(of value: Any) -> String {
        if let bool = value as? Bool, isBoolean(value) {
            return bool ? "1" : "0"
        }
        if let string = value as? String {
            return string
        }
        switch value {
        case let double as Double where type(of: value) == Double.self:
            return String(format: "%0.16g", double)
        case let float as Float where type(of: value) == Float.self:
            return String(format: "%0.7g", Double(float))
        case let float as CGFloat where type(of: value) == CGFloat.self:
            return String(format: "%0.16g", Double(float))
        case let number as NSNumber where type(of: value) is NSNumber.Type && !(value is NSDecimalNumber):
            switch String(cString: number.objCType) {
            case "d": return String(format: "%0.16g", number.doubleValue)
            case "f": return String(format: "%0.7g", number.doubleValue)
            default: return "\(value)"
            }
        default:
            return "\(value)"
        }
    }

    /// Whether `value` is a Boolean (a Swift `Bool` or an `NSNumber` made from one, whose type code is `c`),
    /// not a number that merely converts to one.
    private static func isBoolean(_ value: Any) -> Bool {
        if type(of: value) == Bool.self { return true }
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) == "c"
    }
}
