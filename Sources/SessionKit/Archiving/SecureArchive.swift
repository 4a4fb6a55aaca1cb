internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Archives SessionKit objects and decodes them back through a hardened path that no input bytes can crash.
///
/// ```swift
/// let manager = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"))
/// manager.requestSerializer = JSONRequestSerializer()
/// let key = Data("a secret of at least 32 bytes, kept apart".utf8)
/// let stored = try SecureArchive.archive(manager, signingKey: key)
/// // … later, from disk or a database …
/// let restored = try SecureArchive.unarchive(HTTPSessionManager.self, from: stored, verifyingWith: key)
/// ```
///
/// `unarchive` checks the archive's structure first (`KeyedArchiveValidator`): a well-formed keyed archive, every
/// reference in range, every class name in the allow-list (SessionKit's classes, the Foundation value types they
/// use, and classes added with ``registerClass(_:)``), no cycle, a root of the requested type. Only then is it
/// decoded, by SessionKit's own `ArchiveDecoder` rather than `NSKeyedUnarchiver` (which on Linux can still stop the
/// process on a damaged archive that passes the check): one shared allow-list for every key, a type check on every
/// field, errors recorded instead of raised. Arrays and dictionaries nested more than 500 deep in the archive's
/// property list are refused as malformed, without recursion. Every failure is a ``SecureArchiveError``. Archives
/// are written by Foundation's `NSKeyedArchiver`, so they stay ordinary keyed archives.
public enum SecureArchive {
    /// The Foundation classes SessionKit's archives hold.
    static let foundationClasses: [AnyClass] = [
        NSString.self, NSMutableString.self, NSNumber.self, NSArray.self, NSMutableArray.self, NSDictionary.self,
        NSMutableDictionary.self, NSURL.self, NSData.self, NSMutableData.self,
    ]

    /// SessionKit's archivable classes.
    static let sessionKitClasses: [AnyClass] = [
        URLSessionManager.self, HTTPSessionManager.self, HTTPRequestSerializer.self, JSONRequestSerializer.self,
        PropertyListRequestSerializer.self, HTTPResponseSerializer.self, JSONResponseSerializer.self,
        XMLParserResponseSerializer.self, PropertyListResponseSerializer.self, CompoundResponseSerializer.self,
        SecurityPolicy.self,
    ]

    /// Type names that were renamed: an archive naming the key decodes as the value. SessionKit has renamed
    /// nothing so far; whenever an archivable type is renamed, its old name goes here (through
    /// ``registerRenamedClass(named:as:)``) so that archives of earlier versions keep decoding.
    private static let renamed = Protected<[String: AnyClass]>([:])

    static var renamedClasses: [String: AnyClass] { renamed.wrappedValue }

    private static let registered = Protected<[AnyClass]>([])

    /// Decodes objects archived under the class name `oldName` (`Module.Type`) as `aClass`, which is also added to
    /// the allow-list: for a type that was renamed since the archive was written.
    public static func registerRenamedClass(named oldName: String, as aClass: AnyClass) {
        renamed.write { $0[oldName] = aClass }
        registerClass(aClass)
    }

    /// Adds `aClass` (your subclass of a SessionKit class, say) to the allow-list of ``unarchive(_:from:)``.
    public static func registerClass(_ aClass: AnyClass) {
        registered.write { $0.append(aClass) }
    }

    /// Every class the unarchiver may create.
    static var allowedClasses: [AnyClass] {
        foundationClasses + sessionKitClasses + registered.wrappedValue
    }

    /// `NSKeyedArchiver`'s names of the allowed classes.
    static var allowedClassNames: Set<String> {
        Set(allowedClasses.map { NSStringFromClass($0) } + renamedClasses.keys)
    }

    // MARK: - Archiving

    /// A keyed archive of `object`, with secure coding.
    public static func archive(_ object: NSObject & NSSecureCoding) throws -> Data {
        do {
            return try NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: true)
        } catch {
            throw SecureArchiveError.decodingFailed("archiving failed: \(error)")
        }
    }

    /// The object archived in `data`, checked as described above.
    public static func unarchive<T: NSObject & NSSecureCoding>(_ type: T.Type, from data: Data) throws -> T {
        let validator = KeyedArchiveValidator(
            allowedClassNames: allowedClassNames,
            renamedClassNames: renamedClasses.mapValues { NSStringFromClass($0) })
        let contents = try validator.validate(data, rootClassName: NSStringFromClass(type))
        var classes: [String: AnyClass] = [:]
        for aClass in allowedClasses { classes[NSStringFromClass(aClass)] = aClass }
        for entry in renamedClasses { classes[entry.key] = entry.value }
        let (object, error) = ArchiveDecoder.decodeRoot(contents, classes: classes)
        if let known = error as? SecureArchiveError { throw known }
        if let error { throw SecureArchiveError.decodingFailed("\(error)") }
        guard let typed = object as? T else {
            throw SecureArchiveError.wrongRootType(expected: NSStringFromClass(type))
        }
        return typed
    }

    // MARK: - Signed archives

    private static let signedMagic = Data("SKA1".utf8)

    /// An archive of `object` followed by an HMAC-SHA256 of it under `signingKey`.
    public static func archive(_ object: NSObject & NSSecureCoding, signingKey: Data) throws -> Data {
        let archive = try self.archive(object)
        return signedMagic + (try hmac(archive, key: signingKey)) + archive
    }

    /// The object of a signed archive, after its HMAC-SHA256 under `key` was checked in constant time.
    public static func unarchive<T: NSObject & NSSecureCoding>(
        _ type: T.Type, from data: Data, verifyingWith key: Data
    ) throws -> T {
        guard data.count > signedMagic.count + 32, data.prefix(signedMagic.count) == signedMagic else {
            throw SecureArchiveError.signatureMismatch
        }
        let signature = Data(data.dropFirst(signedMagic.count).prefix(32))
        let archive = Data(data.dropFirst(signedMagic.count + 32))
        let expected = try hmac(archive, key: key)
        let equal = signature.withUnsafeBytes { a in
            expected.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, 32) == 0 }
        }
        guard equal else { throw SecureArchiveError.signatureMismatch }
        return try unarchive(type, from: archive)
    }

    /// HMAC-SHA256 of `data` under `key`, by OpenSSL.
    static func hmac(_ data: Data, key: Data) throws -> Data {
        guard !key.isEmpty else { throw SecureArchiveError.decodingFailed("an empty signing key") }
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { dataBytes in
                HMAC(
                    EVP_sha256(), keyBytes.baseAddress, Int32(key.count),
                    dataBytes.bindMemory(to: UInt8.self).baseAddress, data.count, &output, &length)
            }
        }
        guard result != nil, length == 32 else { throw SecureArchiveError.decodingFailed("HMAC failed") }
        return Data(output)
    }
}
