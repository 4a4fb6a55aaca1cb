import Foundation

/// Checks a keyed archive's structure before Foundation's unarchiver sees it.
///
/// Foundation's `NSKeyedUnarchiver` on Linux stops the process on a class outside the allowed set or on a
/// corrupt object graph (about 3 % of bit-flipped archives, measured). This check reads the archive with SessionKit's
/// own bounded property-list reader and refuses anything that is not exactly the shape `NSKeyedArchiver` writes for
/// the allowed classes: the envelope keys, every reference in range, every class name allowed, an acyclic object
/// graph, Foundation containers with the fields their decoders read, and a root of the requested class.
struct KeyedArchiveValidator {
    typealias UID = BinaryPropertyListReader.UID

    /// At most this many objects in one archive.
    static let maximumObjects = 100_000

    let allowedClassNames: Set<String>
    /// Old class names and the names they now decode as.
    var renamedClassNames: [String: String] = [:]

    /// What a valid archive holds: its object table and the index of its root object.
    struct Contents {
        let objects: [Any]
        let root: Int
    }

    /// Validates `data`; `rootClassName` must be among the root object's classes.
    @discardableResult
    func validate(_ data: Data, rootClassName: String) throws -> Contents {
        guard BinaryPropertyListReader.isBinaryPropertyList(data) else {
            throw SecureArchiveError.malformed("not a binary archive")
        }
        let top: Any
        do {
            top = try BinaryPropertyListReader.read(data, uidsAsDictionaries: false)
        } catch {
            throw SecureArchiveError.malformed("\(error)")
        }
        guard let envelope = top as? [String: Any],
            envelope["$archiver"] as? String == "NSKeyedArchiver",
            envelope["$version"] as? Int == 100_000,
            let topLevel = envelope["$top"] as? [String: Any],
            let objects = envelope["$objects"] as? [Any],
            Set(envelope.keys) == ["$archiver", "$version", "$top", "$objects"]
        else { throw SecureArchiveError.malformed("not a keyed archive") }
        guard !objects.isEmpty, objects.count <= Self.maximumObjects, objects[0] as? String == "$null" else {
            throw SecureArchiveError.malformed("bad object table")
        }
        guard let root = topLevel["root"] as? UID, topLevel.count == 1 else {
            throw SecureArchiveError.malformed("no root object")
        }

        var edges = [[Int]](repeating: [], count: objects.count)
        for (index, object) in objects.enumerated() where index > 0 {
            edges[index] = try check(object, at: index, objects: objects)
        }
        try checkAcyclic(from: root.value, edges: edges)

        guard let rootObject = objects[safe: root.value] as? [String: Any],
            let classUID = rootObject["$class"] as? UID,
            let classDescription = objects[safe: classUID.value] as? [String: Any],
            let classes = classDescription["$classes"] as? [String],
            classes.map({ renamedClassNames[$0] ?? $0 }).contains(rootClassName)
        else { throw SecureArchiveError.wrongRootType(expected: rootClassName) }
        return Contents(objects: objects, root: root.value)
    }

    /// Checks one entry of `$objects` and returns the objects it refers to (not counting its class).
    private func check(_ object: Any, at index: Int, objects: [Any]) throws -> [Int] {
        switch object {
        case is String, is Int, is Double, is Bool, is Data:
            return []
        case let dictionary as [String: Any]:
            if dictionary["$classname"] != nil {
                try checkClassDescription(dictionary)
                return []
            }
            return try checkInstance(dictionary, objects: objects)
        default:
            throw SecureArchiveError.malformed("unexpected value in the object table at \(index)")
        }
    }

    private func checkClassDescription(_ dictionary: [String: Any]) throws {
        guard let name = dictionary["$classname"] as? String,
            let classes = dictionary["$classes"] as? [String], classes.first == name,
            Set(dictionary.keys).isSubset(of: ["$classname", "$classes", "$classhints"])
        else { throw SecureArchiveError.malformed("bad class description") }
        guard allowedClassNames.contains(name) else { throw SecureArchiveError.classNotAllowed(name) }
    }

    private func checkInstance(_ dictionary: [String: Any], objects: [Any]) throws -> [Int] {
        guard let classUID = dictionary["$class"] as? UID,
            let description = objects[safe: classUID.value] as? [String: Any],
            let className = description["$classname"] as? String
        else { throw SecureArchiveError.malformed("an object without a valid class") }
        guard allowedClassNames.contains(className) else { throw SecureArchiveError.classNotAllowed(className) }

        // Foundation's container decoders stop the process when an element fails to decode, so containers may
        // only hold plain values; a field may refer to a plain value, `$null` or another object, never to a class.
        let isContainer = ["NSArray", "NSMutableArray", "NSDictionary", "NSMutableDictionary"].contains(className)
        var references: [Int] = []
        func reference(_ value: Any, key: String) throws {
            if let uid = value as? UID {
                guard uid.value < objects.count else {
                    throw SecureArchiveError.malformed("reference out of range in \(key)")
                }
                if let target = objects[uid.value] as? [String: Any], target["$class"] == nil {
                    throw SecureArchiveError.malformed("\(key) refers to a class, not an object")
                }
                references.append(uid.value)
            } else if let array = value as? [Any] {
                guard isContainer, key == "NS.objects" || key == "NS.keys" else {
                    throw SecureArchiveError.malformed("unexpected reference list in \(key)")
                }
                for element in array {
                    guard let uid = element as? UID, uid.value > 0, uid.value < objects.count,
                        Self.isPlain(objects[uid.value])
                    else {
                        throw SecureArchiveError.malformed("a container holds something other than plain values")
                    }
                    references.append(uid.value)
                }
            } else if !Self.isPlain(value) {
                throw SecureArchiveError.malformed("unexpected value for \(key)")
            }
        }
        for (key, value) in dictionary where key != "$class" { try reference(value, key: key) }
        try checkFoundationFields(className, dictionary, objects: objects)
        return references
    }

    /// The fields Foundation's own decoders read, with the types they expect.
    private func checkFoundationFields(_ className: String, _ dictionary: [String: Any], objects: [Any]) throws {
        func uids(_ key: String) -> [UID]? {
            (dictionary[key] as? [Any])?.compactMap { $0 as? UID }
        }
        switch className {
        case "NSArray", "NSMutableArray":
            guard uids("NS.objects") != nil, dictionary.count == 2 else {
                throw SecureArchiveError.malformed("bad \(className)")
            }
        case "NSDictionary", "NSMutableDictionary":
            guard let keys = uids("NS.keys"), let values = uids("NS.objects"), keys.count == values.count,
                (dictionary["NS.keys"] as? [Any])?.count == keys.count, dictionary.count == 3,
                keys.allSatisfy({ objects[safe: $0.value] is String })
            else { throw SecureArchiveError.malformed("bad \(className)") }
        case "NSURL":
            guard let relative = dictionary["NS.relative"] as? UID, objects[safe: relative.value] is String,
                let base = dictionary["NS.base"] as? UID, base.value == 0, dictionary.count == 3
            else { throw SecureArchiveError.malformed("bad NSURL") }
        case "NSString", "NSMutableString":
            guard dictionary["NS.string"] is String, dictionary.count == 2 else {
                throw SecureArchiveError.malformed("bad NSString")
            }
        case "NSData", "NSMutableData":
            guard dictionary["NS.data"] is Data, dictionary.count == 2 else {
                throw SecureArchiveError.malformed("bad NSData")
            }
        default:
            // SessionKit's classes: every value was checked above; their decoders check each type again.
            break
        }
    }

    /// A string, number, Boolean or data value.
    private static func isPlain(_ value: Any) -> Bool {
        value is String || value is Int || value is Double || value is Bool || value is Data
    }

    /// Refuses a cycle among the objects reachable from `root` (Foundation's decoders would recurse forever).
    private func checkAcyclic(from root: Int, edges: [[Int]]) throws {
        guard root > 0, root < edges.count else { throw SecureArchiveError.malformed("bad root reference") }
        var state = [UInt8](repeating: 0, count: edges.count)  // 0 new, 1 on the path, 2 done
        var stack: [(node: Int, next: Int)] = [(root, 0)]
        state[root] = 1
        while let top = stack.last {
            if top.next == edges[top.node].count {
                state[top.node] = 2
                stack.removeLast()
                continue
            }
            stack[stack.count - 1].next += 1
            let child = edges[top.node][top.next]
            switch state[child] {
            case 1: throw SecureArchiveError.malformed("a cycle in the object graph")
            case 0:
                state[child] = 1
                stack.append((child, 0))
            default: break
            }
        }
    }
}

extension Array {
    /// The element at `index`, or nil outside the bounds.
    subscript(safe index: Int) -> Element? {
        indices.contains(index) ? self[index] : nil
    }
}
