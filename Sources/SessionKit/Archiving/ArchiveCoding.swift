import Foundation

/// The archive format: a version in every object, and typed reads that never trap.
enum ArchiveFormat {
    /// The key of the format version in every SessionKit object's archive.
    static let versionKey = "SessionKit.version"
    /// The version this SessionKit writes; it reads this one and every earlier one.
    static let currentVersion = 1
}

extension NSCoder {
    /// Writes the format version.
    func encodeArchiveVersion() {
        encode(NSNumber(value: ArchiveFormat.currentVersion), forKey: ArchiveFormat.versionKey)
    }

    /// Whether the archive's format version is one this SessionKit reads; records an error when it is not.
    func decodeArchiveVersion() -> Bool {
        guard let version = number(ArchiveFormat.versionKey)?.intValue else {
            failWithError(
                CocoaError(.coderValueNotFound, userInfo: [NSDebugDescriptionErrorKey: "no SessionKit.version"]))
            return false
        }
        guard version >= 1, version <= ArchiveFormat.currentVersion else {
            failWithError(
                CocoaError(
                    .coderReadCorrupt,
                    userInfo: [NSDebugDescriptionErrorKey: "\(SecureArchiveError.unsupportedVersion(version))"]))
            return false
        }
        return true
    }

    /// The object under `key`, decoded with the shared allow-list (never a class outside it, never a trap).
    func object(_ key: String) -> Any? {
        // Foundation on Linux records an error for a missing key; optional fields are simply absent.
        guard containsValue(forKey: key) else { return nil }
        return decodeObject(of: SecureArchive.allowedClasses, forKey: key)
    }

    func number(_ key: String) -> NSNumber? { object(key) as? NSNumber }
    func string(_ key: String) -> String? { object(key) as? String }
    func strings(_ key: String) -> [String]? { (object(key) as? [Any])?.compactMap { $0 as? String } }

    /// A `[String: String]` under `key`; entries of other types are dropped.
    func stringDictionary(_ key: String) -> [String: String]? {
        guard let dictionary = object(key) as? [AnyHashable: Any] else { return nil }
        var result: [String: String] = [:]
        for (name, value) in dictionary {
            if let name = name.base as? String, let value = value as? String { result[name] = value }
        }
        return result
    }

    /// Encodes an optional number only when it is set.
    func encodeIfPresent(_ value: NSNumber?, forKey key: String) {
        if let value { encode(value, forKey: key) }
    }
}
