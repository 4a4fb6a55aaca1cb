import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `NetworkReachabilityManager` against a network namespace the test creates: a veth pair brought up and down with
/// the `ip` command, the manager watching that namespace's netlink. Skipped where namespaces are not permitted.
final class ReachabilityTests: XCTestCase {
    private var namespace: String?

    override func setUp() async throws {
        try await super.setUp()
        let name = "sk-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        let created = try? await ip(["netns", "add", name])
        guard created == 0 else {
            throw XCTSkip("network namespaces are not permitted here (`ip netns add` needs root and the ip command)")
        }
        namespace = name
        for command in [
            ["link", "add", "veth0", "type", "veth", "peer", "name", "veth1"],
            ["addr", "add", "10.77.0.1/24", "dev", "veth0"],
            ["addr", "add", "10.77.0.2/24", "dev", "veth1"],
            ["link", "set", "veth1", "up"],
        ] {
            let status = try await ip(["-n", name] + command)
            XCTAssertEqual(status, 0, "ip \(command.joined(separator: " "))")
        }
    }

    override func tearDown() async throws {
        if let namespace { _ = try? await ip(["netns", "del", namespace]) }
        try await super.tearDown()
    }

    /// Runs `ip` with `arguments` to its end, without blocking a thread; returns its exit status.
    private func ip(_ arguments: [String]) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(
            fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
                ? "/usr/sbin/ip" : "/sbin/ip")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
    }

    private func inNamespace(_ arguments: [String]) async throws {
        guard let namespace else { return }
        let status = try await ip(["-n", namespace] + arguments)
        XCTAssertEqual(status, 0, "ip \(arguments.joined(separator: " "))")
    }

    private var namespacePath: String { "/var/run/netns/\(namespace ?? "")" }

    func testStatusFollowsTheLinkAndTheDefaultRoute() async throws {
        let network = try XCTUnwrap(NetworkReachabilityManager(host: nil, networkNamespace: namespacePath))
        let peer = try XCTUnwrap(NetworkReachabilityManager(host: "10.77.0.9", networkNamespace: namespacePath))
        XCTAssertEqual(network.status, .notReachable, "veth0 is down and there is no default route")
        XCTAssertEqual(peer.status, .notReachable)

        try await inNamespace(["link", "set", "veth0", "up"])
        try await inNamespace(["route", "add", "default", "via", "10.77.0.2", "dev", "veth0"])
        XCTAssertEqual(network.status, .reachable(.ethernet))
        XCTAssertEqual(peer.status, .reachable(.ethernet), "10.77.0.0/24 is on veth0")

        try await inNamespace(["link", "set", "veth0", "down"])
        XCTAssertEqual(network.status, .notReachable)
        XCTAssertFalse(peer.isReachable)

        // Loopback inside the namespace is a link of its own kind.
        try await inNamespace(["link", "set", "lo", "up"])
        let loopback = try XCTUnwrap(NetworkReachabilityManager(host: "127.0.0.1", networkNamespace: namespacePath))
        XCTAssertEqual(loopback.status, .reachable(.other))
    }

    func testListeningReportsEachChangeAndANotification() async throws {
        let network = try XCTUnwrap(NetworkReachabilityManager(host: nil, networkNamespace: namespacePath))
        let updates = LockedBox<[NetworkReachabilityManager.Status]>([])
        let notified = LockedBox(0)
        let observer = NotificationCenter.default.addObserver(
            forName: .sessionKitReachabilityDidChange, object: network, queue: nil
        ) { _ in notified.write { $0 += 1 } }
        defer { NotificationCenter.default.removeObserver(observer) }
        XCTAssertTrue(network.startListening { status in updates.write { $0.append(status) } })
        XCTAssertFalse(network.startListening { _ in }, "one listener at a time")

        // The notification is posted after the listener ran: both are waited for.
        func waitFor(_ count: Int) async throws {
            for _ in 0..<500 where updates.wrappedValue.count < count || notified.wrappedValue < count {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
        }
        try await waitFor(1)
        try await inNamespace(["link", "set", "veth0", "up"])
        try await inNamespace(["route", "add", "default", "via", "10.77.0.2", "dev", "veth0"])
        try await waitFor(2)
        try await inNamespace(["link", "set", "veth0", "down"])
        try await waitFor(3)
        network.stopListening()
        XCTAssertEqual(updates.wrappedValue, [.notReachable, .reachable(.ethernet), .notReachable])
        XCTAssertEqual(notified.wrappedValue, 3)

        // Stopped: no more updates.
        try await inNamespace(["link", "set", "veth0", "up"])
        try await inNamespace(["route", "add", "default", "via", "10.77.0.2", "dev", "veth0"])
        try await Task.sleep(nanoseconds: 500_000_000)
        XCTAssertEqual(updates.wrappedValue.count, 3)
    }

    func testAMissingNamespaceGivesNoManager() {
        XCTAssertNil(
            NetworkReachabilityManager(host: nil, networkNamespace: "/var/run/netns/does-not-exist-\(getpid())"))
    }
}
