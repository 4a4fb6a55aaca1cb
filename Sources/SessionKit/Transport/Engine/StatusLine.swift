/// A response's status line as libcurl hands it to the header callback (RFC 9112 4): `HTTP/1.1 200 OK`,
/// `HTTP/1.0 404 Not Found`, libcurl's own `HTTP/2 200 ` for HTTP/2 and HTTP/3, and a line without its reason phrase
/// (`HTTP/1.1 200`, `HTTP/1.1 200 `), which RFC 9112 allows and servers send.
struct StatusLine: Equatable {
    /// The protocol version as sent (`HTTP/1.1`, `HTTP/2`).
    let version: String
    /// The status code, 100…999.
    let code: Int

    /// The line `bytes` (with or without its CRLF), or nil when it is not a status line: a version other than
    /// `HTTP/` one digit, optionally `.` and one digit; anything but exactly three digits from 100 to 999 after one
    /// space; or a code followed by something other than a space or the end of the line.
    init?(_ bytes: UnsafeRawBufferPointer) {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let prefix = Self.prefix
        guard end >= prefix.count + 5, bytes.prefix(prefix.count).elementsEqual(prefix) else { return nil }
        func isDigit(_ index: Int) -> Bool { index < end && (0x30...0x39).contains(bytes[index]) }
        var index = prefix.count
        guard isDigit(index) else { return nil }
        index += 1
        if index < end, bytes[index] == UInt8(ascii: ".") {
            guard isDigit(index + 1) else { return nil }
            index += 2
        }
        version = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<index]), as: UTF8.self)
        guard index < end, bytes[index] == 0x20, isDigit(index + 1), isDigit(index + 2), isDigit(index + 3),
            bytes[index + 1] != 0x30
        else { return nil }
        code = (index + 1...index + 3).reduce(0) { $0 * 10 + Int(bytes[$1] - 0x30) }
        index += 4
        guard index == end || bytes[index] == 0x20 else { return nil }
    }

    private static let prefix = Array("HTTP/".utf8)

    /// The status line `text`, as ``init(_:)-(UnsafeRawBufferPointer)`` reads it.
    init?(_ text: String) {
        var text = text
        guard let line = text.withUTF8({ StatusLine(UnsafeRawBufferPointer($0)) }) else { return nil }
        self = line
    }
}
