import Foundation

/// One `Set-Cookie` field value, read with RFC 6265 5.2's algorithm (what a user agent does, which is laxer than the
/// grammar a server must follow, and stricter where it matters).
///
/// - The cookie is the name and value before the first `;`, split at the first `=`, without surrounding spaces and
///   tabs. No `=`, or an empty name: no cookie. A comma is part of the value (`a=1, b=2` is one cookie named `a`).
/// - Each attribute after a `;` is a name (any case) and an optional value; an attribute met again wins over the
///   earlier one, and one that is unknown or malformed is ignored, not the cookie.
/// - A field value holding a control character (other than a tab) anywhere is refused, as is a cookie whose name and
///   value together pass 4096 bytes (RFC 6265bis 5.6, 5.7); an attribute whose value passes 1024 bytes is ignored.
/// - An expiry is at most 400 days ahead (RFC 6265bis 5.6.1, 5.6.2: `Expires` and `Max-Age` are capped alike).
struct SetCookie: Equatable {
    /// RFC 6265bis's limit of a cookie's name and value together, in bytes.
    static let maximumSize = 4096
    /// RFC 6265bis's limit of an attribute's value, in bytes: a longer one is ignored.
    static let maximumAttributeValueSize = 1024
    /// RFC 6265bis's cookie-age limit (its SHOULD: 400 days).
    static let maximumAge: TimeInterval = 400 * 86_400

    var name: String
    var value: String
    /// When the cookie expires: from `Max-Age` when there is one (it wins whatever the order), else from `Expires`;
    /// nil for a session cookie. A `Max-Age` of 0 or less is the distant past: the cookie is to be deleted.
    var expiry: Date?
    /// The `Domain` attribute, lowercased, without its leading dot; nil when there is none.
    var domain: String?
    /// The `Path` attribute; nil when there is none, or the last one did not start with `/` (the request's default
    /// path then applies).
    var path: String?
    var isSecure = false
    var isHTTPOnly = false
    /// The `SameSite` attribute's value as sent (`Lax`, `Strict`, `None`), or nil.
    var sameSite: String?

    /// Parses `fieldValue`, one `Set-Cookie` field's value; nil when it holds no cookie. `now` is when a `Max-Age`
    /// counts from.
    init?(_ fieldValue: String, now: Date) {
        // A control character anywhere (an attribute too) drops the whole field (RFC 6265bis 5.6, step 1).
        guard !Self.hasControlCharacter(fieldValue) else { return nil }
        // Bytes, not characters: a `;` or `=` followed by a combining mark is still a separator.
        let bytes = Array(fieldValue.utf8)
        var parts = bytes.split(separator: 0x3B, omittingEmptySubsequences: false)[...]
        guard let pair = parts.popFirst(), let equals = pair.firstIndex(of: 0x3D) else { return nil }
        name = Self.trimmed(pair[..<equals])
        value = Self.trimmed(pair[(equals + 1)...])
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= Self.maximumSize else { return nil }
        var maxAgeExpiry: Date?
        var expires: Date?
        for attribute in parts {
            let equals = attribute.firstIndex(of: 0x3D)
            let attributeName = Self.trimmed(attribute[..<(equals ?? attribute.endIndex)])
            let attributeValue = equals.map { Self.trimmed(attribute[($0 + 1)...]) } ?? ""
            guard attributeValue.utf8.count <= Self.maximumAttributeValueSize else { continue }
            switch attributeName.asciiLowercased {
            case "expires":
                if let date = CookieDate.parse(attributeValue) { expires = date }
            case "max-age":
                if let seconds = Self.deltaSeconds(attributeValue) {
                    maxAgeExpiry = seconds <= 0 ? .distantPast : now.addingTimeInterval(TimeInterval(seconds))
                }
            case "domain":
                // An empty Domain is ignored (RFC 6265 5.2.3); one leading dot is dropped, and a Domain that was only
                // that dot leaves the cookie host-only (5.3, step 4).
                guard !attributeValue.isEmpty else { continue }
                let bare = attributeValue.hasPrefix(".") ? String(attributeValue.dropFirst()) : attributeValue
                domain = bare.isEmpty ? nil : bare.asciiLowercased
            case "path":
                path = attributeValue.hasPrefix("/") ? attributeValue : nil
            case "secure":
                isSecure = true
            case "httponly":
                isHTTPOnly = true
            case "samesite":
                sameSite = attributeValue
            default:
                continue
            }
        }
        let latest = now.addingTimeInterval(Self.maximumAge)
        expiry = (maxAgeExpiry ?? expires).map { min($0, latest) }
    }

    /// Whether the cookie may be set by a response to a request of this security (RFC 6265bis 5.7): a `Secure` cookie,
    /// and one named with the `__Secure-` or `__Host-` prefix, only from a secure origin; a `__Host-` cookie only
    /// without `Domain` and with `Path=/`.
    func mayBeSet(fromSecureOrigin secure: Bool) -> Bool {
        if isSecure && !secure { return false }
        // The prefixes in any case (RFC 6265bis 5.6, steps 20 and 21): `__SECURE-` is `__Secure-`.
        let lowercased = name.asciiLowercased
        if lowercased.hasPrefix("__secure-") && !isSecure { return false }
        if lowercased.hasPrefix("__host-") && (!isSecure || domain != nil || path != "/") { return false }
        return true
    }

    /// Max-Age's value: an optional `-` and digits, and nothing else (RFC 6265 5.2.2); a number too long for an `Int`
    /// is as far as one goes.
    private static func deltaSeconds(_ text: String) -> Int? {
        let digits = text.hasPrefix("-") ? text.utf8.dropFirst() : text.utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        let magnitude = Int(String(decoding: digits, as: UTF8.self)) ?? Int.max
        return text.hasPrefix("-") ? -magnitude : magnitude
    }

    /// The bytes as text, without leading and trailing spaces and tabs (RFC 6265's WSP; not other whitespace).
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// Whether `text` holds a control character other than a tab (RFC 6265bis 5.7, step 2).
    static func hasControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }
}
