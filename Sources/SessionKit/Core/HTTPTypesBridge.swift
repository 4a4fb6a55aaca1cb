import Foundation
import HTTPTypes

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Conversions between swift-http-types' values and Foundation's at the HTTP core API's edge.
enum HTTPTypesBridge {
    /// `request` as a `URLRequest`: its URL from the scheme, authority and path; its fields in order, a repeated
    /// field joined as RFC 9110 5.3 says (`Cookie` with "; ").
    ///
    /// - Throws: `URLError.badURL` when the request has no scheme or authority (an `OPTIONS *` or `CONNECT` request)
    ///   or they make no URL.
    static func urlRequest(from request: HTTPRequest) throws -> URLRequest {
        guard let scheme = request.scheme, let authority = request.authority,
            let url = URL(string: urlString(scheme: scheme, authority: authority, path: request.path ?? "/"))
        else {
            throw URLError(
                .badURL,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "The request has no URL: an HTTPRequest needs a scheme, an authority and a path."
                ])
        }
        var urlRequest = URLRequest(url: url)
        // GET is URLRequest's own; FoundationNetworking's setter normalizes the name at every call.
        if request.method != .get { urlRequest.httpMethod = request.method.rawValue }
        var fields: [String: String] = [:]
        var names: [String: String] = [:]  // canonical name → the spelling first met
        for field in request.headerFields {
            let canonical = field.name.canonicalName
            if let name = names[canonical], let existing = fields[name] {
                fields[name] = existing + (canonical == "cookie" ? "; " : ", ") + field.value
            } else {
                names[canonical] = field.name.rawName
                fields[field.name.rawName] = field.value
            }
        }
        if !fields.isEmpty { urlRequest.allHTTPHeaderFields = fields }
        return urlRequest
    }

    /// `scheme://authority` + `path`, its bytes copied into one allocation (interpolation grows the string step by
    /// step; appending with `+=` after a `reserveCapacity` cost about 1.7k instructions).
    private static func urlString(scheme: String, authority: String, path: String) -> String {
        let count = scheme.utf8.count + 3 + authority.utf8.count + path.utf8.count
        return String(unsafeUninitializedCapacity: count) { buffer in
            // The cursor is a pointer the loop moves, not a variable a nested function captures (a captured `var`
            // is boxed, and each access to it checked for exclusivity at run time).
            guard var cursor = buffer.baseAddress else { return 0 }
            for var part in [scheme, "://", authority, path] {
                cursor = part.withUTF8 { bytes in
                    guard let source = bytes.baseAddress else { return cursor }
                    cursor.initialize(from: source, count: bytes.count)
                    return cursor + bytes.count
                }
            }
            return cursor - buffer.baseAddress!
        }
    }

    /// `response` as swift-http-types' response, read from its lines when it has them (no `HTTPURLResponse` is built
    /// for it then).
    ///
    /// - Throws: `URLError.badServerResponse` for a response that is not HTTP or whose status is outside 100…999.
    static func response(from response: ReceivedResponse, url: URL?) throws -> HTTPResponse {
        if let lines = response.fieldLines {
            guard (100...999).contains(response.statusCode) else {
                throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: url as Any])
            }
            // The lines as they came: a repeated field stays repeated (two `Set-Cookie` lines are two fields).
            return HTTPResponse(status: .init(code: response.statusCode), headerFields: fields(from: lines))
        }
        guard let http = response.httpResponse else {
            throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: url as Any])
        }
        return try self.response(from: http)
    }

    /// `response` as an `HTTPResponse`.
    ///
    /// - Throws: `URLError.badServerResponse` for a status outside 100…999 (no transport delivers one).
    static func response(from response: HTTPURLResponse) throws -> HTTPResponse {
        guard (100...999).contains(response.statusCode) else {
            throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: response.url as Any])
        }
        if let wire = response as? WireHTTPURLResponse {
            // The lines as they came: a repeated field stays repeated (two `Set-Cookie` lines are two fields).
            return HTTPResponse(status: .init(code: response.statusCode), headerFields: fields(from: wire.fieldLines))
        }
        var fields = HTTPFields()
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String, let fieldName = HTTPField.Name(name)
            else { continue }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        return HTTPResponse(status: .init(code: response.statusCode), headerFields: fields)
    }

    /// Field lines as received, as `HTTPFields` (a name that is not a token is dropped).
    static func fields(from lines: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(lines.count)
        for (name, value) in lines {
            // A known name only when byte for byte the same (String's `==` would also match a canonically
            // equivalent spelling that is not a token, which `HTTPField.Name(_:)` refuses).
            guard let fieldName = knownName(spelled: name) ?? HTTPField.Name(name) else { continue }
            // One by one: the compiler specializes `append` here; a whole array handed to `replaceSubrange` goes
            // through the library's unspecialized generic code, which measured 13.0k instructions against 7.4k.
            fields.append(HTTPField(name: fieldName, value: value))
        }
        return fields
    }

    /// The `HTTPField.Name` of `name` when it is one of the names most responses carry, spelled byte for byte as
    /// listed (String's `==` would also match a canonically equivalent spelling that is not a token, which
    /// `HTTPField.Name(_:)` refuses); nil otherwise. A look at the few names of the same length, compared with
    /// `memcmp`: a `Dictionary` lookup hashed every name, about 330 instructions a field against about 100.
    private static func knownName(spelled name: String) -> HTTPField.Name? {
        let count = name.utf8.count
        guard count < knownNames.count else { return nil }
        for known in knownNames[count] where known.rawName.hasSameUTF8(as: name) { return known }
        return nil
    }

    /// The names most responses carry, already checked and lowercased, by the length of their spelling (as HTTP/1.1
    /// servers usually write them, and lowercase as HTTP/2 sends them): the same `HTTPField.Name` that
    /// `HTTPField.Name(_:)` makes of that spelling, without checking and lowercasing it for every response. Its
    /// `rawName` is the spelling.
    private static let knownNames: [[HTTPField.Name]] = {
        let spellings = [
            "Date", "Server", "Content-Type", "Content-Length", "Connection", "Transfer-Encoding", "Content-Encoding",
            "Cache-Control", "ETag", "Last-Modified", "Expires", "Age", "Vary", "Location", "Set-Cookie", "Keep-Alive",
            "Accept-Ranges", "Access-Control-Allow-Origin", "Strict-Transport-Security", "X-Content-Type-Options",
        ]
        let all = spellings + spellings.map { $0.lowercased() }
        var names = [[HTTPField.Name]](repeating: [], count: all.map(\.utf8.count).max()! + 1)
        for spelling in all {
            if let name = HTTPField.Name(spelling) { names[spelling.utf8.count].append(name) }
        }
        return names
    }()

    /// `fields` as lines (request trailers).
    static func lines(from fields: HTTPFields) -> [(String, String)] {
        fields.map { ($0.name.rawName, $0.value) }
    }
}
