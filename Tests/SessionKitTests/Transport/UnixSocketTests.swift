import Foundation
import HTTPTypes
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `http+unix://` and `https+unix://` URLs on the curl transport, against the loopback server bound to Unix sockets in
/// a temporary directory: every API, the `Host` field, the cache, cookies and connections kept per socket, the
/// policy's check over TLS, and the clear errors (a missing socket, no socket path, the Foundation transport).
final class UnixSocketTests: XCTestCase {
    private var directory: URL!
    private var servers: [LoopbackServer] = []

    override func setUp() async throws {
        try await super.setUp()
        // A space in the path: the URL's authority is the percent-encoded path.
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("sk unix-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        for server in servers { try await server.shutdown() }
        servers = []
        try? FileManager.default.removeItem(at: directory)
        try await super.tearDown()
    }

    private func startServer(
        _ name: String = "http.sock", tls: TestCertificates.Identity? = nil
    ) async throws
        -> LoopbackServer
    {
        let server = try await LoopbackServer.start(
            tls: tls, unixSocketPath: directory.appendingPathComponent(name).path)
        servers.append(server)
        return server
    }

    private func manager(
        _ baseURL: URL? = nil, transport: Transport = .curl, configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = nil
        configure(configuration)
        let manager = HTTPSessionManager(baseURL: baseURL, sessionConfiguration: configuration)
        manager.transport = transport
        return manager
    }

    private func json(_ data: Data) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    // MARK: - Every API

    func testVerbsWithABaseURLReachTheSocketWithHostLocalhost() async throws {
        let server = try await startServer()
        XCTAssertTrue(
            server.baseURL.absoluteString.hasPrefix("http+unix://%2Ftmp%2Fsk%20unix"), server.baseURL.absoluteString)
        let manager = manager(server.baseURL)
        let get = try await manager.get("get", parameters: ["a": "1 2"])
        XCTAssertEqual(get.statusCode, 200)
        XCTAssertEqual((get.object as? [String: Any])?["args"] as? [String: String], ["a": "1 2"])
        XCTAssertEqual(get.response.url?.scheme, "http+unix", "the task keeps the URL as written")
        XCTAssertEqual(server.requests.last?.uri, "/get?a=1%202")
        XCTAssertEqual(server.requests.last?.header("Host"), "localhost")
        let post = try await manager.post("post", parameters: ["n": "1"])
        XCTAssertEqual((post.object as? [String: Any])?["form"] as? [String: String], ["n": "1"])
        XCTAssertEqual(server.requests.last?.method, "POST")
    }

    func testTaskAPIKeepsTheRequestsOwnHostField() async throws {
        let server = try await startServer()
        let manager = manager()
        var request = URLRequest(url: server.url("/headers"))
        request.setValue("api.internal", forHTTPHeaderField: "Host")
        let (response, error): (URLResponse?, Error?) = try await awaitCallback { done in
            manager.dataTask(with: request, completionHandler: { response, _, error in done((response, error)) })
                .resume()
        }
        XCTAssertNil(error)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(server.requests.last?.header("Host"), "api.internal")
    }

    func testHTTPCoreAPIWithTheHTTPUnixScheme() async throws {
        let server = try await startServer()
        let manager = manager()
        let authority = try XCTUnwrap(server.baseURL.host(percentEncoded: true))
        let request = HTTPRequest(method: .get, scheme: "http+unix", authority: authority, path: "/get?core=1")
        let (data, response) = try await manager.data(for: request)
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual((try json(data)["args"] as? [String: String])?["core"], "1")
        XCTAssertEqual(server.requests.last?.header("Host"), "localhost")
    }

    func testAStreamedDownloadAndAnUploadOverASocket() async throws {
        let server = try await startServer()
        let manager = manager()
        let authority = try XCTUnwrap(server.baseURL.host(percentEncoded: true))
        let download = HTTPRequest(
            method: .get, scheme: "http+unix", authority: authority, path: "/stream-bytes/100000?chunk_size=10000")
        let count = try await manager.perform(download) { _, body in
            var count = 0
            for try await chunk in body { count += chunk.count }
            return count
        }
        XCTAssertEqual(count, 100_000)
        let upload = HTTPRequest(
            method: .post, scheme: "http+unix", authority: authority, path: "/post",
            headerFields: [.contentType: "text/plain"])
        let (data, response) = try await manager.upload(for: upload, from: Data("streamed over a socket".utf8))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(try json(data)["data"] as? String, "streamed over a socket")
    }

    func testRedirectsStayOnTheSocket() async throws {
        let server = try await startServer()
        let result = try await manager(server.baseURL).get("redirect/2")
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(server.requests.map(\.path), ["/redirect/2", "/redirect/1", "/get"])
    }

    // MARK: - Per socket

    func testTwoSocketsNeverShareCookies() async throws {
        let first = try await startServer("a.sock")
        let second = try await startServer("b.sock")
        let manager = manager { $0.httpCookieStorage = makeOwnCookieStorage() }
        _ = try await manager.get(first.url("/cookies/set?session=a").absoluteString)
        let again = try await manager.get(first.url("/cookies").absoluteString)
        XCTAssertEqual((again.object as? [String: Any])?["cookies"] as? [String: String], ["session": "a"])
        let other = try await manager.get(second.url("/cookies").absoluteString)
        XCTAssertEqual((other.object as? [String: Any])?["cookies"] as? [String: String], [:], "another socket")
        XCTAssertNil(second.requests.last?.header("Cookie"))
    }

    func testTwoSocketsNeverShareCacheEntries() async throws {
        let first = try await startServer("a.sock")
        let second = try await startServer("b.sock")
        let manager = manager {
            $0.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: nil)
        }
        manager.responseSerializer = HTTPResponseSerializer()
        let stored = try await manager.get(first.url("/cache/60").absoluteString).data
        let cached = try await manager.get(first.url("/cache/60").absoluteString).data
        XCTAssertEqual(stored, cached)
        XCTAssertEqual(first.requestCount, 1, "the second GET was served from the cache")
        let other = try await manager.get(second.url("/cache/60").absoluteString).data
        XCTAssertEqual(second.requestCount, 1, "the same path on another socket goes to that socket")
        XCTAssertNotEqual(other, stored)
    }

    func testConnectionsAreReusedPerSocketOnly() async throws {
        let first = try await startServer("a.sock")
        let second = try await startServer("b.sock")
        let manager = manager()
        for _ in 0..<3 {
            _ = try await manager.get(first.url("/get").absoluteString)
            _ = try await manager.get(second.url("/get").absoluteString)
        }
        XCTAssertEqual(first.requestCount, 3)
        XCTAssertEqual(second.requestCount, 3, "never sent over the other socket's connection")
        XCTAssertEqual(first.connectionCount, 1, "reused on its own socket")
        XCTAssertEqual(second.connectionCount, 1)
    }

    // MARK: - TLS

    func testHTTPSOverASocketChecksTheCertificateAgainstLocalhost() async throws {
        let server = try await startServer("tls.sock", tls: TestCertificates.localhost)
        XCTAssertEqual(server.baseURL.scheme, "https+unix")
        let manager = manager(server.baseURL)
        manager.securityPolicy = try .trustingTheTestRoot()
        let result = try await manager.get("get")
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(server.requests.last?.isTLS, true)

        let wrongName = try await startServer("wrong.sock", tls: TestCertificates.served("wrong-host"))
        let refused = self.manager(wrongName.baseURL)
        refused.securityPolicy = try .trustingTheTestRoot()
        do {
            _ = try await refused.get("get")
            XCTFail("a certificate for another name must fail")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .serverCertificateUntrusted)
        }
        XCTAssertEqual(wrongName.requestCount, 0, "nothing sent to a refused server")
        // Its own Host names the certificate's host: then the check passes.
        var request = URLRequest(url: wrongName.url("/get"))
        request.setValue("wrong.example", forHTTPHeaderField: "Host")
        let error: Error? = try await awaitCallback { done in
            refused.dataTask(with: request, completionHandler: { _, _, error in done(error) }).resume()
        }
        XCTAssertNil(error)
        XCTAssertEqual(wrongName.requests.last?.header("Host"), "wrong.example")
    }

    func testAConnectionVerifiedForOneNameNeverCarriesARequestForAnother() async throws {
        let server = try await startServer("tls.sock", tls: TestCertificates.localhost)
        let manager = manager()
        manager.securityPolicy = try .trustingTheTestRoot()
        _ = try await manager.get(server.url("/get").absoluteString)
        var request = URLRequest(url: server.url("/get?other"))
        request.setValue("wrong.example", forHTTPHeaderField: "Host")
        let error: Error? = try await awaitCallback { done in
            manager.dataTask(with: request, completionHandler: { _, _, error in done(error) }).resume()
        }
        XCTAssertEqual((error as? URLError)?.code, .serverCertificateUntrusted, "checked again for the other name")
        XCTAssertEqual(server.requestCount, 1, "not sent over the connection verified for localhost")
    }

    func testAPinningPolicyRefusesPlainHTTPOverASocket() async throws {
        let server = try await startServer()
        let manager = manager(server.baseURL)
        manager.securityPolicy = try .trustingTheTestRoot()
        do {
            _ = try await manager.get("get")
            XCTFail("pins cannot protect plain http")
        } catch {
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.policyNotEnforceable.rawValue)
        }
        XCTAssertEqual(server.requestCount, 0)
    }

    // MARK: - Errors

    func testAMissingSocketIsCannotConnectToHost() async throws {
        let path = directory.appendingPathComponent("absent.sock").path
        let encoded = try XCTUnwrap(path.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let url = try XCTUnwrap(URL(string: "http+unix://\(encoded)/get"))
        do {
            _ = try await manager().get(url.absoluteString)
            XCTFail("no server listens there")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cannotConnectToHost)
            XCTAssertTrue(error.localizedDescription.contains(path), error.localizedDescription)
        }
    }

    func testAURLWithoutASocketPathIsBadURL() async throws {
        for string in ["http+unix:///get", "http+unix://%2Ftmp%2Fx.sock:80/get"] {
            do {
                _ = try await manager().get(string)
                XCTFail("\(string) names no socket")
            } catch let error as URLError {
                XCTAssertEqual(error.code, .badURL, string)
            }
        }
    }

    func testTheFoundationTransportRefusesUnixSockets() async throws {
        let server = try await startServer()
        do {
            _ = try await manager(server.baseURL, transport: .foundation).get("get")
            XCTFail("URLSession cannot reach a Unix socket")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .unsupportedURL)
            XCTAssertTrue(error.localizedDescription.contains("Transport.curl"), error.localizedDescription)
        }
        XCTAssertEqual(server.requestCount, 0)
    }
}
