import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Mutual TLS against a loopback NIOSSL server that requires a client certificate under the test root and tells, in
/// `X-Client-Certificate`, the common name of the certificate on the connection that carried each request.
final class MutualTLSTests: XCTestCase {
    private var server: LoopbackServer!
    private var alice: ClientIdentity!
    private var bob: ClientIdentity!

    override func setUp() async throws {
        try await super.setUp()
        server = try await LoopbackServer.start(
            tls: TestCertificates.localhost, clientCertificateRoots: TestCertificates.rootCAFile)
        alice = try ClientIdentity(
            pkcs12: TestCertificates.client("client-alice.p12"), password: TestCertificates.alicePassword)
        bob = try ClientIdentity(
            certificateChainPEM: TestCertificates.client("client-bob-chain.pem"),
            privateKeyPEM: TestCertificates.client("client-bob-encrypted.key"), password: TestCertificates.bobPassword)
    }

    override func tearDown() async throws {
        try await server?.shutdown()
        server = nil
        try await super.tearDown()
    }

    private func makeManager(
        identity: ClientIdentity?, transport: Transport = .curl
    ) throws -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = transport
        let root = try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)
        manager.securityPolicy = SecurityPolicy(trustingRootCertificates: [root])
        manager.clientIdentity = identity
        return manager
    }

    /// The common name the server saw on the connection of the request whose URI holds `marker`.
    private func subject(of marker: String) -> String? {
        server.requests.first { $0.uri.contains(marker) }?.header(LoopbackServer.clientCertificateField)
    }

    /// GETs `/get?m=<marker>`: nil on success, else the error.
    private func get(_ manager: HTTPSessionManager, _ marker: String) async -> Error? {
        do {
            let result = try await manager.get("/get?m=\(marker)")
            XCTAssertEqual(result.statusCode, 200)
            return nil
        } catch {
            return error
        }
    }

    /// Runs a data task for `/get?m=<marker>` with `identity` set on the task (nil: the manager's is left alone).
    private func taskGet(
        _ manager: HTTPSessionManager, _ marker: String, identity: ClientIdentity??
    ) async throws -> Error? {
        try await awaitCallback { done in
            let request = URLRequest(url: server.url("/get?m=\(marker)"))
            let task = manager.dataTask(with: request, completionHandler: { _, _, error in done(error) })
            if let identity { manager.setClientIdentity(identity, for: task) }
            task.resume()
        }
    }

    func testAPKCS12IdentityIsPresentedToTheServer() async throws {
        let manager = try makeManager(identity: alice)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let error = await get(manager, "p12")
        XCTAssertNil(error)
        XCTAssertEqual(subject(of: "p12"), "SessionKit Test Client alice")
    }

    /// Bob's certificate is issued by the intermediate, which the server does not trust by itself: the chain's
    /// intermediate must be sent too.
    func testAPEMIdentityWithAnEncryptedKeyIsPresentedWithItsIntermediate() async throws {
        let manager = try makeManager(identity: bob)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let error = await get(manager, "pem")
        XCTAssertNil(error)
        XCTAssertEqual(subject(of: "pem"), "SessionKit Test Client bob")
    }

    func testWithoutAnIdentityAServerRequiringOneIsAClearErrorAndReceivesNoRequest() async throws {
        let manager = try makeManager(identity: nil)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let error = await get(manager, "none")
        XCTAssertEqual((error as? URLError)?.code, .clientCertificateRequired, "\(String(describing: error))")
        XCTAssertTrue(
            (error as? URLError)?.localizedDescription.contains("clientIdentity") == true,
            "\(String(describing: error))")
        XCTAssertEqual(server.requestCount, 0)
    }

    /// A server that does not trust the certificate's issuer refuses it: a clear error of its own, no request.
    func testACertificateTheServerDoesNotTrustIsClientCertificateRejected() async throws {
        let strict = try await LoopbackServer.start(
            tls: TestCertificates.localhost,
            clientCertificateRoots: TestCertificates.directory.appendingPathComponent("untrusted-root.pem"))
        defer { Task { try? await strict.shutdown() } }
        let manager = try makeManager(identity: alice)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            _ = try await manager.get(strict.url("/get").absoluteString)
            XCTFail("the server accepted a certificate it does not trust")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .clientCertificateRejected, "\(error)")
            XCTAssertTrue("\(error)".contains("SessionKit Test Client alice"), "\(error)")
        }
        XCTAssertEqual(strict.requestCount, 0)
    }

    func testTheTasksIdentityWinsOverTheManagers() async throws {
        let manager = try makeManager(identity: alice)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let viaTask = try await taskGet(manager, "task-bob", identity: .some(bob))
        XCTAssertNil(viaTask)
        XCTAssertEqual(subject(of: "task-bob"), "SessionKit Test Client bob")
        let managers = try await taskGet(manager, "task-default", identity: nil)
        XCTAssertNil(managers)
        XCTAssertEqual(subject(of: "task-default"), "SessionKit Test Client alice")
        // nil on the task: no identity at all, whatever the manager's.
        let none = try await taskGet(manager, "task-none", identity: .some(nil))
        XCTAssertEqual((none as? URLError)?.code, .clientCertificateRequired, "\(String(describing: none))")
        XCTAssertNil(subject(of: "task-none"))
    }

    /// Two managers (same policy), a task of its own and a manager without an identity, in turns, against one
    /// keep-alive server: each request is served on a connection made with its own identity (or none), never on
    /// another's, however the turns go.
    func testConnectionsMadeWithDifferentIdentitiesAreNeverShared() async throws {
        let (managerA, managerB, managerNone) = (
            try makeManager(identity: alice), try makeManager(identity: bob), try makeManager(identity: nil)
        )
        defer {
            for manager in [managerA, managerB, managerNone] {
                manager.invalidateSessionCancelingTasks(true, resetSession: false)
            }
        }
        for round in 0..<3 {
            let errorA = await get(managerA, "a\(round)")
            XCTAssertNil(errorA)
            let errorB = await get(managerB, "b\(round)")
            XCTAssertNil(errorB)
            let errorTask = try await taskGet(managerA, "t\(round)", identity: .some(bob))
            XCTAssertNil(errorTask)
            let errorNone = await get(managerNone, "n\(round)")
            XCTAssertEqual(
                (errorNone as? URLError)?.code, .clientCertificateRequired, "\(String(describing: errorNone))")
            XCTAssertEqual(subject(of: "a\(round)"), "SessionKit Test Client alice")
            XCTAssertEqual(subject(of: "b\(round)"), "SessionKit Test Client bob")
            XCTAssertEqual(subject(of: "t\(round)"), "SessionKit Test Client bob")
            XCTAssertNil(subject(of: "n\(round)"))
        }
        // Connections were reused within an identity: one per identity kept alive (plus the refused ones).
        XCTAssertLessThan(server.connectionCount, 3 * 4)
    }

    /// A stream task (TLS from the start) presents the manager's identity, or its own; without one, the server's
    /// refusal is the same clear error.
    func testAStreamTaskPresentsItsIdentity() async throws {
        let echo = try await EchoServer.start(
            tls: TestCertificates.localhost, clientCertificateRoots: TestCertificates.rootCAFile)
        defer { Task { try? await echo.shutdown() } }
        let cases: [(manager: ClientIdentity?, task: ClientIdentity??, accepted: Bool)] = [
            (alice, nil, true), (nil, nil, false), (nil, .some(bob), true), (alice, .some(nil), false),
        ]
        for (index, identities) in cases.enumerated() {
            let manager = try makeManager(identity: identities.manager)
            defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
            let task = manager.streamTask(withHostName: "127.0.0.1", port: echo.port)
            if let identity = identities.task { manager.setClientIdentity(identity, for: task) }
            task.startSecureConnection()
            task.resume()
            do {
                try await task.write(Data("hello\n".utf8), timeout: 10)
                let (data, _) = try await task.read(minLength: 6, maxLength: 6, timeout: 10)
                XCTAssertTrue(identities.accepted, "case \(index): accepted without a client certificate")
                XCTAssertEqual(data, Data("hello\n".utf8))
            } catch {
                XCTAssertFalse(identities.accepted, "case \(index): \(error)")
                XCTAssertEqual((error as? URLError)?.code, .clientCertificateRequired, "case \(index): \(error)")
            }
            task.cancel()
        }
    }

    /// A WebSocket over wss presents the manager's identity; without one, the task fails with the clear error and
    /// no upgrade request reaches the server.
    func testAWebSocketOverWSSPresentsTheManagersIdentity() async throws {
        let webSockets = try await WebSocketServer.start(
            tls: TestCertificates.localhost, clientCertificateRoots: TestCertificates.rootCAFile)
        defer { Task { try? await webSockets.shutdown() } }
        let manager = try makeManager(identity: alice)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let task = manager.webSocketTask(with: webSockets.url("/mtls"))
        task.resume()
        try await task.send(.string("over mutual TLS"))
        let received = try await task.receive()
        XCTAssertEqual(received, .string("over mutual TLS"))
        task.cancel(with: .goingAway, reason: nil)

        manager.clientIdentity = nil
        let refused = manager.webSocketTask(with: webSockets.url("/none"))
        refused.resume()
        do {
            _ = try await refused.receive()
            XCTFail("received without a client certificate")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .clientCertificateRequired, "\(error)")
        }
        XCTAssertEqual(webSockets.seen.upgrades.count, 1, "only the upgrade with an identity reached the server")
    }

    /// A client certificate is a credential to the HTTP cache: a response stored for one identity is served to that
    /// identity alone; another (or none) goes to the server.
    func testTheCacheServesAResponseToTheIdentityItWasStoredFor() async throws {
        let cache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: nil)
        func cachingManager(_ identity: ClientIdentity?) throws -> HTTPSessionManager {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 10
            configuration.urlCache = cache
            let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
            manager.transport = .curl
            manager.securityPolicy = SecurityPolicy(
                trustingRootCertificates: [try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)])
            manager.clientIdentity = identity
            return manager
        }
        let (managerA, managerB) = (try cachingManager(alice), try cachingManager(bob))
        defer {
            managerA.invalidateSessionCancelingTasks(true, resetSession: false)
            managerB.invalidateSessionCancelingTasks(true, resetSession: false)
        }
        let path = "/cache/60"
        func serial(_ manager: HTTPSessionManager) async throws -> Int? {
            let result = try await manager.get(path)
            return (result.object as? [String: Any])?["serial"] as? Int
        }
        let first = try await serial(managerA)
        XCTAssertNotNil(first)
        let again = try await serial(managerA)
        XCTAssertEqual(again, first, "the identity it was stored for is served from the cache")
        XCTAssertEqual(server.requestCount, 1)
        let other = try await serial(managerB)
        XCTAssertNotEqual(other, first, "another identity's stored response")
        XCTAssertEqual(server.requestCount, 2, "another identity goes to the server")
        XCTAssertEqual(
            server.requests.last?.header(LoopbackServer.clientCertificateField), "SessionKit Test Client bob")
    }

    func testAManagerArchiveCarriesNoIdentity() throws {
        let manager = try makeManager(identity: alice)
        let archive = try SecureArchive.archive(manager)
        let restored = try SecureArchive.unarchive(HTTPSessionManager.self, from: archive)
        XCTAssertNil(restored.clientIdentity)
        XCTAssertNotNil((manager.copy() as? HTTPSessionManager)?.clientIdentity, "a copy in memory shares it")
        let key = try TestCertificates.client("client-alice.key")
        for secret in [alice.certificate.der, Data(String(decoding: key, as: UTF8.self).utf8.prefix(200).suffix(64))] {
            XCTAssertNil(archive.range(of: secret), "the archive holds part of the identity")
        }
    }

    func testTheFoundationTransportRefusesAnIdentityBeforeSendingAnything() async throws {
        let manager = try makeManager(identity: alice, transport: .foundation)
        manager.securityPolicy = .default  // the policy is refused there too: the identity alone is under test
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let error = await get(manager, "foundation")
        XCTAssertEqual(SessionKitError(error ?? URLError(.unknown)).kind, .session(.unsupportedByTransport))
        // A task given an identity of its own fails too, at once.
        manager.clientIdentity = nil
        let viaTask = try await taskGet(manager, "foundation-task", identity: .some(alice))
        XCTAssertEqual(SessionKitError(viaTask ?? URLError(.unknown)).kind, .session(.unsupportedByTransport))
        XCTAssertEqual(server.requestCount, 0)
    }
}
