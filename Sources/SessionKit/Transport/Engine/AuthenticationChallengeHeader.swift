import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The first challenge of a `WWW-Authenticate` or `Proxy-Authenticate` field (RFC 9110 11.6.1 and 11.7.1): its
/// scheme and realm, as the curl transport needs them to build a `URLAuthenticationChallenge`.
struct AuthenticationChallengeHeader: Equatable {
    /// The scheme as sent (`Basic`, `Digest`, `Bearer`…).
    let scheme: String
    /// The `realm` parameter, unquoted, when there is one.
    let realm: String?
    /// Whether the challenge came from a proxy (a 407).
    let isProxy: Bool

    /// The challenge of `response`: a 401 with `WWW-Authenticate` or a 407 with `Proxy-Authenticate`; nil for any
    /// other response, or a field without a scheme.
    init?(response: HTTPURLResponse) {
        let field: String
        switch response.statusCode {
        case 401: field = "WWW-Authenticate"
        case 407: field = "Proxy-Authenticate"
        default: return nil
        }
        guard let value = response.value(forHTTPHeaderField: field) else { return nil }
        self.init(fieldValue: value, isProxy: response.statusCode == 407)
    }

    /// The schemes the transport answers with a credential (``CurlTransfer/Credential``: libcurl's Basic and
    /// Digest); a challenge of another scheme (`Bearer`, `NTLM`, `Negotiate`, an unknown one) comes after them when a
    /// field offers several, so that the protection space put to the manager is the one its credential answers.
    private static let answerableSchemes: Set<String> = ["basic", "digest"]

    /// Parses a field value such as `Basic realm="Fake Realm", charset="UTF-8"`: its first challenge whose scheme
    /// the transport answers (`Basic`, `Digest`), or else its first challenge. A field may hold several
    /// (RFC 9110 11.6.1), and several fields arrive joined with commas: `Bearer realm="api", Basic realm="site"` is
    /// the Basic challenge, as URLSession offers the one it can answer. Read by Unicode scalars, not `Character`s: a
    /// combining mark after a quote must not hide the quote.
    init?(fieldValue: String, isProxy: Bool) {
        let scalars = Array(fieldValue.unicodeScalars)
        let starts = Self.challengeStarts(in: scalars)
        guard let first = starts.first else { return nil }
        let chosen =
            starts.first {
                Self.answerableSchemes.contains(String(String.UnicodeScalarView(scalars[$0])).asciiLowercased)
            } ?? first
        self.scheme = String(String.UnicodeScalarView(scalars[chosen]))
        self.isProxy = isProxy
        self.realm = Self.parameter(named: "realm", in: scalars[chosen.upperBound...])
    }

    /// The ranges of the schemes of the challenges in `scalars`: the first token, and each token after a comma that
    /// is not an auth-param's name (not followed by `=`). Quoted strings are skipped, so a comma or a token inside one
    /// starts nothing.
    private static func challengeStarts(in scalars: [Unicode.Scalar]) -> [Range<Int>] {
        var starts: [Range<Int>] = []
        var index = 0
        var atChallengeStart = true
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\"" {
                // A quoted string: up to its closing quote, escapes included.
                index += 1
                while index < scalars.count, scalars[index] != "\"" {
                    index += scalars[index] == "\\" ? 2 : 1
                }
                index += 1
                atChallengeStart = false
            } else if scalar == "," {
                atChallengeStart = true
                index += 1
            } else if scalar == " " || scalar == "\t" {
                index += 1
            } else if isToken(scalar) {
                let start = index
                while index < scalars.count, isToken(scalars[index]) { index += 1 }
                var next = index
                while next < scalars.count, scalars[next] == " " || scalars[next] == "\t" { next += 1 }
                // `token =` is an auth-param (or a token68's padding); any other token after a comma is a scheme.
                let isParameter = next < scalars.count && scalars[next] == "="
                if atChallengeStart && !isParameter { starts.append(start..<index) }
                atChallengeStart = false
            } else {
                atChallengeStart = false
                index += 1
            }
        }
        return starts
    }

    /// The field value of this challenge as a server would send it: `scheme realm="…"` (the realm quoted and escaped).
    var fieldValue: String {
        guard let realm else { return scheme }
        var quoted = ""
        for scalar in realm.unicodeScalars {
            if scalar == "\"" || scalar == "\\" { quoted.unicodeScalars.append("\\") }
            quoted.unicodeScalars.append(scalar)
        }
        return "\(scheme) realm=\"\(quoted)\""
    }

    /// The `URLAuthenticationMethod…` constant of the scheme; schemes URLSession has no constant for map to the
    /// default method.
    var authenticationMethod: String {
        switch scheme.lowercased() {
        case "basic": return NSURLAuthenticationMethodHTTPBasic
        case "digest": return NSURLAuthenticationMethodHTTPDigest
        case "ntlm": return NSURLAuthenticationMethodNTLM
        case "negotiate": return NSURLAuthenticationMethodNegotiate
        default: return NSURLAuthenticationMethodDefault
        }
    }

    /// The protection space of this challenge for a request to `url` (for a proxy: through the proxy at `proxyURL`).
    func protectionSpace(for url: URL, proxyURL: URL?) -> URLProtectionSpace {
        let scheme = url.scheme?.lowercased() ?? "http"
        if isProxy, let proxyURL, let host = proxyURL.host {
            return URLProtectionSpace(
                proxyHost: host, port: proxyURL.port ?? (proxyURL.scheme?.lowercased() == "https" ? 443 : 1080),
                type: scheme == "https" ? NSURLProtectionSpaceHTTPSProxy : NSURLProtectionSpaceHTTPProxy,
                realm: realm, authenticationMethod: authenticationMethod)
        }
        return URLProtectionSpace(
            host: url.host ?? "", port: url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme,
            realm: realm, authenticationMethod: authenticationMethod)
    }

    /// The value of the auth-param `name` in the parameters that follow a scheme (a token or a quoted string).
    private static func parameter(named name: String, in parameters: ArraySlice<Unicode.Scalar>) -> String? {
        var rest = parameters
        func skip(_ separators: Set<Unicode.Scalar>) {
            while let first = rest.first, separators.contains(first) { rest = rest.dropFirst() }
        }
        while !rest.isEmpty {
            skip([" ", "\t", ","])
            let key = rest.prefix { isToken($0) }
            guard !key.isEmpty else { return nil }
            rest = rest.dropFirst(key.count)
            skip([" ", "\t"])
            guard rest.first == "=" else { return nil }  // a token68 or the next challenge: no more parameters
            rest = rest.dropFirst()
            skip([" ", "\t"])
            var value = String.UnicodeScalarView()
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let scalar = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(scalar)
                        escaped = false
                    } else if scalar == "\\" {
                        escaped = true
                    } else if scalar == "\"" {
                        break
                    } else {
                        value.append(scalar)
                    }
                }
            } else {
                let token = rest.prefix { $0 != "," && $0 != " " && $0 != "\t" }
                value.append(contentsOf: token)
                rest = rest.dropFirst(token.count)
            }
            if String(String.UnicodeScalarView(key)).lowercased() == name { return String(value) }
        }
        return nil
    }

    /// Whether `scalar` may appear in an RFC 9110 token.
    private static func isToken(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.value > 0x20, scalar.value < 0x7F else { return false }
        return !"\"(),/:;<=>?@[\\]{}".unicodeScalars.contains(scalar)
    }
}

/// The sender a `URLAuthenticationChallenge` needs; SessionKit's challenge closures answer by their return value.
final class ChallengeSender: NSObject, URLAuthenticationChallengeSender {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
