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
    let cookieStorage: HTTPCookieStorage?
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
        var headers: [String: String] = [:]
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            if let name = name.base as? String, let value = value as? String { headers[name] = value }
        }
        additionalHeaders = headers
        cookieStorage = configuration.httpShouldSetCookies ? configuration.httpCookieStorage : nil
        idleTimeout = configuration.timeoutIntervalForRequest
        resourceTimeout = configuration.timeoutIntervalForResource
        maximumConnectionsPerHost = configuration.httpMaximumConnectionsPerHost
        proxies = Self.proxies(in: configuration)
        credentialStorage = configuration.urlCredentialStorage
        cache = ResponseCache(configuration: configuration)
    }

    /// The `http` and `https` proxies of a configuration's `connectionProxyDictionary` (`HTTPEnable`/`HTTPProxy`/
    /// `HTTPPort`, `HTTPSEnable`/`HTTPSProxy`/`HTTPSPort`), as `http://host:port`.
    static func proxies(in configuration: URLSessionConfiguration) -> (http: String?, https: String?) {
        let dictionary = configuration.connectionProxyDictionary ?? [:]
        func value(_ key: String) -> Any? { dictionary.first { ($0.key.base as? String) == key }?.value }
        func proxy(_ prefix: String) -> String? {
            let enabled =
                (value("\(prefix)Enable") as? NSNumber)?.boolValue ?? (value("\(prefix)Enable") as? Bool) ?? false
            guard enabled, let host = value("\(prefix)Proxy") as? String, !host.isEmpty else { return nil }
            let port = (value("\(prefix)Port") as? NSNumber)?.intValue ?? (value("\(prefix)Port") as? Int)
            return "http://\(host)" + (port.map { ":\($0)" } ?? "")
        }
        return (proxy("HTTP"), proxy("HTTPS"))
    }
}
