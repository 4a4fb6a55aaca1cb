import Foundation

/// An incremental UTF-8 check (RFC 3629, as RFC 6455 5.6 requires of text messages): bytes go in as they arrive, in
/// pieces split anywhere, even inside a code point, so that a text message fragmented over frames is judged as it
/// comes rather than once it is whole, and a broken one is refused at its first bad byte.
///
/// Refused: stray continuation bytes, overlong forms (`C0`, `C1`, `E0 80…9F`, `F0 80…8F`), UTF-16 surrogates
/// (`ED A0…BF`), code points past U+10FFFF (`F4 90…`, `F5`…`FF`), and, at the end, a code point cut short.
struct UTF8Validator: Sendable, Equatable {
    /// Continuation bytes still due for the current code point.
    private var pending = 0
    /// The range the next byte must fall in: narrower than `80…BF` right after some lead bytes.
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// Whether every byte so far was valid and no code point is cut short: the text so far is complete UTF-8.
    var isComplete: Bool { pending == 0 }

    /// Checks `bytes` after those seen before; false at the first byte that cannot belong to valid UTF-8 (the
    /// validator is then spent, and its answer stays false).
    mutating func consume<Bytes: Sequence>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        guard pending >= 0 else { return false }
        for byte in bytes {
            if pending == 0 {
                if byte < 0x80 { continue }
                switch byte {
                case 0xC2...0xDF: (pending, lower, upper) = (1, 0x80, 0xBF)
                case 0xE0: (pending, lower, upper) = (2, 0xA0, 0xBF)
                case 0xE1...0xEC, 0xEE...0xEF: (pending, lower, upper) = (2, 0x80, 0xBF)
                case 0xED: (pending, lower, upper) = (2, 0x80, 0x9F)
                case 0xF0: (pending, lower, upper) = (3, 0x90, 0xBF)
                case 0xF1...0xF3: (pending, lower, upper) = (3, 0x80, 0xBF)
                case 0xF4: (pending, lower, upper) = (3, 0x80, 0x8F)
                default:
                    pending = -1
                    return false
                }
            } else {
                guard (lower...upper).contains(byte) else {
                    pending = -1
                    return false
                }
                pending -= 1
                (lower, upper) = (0x80, 0xBF)
            }
        }
        return true
    }

    /// Whether `data` is complete, valid UTF-8: the one-call entry for a fuzzer.
    static func isValid(_ data: Data) -> Bool {
        var validator = UTF8Validator()
        return validator.consume(data) && validator.isComplete
    }
}
