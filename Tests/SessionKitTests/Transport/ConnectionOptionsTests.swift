import Foundation
import HTTPTypes
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The manager's `resolvedAddresses`, `localAddress` and `timeoutIntervalForResponseHead` on the curl transport,
/// through the verbs, the task API, the HTTP core API and WebSocket tasks, against the loopback servers; and their
/// refusal on the Foundation transport.
final class ConnectionOptionsTests: LoopbackTestCase {
    private func curlManager(timeout: TimeInterval = 10) -> HTTPSessionManager {
        makeManager(timeout: timeout, transport: .curl)
    }

    // MARK: - resolvedAddresses

    func testAResolvedNameReachesItsAddressThroughEveryAPI() async throws {
        let manager = curlManager()
        manager.resolvedAddresses = [
            "svc.test:\(server.port)": "127.0.0.1", "compose_service:\(server.port)": "127.0.0.1",
        ]
        let verb = try await manager.get("http://svc.test:\(server.port)/get?verb")
        XCTAssertEqual(verb.statusCode, 200)
        XCTAssertEqual(server.requests.last?.header("Host"), "svc.test:\(server.port)", "the name stays the host")
        let url = try XCTUnwrap(URL(string: "http://SVC.test:\(server.port)/get?task"))
        let error: Error? = try await awaitCallback { done in
            manager.dataTask(with: URLRequest(url: url), completionHandler: { _, _, error in done(error) }).resume()
        }
        XCTAssertNil(error)
        let (_, response) = try await manager.data(
            for: HTTPRequest(method: .get, scheme: "http", authority: "svc.test:\(server.port)", path: "/get?core"))
        XCTAssertEqual(response.status, .ok)
        _ = try await manager.get("http://compose_service:\(server.port)/get?underscore")
        XCTAssertEqual(server.requests.map(\.uri), ["/get?verb", "/get?task", "/get?core", "/get?underscore"])
    }

    func testTLSStillChecksTheCertificateAgainstTheName() async throws {
        let tls = try await LoopbackServer.start(tls: TestCertificates.served("wrong-host"))  // for wrong.example
        defer { Task { try? await tls.shutdown() } }
        let manager = curlManager()
        manager.securityPolicy = try .trustingTheTestRoot()
        manager.resolvedAddresses = ["wrong.example:\(tls.port)": "127.0.0.1"]
        let result = try await manager.get("https://wrong.example:\(tls.port)/get")
        XCTAssertEqual(result.statusCode, 200, "the certificate names wrong.example")
        XCTAssertEqual(tls.requests.last?.header("Host"), "wrong.example:\(tls.port)")

        let other = curlManager()
        other.securityPolicy = try .trustingTheTestRoot()
        other.resolvedAddresses = ["other.example:\(tls.port)": "127.0.0.1"]
        let error = await expectURLError(.serverCertificateUntrusted) {
            _ = try await other.get("https://other.example:\(tls.port)/get")
        }
        XCTAssertTrue(error?.localizedDescription.contains("other.example") == true)
        XCTAssertEqual(tls.requestCount, 1, "nothing sent to a server whose certificate names another host")
    }

    func testAConnectionIsNeverReusedUnderAnotherAddress() async throws {
        let first = curlManager()
        first.resolvedAddresses = ["svc.test:\(server.port)": "127.0.0.1"]
        _ = try await first.get("http://svc.test:\(server.port)/get")
        // The same name and port to ::1, where nothing listens: a reused connection would have answered.
        let second = curlManager()
        second.resolvedAddresses = ["svc.test:\(server.port)": "::1"]
        _ = await expectURLError(.cannotConnectToHost) {
            _ = try await second.get("http://svc.test:\(server.port)/get")
        }
        XCTAssertEqual(server.requestCount, 1)
    }

    func testAWebSocketUsesTheResolvedAddress() async throws {
        let webSocketServer = try await WebSocketServer.start()
        defer { Task { try? await webSocketServer.shutdown() } }
        let manager = curlManager()
        manager.resolvedAddresses = ["chat.test:\(webSocketServer.port)": "127.0.0.1"]
        let task = manager.webSocketTask(
            with: try XCTUnwrap(URL(string: "ws://chat.test:\(webSocketServer.port)/echo")))
        task.resume()
        try await task.send(.string("resolved"))
        let echoed = try await task.receive()
        XCTAssertEqual(echoed, .string("resolved"))
        let host = webSocketServer.seen.upgrades.first?.headers.first { $0.0.lowercased() == "host" }?.1
        XCTAssertEqual(host, "chat.test:\(webSocketServer.port)")
        task.cancel(with: .normalClosure, reason: nil)
    }

    func testAnInvalidResolvedAddressIsBadURL() async throws {
        for entry in [["no-port": "127.0.0.1"], ["a.test:80": "not-an-address"], ["a.test:0": "127.0.0.1"]] {
            let manager = curlManager()
            manager.resolvedAddresses = entry
            let error = await expectURLError(.badURL) { _ = try await manager.get("/get") }
            XCTAssertTrue(error?.localizedDescription.contains("resolvedAddresses") == true)
        }
        XCTAssertEqual(server.requestCount, 0)
    }

    // MARK: - localAddress

    func testLocalAddressIsThePeerTheServerSees() async throws {
        let manager = curlManager()
        _ = try await manager.get("/get")
        XCTAssertEqual(server.requests.last?.peerAddress, "127.0.0.1")
        manager.localAddress = "127.0.0.2"
        _ = try await manager.get("/get")
        XCTAssertEqual(server.requests.last?.peerAddress, "127.0.0.2")
        // Same engine, same server: the connection bound to 127.0.0.2 is not reused for another address.
        let other = curlManager()
        other.localAddress = "127.0.0.3"
        _ = try await other.get("/get")
        XCTAssertEqual(server.requests.last?.peerAddress, "127.0.0.3")
        let named = curlManager()
        named.localAddress = "host!127.0.0.4"
        _ = try await named.get("/get")
        XCTAssertEqual(server.requests.last?.peerAddress, "127.0.0.4")
    }

    func testAnUnusableLocalAddressIsAClearError() async throws {
        for address in ["192.0.2.1", "if!sk-no-such-if"] {
            let manager = curlManager()
            manager.localAddress = address
            let error = await expectURLError(.cannotConnectToHost) { _ = try await manager.get("/get") }
            XCTAssertTrue(error?.localizedDescription.contains("localAddress") == true, address)
        }
        XCTAssertEqual(server.requestCount, 0)
    }

    // MARK: - timeoutIntervalForResponseHead

    func testAHeadThatComesTooLateTimesOutNamingItsLimit() async throws {
        let manager = curlManager()
        manager.timeoutIntervalForResponseHead = 0.5
        let error = await expectURLError(.timedOut) { _ = try await manager.get("/drip?delay=4&numbytes=1") }
        XCTAssertEqual(error?.userInfo[SessionKitError.timeoutLimitKey] as? String, "timeoutIntervalForResponseHead")
        XCTAssertTrue(error?.localizedDescription.contains("timeoutIntervalForResponseHead") == true)
        // The HTTP core API and the task API take the same limit.
        let core = await expectURLError(.timedOut) {
            _ = try await manager.data(
                for: HTTPRequest(
                    method: .get, scheme: "http", authority: "127.0.0.1:\(self.server.port)", path: "/delay/4"))
        }
        XCTAssertEqual(core?.userInfo[SessionKitError.timeoutLimitKey] as? String, "timeoutIntervalForResponseHead")
        let task: Error? = try await awaitCallback { done in
            manager.dataTask(
                with: URLRequest(url: self.server.url("/delay/4")), completionHandler: { _, _, error in done(error) }
            ).resume()
        }
        XCTAssertEqual((task as? URLError)?.code, .timedOut)
    }

    func testATricklingBodyAfterAQuickHeadIsNotCut() async throws {
        let manager = curlManager()
        manager.responseSerializer = HTTPResponseSerializer()
        manager.timeoutIntervalForResponseHead = 0.5
        // The head at once, then 5 bytes over 2.5 s: longer than the limit in all.
        let result = try await manager.get("/drip?numbytes=5&duration=2.5")
        XCTAssertEqual(result.data, Data("*****".utf8))
    }

    func testTheIdleAndResourceLimitsNameThemselvesToo() async throws {
        let manager = curlManager(timeout: 1)
        let idle = await expectURLError(.timedOut) { _ = try await manager.get("/drip?delay=4&numbytes=1") }
        XCTAssertEqual(idle?.userInfo[SessionKitError.timeoutLimitKey] as? String, "timeoutIntervalForRequest")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = 1.5
        let bounded = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        bounded.transport = .curl
        // Bytes keep coming (never idle), for longer than the whole task may take.
        let total = await expectURLError(.timedOut) { _ = try await bounded.get("/drip?numbytes=8&duration=4") }
        XCTAssertEqual(total?.userInfo[SessionKitError.timeoutLimitKey] as? String, "timeoutIntervalForResource")
    }

    func testANonPositiveResponseHeadTimeoutIsRefused() async throws {
        let manager = curlManager()
        manager.timeoutIntervalForResponseHead = 0
        let error = await expectURLError(.badURL) { _ = try await manager.get("/get") }
        XCTAssertTrue(error?.localizedDescription.contains("timeoutIntervalForResponseHead") == true)
        XCTAssertEqual(server.requestCount, 0)
    }

    // MARK: - The Foundation transport

    func testTheFoundationTransportRefusesEachOption() async throws {
        let settings: [(String, (URLSessionManager) -> Void)] = [
            ("resolvedAddresses", { $0.resolvedAddresses = ["svc.test:80": "127.0.0.1"] }),
            ("localAddress", { $0.localAddress = "127.0.0.2" }),
            ("timeoutIntervalForResponseHead", { $0.timeoutIntervalForResponseHead = 5 }),
        ]
        for (name, apply) in settings {
            let manager = makeManager(transport: .foundation)
            apply(manager)
            do {
                _ = try await manager.get("/get")
                XCTFail("\(name) cannot be honoured by URLSession")
            } catch {
                XCTAssertEqual((error as NSError).code, SessionKitError.Code.unsupportedByTransport.rawValue, name)
                XCTAssertTrue(error.localizedDescription.contains(name), error.localizedDescription)
            }
        }
        XCTAssertEqual(server.requestCount, 0)
    }
}
