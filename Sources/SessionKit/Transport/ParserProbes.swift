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

    /// What the HTTP cache's rules make of a stored response with `fields` (status `status`), received `elapsed`
    /// seconds before `now`, for a request with `requestFields`.
    public static func cacheRules(
        status: Int, fields: [String: String], requestFields: [String: String], elapsed: TimeInterval, now: Date
    ) -> (lifetime: TimeInterval, age: TimeInterval, usable: Bool, maxStale: TimeInterval?, storable: Bool)? {
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
        return (
            entry.freshnessLifetime, entry.currentAge(at: now),
            entry.isUsableWithoutValidation(under: control, at: now),
            control.maxStale, CacheEntry.refusalToStore(response, for: request, authenticated: false) == nil
        )
    }
}
