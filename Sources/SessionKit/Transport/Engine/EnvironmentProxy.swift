import Foundation

/// The proxy libcurl 7.88 takes from the environment for a URL when the configuration names none: `http_proxy` for
/// `http` (never `HTTP_PROXY`, which a CGI program's `Proxy:` request field could set), `https_proxy` or
/// `HTTPS_PROXY` for `https`, else `all_proxy` or `ALL_PROXY`; none for a host `no_proxy` (or `NO_PROXY`) names.
///
/// The transfer leaves the choice to libcurl; the task needs the same answer to say whose protection space a 407
/// challenge is (the proxy's, not the origin's) and to bind the proxy's credential to that proxy.
enum EnvironmentProxy {
    /// The proxy for `url` as `scheme://host:port`: `configured` (the configuration's for its scheme), else the
    /// environment's (libcurl's default port when it gives none: 1080, 443 for an `https` proxy); nil when `url`
    /// goes direct (not HTTP or HTTPS, or a host `no_proxy` names, which libcurl reaches past a configured proxy too).
    static func proxy(
        for url: URL?, configured: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        guard let url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            !goesDirect(url, environment: environment)
        else { return nil }
        if let configured { return configured }
        // libcurl's `curl_getenv` takes an empty variable for an unset one.
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let name = "\(scheme)_proxy"
        let value = variable(name) ?? (name == "http_proxy" ? nil : variable(name.uppercased()))
        guard let proxy = value ?? variable("all_proxy") ?? variable("ALL_PROXY") else { return nil }
        return normalized(proxy)
    }

    /// Whether `url`'s host is one `no_proxy` (or `NO_PROXY`) names: libcurl then reaches it directly, past the
    /// configuration's proxy too.
    static func goesDirect(_ url: URL?, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let host = url?.host else { return false }
        let noProxy = [environment["no_proxy"], environment["NO_PROXY"]].lazy.compactMap { $0 }.first { !$0.isEmpty }
        return noProxy.map { bypasses(host, $0) } ?? false
    }

    /// `proxy` with a scheme and a port: `proxy:3128` is `http://proxy:3128`, `http://proxy` is `http://proxy:1080`.
    static func normalized(_ proxy: String) -> String? {
        let withScheme = proxy.contains("://") ? proxy : "http://" + proxy
        guard var components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            return nil
        }
        let scheme = components.scheme?.lowercased() ?? "http"
        if components.port == nil { components.port = scheme == "https" ? 443 : 1080 }
        components.scheme = scheme
        components.path = ""
        components.query = nil
        components.fragment = nil
        return components.string
    }

    /// Whether `noProxy` (a list of names, addresses and IPv4 ranges, separated by commas or white space; `*` alone
    /// for all) makes `host` go direct: a name matches itself and the names that end with it after a dot (a leading dot
    /// is ignored), an address only itself or its range, case aside.
    static func bypasses(_ host: String, _ noProxy: String) -> Bool {
        if noProxy == "*" { return true }
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        let address = ipv4Value(name)
        let isAddress = address != nil || name.contains(":")
        let separators = CharacterSet(charactersIn: ", \t")
        for token in noProxy.components(separatedBy: separators) where !token.isEmpty {
            var token = token.lowercased()
            if isAddress {
                if let slash = token.firstIndex(of: "/") {
                    if let address, let network = ipv4Value(String(token[..<slash])),
                        let bits = Int(token[token.index(after: slash)...]), (0...32).contains(bits)
                    {
                        // As libcurl's `Curl_cidr4_match`: `/0` and `/32` compare the whole address.
                        let mask: UInt32 = bits == 0 ? ~0 : ~UInt32(0) << (32 - bits)
                        if address & mask == network & mask { return true }
                    }
                } else if token == name {
                    return true
                }
                continue
            }
            if token.hasPrefix(".") { token.removeFirst() }
            if token.hasSuffix(".") { token.removeLast() }
            guard !token.isEmpty else { continue }
            if name == token || name.hasSuffix("." + token) { return true }
        }
        return false
    }

    /// The value of a dotted IPv4 address, as `inet_pton` (and libcurl's `Curl_inet_pton`) reads one, or nil.
    private static func ipv4Value(_ text: String) -> UInt32? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return UInt32(bigEndian: address.s_addr)
    }
}
