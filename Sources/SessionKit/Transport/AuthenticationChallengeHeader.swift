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

    /// Parses the first challenge of a field value such as `Basic realm="Fake Realm", charset="UTF-8"`.
    init?(fieldValue: String, isProxy: Bool) {
        var rest = Substring(fieldValue).drop { $0 == " " || $0 == "\t" || $0 == "," }
        let scheme = rest.prefix { Self.isTokenCharacter($0) }
        guard !scheme.isEmpty else { return nil }
        rest = rest.dropFirst(scheme.count)
        self.scheme = String(scheme)
        self.isProxy = isProxy
        self.realm = Self.parameter(named: "realm", in: rest)
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
                proxyHost: host, port: proxyURL.port ?? 80,
                type: scheme == "https" ? NSURLProtectionSpaceHTTPSProxy : NSURLProtectionSpaceHTTPProxy,
                realm: realm, authenticationMethod: authenticationMethod)
        }
        return URLProtectionSpace(
            host: url.host ?? "", port: url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme,
            realm: realm, authenticationMethod: authenticationMethod)
    }

    /// The value of the auth-param `name` in the parameters that follow a scheme (a token or a quoted string).
    private static func parameter(named name: String, in parameters: Substring) -> String? {
        var rest = parameters
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            let key = rest.prefix { isTokenCharacter($0) }
            guard !key.isEmpty else { return nil }
            rest = rest.dropFirst(key.count).drop { $0 == " " || $0 == "\t" }
            guard rest.first == "=" else { return nil }  // a token68 or the next challenge: no more parameters
            rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
            } else {
                value = String(rest.prefix { $0 != "," && $0 != " " && $0 != "\t" })
                rest = rest.dropFirst(value.count)
            }
            if key.lowercased() == name { return value }
        }
        return nil
    }

    /// Whether `character` may appear in an RFC 9110 token.
    private static func isTokenCharacter(_ character: Character) -> Bool {
        guard let ascii = character.asciiValue, ascii > 0x20, ascii < 0x7F else { return false }
        return !"\"(),/:;<=>?@[\\]{}".contains(character)
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
