import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the curl transport takes from a session configuration, read once per manager (decision 4 of
/// `Docs/Architecture.md`: the configuration URLSession would have honoured).
struct CurlSessionSettings: @unchecked Sendable {
    // @unchecked Sendable: immutable after `init`; the cookie and credential storages are Foundation's thread-safe
    // shared stores.
    let additionalHeaders: [String: String]
    /// The configuration's cookie storage under RFC 6265's rules; nil when the configuration sets no cookies.
    let cookies: CookieJar?
    let idleTimeout: TimeInterval
    let resourceTimeout: TimeInterval
    let maximumConnectionsPerHost: Int
    /// The proxy for `http` and for `https` URLs, as `http://host:port`; nil leaves libcurl's own choice (the
    /// `http_proxy`, `https_proxy` and `no_proxy` environment).
    let proxies: (http: String?, https: String?)
    let credentialStorage: URLCredentialStorage?
    /// The HTTP cache over the configuration's `URLCache` and `requestCachePolicy`; nil without a `URLCache`.
    let cache: ResponseCache?

    init(_ configuration: URLSessionConfiguration) {
        additionalHeaders = configuration.additionalHeaderFields
        cookies = CookieJar(configuration)
        idleTimeout = configuration.timeoutIntervalForRequest
        resourceTimeout = configuration.timeoutIntervalForResource
        maximumConnectionsPerHost = configuration.httpMaximumConnectionsPerHost
        proxies = Self.proxies(in: configuration)
        credentialStorage = configuration.urlCredentialStorage
        cache = ResponseCache(configuration: configuration)
    }

    /// The `http` and `https` proxies of a configuration's `connectionProxyDictionary` (`HTTPEnable`/`HTTPProxy`/
    /// `HTTPPort`, `HTTPSEnable`/`HTTPSProxy`/`HTTPSPort`), as `http://host:port` (port 1080, libcurl's, when neither
    /// the dictionary nor the host gives one: written out, a 407's protection space names the port libcurl uses); a
    /// scheme without one of its own goes through the SOCKS5 proxy when there is one (``socksProxy(in:)``).
    static func proxies(in configuration: URLSessionConfiguration) -> (http: String?, https: String?) {
        let dictionary = configuration.connectionProxyDictionary ?? [:]
        func value(_ key: String) -> Any? { dictionary.first { ($0.key.base as? String) == key }?.value }
        func proxy(_ prefix: String) -> String? {
            let enabled =
                (value("\(prefix)Enable") as? NSNumber)?.boolValue ?? (value("\(prefix)Enable") as? Bool) ?? false
            guard enabled, let host = value("\(prefix)Proxy") as? String, !host.isEmpty else { return nil }
            guard let port = (value("\(prefix)Port") as? NSNumber)?.intValue ?? (value("\(prefix)Port") as? Int) else {
                // Without a port of its own: libcurl's (a `host:port` written in `HTTPProxy` keeps its port).
                let proxy = "http://\(bracketed(host))"
                return EnvironmentProxy.normalized(proxy) ?? proxy
            }
            return "http://\(bracketed(host)):\(port)"
        }
        let socks = socksProxy(in: configuration)
        return (proxy("HTTP") ?? socks, proxy("HTTPS") ?? socks)
    }

    /// The SOCKS5 proxy of a configuration's `connectionProxyDictionary` (`SOCKSEnable`, `SOCKSProxy`, `SOCKSPort`,
    /// default 1080; credentials under `SOCKSUser`/`SOCKSPassword` or CFNetwork's `kCFStreamPropertySOCKSUser`/
    /// `kCFStreamPropertySOCKSPassword`), as `socks5h://user:password@host:port`: the proxy resolves the host names.
    static func socksProxy(in configuration: URLSessionConfiguration) -> String? {
        let dictionary = configuration.connectionProxyDictionary ?? [:]
        func value(_ key: String) -> Any? { dictionary.first { ($0.key.base as? String) == key }?.value }
        let enabled = (value("SOCKSEnable") as? NSNumber)?.boolValue ?? (value("SOCKSEnable") as? Bool) ?? false
        guard enabled, let host = value("SOCKSProxy") as? String, !host.isEmpty else { return nil }
        let port = (value("SOCKSPort") as? NSNumber)?.intValue ?? (value("SOCKSPort") as? Int) ?? 1080
        // Percent-encoded: libcurl decodes the credentials of a proxy URL.
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        func encoded(_ key: String, _ alias: String) -> String? {
            ((value(key) ?? value(alias)) as? String)?.addingPercentEncoding(withAllowedCharacters: allowed)
        }
        let user = encoded("SOCKSUser", "kCFStreamPropertySOCKSUser")
        let password = encoded("SOCKSPassword", "kCFStreamPropertySOCKSPassword")
        let credentials = user.map { "\($0)" + (password.map { ":\($0)" } ?? "") + "@" } ?? ""
        return "socks5h://\(credentials)\(bracketed(host)):\(port)"
    }

    /// A proxy's host as a URL names it: an IPv6 address in brackets (a name, a `host:port` or a bracketed address as
    /// it is).
    private static func bracketed(_ host: String) -> String {
        var address = in6_addr()
        return inet_pton(AF_INET6, host, &address) == 1 ? "[\(host)]" : host
    }
}
