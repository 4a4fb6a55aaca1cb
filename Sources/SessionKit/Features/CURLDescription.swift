import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// The `curl` command line that sends this request: method, headers, body, cookies, and `--pinnedpubkey` for a
    /// policy that pins public-key hashes, every argument shell-quoted.
    ///
    /// ```swift
    /// print(request.curlDescription())
    /// // curl -X 'POST' 'https://api.example.com/v1/users' -H 'Content-Type: application/json' --data-binary '{"name":"Ada"}'
    /// ```
    ///
    /// - Parameters:
    ///   - cookies: The store whose cookies for the URL are added (as the request would send them); nil for none.
    ///   - policy: A policy whose public-key hashes become `--pinnedpubkey`.
    ///   - bodyFile: A file holding the body (a streamed or file upload): `--data-binary @file`.
    public func curlDescription(cookies: HTTPCookieStorage? = nil, policy: SecurityPolicy? = nil, bodyFile: URL? = nil) -> String {
        guard let url else { return "curl" }
        var arguments = ["curl"]
        let method = httpMethod ?? "GET"
        if method == "HEAD" {
            arguments.append("--head")
        } else if method != "GET" {
            arguments += ["-X", Self.quoted(method)]
        }
        arguments.append(Self.quoted(url.absoluteString))
        for (field, value) in (allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) where field.lowercased() != "cookie" {
            arguments += ["-H", Self.quoted("\(field): \(value)")]
        }
        var cookieHeader = value(forHTTPHeaderField: "Cookie")
        if cookieHeader == nil, httpShouldHandleCookies, let stored = cookies?.cookies(for: url), !stored.isEmpty {
            cookieHeader = stored.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
        }
        if let cookieHeader { arguments += ["-b", Self.quoted(cookieHeader)] }
        if let bodyFile {
            arguments += ["--data-binary", Self.quoted("@" + bodyFile.path)]
        } else if let body = httpBody, !body.isEmpty {
            let text = String(data: body, encoding: .utf8) ?? "<\(body.count) bytes of binary data>"
            arguments += ["--data-binary", Self.quoted(text)]
        }
        if let policy, policy.pinningMode == .publicKey {
            let pins = policy.pinnedPublicKeyHashes.union(policy.pinnedCertificates.compactMap { try? Certificate(der: $0).publicKeyPin })
            if !pins.isEmpty { arguments += ["--pinnedpubkey", Self.quoted(pins.sorted().joined(separator: ";"))] }
        }
        if timeoutInterval != 60 { arguments += ["--max-time", String(format: "%g", timeoutInterval)] }
        return arguments.joined(separator: " ")
    }

    /// `text` in single quotes for a POSIX shell; a single quote inside becomes `'\''`.
    static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
