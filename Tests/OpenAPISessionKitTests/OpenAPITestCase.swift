#if OpenAPI  // the package's `OpenAPI` trait: `swift build --build-tests --traits OpenAPI`
    import Foundation
    import OpenAPIRuntime
    import OpenAPISessionKit
    import SessionKit
    import SessionKitTestSupport
    import XCTest

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// A test case with a fresh loopback server per test and the generated client (`Generated/`, from `openapi.yaml`)
    /// on it, through `SessionKitTransport`.
    class OpenAPITestCase: XCTestCase {
        // Set in setUp, read by the test's own methods only.
        nonisolated(unsafe) var server: LoopbackServer!

        override func setUp() async throws {
            try await super.setUp()
            server = try await LoopbackServer.start()
        }

        override func tearDown() async throws {
            try await server?.shutdown()
            server = nil
            try await super.tearDown()
        }

        /// The transport of the transport-neutral tests: `SESSIONKIT_TEST_TRANSPORT` (`foundation` or `curl`).
        static var testTransport: Transport {
            ProcessInfo.processInfo.environment["SESSIONKIT_TEST_TRANSPORT"].flatMap(Transport.init(rawValue:)) ?? .curl
        }

        /// A manager with a short timeout and no cache.
        func makeManager(transport: Transport = OpenAPITestCase.testTransport) -> URLSessionManager {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 30
            configuration.urlCache = nil
            let manager = URLSessionManager(sessionConfiguration: configuration)
            manager.transport = transport
            return manager
        }

        /// The generated client, sending through `manager` to `server` (this test's by default) under `basePath`.
        func client(
            _ manager: URLSessionManager? = nil, on server: LoopbackServer? = nil, host: String = "127.0.0.1",
            basePath: String = "/openapi"
        ) throws -> Client {
            let server = server ?? self.server!
            let scheme = server.isTLS ? "https" : "http"
            let url = try XCTUnwrap(URL(string: "\(scheme)://\(host):\(server.port)\(basePath)"))
            return Client(serverURL: url, transport: SessionKitTransport(manager: manager ?? makeManager()))
        }

        /// Waits (bounded: 10 s) until `condition` holds.
        func eventually(_ condition: () -> Bool) async throws {
            for _ in 0..<500 where !condition() { try await Task.sleep(nanoseconds: 20_000_000) }
        }

        /// The process's resident set size in bytes, from `/proc/self/statm`.
        static func residentBytes() -> Int {
            guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
            let fields = statm.split(separator: " ")
            guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
            return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        }
    }

    /// The error a generated call threw, inside the runtime's `ClientError`.
    func underlyingError(_ error: Error, file: StaticString = #filePath, line: UInt = #line) -> Error? {
        guard let clientError = error as? ClientError else {
            XCTFail("not a ClientError: \(error)", file: file, line: line)
            return nil
        }
        return clientError.underlyingError
    }
#endif
