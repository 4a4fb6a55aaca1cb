import Foundation

/// Reads a binary property list (`bplist00`) without Foundation's decoder.
///
/// Foundation's decoder on Linux trusts the file: a set whose member cannot be bridged crashes the process (found
/// by `make fuzz`, input kept in `Fuzz/regressions/plist/`), and its error paths leak memory on every malformed
/// input. This reader checks every offset, count and reference against the bounds, refuses cycles and nesting
/// deeper than ``maximumDepth``, and builds each object once (shared references reuse it), so any bytes give an
/// object or an error in time and memory proportional to the input. What a caller then walks is bounded too: a
/// container referenced from several places is walked once for each, so 40 arrays of two references to the next one
/// are 203 bytes and 2^40 leaves; a property list whose objects, counted as a walk meets them, pass
/// ``maximumExpansion(for:)`` is refused.
///
/// Values: `[String: Any]`, `[Any]`, `String`, `Int`, `Double`, `Bool`, `Date`, `Data`; a UID is
/// `["CF$UID": Int]`, as Foundation writes it in XML. Sets and dictionary keys that are not strings are refused.
enum BinaryPropertyListReader {
    /// How deep arrays and dictionaries may nest.
    static let maximumDepth = NestingLimit.maximumDepth

    /// How many objects a walk of a property list of `byteCount` bytes may meet. Every reference takes at least a
    /// byte, so a list whose containers are not shared meets fewer objects than it has bytes; sharing a string or a
    /// number many times (Foundation's writer does) stays within that too. The margin leaves room for a writer that
    /// shares a container now and then.
    static func maximumExpansion(for byteCount: Int) -> Int {
        8 * byteCount + 10_000
    }

    /// Whether `data` starts like a binary property list.
    static func isBinaryPropertyList(_ data: Data) -> Bool {
        data.starts(with: Array("bplist".utf8))
    }

    /// A UID (a reference between the objects of a keyed archive), kept apart from dictionaries when asked.
    struct UID: Equatable {
        let value: Int
    }

    /// The top object of `data`.
    ///
    /// - Parameter uidsAsDictionaries: Return UIDs as `["CF$UID": n]` (for response bodies) rather than ``UID``.
    /// - Throws: ``PropertyListReader/Refusal`` saying what is wrong.
    static func read(_ data: Data, uidsAsDictionaries: Bool = true) throws -> Any {
        var reader = try Reader([UInt8](data))
        reader.uidsAsDictionaries = uidsAsDictionaries
        return try reader.object(reader.topObject)
    }

    private typealias Refusal = PropertyListReader.Refusal

    private struct Reader {
        let bytes: [UInt8]
        let referenceSize: Int
        let tableOffset: Int
        let topObject: Int
        var offsets: [Int] = []
        var cache: [Any?]
        var onPath: [Bool]
        /// How many objects a walk of each object built meets (itself and, for a container, its members' walks).
        var expansion: [Int]
        var uidsAsDictionaries = true

        init(_ bytes: [UInt8]) throws {
            self.bytes = bytes
            guard bytes.count >= 8 + 1 + 32, bytes.starts(with: Array("bplist0".utf8)) else {
                throw Refusal("too short for a binary property list")
            }
            let trailer = bytes.count - 32
            let offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let objectCount = try Self.integer(bytes, at: trailer + 8, size: 8, limit: bytes.count)
            topObject = try Self.integer(bytes, at: trailer + 16, size: 8, limit: bytes.count)
            tableOffset = try Self.integer(bytes, at: trailer + 24, size: 8, limit: bytes.count)
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw Refusal("bad integer sizes in the trailer")
            }
            guard objectCount > 0, topObject < objectCount, tableOffset >= 8,
                objectCount <= (trailer - tableOffset) / offsetSize
            else { throw Refusal("object table out of range") }
            offsets.reserveCapacity(objectCount)
            for index in 0..<objectCount {
                let offset = try Self.integer(
                    bytes, at: tableOffset + index * offsetSize, size: offsetSize, limit: trailer)
                guard offset >= 8, offset < tableOffset else { throw Refusal("object offset out of range") }
                offsets.append(offset)
            }
            cache = Array(repeating: nil, count: objectCount)
            onPath = Array(repeating: false, count: objectCount)
            expansion = Array(repeating: 1, count: objectCount)
        }

        /// What the bytes of one object hold: a value, or a container and the references of its members.
        private enum Decoded {
            case value(Any)
            case array([Int])
            /// The keys' references, then the values'.
            case dictionary([Int])
        }

        /// A container whose members are being built.
        private struct Container {
            let index: Int
            let isArray: Bool
            let references: [Int]
            var members: [Any] = []

            /// The array or dictionary of the members built.
            func build() throws -> Any {
                if isArray { return members }
                let count = members.count / 2
                var dictionary: [String: Any] = [:]
                dictionary.reserveCapacity(count)
                for index in 0..<count {
                    guard let key = members[index] as? String else {
                        throw Refusal("a dictionary key that is not a string")
                    }
                    dictionary[key] = members[count + index]
                }
                return dictionary
            }
        }

        /// Object number `index`, each object built once; containers are walked with a stack of their own rather
        /// than by recursion, so that deep nesting cannot overflow the thread's stack.
        mutating func object(_ root: Int) throws -> Any {
            var open: [Container] = []
            var next: Int? = root
            while true {
                var finished: Any?
                if let index = next {
                    next = nil
                    guard index < offsets.count else { throw Refusal("reference out of range") }
                    if let cached = cache[index] {
                        finished = cached
                    } else {
                        guard !onPath[index] else { throw Refusal("cycle") }
                        switch try decode(at: offsets[index]) {
                        case .value(let value):
                            cache[index] = value
                            finished = value
                        case .array(let references):
                            try openContainer(Container(index: index, isArray: true, references: references), in: &open)
                        case .dictionary(let references):
                            try openContainer(
                                Container(index: index, isArray: false, references: references), in: &open)
                        }
                    }
                } else if let last = open.indices.last {
                    if open[last].members.count < open[last].references.count {
                        next = open[last].references[open[last].members.count]
                        continue
                    }
                    let container = open.removeLast()
                    onPath[container.index] = false
                    // Members are built before their container: their counts are known. Capped, so that no sum
                    // overflows.
                    let limit = maximumExpansion(for: bytes.count)
                    let met = container.references.reduce(1) { min($0 + expansion[$1], limit + 1) }
                    guard met <= limit else {
                        throw Refusal("shared containers that a walk would meet more than \(limit) times")
                    }
                    expansion[container.index] = met
                    let value = try container.build()
                    cache[container.index] = value
                    finished = value
                }
                if let value = finished {
                    guard let last = open.indices.last else { return value }
                    open[last].members.append(value)
                }
            }
        }

        /// Starts reading the members of `container`, refused beyond ``maximumDepth`` containers.
        private mutating func openContainer(_ container: Container, in open: inout [Container]) throws {
            guard open.count < maximumDepth else { throw Refusal("nested more deeply than \(maximumDepth) levels") }
            onPath[container.index] = true
            open.append(container)
        }

        /// The value or container at `offset`.
        private mutating func decode(at offset: Int) throws -> Decoded {
            let marker = bytes[offset]
            let low = Int(marker & 0x0F)
            var cursor = offset + 1
            let end = tableOffset

            func length() throws -> Int {
                guard low == 0x0F else { return low }
                guard cursor < end, bytes[cursor] >> 4 == 0x1 else { throw Refusal("bad length") }
                let size = 1 << Int(bytes[cursor] & 0x0F)
                guard size <= 8 else { throw Refusal("bad length size") }
                let value = try Self.integer(bytes, at: cursor + 1, size: size, limit: end)
                cursor += 1 + size
                return value
            }
            func take(_ count: Int) throws -> ArraySlice<UInt8> {
                guard count >= 0, count <= end - cursor else { throw Refusal("object runs past the table") }
                defer { cursor += count }
                return bytes[cursor..<cursor + count]
            }

            switch marker >> 4 {
            case 0x0:
                switch low {
                case 0x00: return .value(NSNull())
                case 0x08: return .value(false)
                case 0x09: return .value(true)
                default: throw Refusal("unknown marker")
                }
            case 0x1:
                guard low <= 4 else { throw Refusal("integer too wide") }
                return .value(try Self.signedInteger(take(1 << low)))
            case 0x2:
                guard low == 2 || low == 3 else { throw Refusal("bad real") }
                let raw = try take(1 << low).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                return .value(
                    low == 2 ? Double(Float(bitPattern: UInt32(truncatingIfNeeded: raw))) : Double(bitPattern: raw))
            case 0x3:
                guard low == 3 else { throw Refusal("bad date") }
                let raw = try take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let seconds = Double(bitPattern: raw)
                guard seconds.isFinite else { throw Refusal("bad date") }
                return .value(Date(timeIntervalSinceReferenceDate: seconds))
            case 0x4:
                return .value(Data(try take(try length())))
            case 0x5:
                return .value(String(decoding: try take(try length()), as: UTF8.self))
            case 0x6:
                let count = try length()
                guard count <= (end - cursor) / 2 else { throw Refusal("string runs past the table") }
                let raw = try take(count * 2)
                let units = stride(from: raw.startIndex, to: raw.endIndex, by: 2).map {
                    UInt16(raw[$0]) << 8 | UInt16(raw[$0 + 1])
                }
                return .value(String(decoding: units, as: UTF16.self))
            case 0x8:
                let value = try take(low + 1).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                guard value <= UInt64(Int32.max) else { throw Refusal("UID too large") }
                return .value(uidsAsDictionaries ? ["CF$UID": Int(value)] as [String: Any] : UID(value: Int(value)))
            case 0xA:
                return .array(try referenceList(count: try length(), cursor: &cursor))
            case 0xD:
                return .dictionary(try referenceList(count: try length() * 2, cursor: &cursor))
            case 0xC:
                // Foundation on Linux crashes bridging some sets; response bodies have no use for them.
                throw Refusal("sets are not accepted")
            default:
                throw Refusal("unknown marker")
            }
        }

        private func referenceList(count: Int, cursor: inout Int) throws -> [Int] {
            guard count >= 0, count <= (tableOffset - cursor) / referenceSize else {
                throw Refusal("collection runs past the table")
            }
            let start = cursor
            cursor += count * referenceSize
            return try (0..<count).map { index in
                try Self.integer(bytes, at: start + index * referenceSize, size: referenceSize, limit: tableOffset)
            }
        }

        /// A big-endian unsigned integer of `size` bytes at `offset`, ending by `limit`, at most `Int32.max`.
        static func integer(_ bytes: [UInt8], at offset: Int, size: Int, limit: Int) throws -> Int {
            guard offset >= 0, size >= 1, size <= 8, offset <= limit - size else {
                throw Refusal("integer out of range")
            }
            var value: UInt64 = 0
            for index in 0..<size { value = value << 8 | UInt64(bytes[offset + index]) }
            guard value <= UInt64(Int32.max) else { throw Refusal("value too large") }
            return Int(value)
        }

        /// An integer object: 1, 2 and 4 bytes unsigned, 8 bytes signed, 16 bytes (128-bit two's complement) when it
        /// fits in 64 bits: an `Int`, or a `UInt64` past `Int.max` (how writers store 2^63 … 2^64 − 1).
        static func signedInteger(_ raw: ArraySlice<UInt8>) throws -> Any {
            let low = raw.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if raw.count == 16 {
                if raw.prefix(8).allSatisfy({ $0 == 0 }) { return low <= UInt64(Int.max) ? Int(low) : low }
                // A negative number sign-extended to 128 bits.
                guard raw.prefix(8).allSatisfy({ $0 == 0xFF }), Int64(bitPattern: low) < 0 else {
                    throw Refusal("integer too large")
                }
                return Int(Int64(bitPattern: low))
            }
            return raw.count == 8 ? Int(Int64(bitPattern: low)) : Int(low)
        }
    }
}
