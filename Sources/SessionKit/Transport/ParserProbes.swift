import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The parsers that read network bytes, reachable from the libFuzzer harness (`sessionkit-fuzz`, which imports
/// `@_spi(Fuzzing) SessionKit`) as they run in the transport. Not API: the SPI keeps them out of a consumer's view.
@_spi(Fuzzing) public enum ParserProbes {
    /// What the response-head parser made of some lines.
    public struct Head {
        /// The status codes of the status lines read, in order.
        public var statuses: [Int] = []
        /// The fields of the last head, as they stand.
        public var fields: [(name: String, value: String)] = []
        /// Whether the blank line that ends a head was read.
        public var ended = false
        /// Why the lines were refused, if they were (the parser stops there).
        public var malformed: String?
    }

    /// Reads `data` split after each LF, as libcurl hands a head's lines to the header callback.
    public static func responseHead(_ data: Data) -> Head {
        var parser = ResponseHeadParser()
        var head = Head()
        var lineStart = data.startIndex
        while lineStart < data.endIndex {
            let lineEnd = data[lineStart...].firstIndex(of: 0x0A).map { $0 + 1 } ?? data.endIndex
            let outcome = data[lineStart..<lineEnd].withUnsafeBytes { parser.read($0) }
            lineStart = lineEnd
            switch outcome {
            case .status(let status): head.statuses.append(status.code)
            case .field: break
            case .end: head.ended = true
            case .malformed(let reason):
                head.malformed = reason
                head.fields = parser.fields.map { ($0.0, $0.1) }
                return head
            }
        }
        head.fields = parser.fields.map { ($0.0, $0.1) }
        return head
    }

    /// The trailer (or head) line `data` on its own: a field, a fold, blank, or refused.
    public static func fieldLine(_ data: Data) -> (name: String?, value: String?, refused: Bool) {
        switch data.withUnsafeBytes({ ResponseHeadParser.fieldLine($0) }) {
        case .field(let name, let value): return (name, value, false)
        case .fold(let value): return (nil, value, false)
        case .blank: return (nil, nil, false)
        case .invalid: return (nil, nil, true)
        }
    }

    /// The status line `data`: its version and code, or nil.
    public static func statusLine(_ data: Data) -> (version: String, code: Int)? {
        data.withUnsafeBytes { StatusLine($0) }.map { ($0.version, $0.code) }
    }

    /// The HTTP-date `text` (RFC 9110 5.6.7), with `now` placing a two-digit year.
    public static func httpDate(_ text: String, now: Date) -> Date? {
        HTTPDate.parse(text, now: now)
    }

    /// `date` as an IMF-fixdate.
    public static func imfFixdate(_ date: Date) -> String {
        HTTPDate.format(date)
    }

    /// The first challenge of a `WWW-Authenticate` value: its scheme and realm, and the value it prints back as.
    public static func challenge(_ value: String) -> (scheme: String, realm: String?, printed: String)? {
        AuthenticationChallengeHeader(fieldValue: value, isProxy: false).map { ($0.scheme, $0.realm, $0.fieldValue) }
    }

    /// A WebSocket frame as the parser delivered it.
    public struct Frame: Equatable {
        /// Whether the frame ends its message.
        public var fin: Bool
        /// The RSV1 bit (permessage-deflate's).
        public var rsv1: Bool
        /// The opcode (RFC 6455 5.2).
        public var opcode: UInt8
        /// The unmasked payload.
        public var payload: Data
    }

    /// The frames a client's parser reads from a server's `data` when it arrives in pieces split at `splits`, and the
    /// close code of the failure that stopped it, if one did.
    public static func webSocketFrames(
        _ data: Data, splits: [Int] = [], maximumPayloadLength: Int
    ) -> (frames: [Frame], failureCode: UInt16?) {
        var parser = WebSocketFrameParser(maximumPayloadLength: maximumPayloadLength)
        var frames: [Frame] = []
        var start = data.startIndex
        for cut in (splits.map { data.startIndex + min(max(0, $0), data.count) } + [data.endIndex]) where cut >= start {
            parser.append(Data(data[start..<cut]))
            start = cut
            // Each frame takes two bytes at least: bounded by the bytes appended so far.
            for _ in 0...(data.count / 2) {
                do {
                    guard let frame = try parser.next() else { break }
                    frames.append(
                        Frame(fin: frame.fin, rsv1: frame.rsv1, opcode: frame.opcode.rawValue, payload: frame.payload))
                } catch {
                    return (frames, error.code)
                }
            }
        }
        return (frames, nil)
    }

    /// permessage-deflate's parameters as the handshake check negotiated them.
    public struct Deflate: Equatable {
        /// The server resets its context after each message.
        public var serverNoContextTakeover: Bool
        /// The client must reset its context after each message.
        public var clientNoContextTakeover: Bool
        /// The server's window (bits), what the client inflates with.
        public var serverMaxWindowBits: Int
        /// The client's largest window (bits).
        public var clientMaxWindowBits: Int
    }

    /// The offer the client sends in `Sec-WebSocket-Extensions`.
    public static var deflateOffer: String { WebSocketDeflateParameters.offer }

    /// What the handshake check makes of the server's `Sec-WebSocket-Extensions` values: nil parameters and nil
    /// refusal when no extension was accepted, the parameters, or why the answer is refused.
    public static func deflateNegotiation(_ values: [String]) -> (parameters: Deflate?, refusal: String?) {
        switch WebSocketDeflateParameters.negotiate(values) {
        case .success(let parameters):
            return (
                parameters.map {
                    Deflate(
                        serverNoContextTakeover: $0.serverNoContextTakeover,
                        clientNoContextTakeover: $0.clientNoContextTakeover,
                        serverMaxWindowBits: $0.serverMaxWindowBits, clientMaxWindowBits: $0.clientMaxWindowBits)
                }, nil
            )
        case .failure(let error): return (nil, error.reason)
        }
    }

    /// Inflates `messages` one after another as the message reader does (each one frame, `00 00 ff ff` appended),
    /// with a window of `windowBits`, each into at most `limit` bytes, the context reset after each message when
    /// `resetsContext`: the messages inflated, and the close code of the failure that stopped it, if one did. Nil
    /// when zlib refuses the window.
    public static func inflate(
        _ messages: [Data], windowBits: Int, limit: Int, resetsContext: Bool
    ) -> (messages: [Data], failureCode: UInt16?)? {
        guard let inflater = RawDeflateStream(.decompress, windowBits: windowBits) else { return nil }
        var inflated: [Data] = []
        for message in messages {
            do {
                inflated.append(try inflater.decompress(message + [0x00, 0x00, 0xFF, 0xFF], limit: limit))
            } catch {
                return (inflated, error.code)
            }
            if resetsContext { inflater.reset() }
        }
        return (inflated, nil)
    }

    /// `messages` compressed one after another as the connection sends them (the flush's `00 00 ff ff` removed),
    /// with a window of `windowBits`, the context reset after each message when `resetsContext`. Nil when zlib
    /// refuses the window or fails.
    public static func deflate(_ messages: [Data], windowBits: Int, resetsContext: Bool) -> [Data]? {
        guard let deflater = RawDeflateStream(.compress, windowBits: windowBits) else { return nil }
        var compressed: [Data] = []
        for message in messages {
            guard let payload = deflater.compress(message) else { return nil }
            compressed.append(payload)
            if resetsContext { deflater.reset() }
        }
        return compressed
    }

    /// Whether the WebSocket text check accepts `data` read whole, and read in two pieces split at `split`.
    public static func utf8(_ data: Data, split: Int) -> (whole: Bool, pieces: Bool) {
        var validator = UTF8Validator()
        let cut = data.startIndex + min(max(0, split), data.count)
        let pieces = validator.consume(data[..<cut]) && validator.consume(data[cut...]) && validator.isComplete
        return (UTF8Validator.isValid(data), pieces)
    }

    /// What the HTTP cache's rules make of a stored response with `fields` (status `status`), received `elapsed`
    /// seconds before `now`, for a request with `requestFields`; `notModified`: the lowercased field names of the
    /// cache's own 304 to the request's validators, nil when it makes none.
    public static func cacheRules(
        status: Int, fields: [String: String], requestFields: [String: String], elapsed: TimeInterval, now: Date
    ) -> (
        lifetime: TimeInterval, age: TimeInterval, usable: Bool, maxStale: TimeInterval?, storable: Bool,
        notModified: Set<String>?
    )? {
        guard let url = URL(string: "http://127.0.0.1/probe"),
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)
        else { return nil }
        var request = URLRequest(url: url)
        for (name, value) in requestFields { request.setValue(value, forHTTPHeaderField: name) }
        let received = now.addingTimeInterval(-elapsed)
        let entry = CacheEntry(
            response: response, data: Data(), request: request, requestTime: received, responseTime: received,
            policyKey: nil)
        let control = CacheEntry.requestControl(of: request)
        _ = entry.matches(request)
        _ = entry.mayServeWhileRevalidating(under: control, at: now)
        _ = entry.mayServeAfterError(at: now)
        _ = entry.partial(for: requestFields["Range"] ?? "bytes=0-")
        let notModified = entry.notModified(
            ifNoneMatch: requestFields["If-None-Match"], ifModifiedSince: requestFields["If-Modified-Since"])
        return (
            entry.freshnessLifetime, entry.currentAge(at: now),
            entry.isUsableWithoutValidation(under: control, at: now),
            control.maxStale, CacheEntry.refusalToStore(response, for: request, authenticated: false) == nil,
            notModified.map { made in
                Set(made.response.allHeaderFields.keys.compactMap { ($0 as? String)?.lowercased() })
            }
        )
    }

    /// One `Set-Cookie` field value as the curl transport reads it (RFC 6265 5.2): the cookie's name, value and
    /// expiry, or nil when the value holds no cookie.
    public static func setCookie(_ fieldValue: String, now: Date) -> (name: String, value: String, expiry: Date?)? {
        SetCookie(fieldValue, now: now).map { ($0.name, $0.value, $0.expiry) }
    }

    /// An `Expires` date as the curl transport reads it (RFC 6265 5.1.1).
    public static func cookieDate(_ text: String) -> Date? {
        CookieDate.parse(text)
    }

    /// One storage the cookie probe reuses (emptied before each use: the fuzzer runs one input at a time).
    private static let cookieStorage = HTTPCookieStorage.sharedCookieStorage(
        forGroupContainerIdentifier: "sessionkit.fuzz.cookies")

    /// The `Cookie` field a request to `target` sends after a response from `origin` set `fieldValues`, from an empty
    /// store.
    public static func cookieHeader(after fieldValues: [String], from origin: URL, to target: URL, now: Date) -> String?
    {
        for cookie in cookieStorage.cookies ?? [] { cookieStorage.deleteCookie(cookie) }
        let jar = CookieJar(storage: cookieStorage)
        jar.store(fieldValues, from: origin, now: now)
        return jar.header(for: target, now: now)
    }
}
