import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RFC 9110's rules for what SessionKit puts on the wire (starting decision 8): a method and a field name are tokens
/// (visible ASCII without delimiters), and a field value holds no CR, LF or NUL. A request that breaks them fails
/// before any I/O, with an error that names the culprit, instead of smuggling a second request or header onto the
/// connection, or (as `URLRequest` on Linux does with a bad value) silently dropping the header.
enum HTTPFieldValidation {
    /// Whether `text` is an RFC 9110 token.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "A")...UInt8(ascii: "Z"):
                    return true
                default:
                    return "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
    }

    /// Whether `value` can be a field value: no CR, LF or NUL.
    static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// The error for a method that is not a token, or nil.
    static func error(forMethod method: String) -> NSError? {
        guard !isToken(method) else { return nil }
        return SessionKitError.session(
            .invalidRequestField,
            "The HTTP method \(quoted(method)) is not a token (RFC 9110): the request was not sent.")
    }

    /// The error for the first field of `fields` whose name is not a token or whose value holds CR, LF or NUL.
    static func error(forFields fields: [String: String]) -> NSError? {
        error(forFields: fields.sorted(by: { $0.key < $1.key }).map { ($0.key, $0.value) }, of: "header")
    }

    /// The error for the first of `fields` (in order) whose name is not a token or whose value holds CR, LF or NUL;
    /// `place` names where the fields go (`header`, `multipart part header`).
    static func error(forFields fields: [(String, String)], of place: String) -> NSError? {
        for (name, value) in fields {
            if !isToken(name) {
                return SessionKitError.session(
                    .invalidRequestField,
                    "The \(place) name \(quoted(name)) is not a token (RFC 9110: ASCII letters, digits and !#$%&'*+-.^_`|~): the request was not sent."
                )
            }
            if !isValidValue(value) {
                return SessionKitError.session(
                    .invalidRequestField,
                    "The value of the \(place) \(quoted(name)) holds CR, LF or NUL: the request was not sent.")
            }
        }
        return nil
    }

    /// The error for `request`'s method or header fields, or nil.
    static func error(for request: URLRequest) -> NSError? {
        error(forMethod: request.httpMethod ?? "GET") ?? error(forFields: request.allHTTPHeaderFields ?? [:])
    }

    /// `text` quoted, with control characters shown as escapes so that the message stays on one line.
    private static func quoted(_ text: String) -> String {
        "\""
            + text.unicodeScalars.map {
                $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F ? String($0) : $0.escaped(asASCII: true)
            }.joined() + "\""
    }
}
