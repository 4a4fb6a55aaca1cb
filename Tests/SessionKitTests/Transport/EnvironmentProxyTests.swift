import Foundation
import XCTest

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The proxy libcurl 7.88 takes from the environment, as ``EnvironmentProxy`` works it out for a 407's protection
/// space: the variables in libcurl's order, `no_proxy`'s matching, and the default port.
final class EnvironmentProxyTests: XCTestCase {
    private func proxy(_ url: String, _ environment: [String: String]) -> String? {
        EnvironmentProxy.proxy(for: URL(string: url), environment: environment)
    }

    func testTheVariablesInLibcurlsOrder() {
        XCTAssertEqual(proxy("http://a.test/", ["http_proxy": "http://p:1"]), "http://p:1")
        XCTAssertNil(proxy("http://a.test/", ["HTTP_PROXY": "http://p:1"]), "HTTP_PROXY is never read (httpoxy)")
        XCTAssertEqual(proxy("https://a.test/", ["HTTPS_PROXY": "http://p:2"]), "http://p:2")
        XCTAssertEqual(
            proxy("https://a.test/", ["https_proxy": "http://p:3", "HTTPS_PROXY": "http://p:2"]), "http://p:3")
        XCTAssertEqual(proxy("https://a.test/", ["ALL_PROXY": "socks5h://p:4"]), "socks5h://p:4")
        XCTAssertEqual(proxy("http://a.test/", ["all_proxy": "http://p:5", "ALL_PROXY": "http://p:4"]), "http://p:5")
        XCTAssertEqual(
            proxy("http://a.test/", ["http_proxy": "", "all_proxy": "http://p:5"]), "http://p:5",
            "empty is unset, as libcurl's curl_getenv reads it")
        XCTAssertEqual(proxy("https://a.test/", ["https_proxy": "", "HTTPS_PROXY": "http://p:2"]), "http://p:2")
        XCTAssertNil(proxy("https://a.test/", ["all_proxy": "", "ALL_PROXY": ""]))
        XCTAssertNil(proxy("https://a.test/", ["no_proxy": "", "NO_PROXY": "a.test", "https_proxy": "http://p:3"]))
        XCTAssertTrue(
            EnvironmentProxy.goesDirect(URL(string: "http://www.a.test/"), environment: ["NO_PROXY": "a.test"]))
        XCTAssertFalse(EnvironmentProxy.goesDirect(URL(string: "http://b.test/"), environment: ["NO_PROXY": "a.test"]))
        XCTAssertNil(proxy("http+unix://%2Ftmp%2Fs/x", ["all_proxy": "http://p:5"]), "a socket goes direct")
        XCTAssertNil(proxy("http://a.test/", [:]))
    }

    func testTheDefaultSchemeAndPort() {
        XCTAssertEqual(EnvironmentProxy.normalized("proxy.test:3128"), "http://proxy.test:3128")
        XCTAssertEqual(EnvironmentProxy.normalized("http://proxy.test"), "http://proxy.test:1080")
        XCTAssertEqual(EnvironmentProxy.normalized("HTTPS://proxy.test/"), "https://proxy.test:443")
        XCTAssertEqual(EnvironmentProxy.normalized("http://user:pw@proxy.test:8080"), "http://user:pw@proxy.test:8080")
        XCTAssertNil(EnvironmentProxy.normalized("http://"))
    }

    /// A configuration's proxy without a port is written with libcurl's (1080), so that a 407's protection space names
    /// the port the connection went to; a `host:port` keeps its port; an IPv6 address is bracketed.
    func testTheConfigurationsProxyWithoutAPortIsLibcurlsDefault() {
        func proxies(_ dictionary: [AnyHashable: Any]) -> (http: String?, https: String?) {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.connectionProxyDictionary = dictionary
            return CurlSessionSettings.proxies(in: configuration)
        }
        let portless = proxies([
            "HTTPEnable": true, "HTTPProxy": "proxy.test", "HTTPSEnable": true, "HTTPSProxy": "::1",
        ])
        XCTAssertEqual(portless.http, "http://proxy.test:1080")
        XCTAssertEqual(portless.https, "http://[::1]:1080")
        XCTAssertEqual(
            proxies(["HTTPEnable": true, "HTTPProxy": "proxy.test", "HTTPPort": 3128]).http, "http://proxy.test:3128")
        XCTAssertEqual(
            proxies(["HTTPEnable": true, "HTTPProxy": "proxy.test:3128"]).http, "http://proxy.test:3128",
            "a port written with the host is kept")
        XCTAssertEqual(proxies(["HTTPEnable": true, "HTTPProxy": "[::1]"]).http, "http://[::1]:1080")
        XCTAssertEqual(proxies(["HTTPEnable": true, "HTTPProxy": "::1", "HTTPPort": 8080]).http, "http://[::1]:8080")
        XCTAssertEqual(
            EnvironmentProxy.proxy(for: URL(string: "http://a.test/"), configured: portless.http, environment: [:]),
            "http://proxy.test:1080")
    }

    func testNoProxyMatching() {
        let bypasses = EnvironmentProxy.bypasses
        XCTAssertTrue(bypasses("a.test", "*"))
        XCTAssertFalse(bypasses("a.test", " * "), "`*` for all only as the whole value, as libcurl compares it")
        XCTAssertTrue(bypasses("a.test", " a.test "))
        XCTAssertTrue(bypasses("www.a.test", "a.test"))
        XCTAssertTrue(bypasses("www.a.test", ".a.test"))
        XCTAssertTrue(bypasses("WWW.A.test.", "x.test, a.TEST"))
        XCTAssertFalse(bypasses("xa.test", "a.test"), "a suffix only after a dot")
        XCTAssertFalse(bypasses("a.test", "www.a.test"))
        XCTAssertFalse(bypasses("a.test", "*.a.test, b"), "no wildcard but the whole list")
        XCTAssertTrue(bypasses("10.1.2.3", "localhost\t10.0.0.0/8"))
        XCTAssertFalse(bypasses("11.1.2.3", "10.0.0.0/8"))
        XCTAssertTrue(bypasses("192.168.1.7", "192.168.1.7"))
        XCTAssertFalse(bypasses("192.168.1.7", "168.1.7"), "an address matches itself, not a suffix")
        XCTAssertTrue(bypasses("[::1]", "::1"))
        XCTAssertFalse(bypasses("0.0.0.1", "0.0.0.0/0"), "libcurl's Curl_cidr4_match: /0 is the address itself")
        XCTAssertTrue(bypasses("0.0.0.0", "0.0.0.0/0"))
        XCTAssertTrue(bypasses("10.1.2.3", "10.1.2.3/32"))
    }
}
