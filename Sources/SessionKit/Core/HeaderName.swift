import Foundation

extension String {
    /// Whether two HTTP header names are the same name: they are ASCII tokens, compared byte by byte without
    /// case. Foundation's `caseInsensitiveCompare` is locale-aware and costs tens of thousands of instructions per
    /// response on Linux.
    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        func lower(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte + 32 : byte }
        return zip(utf8, other.utf8).allSatisfy { lower($0) == lower($1) }
    }
}
