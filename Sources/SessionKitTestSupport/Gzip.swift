import Foundation

/// A minimal gzip writer (RFC 1952) whose deflate stream uses stored blocks only: valid gzip that any
/// decoder reads, without a zlib dependency in the test server.
enum Gzip {
    /// `data` as a gzip member.
    static func encode(_ data: Data) -> Data {
        var out = Data([0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff])
        let bytes = [UInt8](data)
        var offset = 0
        repeat {
            let count = min(65_535, bytes.count - offset)
            let isLast = offset + count >= bytes.count
            out.append(isLast ? 1 : 0)
            out.append(UInt8(count & 0xff))
            out.append(UInt8(count >> 8))
            out.append(UInt8(~count & 0xff))
            out.append(UInt8((~count >> 8) & 0xff))
            out.append(contentsOf: bytes[offset..<offset + count])
            offset += count
        } while offset < bytes.count
        appendLittleEndian(crc32(bytes), to: &out)
        appendLittleEndian(UInt32(truncatingIfNeeded: bytes.count), to: &out)
        return out
    }

    private static func appendLittleEndian(_ value: UInt32, to data: inout Data) {
        for shift in stride(from: 0, to: 32, by: 8) { data.append(UInt8((value >> UInt32(shift)) & 0xff)) }
    }

    private static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xffff_ffff
    }
}
