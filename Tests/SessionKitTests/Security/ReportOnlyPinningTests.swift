import Foundation
import Logging
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Keeps the pinning reports it receives.
private final class PinningReportMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: `log` is a `LockedBox`.
    let queue = DispatchQueue(label: "test.pinning-monitor")
    private let log = LockedBox<[(host: String, report: PinningReport)]>([])

    var reports: [(host: String, report: PinningReport)] { log.wrappedValue }

    func flush() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport) {
        log.write { $0.append((host, report)) }
    }
}

/// `SecurityPolicy.reportsOnly` against loopback TLS servers (curl transport): a pin mismatch is let through and
/// reported to the request's monitors and the log; off, it is refused before any request byte.
final class ReportOnlyPinningTests: XCTestCase {
    /// A public-key pin that no test certificate has.
    private static let unrelatedPin = "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

    private func policy(reportsOnly: Bool) -> SecurityPolicy {
        let policy = SecurityPolicy(pinnedPublicKeyHashes: [Self.unrelatedPin])
        policy.allowInvalidCertificates = true  // the test root is not in the system store: the pins alone decide
        policy.reportsOnly = reportsOnly
        return policy
    }

    private func manager(
        _ server: LoopbackServer, policy: SecurityPolicy, monitors: [any EventMonitor]
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        manager.securityPolicy = policy
        manager.eventMonitors = monitors
        return manager
    }

    /// The pins of the chain the localhost server presents: its leaf, then the root.
    private func servedPins() throws -> [String] {
        let chain = try Certificate.certificates(fromPEM: Data(contentsOf: TestCertificates.localhost.chainFile))
        return chain.map(\.publicKeyPin)
    }

    func testAMismatchIsReportedToMonitorsAndTheLogAndTheRequestGoesOn() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        let other = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer {
            Task {
                try? await server.shutdown()
                try? await other.shutdown()
            }
        }
        let lines = LockedBox<[String]>([])
        let logging = LoggingEventMonitor(logger: Logger(label: "pins") { _ in CapturingLogHandler(lines: lines) })
        let monitor = PinningReportMonitor()
        let manager = manager(server, policy: policy(reportsOnly: true), monitors: [monitor, logging])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }

        let result = try await manager.get("/get")
        XCTAssertEqual(result.statusCode, 200)
        // Through the task API too, on a new connection (another server): every API reaches the monitors.
        let error: Error? = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: other.url("/get")), completionHandler: { _, _, error in done(error) })
            task.resume()
        }
        XCTAssertNil(error)
        XCTAssertEqual(server.requestCount, 1)
        XCTAssertEqual(other.requestCount, 1)

        await monitor.flush()
        await withCheckedContinuation { continuation in logging.queue.async { continuation.resume() } }
        let pins = try servedPins()
        XCTAssertEqual(monitor.reports.count, 2)
        for (host, report) in monitor.reports {
            XCTAssertEqual(host, "127.0.0.1")
            XCTAssertEqual(report.host, "127.0.0.1")
            XCTAssertEqual(report.publicKeyHashes, pins)
            XCTAssertEqual(report.certificateChain.count, 2)
            XCTAssertTrue(report.reason.contains("pinned public key"), report.reason)
        }
        let warnings = lines.wrappedValue.filter { $0.hasPrefix("[warning]") && $0.contains("pinning failed") }
        XCTAssertEqual(warnings.count, 2, lines.wrappedValue.joined(separator: "\n"))
        for pin in pins {
            XCTAssertTrue(warnings.allSatisfy { $0.contains(pin) }, "\(pin) missing from \(warnings)")
        }
    }

    /// OpenSSL calls back at the leaf once for each error it meets there (a self-signed leaf: its own issuer is not
    /// trusted) and once more for the leaf itself: the policy decides once per handshake, so one report per connection.
    func testAMismatchOnAChainOpenSSLCannotVerifyIsReportedOncePerConnection() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.served("self-signed"))
        defer { Task { try? await server.shutdown() } }
        let monitor = PinningReportMonitor()
        let manager = manager(server, policy: policy(reportsOnly: true), monitors: [monitor])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let result = try await manager.get("/get")
        XCTAssertEqual(result.statusCode, 200)
        await monitor.flush()
        XCTAssertEqual(monitor.reports.count, 1, "\(monitor.reports.map(\.report.reason))")
    }

    func testWithoutReportsOnlyAMismatchIsRefusedBeforeAnyRequest() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let monitor = PinningReportMonitor()
        let manager = manager(server, policy: policy(reportsOnly: false), monitors: [monitor])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            _ = try await manager.get("/get")
            XCTFail("a pin mismatch was let through")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .serverCertificateUntrusted)
        }
        await monitor.flush()
        XCTAssertTrue(monitor.reports.isEmpty)
        XCTAssertEqual(server.requestCount, 0)
    }

    /// reportsOnly covers the pins only: a chain the policy validates must still be trusted.
    func testAnUntrustedChainIsRefusedEvenWhenPinsOnlyReport() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let policy = policy(reportsOnly: true)
        policy.allowInvalidCertificates = false  // the chain is checked against the system store, which lacks the root
        let monitor = PinningReportMonitor()
        let manager = manager(server, policy: policy, monitors: [monitor])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            _ = try await manager.get("/get")
            XCTFail("an untrusted chain was let through")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .serverCertificateHasUnknownRoot)
        }
        await monitor.flush()
        XCTAssertTrue(monitor.reports.isEmpty)
        XCTAssertEqual(server.requestCount, 0)
    }

    func testReportsOnlyIsArchivedAndOldArchivesEnforce() throws {
        for flag in [true, false] {
            let policy = policy(reportsOnly: flag)
            let restored = try SecureArchive.unarchive(SecurityPolicy.self, from: SecureArchive.archive(policy))
            XCTAssertEqual(restored.reportsOnly, flag)
            XCTAssertEqual(restored.pinnedPublicKeyHashes, [Self.unrelatedPin])
            XCTAssertEqual((policy.copy() as? SecurityPolicy)?.reportsOnly, flag)
        }
        let old = try Data(
            contentsOf: ArchiveFixtures.directory.appendingPathComponent("v1/SecurityPolicy.archive"))
        XCTAssertFalse(try SecureArchive.unarchive(SecurityPolicy.self, from: old).reportsOnly)
        XCTAssertFalse(SecurityPolicy.default.reportsOnly)
    }
}
