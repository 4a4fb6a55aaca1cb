import Foundation
import NIOCore
import NIOHTTP1

/// The endpoints that challenge: HTTP Digest, a challenge followed by a redirect, and a proxy that wants credentials.
extension HTTPBinHandler {
    /// - `/digest-auth/QOP/USER/PASS`: 200 for a valid RFC 7616 Digest answer (MD5, `qop=auth`), else 401 with a
    ///   `Digest` challenge.
    /// - `/auth-redirect-to/USER/PASS?url=U`: 302 to `U` once Basic credentials match, else 401 with a `Basic`
    ///   challenge.
    /// - `/proxy-auth/USER/PASS`: plays a proxy: 200 once `Proxy-Authorization` carries the Basic credentials, else
    ///   407 with a `Proxy-Authenticate` challenge.
    func authenticate(_ context: ChannelHandlerContext, _ request: Request, parts: [String]) {
        switch parts[0] {
        case "digest-auth":
            let user = parts.count > 2 ? parts[2] : "", password = parts.count > 3 ? parts[3] : ""
            if Self.digestAnswerIsValid(
                request.header("Authorization"), method: request.method, user: user,
                password: password)
            {
                return respond(context, request, json: ["authenticated": true, "user": user])
            }
            var headers = HTTPHeaders()
            let nonce = String(UInt64.random(in: 1...UInt64.max), radix: 16)
            headers.add(
                name: "WWW-Authenticate",
                value:
                    "Digest realm=\"\(Self.digestRealm)\", qop=\"auth\", nonce=\"\(nonce)\", opaque=\"0f0f\", algorithm=MD5"
            )
            respond(context, request, status: .unauthorized, json: ["authenticated": false], extraHeaders: headers)
        case "auth-redirect-to":
            let user = parts.count > 1 ? parts[1] : "", password = parts.count > 2 ? parts[2] : ""
            guard request.header("Authorization") == Self.basic(user, password) else {
                return challenge(context, request, status: .unauthorized, field: "WWW-Authenticate")
            }
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: request.query["url"] ?? "/get")
            respond(context, request, status: .found, body: Data(), contentType: nil, extraHeaders: headers)
        default:
            let user = parts.count > 1 ? parts[1] : "", password = parts.count > 2 ? parts[2] : ""
            guard request.header("Proxy-Authorization") == Self.basic(user, password) else {
                return challenge(context, request, status: .proxyAuthenticationRequired, field: "Proxy-Authenticate")
            }
            respond(context, request, json: ["authenticated": true, "proxy": true, "user": user])
        }
    }

    private static let digestRealm = "digest@sessionkit"

    private static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    private func challenge(
        _ context: ChannelHandlerContext, _ request: Request, status: HTTPResponseStatus, field: String
    ) {
        var headers = HTTPHeaders()
        headers.add(name: field, value: "Basic realm=\"Fake Realm\"")
        respond(context, request, status: status, json: ["authenticated": false], extraHeaders: headers)
    }

    /// Whether `authorization` is a correct Digest answer (RFC 7616, MD5, `qop=auth`) for `user` and `password`.
    private static func digestAnswerIsValid(
        _ authorization: String?, method: String, user: String, password: String
    ) -> Bool {
        guard let authorization, authorization.hasPrefix("Digest ") else { return false }
        var fields: [String: String] = [:]
        var rest = Substring(authorization.dropFirst("Digest ".count))
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "," }
            guard let equals = rest.firstIndex(of: "=") else { break }
            let key = rest[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            rest = rest[rest.index(after: equals)...]
            if rest.first == "\"" {
                rest = rest.dropFirst()
                let value = rest.prefix { $0 != "\"" }
                fields[key] = String(value)
                rest = rest.dropFirst(value.count + 1)
            } else {
                let value = rest.prefix { $0 != "," }
                fields[key] = value.trimmingCharacters(in: .whitespaces)
                rest = rest.dropFirst(value.count)
            }
        }
        guard fields["username"] == user, fields["realm"] == digestRealm, let nonce = fields["nonce"],
            let uri = fields["uri"], let nc = fields["nc"], let cnonce = fields["cnonce"], fields["qop"] == "auth",
            let answer = fields["response"]
        else { return false }
        let ha1 = MD5.hex("\(user):\(digestRealm):\(password)")
        let ha2 = MD5.hex("\(method):\(uri)")
        return answer == MD5.hex("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)")
    }
}
