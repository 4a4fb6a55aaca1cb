import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLRequest {
    /// The text that stands for a secret in ``curlDescription(cookies:policy:bodyFile:includingSecrets:)``, as in
    /// ``LoggingEventMonitor``.
    static let curlRedactedSecret = "<redacted>"

    /// The `curl` command line that sends this request: method, headers, body, cookies, and `--pinnedpubkey` for a
    /// policy that pins public-key hashes, every argument shell-quoted.
    ///
    /// Secrets are redacted unless `includingSecrets` is true, so that the line can be logged: the credentials of
    /// `Authorization` and `Proxy-Authorization` (the scheme stays: `Bearer <redacted>`), the value of every cookie
    /// (`Cookie`, `Set-Cookie` and the store's cookies; names stay: `session=<redacted>`) and the URL's password
    /// (`redacted`, as ``LoggingEventMonitor`` writes it).
    /// Header names, user names and everything else are kept, so the line still shows what was sent.
    ///
    /// ```swift
    /// print(request.curlDescription())
    /// // curl -X 'POST' 'https://api.example.com/v1/users' -H 'Authorization: Bearer <redacted>' --data-binary '{"name":"Ada"}'
    /// print(request.curlDescription(includingSecrets: true))  // the real token: for a terminal, not a log
    /// ```
    ///
    /// - Parameters:
    ///   - cookies: The store whose cookies for the URL are added (as the request would send them); nil for none.
    ///   - policy: A policy whose public-key hashes become `--pinnedpubkey`.
    ///   - bodyFile: A file holding the body (a streamed or file upload): `--data-binary @file`.
    ///   - includingSecrets: Print credentials, cookie values and the URL's password in clear. Default false.
    public func curlDescription(
        cookies: HTTPCookieStorage? = nil, policy: SecurityPolicy? = nil, bodyFile: URL? = nil,
        includingSecrets: Bool = false
    ) -> String {
        guard let url else { return "curl" }
        var arguments = ["curl"]
        let method = httpMethod ?? "GET"
        if method == "HEAD" {
            arguments.append("--head")
        } else if method != "GET" {
            arguments += ["-X", Self.quoted(method)]
        }
        arguments.append(Self.quoted(includingSecrets ? url.absoluteString : Self.redactingPassword(of: url)))
        for (field, value) in (allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key })
        where field.lowercased() != "cookie" {
            let shown = includingSecrets ? value : Self.redacting(value, ofHeader: field)
            arguments += ["-H", Self.quoted("\(field): \(shown)")]
        }
        var cookieHeader = value(forHTTPHeaderField: "Cookie")
        if cookieHeader == nil, httpShouldHandleCookies, let cookies {
            // The cookies the curl transport would send (RFC 6265 5.4), in its order.
            cookieHeader = CookieJar(storage: cookies).header(for: url)
        }
        if let cookieHeader {
            arguments += [
                "-b", Self.quoted(includingSecrets ? cookieHeader : Self.redactingCookieValues(cookieHeader)),
            ]
        }
        if let bodyFile {
            arguments += ["--data-binary", Self.quoted("@" + bodyFile.path)]
        } else if let body = httpBody, !body.isEmpty {
            let text = String(data: body, encoding: .utf8) ?? "<\(body.count) bytes of binary data>"
            arguments += ["--data-binary", Self.quoted(text)]
        }
        if let policy, policy.pinningMode == .publicKey {
            let pins = policy.pinnedPublicKeyHashes.union(
                policy.pinnedCertificates.compactMap { try? Certificate(der: $0).publicKeyPin })
            if !pins.isEmpty { arguments += ["--pinnedpubkey", Self.quoted(pins.sorted().joined(separator: ";"))] }
        }
        if timeoutInterval != 60 { arguments += ["--max-time", String(format: "%g", timeoutInterval)] }
        return arguments.joined(separator: " ")
    }

    /// `value` of the header `field` with its secret replaced: the credentials of an authorization header (after
    /// the scheme), the values of a cookie header; any other header unchanged.
    static func redacting(_ value: String, ofHeader field: String) -> String {
        switch field.lowercased() {
        case "authorization", "proxy-authorization":
            let scheme = value.prefix { $0 != " " }
            return scheme.count < value.count ? "\(scheme) \(curlRedactedSecret)" : curlRedactedSecret
        case "cookie":
            return redactingCookieValues(value)
        case "set-cookie":
            // One cookie and its attributes: only the cookie's own value is secret.
            let parts = value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)
            let cookie = redactingCookieValues(String(parts.first ?? ""))
            return parts.count > 1 ? cookie + ";" + parts[1] : cookie
        default:
            return value
        }
    }

    /// `name=value; name=value` with every value replaced; the names stay.
    static func redactingCookieValues(_ header: String) -> String {
        header.split(separator: ";", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            return pair[...equals] + curlRedactedSecret
        }.joined(separator: ";")
    }

    /// The text of `url` with its password, if any, replaced by `redacted`.
    static func redactingPassword(of url: URL) -> String {
        guard url.password != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return url.absoluteString
        }
        components.password = "redacted"
        return components.string ?? curlRedactedSecret
    }

    /// `text` in single quotes for a POSIX shell; a single quote inside becomes `'\''`.
    static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
