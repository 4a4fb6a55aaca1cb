import Foundation

/// The directives of a `Cache-Control` field (RFC 9111 5.2) that a private cache acts on, from a request or a
/// response. Unknown directives are ignored, as the RFC asks; a directive given twice keeps its first value.
struct CacheControl: Equatable {
    /// `max-age=N` (seconds).
    var maxAge: TimeInterval?
    /// `max-stale` (a request accepts a stale response; without a value, however stale), `max-stale=N`.
    var maxStale: TimeInterval?
    /// `min-fresh=N` (a request wants the response fresh for N more seconds).
    var minFresh: TimeInterval?
    /// `no-cache` (a response must be revalidated before each use; a request asks for a revalidation).
    var noCache = false
    /// `no-store`: nothing of this exchange is stored.
    var noStore = false
    /// `must-revalidate`: never used stale. (`proxy-revalidate` is a shared cache's, which a private one ignores.)
    var mustRevalidate = false
    /// `public`: storable even for an authenticated request.
    var isPublic = false
    /// `private` (with or without field names): meant for one user, so served only to the user it was made for.
    var isPrivate = false
    /// `stale-while-revalidate=N` (RFC 5861 3): a response stale by at most N seconds may be served while a
    /// revalidation runs in the background.
    var staleWhileRevalidate: TimeInterval?
    /// `stale-if-error=N` (RFC 5861 4): a response stale by at most N seconds may be served when its revalidation
    /// meets an error (a 500, 502, 503 or 504, or no response at all).
    var staleIfError: TimeInterval?
    /// `s-maxage=N`: a shared cache's lifetime; a private cache ignores it for freshness, but it marks a response
    /// to an authenticated request as storable (RFC 9111 3.5).
    var sharedMaxAge: TimeInterval?
    /// `only-if-cached` (a request wants no network at all).
    var onlyIfCached = false
    /// `must-understand` (RFC 9111 5.2.2.3): stored only by a cache that implements the status code's caching rules,
    /// which then ignores the `no-store` sent with it for caches that do not know the directive.
    var mustUnderstand = false

    /// Whether `no-store` holds: sent, and not overridden by `must-understand` (whose response a cache stores only for
    /// a status it implements, ignoring the `no-store` sent for caches that do not know the directive).
    var forbidsStoring: Bool { noStore && !mustUnderstand }

    /// Whether any directive at all was recognised.
    var isEmpty: Bool { self == CacheControl() }

    init() {}

    /// Parses the comma-separated directives of `value` (names case-insensitive, values quoted or not).
    init(_ value: String?) {
        guard let value, !value.isEmpty else { return }
        for item in Self.split(value) {
            let parts = item.split(separator: "=", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard let name = parts.first?.lowercased(), !name.isEmpty else { continue }
            let argument = parts.count > 1 ? parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            let seconds = argument.flatMap(Self.deltaSeconds)
            switch name {
            case "max-age": if maxAge == nil { maxAge = seconds ?? 0 }  // an invalid value means stale (RFC 9111 4.2.1)
            case "s-maxage": if sharedMaxAge == nil { sharedMaxAge = seconds ?? 0 }
            case "max-stale": if maxStale == nil { maxStale = argument == nil ? .infinity : (seconds ?? 0) }
            case "min-fresh": if minFresh == nil { minFresh = seconds ?? 0 }
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "must-revalidate": mustRevalidate = true
            case "public": isPublic = true
            case "private": isPrivate = true
            case "stale-while-revalidate":
                if staleWhileRevalidate == nil, let seconds { staleWhileRevalidate = seconds }
            case "stale-if-error": if staleIfError == nil, let seconds { staleIfError = seconds }
            case "only-if-cached": onlyIfCached = true
            case "must-understand": mustUnderstand = true
            default: break
            }
        }
    }

    /// The items of a field value, split on commas outside quoted strings.
    private static func split(_ value: String) -> [String] {
        var items: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in value {
            // RFC 9110 5.6.4: in a quoted string, a backslash makes the next character plain (`\"` ends nothing).
            if escaped {
                escaped = false
            } else if quoted && character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            }
            if character == "," && !quoted {
                items.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        items.append(current)
        return items.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// A delta-seconds value: digits only; one too large to hold is a very long time (RFC 9111 1.2.2).
    static func deltaSeconds(_ text: String) -> TimeInterval? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return TimeInterval(text).map { min($0, 2_147_483_648) }
    }
}
