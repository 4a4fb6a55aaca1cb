import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// SOCKS5 and HTTP `CONNECT` proxies on the curl transport, against ``TunnelProxyServer`` on loopback: the
/// configuration's SOCKS keys (with credentials), `ALL_PROXY`/`all_proxy` with `socks5://` and `socks5h://`,
/// `NO_PROXY`, an unreachable proxy (an error, never a direct connection), and WebSocket and stream tasks through the
/// same proxies as HTTP requests.
final class ProxyTunnelTests: WebSocketTestCase {
    private var proxies: [TunnelProxyServer] = []
    private var origins: [LoopbackServer] = []

    override func tearDown() async throws {
        for proxy in proxies { try await proxy.shutdown() }
        for origin in origins { try await origin.shutdown() }
        proxies = []
        origins = []
        try await super.tearDown()
    }

    private func startProxy(_ kind: TunnelProxyServer.Kind) async throws -> TunnelProxyServer {
        let proxy = try await TunnelProxyServer.start(kind)
        proxies.append(proxy)
        return proxy
    }

    private func startOrigin(tls: TestCertificates.Identity? = nil) async throws -> LoopbackServer {
        let origin = try await LoopbackServer.start(tls: tls)
        origins.append(origin)
        return origin
    }

    /// A port nothing listens on (a proxy's, stopped).
    private func closedPort() async throws -> Int {
        let proxy = try await TunnelProxyServer.start(.socks5())
        let port = proxy.port
        try await proxy.shutdown()
        return port
    }

    private func socksKeys(_ port: Int, user: String? = nil, password: String? = nil) -> [AnyHashable: Any] {
        var keys: [AnyHashable: Any] = ["SOCKSEnable": 1, "SOCKSProxy": "127.0.0.1", "SOCKSPort": port]
        if let user { keys["SOCKSUser"] = user }
        if let password { keys["SOCKSPassword"] = password }
        return keys
    }

    private func httpManager(
        proxy keys: [AnyHashable: Any]?, transport: Transport = .curl
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = nil
        configuration.connectionProxyDictionary = keys
        let manager = HTTPSessionManager(sessionConfiguration: configuration)
        manager.transport = transport
        return manager
    }

    // MARK: - HTTP requests through SOCKS5

    func testTheConfigurationsSOCKSKeysCarryHTTPAndHTTPSRequests() async throws {
        let proxy = try await startProxy(.socks5())
        let origin = try await startOrigin()
        let manager = httpManager(proxy: socksKeys(proxy.port))
        let result = try await manager.get("http://localhost:\(origin.port)/get")
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(proxy.destinations, ["localhost:\(origin.port)"], "the proxy resolves the name (socks5h)")
        XCTAssertEqual(origin.requests.last?.header("Host"), "localhost:\(origin.port)")

        let secure = try await startOrigin(tls: TestCertificates.localhost)
        manager.securityPolicy = try .trustingTheTestRoot()
        let tls = try await manager.get("https://localhost:\(secure.port)/get")
        XCTAssertEqual(tls.statusCode, 200)
        XCTAssertEqual(proxy.destinations.last, "localhost:\(secure.port)", "TLS inside the tunnel")
        XCTAssertEqual(secure.requests.last?.isTLS, true)
    }

    func testSOCKSUsernameAndPasswordAuthentication() async throws {
        let password = "p@ss:w/rd é"
        let proxy = try await startProxy(.socks5(username: "alice", password: password))
        let origin = try await startOrigin()
        let manager = httpManager(proxy: socksKeys(proxy.port, user: "alice", password: password))
        let result = try await manager.get(origin.url("/get").absoluteString)
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(proxy.destinations, ["127.0.0.1:\(origin.port)"])

        // CFNetwork's key names work too; a wrong password is refused by the proxy and fails the request.
        let wrong = httpManager(proxy: [
            "SOCKSEnable": true, "SOCKSProxy": "127.0.0.1", "SOCKSPort": proxy.port,
            "kCFStreamPropertySOCKSUser": "alice", "kCFStreamPropertySOCKSPassword": "wrong",
        ])
        _ = await expectURLError(.cannotConnectToHost) {
            _ = try await wrong.get(origin.url("/get?wrong").absoluteString)
        }
        XCTAssertEqual(origin.requestCount, 1, "never sent around the proxy")
    }

    func testAnUnreachableSOCKSProxyIsAnErrorNotADirectConnection() async throws {
        let origin = try await startOrigin()
        let manager = httpManager(proxy: socksKeys(try await closedPort()))
        _ = await expectURLError(.cannotConnectToHost) { _ = try await manager.get(origin.url("/get").absoluteString) }
        XCTAssertEqual(origin.connectionCount, 0, "no direct connection")
    }

    func testTheFoundationTransportRefusesSOCKSKeys() async throws {
        let proxy = try await startProxy(.socks5())
        let origin = try await startOrigin()
        do {
            _ = try await httpManager(proxy: socksKeys(proxy.port), transport: .foundation).get(
                origin.url("/get").absoluteString)
            XCTFail("URLSession on Linux would go around the SOCKS proxy")
        } catch {
            XCTAssertEqual((error as NSError).domain, SessionKitError.sessionDomain)
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.unsupportedByTransport.rawValue)
        }
        XCTAssertEqual(origin.connectionCount + proxy.connectionCount, 0)
    }

    // MARK: - The environment

    func testALLPROXYWithSocks5hAndSocks5() async throws {
        let proxy = try await startProxy(.socks5())
        let origin = try await startOrigin()
        try await withProxyEnvironment(["ALL_PROXY": "socks5h://127.0.0.1:\(proxy.port)"]) {
            _ = try await httpManager(proxy: nil).get("http://localhost:\(origin.port)/get?h")
        }
        XCTAssertEqual(proxy.destinations, ["localhost:\(origin.port)"], "socks5h: the proxy resolves the name")
        try await withProxyEnvironment(["all_proxy": "socks5://127.0.0.1:\(proxy.port)"]) {
            _ = try await httpManager(proxy: nil).get("http://localhost:\(origin.port)/get?local")
        }
        XCTAssertEqual(proxy.destinations.count, 2)
        let resolved = try XCTUnwrap(proxy.destinations.last)
        XCTAssertTrue(
            ["127.0.0.1:\(origin.port)", "[::1]:\(origin.port)"].contains(resolved),
            "socks5: the client resolves the name and sends an address, not \(resolved)")
        XCTAssertEqual(origin.requests.map(\.uri), ["/get?h", "/get?local"])
    }

    /// An HTTPS request through an HTTP proxy libcurl takes from the environment: the tunnel's "200 Connection
    /// established" is not the response (it was, and the real head was then read as trailers).
    func testHTTPSThroughAnHTTPProxyFromTheEnvironment() async throws {
        let origin = try await startOrigin(tls: TestCertificates.localhost)
        let manager = httpManager(proxy: nil)
        manager.securityPolicy = try .trustingTheTestRoot()
        manager.responseSerializer = HTTPResponseSerializer()
        for variable in ["https_proxy", "HTTPS_PROXY", "ALL_PROXY"] {
            // A proxy of its own per variable: a tunnel through another proxy is not reused.
            let proxy = try await startProxy(.httpConnect)
            let response = try await withProxyEnvironment([variable: "http://127.0.0.1:\(proxy.port)"]) {
                try await manager.get("https://localhost:\(origin.port)/get?\(variable)")
            }
            XCTAssertEqual(response.statusCode, 200, variable)
            XCTAssertEqual(proxy.destinations, ["localhost:\(origin.port)"], "\(variable): through the proxy")
        }
        XCTAssertEqual(origin.requests.map(\.uri), ["/get?https_proxy", "/get?HTTPS_PROXY", "/get?ALL_PROXY"])
    }

    func testNOPROXYGoesDirectForTheEnvironmentsProxyAndTheConfigurations() async throws {
        let proxy = try await startProxy(.socks5())
        let origin = try await startOrigin()
        // Two hosts, so that the second request does not reuse the first one's tunnel.
        let (byName, byAddress) = ("http://localhost:\(origin.port)/get", origin.url("/get").absoluteString)
        try await withProxyEnvironment(["ALL_PROXY": "socks5h://127.0.0.1:\(proxy.port)"]) {
            _ = try await httpManager(proxy: nil).get(byName + "?env")
            _ = try await httpManager(proxy: socksKeys(proxy.port)).get(byAddress + "?keys")
        }
        XCTAssertEqual(proxy.destinations, ["localhost:\(origin.port)", "127.0.0.1:\(origin.port)"], "both proxied")
        let noProxy = "localhost,127.0.0.1"
        try await withProxyEnvironment(["ALL_PROXY": "socks5h://127.0.0.1:\(proxy.port)", "NO_PROXY": noProxy]) {
            _ = try await httpManager(proxy: nil).get(byName + "?env-direct")
            _ = try await httpManager(proxy: socksKeys(proxy.port)).get(byAddress + "?keys-direct")
        }
        XCTAssertEqual(origin.requests.map(\.uri), ["/get?env", "/get?keys", "/get?env-direct", "/get?keys-direct"])
        XCTAssertEqual(proxy.connectionCount, 2, "NO_PROXY names the host: straight to it")
    }

    func testAnUnreachableProxyFromTheEnvironmentIsAnError() async throws {
        let origin = try await startOrigin()
        let port = try await closedPort()
        try await withProxyEnvironment(["ALL_PROXY": "socks5h://127.0.0.1:\(port)"]) {
            _ = await expectURLError(.cannotConnectToHost) {
                _ = try await httpManager(proxy: nil).get(origin.url("/get").absoluteString)
            }
        }
        XCTAssertEqual(origin.connectionCount, 0)
    }

    // MARK: - WebSocket and stream tasks

    func testAWebSocketThroughSOCKS5() async throws {
        let proxy = try await startProxy(.socks5(username: "ws", password: "secret"))
        let server = try await startServer()
        let (manager, completions) = makeManager {
            $0.connectionProxyDictionary = self.socksKeys(proxy.port, user: "ws", password: "secret")
        }
        let task = manager.webSocketTask(with: try XCTUnwrap(URL(string: "ws://localhost:\(server.port)/echo")))
        task.resume()
        try await task.send(.string("through SOCKS"))
        let echoed = try await task.receive()
        XCTAssertEqual(echoed, .string("through SOCKS"))
        XCTAssertEqual(proxy.destinations, ["localhost:\(server.port)"])
        task.cancel(with: .normalClosure, reason: nil)
        _ = await completions.completion(of: task)
    }

    func testAWebSocketThroughAnHTTPConnectProxyPlainAndTLS() async throws {
        let proxy = try await startProxy(.httpConnect)
        let plain = try await startServer()
        let secure = try await startServer(tls: TestCertificates.localhost)
        let (manager, completions) = makeManager(policy: try .trustingTheTestRoot()) {
            $0.connectionProxyDictionary = [
                "HTTPEnable": 1, "HTTPProxy": "127.0.0.1", "HTTPPort": proxy.port,
                "HTTPSEnable": 1, "HTTPSProxy": "127.0.0.1", "HTTPSPort": proxy.port,
            ]
        }
        for url in [plain.url("/echo"), try XCTUnwrap(URL(string: "wss://localhost:\(secure.port)/echo"))] {
            let task = manager.webSocketTask(with: url)
            task.resume()
            try await task.send(.string("tunnelled"))
            let echoed = try await task.receive()
            XCTAssertEqual(echoed, .string("tunnelled"), url.absoluteString)
            task.cancel(with: .normalClosure, reason: nil)
            _ = await completions.completion(of: task)
        }
        XCTAssertEqual(proxy.destinations, ["127.0.0.1:\(plain.port)", "localhost:\(secure.port)"])
    }

    func testAWebSocketWithAnUnreachableProxyFailsWithoutConnecting() async throws {
        let server = try await startServer()
        let port = try await closedPort()
        let (manager, completions) = makeManager { $0.connectionProxyDictionary = self.socksKeys(port) }
        let task = manager.webSocketTask(with: server.url("/echo"))
        defer { task.cancel() }  // ends the wait below should the task wrongly connect
        task.resume()
        let completion: Error? = try await awaitCallback(timeout: 15) { done in
            Task { done(await completions.completion(of: task)) }
        }
        XCTAssertEqual((completion as? URLError)?.code, .cannotConnectToHost)
        XCTAssertEqual(server.seen.connections, 0, "never a direct connection")
    }

    func testAWebSocketTakesTheEnvironmentsProxyAndItsNOPROXY() async throws {
        let proxy = try await startProxy(.socks5())
        let server = try await startServer()
        let url = try XCTUnwrap(URL(string: "ws://localhost:\(server.port)/echo"))
        for noProxy in [nil, "localhost"] {
            try await withProxyEnvironment(["ALL_PROXY": "socks5h://127.0.0.1:\(proxy.port)", "NO_PROXY": noProxy]) {
                let (manager, completions) = makeManager()
                let task = manager.webSocketTask(with: url)
                task.resume()
                try await task.send(.string("env"))
                let echoed = try await task.receive()
                XCTAssertEqual(echoed, .string("env"))
                task.cancel(with: .normalClosure, reason: nil)
                _ = await completions.completion(of: task)
            }
        }
        XCTAssertEqual(proxy.destinations, ["localhost:\(server.port)"], "through the proxy once, then direct")
        XCTAssertEqual(server.seen.connections, 2)
    }

    func testAStreamToADestinationTheProxyRefusesFails() async throws {
        // The test proxy connects to loopback only; socks5h hands it the name unresolved, so nothing leaves the machine.
        let proxy = try await startProxy(.socks5())
        let (manager, completions) = makeManager { $0.connectionProxyDictionary = self.socksKeys(proxy.port) }
        let task = manager.streamTask(withHostName: "blocked.example", port: 80)
        task.resume()
        do {
            try await task.write(Data("x".utf8), timeout: 10)
            XCTFail("the proxy refused the destination")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cannotConnectToHost)
        }
        _ = await completions.completion(of: task)
        XCTAssertEqual(proxy.destinations, ["blocked.example:80"])
    }

    func testAStreamTaskThroughSOCKS5() async throws {
        let proxy = try await startProxy(.socks5())
        let server = try await EchoServer.start()
        defer { Task { try? await server.shutdown() } }
        let (manager, completions) = makeManager { $0.connectionProxyDictionary = self.socksKeys(proxy.port) }
        let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let message = Data("over a tunnel".utf8)
        try await task.write(message, timeout: 10)
        let (data, _) = try await task.read(minLength: message.count, maxLength: message.count, timeout: 10)
        XCTAssertEqual(data, message)
        XCTAssertEqual(proxy.destinations, ["127.0.0.1:\(server.port)"])
        task.cancel()
        _ = await completions.completion(of: task)
    }
}
