import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A test case with a fresh loopback server per test, and helpers that wait for callbacks without blocking a
/// thread (tests never park the main thread or global-queue threads on the network).
class LoopbackTestCase: XCTestCase {
    var server: LoopbackServer!

    override func setUp() async throws {
        try await super.setUp()
        server = try await LoopbackServer.start()
    }

    override func tearDown() async throws {
        try await server?.shutdown()
        server = nil
        try await super.tearDown()
    }

    /// The transport of the transport-neutral tests: `SESSIONKIT_TEST_TRANSPORT` (`foundation` or `curl`), so that
    /// `make test` runs them on both.
    static var testTransport: Transport {
        ProcessInfo.processInfo.environment["SESSIONKIT_TEST_TRANSPORT"].flatMap(Transport.init(rawValue:)) ?? .curl
    }

    /// A manager with a short timeout, on the loopback server.
    func makeManager(
        timeout: TimeInterval = 10, transport: Transport = LoopbackTestCase.testTransport
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = transport
        return manager
    }

    /// A manager on the curl transport for the loopback server, on an ephemeral configuration with a cookie storage
    /// of its own; `configure` may change the configuration first.
    func makeCurlManagerWithOwnCookies(
        _ configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = makeOwnCookieStorage()
        configure(configuration)
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        return manager
    }
}

extension XCTestCase {
    /// A cookie storage of its own: empty, and shared with no other test.
    func makeOwnCookieStorage() -> HTTPCookieStorage {
        HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: "sessionkit.tests.\(UUID())")
    }

    /// A manager on the curl transport that trusts the test root CA by pinning it (for the TLS and HTTP/2 servers),
    /// with a short timeout, and `baseURL` for its verbs.
    func makeRootCAPinnedManager(baseURL: URL? = nil) throws -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let manager = HTTPSessionManager(baseURL: baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        let policy = SecurityPolicy(
            pinningMode: .certificate,
            pinnedCertificates: [try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)])
        policy.allowInvalidCertificates = true
        manager.securityPolicy = policy
        return manager
    }
}

/// Suspends until `body` calls its callback, failing the test (instead of hanging) after `timeout` seconds.
func awaitCallback<T>(
    timeout: TimeInterval = 30,
    file: StaticString = #filePath,
    line: UInt = #line,
    _ body: (@escaping (T) -> Void) -> Void
) async throws -> T {
    let once = OnceBox<T>()
    body { value in once.resolve(value) }
    return try await once.value(timeout: timeout, file: file, line: line)
}

/// A value delivered once; later deliveries are counted (so a test can assert "exactly once").
final class OnceBox<T>: @unchecked Sendable {
    // @unchecked Sendable: all state is guarded by `lock`.
    private let lock = NSLock()
    private var result: T?
    private var continuation: CheckedContinuation<T?, Never>?
    private(set) var deliveries = 0

    func resolve(_ value: T) {
        lock.lock()
        deliveries += 1
        guard deliveries == 1 else { return lock.unlock() }
        if let continuation {
            self.continuation = nil
            lock.unlock()
            continuation.resume(returning: value)
        } else {
            result = value
            lock.unlock()
        }
    }

    private func timeOut() {
        lock.lock()
        let continuation = self.continuation
        self.continuation = nil
        lock.unlock()
        continuation?.resume(returning: nil)
    }

    func value(timeout: TimeInterval, file: StaticString, line: UInt) async throws -> T {
        let value: T? = await withCheckedContinuation { continuation in
            lock.lock()
            if let result {
                lock.unlock()
                continuation.resume(returning: result)
                return
            }
            self.continuation = continuation
            lock.unlock()
            DispatchQueue(label: "test.timeout").asyncAfter(deadline: .now() + timeout) { [weak self] in
                self?.timeOut()
            }
        }
        guard let value else {
            XCTFail("timed out after \(timeout) s waiting for a callback", file: file, line: line)
            throw URLError(.timedOut)
        }
        return value
    }
}

/// Counts calls from any thread.
final class CallCounter: @unchecked Sendable {
    // @unchecked Sendable: `count` is guarded by `lock`.
    private let lock = NSLock()
    private var storage = 0

    func increment() {
        lock.lock()
        storage += 1
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return storage
    }
}

/// The JSON dictionary an echo endpoint returned.
func echo(_ object: Any?, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
    try XCTUnwrap(
        object as? [String: Any], "expected an echo document, got \(String(describing: object))", file: file, line: line
    )
}
