import Foundation
@_spi(Fuzzing) import SessionKit

/// The properties the parsers of network bytes keep on every input; a broken one stops the process (libFuzzer saves
/// the input as a crash, and `make test` replays it).
enum NetworkParserProperties {
    /// A fixed present, so that a two-digit year means the same on every run.
    private static let now = Date(timeIntervalSince1970: 1_790_000_000)

    private static func fail(_ property: String, _ input: Data) -> Never {
        let shown = String(decoding: input.prefix(200), as: UTF8.self).debugDescription
        fatalError("property broken: \(property); input \(shown)")
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
    }

    private static func isCleanValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
            && value.utf8.first.map { $0 != 0x20 && $0 != 0x09 } ?? true
            && value.utf8.last.map { $0 != 0x20 && $0 != 0x09 } ?? true
    }

    /// The response head: every status is 100…999 (never 0), every field a token name with a clean value, a head that
    /// ended has a status, and the status line agrees with a regular expression of RFC 9112 4.
    static func head(_ input: Data) {
        let head = ParserProbes.responseHead(input)
        for status in head.statuses where !(100...999).contains(status) { fail("status \(status)", input) }
        for field in head.fields where !isToken(field.name) || !isCleanValue(field.value) {
            fail("field \(field)", input)
        }
        if head.ended, head.malformed == nil, head.statuses.isEmpty { fail("a head without a status", input) }
        let firstLine = Data(input.prefix { $0 != 0x0A })
        if (ParserProbes.statusLine(firstLine) != nil) != referenceStatusLine(firstLine) {
            fail("status line disagrees with RFC 9112's grammar", input)
        }
    }

    /// RFC 9112 4 as a regular expression over the line's bytes (read as Latin-1, one character a byte), its trailing
    /// CR and LF stripped as libcurl's lines carry them.
    private static func referenceStatusLine(_ line: Data) -> Bool {
        var bytes = [UInt8](line)
        while let last = bytes.last, last == 0x0D || last == 0x0A { bytes.removeLast() }
        let text = String(decoding: bytes.map { UInt16($0) }, as: UTF16.self)
        let pattern = "\\AHTTP/[0-9](\\.[0-9])? [1-9][0-9]{2}( [\\s\\S]*)?\\z"
        return text.range(of: pattern, options: .regularExpression) != nil
    }

    /// A trailer (or head) line alone: a field has a token name and a clean value.
    static func trailer(_ input: Data) {
        let line = ParserProbes.fieldLine(input)
        if let name = line.name, !isToken(name) { fail("trailer name \(name)", input) }
        if let value = line.value, !value.utf8.allSatisfy({ $0 != 0x0D && $0 != 0x0A && $0 != 0 }) {
            fail("trailer value \(value.debugDescription)", input)
        }
    }

    /// HTTP dates: SessionKit's reader and the reference agree on every input; a date accepted prints back as an
    /// IMF-fixdate that reads as the same date, and an IMF-fixdate input prints back as itself.
    static func date(_ input: Data) {
        let text = String(decoding: input, as: UTF8.self)
        let parsed = ParserProbes.httpDate(text, now: now)
        let reference = ReferenceHTTPDate.parse(text, now: now)
        if parsed != reference {
            fail("HTTPDate \(String(describing: parsed)) but the reference \(String(describing: reference))", input)
        }
        guard let parsed else { return }
        let printed = ParserProbes.imfFixdate(parsed)
        if ParserProbes.httpDate(printed, now: now) != parsed { fail("\(printed) does not read back", input) }
        // Past its day name (which need not be the date's), an IMF-fixdate prints back as it came, but for case.
        if text.utf8.count == 29, text.utf8.dropFirst(3).first == UInt8(ascii: ","),
            printed.dropFirst(3).caseInsensitiveCompare(text.dropFirst(3)) != .orderedSame
        {
            fail("an IMF-fixdate printed back as \(printed)", input)
        }
    }

    private static let responseNames = [
        "Date", "Expires", "Age", "Last-Modified", "Cache-Control", "Vary", "ETag", "Pragma", "Content-Encoding",
        "Set-Cookie", "Connection", "Keep-Alive",
    ]
    private static let requestNames = [
        "Cache-Control", "Pragma", "Range", "Accept-Language", "Authorization", "Cookie", "If-None-Match",
        "If-Modified-Since",
    ]
    private static let statuses = [200, 203, 204, 206, 300, 301, 304, 308, 404, 410, 500, 503]

    /// The cache's rules on a stored response whose fields the input names (one per line: a byte choosing the field,
    /// then its value; a line starting with `>` is a request field): lifetimes and ages are finite and not negative,
    /// and a response used without validation is fresh enough or the request accepts it stale.
    static func cache(_ input: Data) {
        guard input.count >= 3 else { return }
        let status = statuses[Int(input[input.startIndex]) % statuses.count]
        let elapsed = TimeInterval(Int(input[input.startIndex + 1]) * 997)
        var fields: [String: String] = [:]
        var requestFields: [String: String] = [:]
        for line in input.dropFirst(2).split(separator: 0x0A) {
            guard let first = line.first else { continue }
            let isRequest = first == UInt8(ascii: ">")
            let body = isRequest ? line.dropFirst() : line
            guard let selector = body.first else { continue }
            let value = String(decoding: body.dropFirst(), as: UTF8.self)
            if isRequest {
                requestFields[requestNames[Int(selector) % requestNames.count]] = value
            } else {
                fields[responseNames[Int(selector) % responseNames.count]] = value
            }
        }
        guard
            let rules = ParserProbes.cacheRules(
                status: status, fields: fields, requestFields: requestFields, elapsed: elapsed, now: now)
        else { return }
        if !rules.lifetime.isFinite || rules.lifetime < 0 { fail("lifetime \(rules.lifetime)", input) }
        if !rules.age.isFinite || rules.age < 0 { fail("age \(rules.age)", input) }
        if rules.usable, rules.lifetime <= rules.age, rules.maxStale == nil {
            fail("used without validation while stale (\(rules.lifetime) ≤ \(rules.age))", input)
        }
        if let notModified = rules.notModified {
            if status != 200 && status != 206 { fail("a 304 made from a stored \(status)", input) }
            if requestFields["If-None-Match"] == nil && requestFields["If-Modified-Since"] == nil {
                fail("a 304 without validators", input)
            }
            let allowed: Set = [
                "cache-control", "content-location", "date", "etag", "expires", "last-modified", "vary",
            ]
            if !notModified.isSubset(of: allowed) { fail("a 304 with \(notModified.subtracting(allowed))", input) }
        }
    }

    /// WebSocket frames from a server: read whole or in pieces (split where the first two bytes say), the parser
    /// delivers the same frames and the same failure; no delivered frame breaks a rule the parser enforces (a client
    /// never gets data from a frame it rejects); no data frame's payload passes the limit.
    static func webSocket(_ input: Data) {
        guard input.count >= 2 else { return }
        let limit = 1 + Int(input[input.startIndex]) * 64
        let data = Data(input.dropFirst(2))
        let whole = ParserProbes.webSocketFrames(data, maximumPayloadLength: limit)
        let split = ParserProbes.webSocketFrames(
            data, splits: [Int(input[input.startIndex + 1]), Int(input[input.startIndex + 1]) * 3],
            maximumPayloadLength: limit)
        if whole.frames != split.frames || whole.failureCode != split.failureCode {
            fail("frames differ when the bytes arrive in pieces", input)
        }
        for frame in whole.frames {
            let isControl = frame.opcode & 0x8 != 0
            if frame.rsv1 { fail("RSV1 without an extension", input) }
            if ![0, 1, 2, 8, 9, 10].contains(frame.opcode) { fail("opcode \(frame.opcode)", input) }
            if isControl && (!frame.fin || frame.payload.count > 125) { fail("a control frame broke 5.5", input) }
            // The limit is the messages': a control frame (125 bytes at most, above) passes under any limit.
            if !isControl && frame.payload.count > limit { fail("payload over the limit", input) }
        }
        if let code = whole.failureCode, ![1002, 1007, 1009].contains(code) { fail("close code \(code)", input) }
    }

    /// The WebSocket text check agrees with Swift's own UTF-8 validation, whole and in pieces.
    static func utf8(_ input: Data) {
        let split = input.first.map(Int.init) ?? 0
        let result = ParserProbes.utf8(input, split: split)
        let reference = String(validating: input, as: UTF8.self) != nil
        if result.whole != reference || result.pieces != reference {
            fail("UTF-8 check \(result) but Swift says \(reference)", input)
        }
    }

    /// Server-Sent Events: the stream read whole and read in pieces (split where the first byte says) gives the same
    /// events or the same error; no event holds more than the size limit.
    static func serverSentEvents(_ input: Data) {
        let limit = 4096
        let whole = Result { try ServerSentEventParser.events(in: input, maximumEventSize: limit) }
        let cut = input.startIndex + min(Int(input.first ?? 0), input.count)
        let pieces = Result { () throws -> [ServerSentEvent] in
            var parser = ServerSentEventParser(maximumEventSize: limit)
            return try parser.parse(Data(input[..<cut])) + parser.parse(Data(input[cut...]))
        }
        switch (whole, pieces) {
        case (.success(let a), .success(let b)):
            if a != b { fail("events differ when the stream arrives in pieces", input) }
            for event in a where event.data.utf8.count > limit { fail("an event over the size limit", input) }
        case (.failure, .failure):
            break
        default:
            fail("one reading failed and the other did not", input)
        }
    }

    /// permessage-deflate: the check of the server's `Sec-WebSocket-Extensions` answer, the inflater on hostile
    /// bytes under a small limit, and a round trip through the deflater and the inflater.
    ///
    /// The input is a flags byte (the window, `8 + flags & 7` bits; the context reset after each message when
    /// `flags & 8`), a limit byte (32 bytes a step), a length byte, a split byte, that many bytes of answer (values
    /// separated by LF), and the rest: its first half inflated as two compressed messages (cut where the split byte
    /// says), its second half as two messages compressed and inflated back.
    static func deflate(_ input: Data) {
        let bytes = [UInt8](input)
        guard bytes.count >= 4 else { return }
        let windowBits = 8 + Int(bytes[0] & 0x07)
        let resetsContext = bytes[0] & 0x08 != 0
        let limit = Int(bytes[1]) * 32
        let answerEnd = min(bytes.count, 4 + Int(bytes[2]))
        let answer = String(decoding: bytes[4..<answerEnd], as: UTF8.self)
        deflateNegotiation(answer.split(separator: "\n", omittingEmptySubsequences: false).map(String.init), input)

        func cut(_ data: Data) -> [Data] {
            let at = min(Int(bytes[3]), data.count)
            return [Data(data.prefix(at)), Data(data.dropFirst(at))]
        }
        let rest = Data(bytes[answerEnd...])
        let hostile = cut(rest.prefix(rest.count / 2))
        guard
            let inflated = ParserProbes.inflate(
                hostile, windowBits: windowBits, limit: limit, resetsContext: resetsContext)
        else { fail("zlib refused the window \(windowBits) to inflate", input) }
        for message in inflated.messages where message.count > limit {
            fail("a message inflated to \(message.count) bytes past the limit of \(limit)", input)
        }
        if let code = inflated.failureCode, code != 1007 && code != 1009 { fail("close code \(code)", input) }

        // The deflater has no 8-bit window (the connection then sends uncompressed).
        let roundTripWindow = max(9, windowBits)
        let messages = cut(rest.dropFirst(rest.count / 2))
        guard
            let compressed = ParserProbes.deflate(messages, windowBits: roundTripWindow, resetsContext: resetsContext)
        else { fail("zlib could not compress", input) }
        let largest = messages.map(\.count).max() ?? 0
        let back = ParserProbes.inflate(
            compressed, windowBits: roundTripWindow, limit: largest, resetsContext: resetsContext)
        if back?.messages != messages || back?.failureCode != nil { fail("inflate(deflate(x)) is not x", input) }
        if largest > 0 {
            // One byte short: the first largest message is refused with 1009, those before it arrive.
            let short = ParserProbes.inflate(
                compressed, windowBits: roundTripWindow, limit: largest - 1, resetsContext: resetsContext)
            let before = messages.prefix { $0.count < largest }
            if short?.failureCode != 1009 || short.map({ $0.messages[...] }) != before {
                fail("a message one byte past the limit was not refused with 1009 alone", input)
            }
        }
    }

    /// The server's answer: accepted only as one `permessage-deflate` element of ASCII, with windows the offer allows
    /// (8 to 15 bits), each flag only when named, and parameters that read back the same when printed.
    private static func deflateNegotiation(_ values: [String], _ input: Data) {
        let result = ParserProbes.deflateNegotiation(values)
        guard let parameters = result.parameters else { return }
        let text = values.joined(separator: ",")
        if !text.utf8.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x09 }) {
            fail("accepted an answer that is not printable ASCII", input)
        }
        let lowercased = text.lowercased()
        if !lowercased.contains("permessage-deflate") { fail("accepted without permessage-deflate", input) }
        for bits in [parameters.serverMaxWindowBits, parameters.clientMaxWindowBits] where !(8...15).contains(bits) {
            fail("a window of \(bits) bits", input)
        }
        let named: [(Bool, String)] = [
            (parameters.serverNoContextTakeover, "server_no_context_takeover"),
            (parameters.clientNoContextTakeover, "client_no_context_takeover"),
            (parameters.serverMaxWindowBits != 15, "server_max_window_bits"),
            (parameters.clientMaxWindowBits != 15, "client_max_window_bits"),
        ]
        for (isSet, name) in named where isSet && !lowercased.contains(name) { fail("\(name) set unnamed", input) }
        var printed = "permessage-deflate"
        if parameters.serverNoContextTakeover { printed += "; server_no_context_takeover" }
        if parameters.clientNoContextTakeover { printed += "; client_no_context_takeover" }
        printed += "; server_max_window_bits=\(parameters.serverMaxWindowBits)"
        printed += "; client_max_window_bits=\"\(parameters.clientMaxWindowBits)\""
        if ParserProbes.deflateNegotiation([printed]).parameters != parameters {
            fail("\(printed) does not read back as the same parameters", input)
        }
    }

    /// A challenge accepted prints back (`scheme realm="…"`) as a value that reads as the same challenge.
    static func challenge(_ input: Data) {
        let text = String(decoding: input, as: UTF8.self)
        guard let parsed = ParserProbes.challenge(text) else { return }
        if !isToken(parsed.scheme) { fail("scheme \(parsed.scheme)", input) }
        guard let again = ParserProbes.challenge(parsed.printed) else { fail("\(parsed.printed) not read back", input) }
        if again.scheme != parsed.scheme || again.realm != parsed.realm {
            fail("\(parsed.printed) read back as \(again.scheme) \(String(describing: again.realm))", input)
        }
    }

    /// Cookies (RFC 6265): a cookie read from a `Set-Cookie` value has a name, no `;` and no control character in its
    /// name or value, 4096 bytes at most, and no `=` in its name; an `Expires` date read is within 1601…9999 and reads
    /// back from its IMF-fixdate; the `Cookie` field sent after the input's lines (one `Set-Cookie` value each) holds
    /// no CR, LF or NUL, and only pairs those lines set.
    static func cookie(_ input: Data) {
        let text = String(decoding: input, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var parsed: Set<String> = []
        for line in lines {
            guard let cookie = ParserProbes.setCookie(line, now: now) else { continue }
            let (name, value) = (cookie.name, cookie.value)
            if name.isEmpty || name.contains("=") || (name + value).contains(";") {
                fail("cookie \(name.debugDescription)=\(value.debugDescription)", input)
            }
            if (name + value).utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F })
                || name.utf8.count + value.utf8.count > 4096
            {
                fail("cookie with a control character or over 4096 bytes", input)
            }
            parsed.insert("\(name)=\(value)")
        }
        if let date = ParserProbes.cookieDate(text) {
            let seconds = date.timeIntervalSince1970
            // 1601-01-01 and 10000-01-01.
            if seconds < -11_644_473_600 || seconds >= 253_402_300_800 { fail("cookie date \(date)", input) }
            if seconds >= 0, ParserProbes.cookieDate(ParserProbes.imfFixdate(date)) != date {
                fail("cookie date \(date) does not read back", input)
            }
        }
        let origin = URL(string: "https://www.example.com/a/b") ?? URL(fileURLWithPath: "/")
        guard let header = ParserProbes.cookieHeader(after: lines, from: origin, to: origin, now: now) else { return }
        if header.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
            fail("Cookie field \(header.debugDescription)", input)
        }
        // No pair holds a `;` (the parse forbids it): split at each, by Unicode scalars (a combining mark after the
        // space would join it into one `Character` and hide the separator from a `Character` split), drop the space
        // the jar writes after it, and look each pair up.
        let pieces = header.unicodeScalars.split(separator: ";", omittingEmptySubsequences: false)
        let pairs = pieces.enumerated().map { index, piece in
            String(String.UnicodeScalarView(index == 0 || piece.first != " " ? piece : piece.dropFirst()))
        }
        for pair in pairs where !parsed.contains(pair) {
            fail("Cookie pair \(pair.debugDescription) that no line set", input)
        }
    }
}
