import Foundation

/// How deeply the arrays and dictionaries of caller- and network-supplied values may nest.
///
/// Foundation's `JSONSerialization`, `PropertyListSerialization`, `JSONEncoder` and `JSONDecoder` walk their input
/// by recursion, several stack frames a level (bridging a Swift array to `NSArray` alone takes about 1.4 KB a
/// level), so a value nested 100,000 deep overflows any thread's stack and ends the process. SessionKit measures the
/// depth first, without recursion, and its own walks (query strings, `null` removal, the property-list and archive
/// readers) keep an explicit stack: input nested more deeply than ``maximumDepth`` gives an error. Input deeper than
/// ``largeStackThreshold`` but within the limit is handed to Foundation on a thread of SessionKit's own with a
/// ``largeStackSize`` stack, so that it fits whatever the stack of the calling thread.
enum NestingLimit {
    /// At most this many arrays, dictionaries or sets, one inside the other.
    static let maximumDepth = 500
    /// Values nested more deeply than this are given to Foundation's recursive code on a thread with a large stack.
    static let largeStackThreshold = 32
    /// The stack of that thread: room for ``maximumDepth`` levels of Foundation's recursion, many times over.
    static let largeStackSize = 16 << 20

    /// Runs `work` in place, or, when `deep`, on a new thread with a ``largeStackSize`` stack while the calling
    /// thread waits, and returns its result or throws its error.
    static func onLargeStack<T>(if deep: Bool, _ work: @escaping () throws -> T) throws -> T {
        guard deep else { return try work() }
        let outcome = LargeStackOutcome<T>()
        let done = DispatchSemaphore(value: 0)
        // The closure runs on the worker thread only, while this thread waits for it.
        nonisolated(unsafe) let work = work
        let thread = Thread {
            outcome.result = Result { try work() }
            done.signal()
        }
        thread.stackSize = largeStackSize
        thread.start()
        done.wait()
        guard let result = outcome.result else {
            throw SessionKitError.requestSerialization(.unknown, "The serialization thread ended without a result.")
        }
        return try result.get()
    }

    /// The reason given for a value nested too deeply.
    static func reason(_ what: String) -> String {
        "\(what) nested more deeply than \(maximumDepth) levels."
    }

    /// The members of `value` when it is a collection (dictionary values, array elements, set members), or nil.
    static func members(of value: Any) -> [Any]? {
        if let dictionary = value as? [AnyHashable: Any] { return Array(dictionary.values) }
        if let array = value as? [Any] { return array }
        if let set = value as? Set<AnyHashable> { return set.map(\.base) }
        if let set = value as? NSSet { return set.allObjects }
        return nil
    }

    /// The result of work done on the large-stack thread.
    private final class LargeStackOutcome<T>: @unchecked Sendable {
        // @unchecked Sendable: written by the worker thread before it signals, read by the waiting thread after.
        var result: Result<T, Error>?
    }

    /// How deeply collections nest in `value` (0 for a scalar), walked without recursion; counting stops past
    /// ``maximumDepth``.
    static func depth(of value: Any) -> Int {
        var deepest = 0
        var pending: [(value: Any, depth: Int)] = [(value, 1)]
        while let (value, depth) = pending.popLast() {
            guard let members = members(of: value) else { continue }
            deepest = max(deepest, depth)
            if depth > maximumDepth { return depth }
            for member in members { pending.append((member, depth + 1)) }
        }
        return deepest
    }

    /// What a scan of the JSON text `data` finds before any parser reads it: how deeply its arrays and objects nest
    /// (brackets inside strings do not count; counting stops past ``maximumDepth``), and whether a `,` comes right
    /// before a `]` or `}`, which RFC 8259 does not allow and Foundation's parser on Linux accepts. Text in UTF-16 or
    /// UTF-32 (RFC 8259 8.1 allows only UTF-8 on the wire; RFC 4627 3 tells them by their zero bytes) is read as its
    /// UTF-8, so that a character whose bytes include `"` or a bracket cannot hide the nesting.
    static func scan(json data: Data) -> (depth: Int, trailingComma: Bool) {
        if let encoding = wideEncoding(of: data), let text = String(data: data, encoding: encoding) {
            return scan(utf8: Data(text.utf8))
        }
        return scan(utf8: data)
    }

    /// UTF-16 or UTF-32, by a byte-order mark or by the zero bytes of the first two characters (RFC 4627 3); nil for
    /// UTF-8.
    private static func wideEncoding(of data: Data) -> String.Encoding? {
        let head = [UInt8](data.prefix(4))
        guard head.count >= 2 else { return nil }
        if head.starts(with: [0xEF, 0xBB, 0xBF]) { return nil }
        if head.count == 4 {
            if head == [0x00, 0x00, 0xFE, 0xFF] || (head[0] == 0 && head[1] == 0 && head[2] == 0) {
                return .utf32BigEndian
            }
            if head == [0xFF, 0xFE, 0x00, 0x00] || (head[1] == 0 && head[2] == 0 && head[3] == 0) {
                return .utf32LittleEndian
            }
        }
        if head.starts(with: [0xFE, 0xFF]) || head.starts(with: [0xFF, 0xFE]) { return .utf16 }
        if head[0] == 0 && head[1] != 0 { return .utf16BigEndian }
        if head[0] != 0 && head[1] == 0 { return .utf16LittleEndian }
        return nil
    }

    private static func scan(utf8 data: Data) -> (depth: Int, trailingComma: Bool) {
        data.withUnsafeBytes { bytes in
            var deepest = 0
            var depth = 0
            var inString = false
            var escaped = false
            var trailingComma = false
            // The last byte outside strings that is not white space.
            var previous: UInt8 = 0
            for byte in bytes {
                if inString {
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                    continue
                }
                switch byte {
                case 0x20, 0x09, 0x0A, 0x0D:
                    continue
                case UInt8(ascii: "\""):
                    inString = true
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    depth += 1
                    deepest = max(deepest, depth)
                    if depth > maximumDepth { return (depth, trailingComma) }
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    if previous == UInt8(ascii: ",") { trailingComma = true }
                    depth -= 1
                default:
                    break
                }
                previous = byte
            }
            return (deepest, trailingComma)
        }
    }
}

/// Walks an `Encodable` value's `encode(to:)` without storing anything, to learn whether it nests more deeply than
/// ``NestingLimit/maximumDepth`` before `JSONEncoder` (which recurses as deep as the value) encodes it.
///
/// The walk is the value's own recursion, so it is bounded rather than flat: it stops, by throwing, at the limit.
struct NestingProbe: Encoder {
    /// Thrown to stop the walk at the limit.
    private struct TooDeep: Error {}

    let depth: Int
    let limit: Int
    var codingPath: [CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Whether `value` nests more deeply than `limit`.
    static func exceeded(by value: any Encodable, limit: Int) -> Bool {
        do {
            try walk(value, depth: 1, limit: limit)
            return false
        } catch is TooDeep {
            return true
        } catch {
            return false  // the value's own failure: `JSONEncoder` reports it
        }
    }

    /// Encodes `value` `depth` levels down.
    static func walk(_ value: some Encodable, depth: Int, limit: Int) throws {
        // Scalars end the walk (their `encode(to:)` would come back here).
        if value is String || value is Bool || value is any BinaryInteger || value is any BinaryFloatingPoint { return }
        guard depth <= limit else { throw TooDeep() }
        try value.encode(to: NestingProbe(depth: depth, limit: limit))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(Keyed<Key>(depth: depth, limit: limit))
    }

    func unkeyedContainer() -> UnkeyedEncodingContainer { Unkeyed(depth: depth, limit: limit) }

    func singleValueContainer() -> SingleValueEncodingContainer { Single(depth: depth, limit: limit) }

    private struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let depth: Int
        let limit: Int
        var codingPath: [CodingKey] { [] }
        mutating func encodeNil(forKey key: Key) throws {}
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try walk(value, depth: depth + 1, limit: limit)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        )
            -> KeyedEncodingContainer<NestedKey>
        {
            KeyedEncodingContainer(Keyed<NestedKey>(depth: depth + 1, limit: limit))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
            Unkeyed(depth: depth + 1, limit: limit)
        }
        mutating func superEncoder() -> Encoder { NestingProbe(depth: depth + 1, limit: limit) }
        mutating func superEncoder(forKey key: Key) -> Encoder { NestingProbe(depth: depth + 1, limit: limit) }
    }

    private struct Unkeyed: UnkeyedEncodingContainer {
        let depth: Int
        let limit: Int
        var codingPath: [CodingKey] { [] }
        var count = 0
        mutating func encodeNil() throws { count += 1 }
        mutating func encode<T: Encodable>(_ value: T) throws {
            count += 1
            try walk(value, depth: depth + 1, limit: limit)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            count += 1
            return KeyedEncodingContainer(Keyed<NestedKey>(depth: depth + 1, limit: limit))
        }
        mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
            count += 1
            return Unkeyed(depth: depth + 1, limit: limit)
        }
        mutating func superEncoder() -> Encoder { NestingProbe(depth: depth + 1, limit: limit) }
    }

    private struct Single: SingleValueEncodingContainer {
        let depth: Int
        let limit: Int
        var codingPath: [CodingKey] { [] }
        mutating func encodeNil() throws {}
        mutating func encode<T: Encodable>(_ value: T) throws { try walk(value, depth: depth + 1, limit: limit) }
    }
}
