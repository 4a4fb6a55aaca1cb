import CCurl
import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The loopback server itself: TLS with the committed certificates, request log, deterministic bodies.
final class LoopbackServerTests: XCTestCase {
    /// Fetches `url` with raw libcurl, trusting only `caFile`, on a thread of its own.
    private func curlGet(_ url: URL, caFile: URL) async -> (code: CURLcode, status: Int) {
        await withCheckedContinuation { continuation in
            Thread {
                guard let handle = curl_easy_init() else {
                    return continuation.resume(returning: (CURLE_FAILED_INIT, 0))
                }
                defer { curl_easy_cleanup(handle) }
                _ = sk_curl_easy_setopt_string(handle, CURLOPT_URL, url.absoluteString)
                _ = sk_curl_easy_setopt_string(handle, CURLOPT_CAINFO, caFile.path)
                _ = sk_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT, 10)
                let discard: sk_curl_data_callback = { _, size, count, _ in size * count }
                _ = sk_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, discard)
                let code = curl_easy_perform(handle)
                var status = 0
                _ = sk_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
                continuation.resume(returning: (code, status))
            }.start()
        }
    }

    func testTLSServerPresentsAChainValidFor127001UnderTheTestRoot() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        XCTAssertEqual(server.baseURL.scheme, "https")
        let result = await curlGet(server.url("/get"), caFile: TestCertificates.rootCAFile)
        XCTAssertEqual(result.code, CURLE_OK, String(cString: curl_easy_strerror(result.code)))
        XCTAssertEqual(result.status, 200)
        XCTAssertEqual(server.requests.first?.isTLS, true)
    }

    func testTLSServerIsRefusedByAClientThatDoesNotTrustTheTestRoot() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let systemBundle = URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt")
        guard FileManager.default.fileExists(atPath: systemBundle.path) else { throw XCTSkip("no system CA bundle") }
        let result = await curlGet(server.url("/get"), caFile: systemBundle)
        XCTAssertNotEqual(result.code, CURLE_OK)
        XCTAssertTrue(server.requests.isEmpty, "a refused handshake carries no request")
    }

    func testFoundationTransportReportsTheUntrustedTLSServerAsAnError() async throws {
        // URLSession on Linux trusts only the system CA bundle: the reason SessionKit needs a transport of its own.
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let manager = URLSessionManager(sessionConfiguration: .ephemeral)
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/get")),
                    completionHandler: { _, _, error in
                        done(error)
                    }))
        }
        XCTAssertNotNil(error)
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testRequestLogAndCounters() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        let manager = HTTPSessionManager(baseURL: server.baseURL)
        _ = try await manager.post("/post", parameters: ["a": "1"], headers: ["X-Mark": "m"])
        let recorded = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(recorded.method, "POST")
        XCTAssertEqual(recorded.path, "/post")
        XCTAssertEqual(recorded.header("x-mark"), "m")
        XCTAssertEqual(recorded.body, Data("a=1".utf8))
        XCTAssertEqual(server.requestCount, 1)
        XCTAssertGreaterThanOrEqual(server.connectionCount, 1)
        server.clearRequests()
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testBytesAreDeterministicPerSeed() {
        XCTAssertEqual(ByteGenerator.bytes(count: 1000, seed: 5), ByteGenerator.bytes(count: 1000, seed: 5))
        XCTAssertNotEqual(ByteGenerator.bytes(count: 1000, seed: 5), ByteGenerator.bytes(count: 1000, seed: 6))
    }
}

/// The README's quick start, compiled and run against the loopback server instead of port 8080.
final class QuickStartTests: LoopbackTestCase {
    func testQuickStartFromTheREADMEWorks() async throws {
        let manager = HTTPSessionManager(baseURL: server.url("/anything/v1"))
        manager.requestSerializer = JSONRequestSerializer()

        let result = try await manager.post("users", parameters: ["name": "Ada"])
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(server.requests.last?.uri, "/anything/v1/users")

        struct Echo: Decodable { let method: String; let url: String }
        let echoed = try await manager.get("users/1", as: Echo.self)
        XCTAssertEqual(echoed.method, "GET")

        let object: Any? = try await awaitCallback { done in
            manager.get(
                "users", parameters: ["page": 2], headers: ["X-Trace": "1"], progress: nil,
                success: { _, object in done(object) },
                failure: { _, error in
                    XCTFail("\(error)"); done(nil)
                })
        }
        XCTAssertEqual((object as? [String: Any])?["args"] as? [String: String], ["page": "2"])
    }
}
