import Foundation

extension UInt8 {
    /// The byte with an ASCII letter A to Z lowercased, any other byte as it is: for comparing tokens without case
    /// (Unicode's lowercasing would let a non-ASCII letter pass for one).
    var asciiLowercased: UInt8 { (0x41...0x5A).contains(self) ? self | 0x20 : self }
}

extension String {
    /// The text with only the ASCII letters A to Z lowercased, for tokens, host names and attribute names compared
    /// without case: Unicode's lowercasing would let a non-ASCII letter pass for one (KELVIN SIGN U+212A becomes `k`).
    /// Text without an upper-case ASCII letter (most schemes, tokens and host names) is returned as it is, uncopied.
    var asciiLowercased: String {
        guard utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return self }
        return String(decoding: utf8.map(\.asciiLowercased), as: UTF8.self)
    }

    /// Whether two HTTP header names are the same name: they are ASCII tokens, compared byte by byte without
    /// case. Foundation's `caseInsensitiveCompare` is locale-aware and costs tens of thousands of instructions per
    /// response on Linux; the bytes are read from the strings' contiguous UTF-8 (walking two `UTF8View`s side by side
    /// cost about 2k instructions per response head).
    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        var mine = self
        var theirs = other
        return mine.withUTF8 { mine in
            theirs.withUTF8 { theirs in
                for index in 0..<mine.count where mine[index].asciiLowercased != theirs[index].asciiLowercased {
                    return false
                }
                return true
            }
        }
    }

    /// Whether the two strings are the same bytes of UTF-8, which `==` (canonical equivalence) does not ask: a
    /// non-ASCII spelling that Unicode equates with an ASCII name is not that name.
    func hasSameUTF8(as other: String) -> Bool {
        let count = utf8.count
        guard count == other.utf8.count else { return false }
        var mine = self
        var theirs = other
        return mine.withUTF8 { mine in
            theirs.withUTF8 { theirs in
                // One `memcmp`: a generic element-by-element comparison costs several times more per header.
                guard let mine = mine.baseAddress, let theirs = theirs.baseAddress else { return true }
                return memcmp(mine, theirs, count) == 0
            }
        }
    }
}
