import Foundation

/// Why ``SecureArchive`` refused an archive.
public enum SecureArchiveError: Error, CustomStringConvertible, Equatable {
    /// The bytes are not a keyed archive of the shape SessionKit writes; the text says what is wrong.
    case malformed(String)
    /// The archive names a class outside the allow-list.
    case classNotAllowed(String)
    /// The root object is not of the requested class.
    case wrongRootType(expected: String)
    /// The signature does not match the archive and key (tampered with, or another key).
    case signatureMismatch
    /// Foundation's unarchiver reported an error, or a field had the wrong type.
    case decodingFailed(String)
    /// The archive was written by a newer SessionKit, whose format this one does not know.
    case unsupportedVersion(Int)

    /// A sentence that says what was wrong with the archive.
    public var description: String {
        switch self {
        case .malformed(let reason): return "The archive is malformed: \(reason)."
        case .classNotAllowed(let name): return "The archive names the class \(name), which is not allowed."
        case .wrongRootType(let expected): return "The archive's root object is not a \(expected)."
        case .signatureMismatch:
            return "The archive's signature does not match: it was changed or signed with another key."
        case .decodingFailed(let reason): return "The archive could not be decoded: \(reason)."
        case .unsupportedVersion(let version):
            return "The archive has format version \(version), newer than this SessionKit reads."
        }
    }
}
