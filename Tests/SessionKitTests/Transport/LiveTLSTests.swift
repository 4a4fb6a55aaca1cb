import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SecurityPolicy` on the curl transport against real TLS servers on loopback: the offline matrix of
/// `SecurityPolicyTests` again, through a manager, in the handshake; and the failures that get codes of their own.
/// Every refusal is checked in the server's request log: no request arrived.
final class LiveTLSTests: XCTestCase {
    private enum Pin: CaseIterable { case leaf, intermediate, root, unrelated, none }

    private func der(_ name: String) throws -> Data {
        try TestCertificates.derCertificate(at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
    }

    private func manager(_ server: LoopbackServer, host: String, policy: SecurityPolicy) throws -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let baseURL = try XCTUnwrap(URL(string: "https://\(host):\(server.port)"))
        let manager = HTTPSessionManager(baseURL: baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        manager.securityPolicy = policy
        return manager
    }

    /// Sends one GET; nil when it succeeded, else its `URLError`. Fails the test on any other outcome.
    private func attempt(
        _ manager: HTTPSessionManager, file: StaticString = #filePath, line: UInt = #line
    ) async -> URLError? {
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            let result = try await manager.get("/get")
            XCTAssertEqual(result.statusCode, 200, file: file, line: line)
            return nil
        } catch let error as URLError {
            return error
        } catch {
            XCTFail("unexpected error \(error)", file: file, line: line)
            return URLError(.unknown)
        }
    }

    /// Every pinning mode × allowInvalidCertificates × validatesDomainName × pin × (server, host name): 240 live
    /// handshakes. The test root is not in the system store, so a chain is trusted only through pinned anchors.
    func testPolicyMatrixInTheLiveHandshake() async throws {
        let served = try await LoopbackServer.start(tls: TestCertificates.served("intermediate-localhost"))
        let wrongHost = try await LoopbackServer.start(tls: TestCertificates.served("wrong-host"))
        defer {
            Task {
                try? await served.shutdown()
                try? await wrongHost.shutdown()
            }
        }
        let cases: [(server: LoopbackServer, leaf: String, host: String, domainMatches: Bool)] = [
            (served, "intermediate-localhost", "127.0.0.1", true),
            (served, "intermediate-localhost", "localhost", true),
            (wrongHost, "wrong-host", "127.0.0.1", false), (wrongHost, "wrong-host", "localhost", false),
        ]
        let commonPins: [Pin: Data] = [
            .intermediate: try der("intermediate-ca"), .root: try der("root-ca"), .unrelated: try der("untrusted-root"),
        ]
        var checked = 0
        for target in cases {
            var pins = commonPins
            pins[.leaf] = try der(target.leaf)
            for mode in SSLPinningMode.allCases {
                for allowInvalid in [false, true] {
                    for validatesDomain in [false, true] {
                        for pin in Pin.allCases {
                            let policy = SecurityPolicy(
                                pinningMode: mode, pinnedCertificates: pins[pin].map { [$0] } ?? [])
                            policy.allowInvalidCertificates = allowInvalid
                            policy.validatesDomainName = validatesDomain
                            let pinInChain = pin == .leaf || pin == .intermediate || pin == .root
                            let expected: Bool
                            if allowInvalid && validatesDomain && (mode == .none || pin == .none) {
                                expected = false
                            } else if mode == .none {
                                expected = allowInvalid
                            } else if !allowInvalid {
                                expected = false  // untrusted by the system store
                            } else {
                                // The name counts in both pinning modes (AFNetworking's public-key mode skips it).
                                expected = pinInChain && (!validatesDomain || target.domainMatches)
                            }
                            let label =
                                "mode \(mode) allowInvalid \(allowInvalid) validatesDomain \(validatesDomain) "
                                + "pin \(pin) leaf \(target.leaf) host \(target.host)"
                            let before = target.server.requests.count
                            let error = await attempt(try manager(target.server, host: target.host, policy: policy))
                            XCTAssertEqual(error == nil, expected, "\(label): \(error.map { "\($0)" } ?? "passed")")
                            if let error, !expected {
                                // Without allowInvalidCertificates the system store refuses first: an unknown root.
                                let code: URLError.Code =
                                    allowInvalid ? .serverCertificateUntrusted : .serverCertificateHasUnknownRoot
                                XCTAssertEqual(error.code, code, "\(label): \(error.localizedDescription)")
                                XCTAssertNotNil(error.failingURL, label)
                                XCTAssertEqual(
                                    target.server.requests.count, before,
                                    "\(label): a refused server receives no request")
                            } else if expected {
                                XCTAssertEqual(target.server.requests.count, before + 1, label)
                            }
                            checked += 1
                        }
                    }
                }
            }
        }
        XCTAssertEqual(checked, 240)
    }

    /// A policy that trusts the test root through a pin, in certificate mode: what remains is the leaf's own fault.
    private func rootPinned(validatesDomain: Bool = true) throws -> SecurityPolicy {
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der("root-ca")])
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = validatesDomain
        return policy
    }

    /// A policy pinning the public key of certificate `name`, trusted through that pin alone.
    private func keyPinned(_ name: String) throws -> SecurityPolicy {
        let policy = SecurityPolicy(pinnedPublicKeyHashes: [try Certificate(der: try der(name)).publicKeyPin])
        policy.allowInvalidCertificates = true
        return policy
    }

    private func refusal(
        serving name: String, policy: SecurityPolicy, host: String = "127.0.0.1",
        file: StaticString = #filePath, line: UInt = #line
    ) async throws -> URLError? {
        let server = try await LoopbackServer.start(tls: TestCertificates.served(name))
        defer { Task { try? await server.shutdown() } }
        let error = await attempt(try manager(server, host: host, policy: policy), file: file, line: line)
        if error != nil {
            XCTAssertTrue(
                server.requests.isEmpty, "\(name): a refused server receives no request", file: file, line: line)
        }
        return error
    }

    func testExpiredAndNotYetValidLeavesHaveTheirOwnCodes() async throws {
        let expired = try await refusal(serving: "expired", policy: try rootPinned())
        XCTAssertEqual(expired?.code, .serverCertificateHasBadDate, "\(String(describing: expired))")
        let reason = (expired as NSError?)?.userInfo[NSLocalizedFailureReasonErrorKey] as? String
        XCTAssertTrue(reason?.contains("expired") == true, "\(String(describing: reason))")
        let early = try await refusal(serving: "not-yet-valid", policy: try rootPinned())
        XCTAssertEqual(early?.code, .serverCertificateNotYetValid, "\(String(describing: early))")
    }

    func testUnknownRootAndSelfSignedLeaf() async throws {
        for name in ["intermediate-localhost", "self-signed", "untrusted-leaf"] {
            let error = try await refusal(serving: name, policy: .default)
            XCTAssertEqual(error?.code, .serverCertificateHasUnknownRoot, "\(name): \(String(describing: error))")
        }
        // A self-signed leaf pinned by its public key is trusted through the pin.
        let none = try await refusal(serving: "self-signed", policy: try keyPinned("self-signed"))
        XCTAssertNil(none)
    }

    func testHostMismatchIsUntrustedWithAReason() async throws {
        let error = try await refusal(serving: "wrong-host", policy: try rootPinned())
        XCTAssertEqual(error?.code, .serverCertificateUntrusted)
        XCTAssertTrue(
            error?.localizedDescription.contains("127.0.0.1") == true,
            "\(String(describing: error?.localizedDescription))")
        // The same chain passes when the domain is not validated.
        let none = try await refusal(serving: "wrong-host", policy: try rootPinned(validatesDomain: false))
        XCTAssertNil(none)
    }

    func testServerWithoutItsIntermediate() async throws {
        // Pinned to the root, the chain cannot be built without the intermediate the server left out.
        let rootRefused = try await refusal(serving: "missing-intermediate", policy: try rootPinned())
        XCTAssertEqual(rootRefused?.code, .serverCertificateUntrusted)
        // Pinned to the intermediate (an anchor of its own), or to the leaf's public key, it passes.
        let intermediatePin = SecurityPolicy(
            pinningMode: .certificate, pinnedCertificates: [try der("intermediate-ca")])
        intermediatePin.allowInvalidCertificates = true
        let passed = try await refusal(serving: "missing-intermediate", policy: intermediatePin)
        XCTAssertNil(passed)
        let keyPassed = try await refusal(
            serving: "missing-intermediate", policy: try keyPinned("intermediate-localhost"))
        XCTAssertNil(keyPassed)
    }

    func testHandshakeFailureIsSecureConnectionFailed() async throws {
        let plain = try await LoopbackServer.start()
        defer { Task { try? await plain.shutdown() } }
        let error = await attempt(try manager(plain, host: "127.0.0.1", policy: try rootPinned()))
        XCTAssertEqual(error?.code, .secureConnectionFailed, "\(String(describing: error))")
    }
}

/// HTTP/2 over TLS, negotiated by ALPN, on the curl transport.
final class HTTP2Tests: XCTestCase {
    func testConcurrentRequestsShareOneHTTP2Connection() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await server.shutdown() } }
        let manager = try makeManager(server)
        let sizes = (0..<20).map { 1_000 + $0 * 20_000 }
        let bodies = try await withThrowingTaskGroup(of: (Int, Data).self) { group in
            for size in sizes {
                group.addTask { (size, try await manager.get("/bytes/\(size)").data) }
            }
            return try await group.reduce(into: [Int: Data]()) { $0[$1.0] = $1.1 }
        }
        for size in sizes {
            XCTAssertEqual(bodies[size]?.count, size, "every stream's body arrives whole")
        }
        XCTAssertEqual(server.requests.count, sizes.count)
        XCTAssertTrue(
            server.requests.allSatisfy { $0.httpVersion == "HTTP/2.0" }, "\(server.requests.map(\.httpVersion))")
        XCTAssertEqual(server.connectionCount, 1, "the streams are multiplexed on one connection")
        // gzip over HTTP/2 as well.
        let gzip = try await manager.get("/gzip")
        XCTAssertEqual(gzip.statusCode, 200)
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: gzip.data) as? [String: Any])
    }

    /// A manager of `server`'s (HTTP/2) with the loopback CA pinned, keeping bodies as `Data`.
    private func makeManager(_ server: LoopbackServer) throws -> HTTPSessionManager {
        let manager = try makeRootCAPinnedManager(baseURL: server.baseURL)
        manager.responseSerializer = HTTPResponseSerializer()
        return manager
    }

    /// A server that sent GOAWAY and left the connection open processes no new stream on it (RFC 9113 6.8). libcurl
    /// 7.88 sends the next request there anyway and fails it: an idempotent request goes again on a new connection,
    /// once; a POST is not sent again (its error says why).
    func testARequestAfterTheServersGOAWAYGoesOnANewConnection() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await server.shutdown() } }
        let manager = try makeManager(server)
        let first = try await manager.get("/goaway")
        XCTAssertEqual(first.statusCode, 200)
        XCTAssertEqual(server.requests.last?.httpVersion, "HTTP/2.0")
        // The GOAWAY goes 50 ms after the answer; the connection stays open, idle in libcurl's pool.
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(server.openConnectionCount, 1, "the server left its connection open after GOAWAY")
        let second = try await manager.get("/get")
        XCTAssertEqual(second.statusCode, 200)
        XCTAssertEqual(server.connectionCount, 2, "the GET went again on a new connection")
        XCTAssertEqual(server.requests.filter { $0.path == "/get" }.count, 1, "processed once")

        _ = try await manager.get("/goaway")
        try await Task.sleep(nanoseconds: 300_000_000)
        let lost = await expectURLError(.networkConnectionLost) {
            _ = try await manager.post("/post", parameters: ["a": "1"])
        }
        XCTAssertEqual(lost?.localizedDescription.contains("not sent again"), true, "\(String(describing: lost))")
        XCTAssertFalse(server.requests.contains { $0.path == "/post" }, "the server processed no POST")

        // A PUT of a file after a GOAWAY: answered once, the whole file (a resend opens the file again).
        _ = try await manager.get("/goaway")
        try await Task.sleep(nanoseconds: 300_000_000)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-goaway-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let body = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try body.write(to: file)
        var put = URLRequest(url: server.url("/put"))
        put.httpMethod = "PUT"
        let uploaded: (URLResponse?, Error?) = try await awaitCallback { done in
            manager.uploadTask(with: put, fromFile: file) { response, _, error in done((response, error)) }.resume()
        }
        XCTAssertNil(uploaded.1, "\(String(describing: uploaded.1))")
        XCTAssertEqual((uploaded.0 as? HTTPURLResponse)?.statusCode, 200)
        let puts = server.requests.filter { $0.path == "/put" }
        XCTAssertEqual(puts.count, 1, "processed once")
        XCTAssertEqual(puts.first?.body, body)
    }

    /// A stream the server resets before any response is a lost connection when the server gave it up (INTERNAL_ERROR,
    /// CANCEL), as a connection closed before the response is over HTTP/1.1, and a malformed response when the reset
    /// says the exchange broke HTTP/2 (PROTOCOL_ERROR, which libcurl also sends for a head that is not valid HTTP/2).
    func testAStreamTheServerResetsIsALostConnectionUnlessTheResetSaysItWasMalformed() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await server.shutdown() } }
        let manager = try makeManager(server)
        for code in [2, 8] {
            let lost = await expectURLError(.networkConnectionLost) { _ = try await manager.get("/reset?code=\(code)") }
            XCTAssertEqual(
                lost?.localizedDescription.contains("reset the HTTP/2 stream"), true, "\(String(describing: lost))")
        }
        XCTAssertEqual(server.requests.last?.httpVersion, "HTTP/2.0")
        XCTAssertEqual(server.requests.filter { $0.path == "/reset" }.count, 2, "each sent once")
        _ = await expectURLError(.badServerResponse) { _ = try await manager.get("/reset?code=1") }
        let after = try await manager.get("/get")
        XCTAssertEqual(after.statusCode, 200, "the connection serves the next request")
    }

    /// A request cut short over HTTP/2 ends on the wire at once: libcurl 7.88 keeps the stream's RST_STREAM in the
    /// connection's output buffer until another transfer uses the connection, so the server would go on sending.
    /// The connection, used by no other stream, is closed.
    func testACancelledRequestEndsOnTheWireAtOnce() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await server.shutdown() } }
        let manager = try makeManager(server)
        let request = Task { try await manager.get("/drip?numbytes=100&duration=30") }
        try await waitUntil("the request reached the server") { server.requests.contains { $0.path == "/drip" } }
        request.cancel()
        _ = await expectURLError(.cancelled) { _ = try await request.value }
        XCTAssertEqual(server.requests.last?.httpVersion, "HTTP/2.0")
        try await waitUntil("the server saw the connection end") { server.openConnectionCount == 0 }
    }
}
