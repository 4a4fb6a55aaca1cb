import BenchServer
import Foundation
import HTTPTypes
import SessionKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The two SessionKit APIs that users call and that `Measurement` did not run before wave 3 (issue 23, item 6): the
/// closure verb `HTTPSessionManager.get(_:parameters:headers:progress:success:failure:)` and the HTTP core API
/// `data(for: HTTPRequest)`. The task API (`dataTask(with:)`) and the async verb (`try await manager.get(_:)`) stay in
/// `Measurement`. Only the small-GET scenarios (sequential, 64 in flight, new connection per GET) and the soak run
/// here: the large transfers go through the task API.
enum SessionKitVerbs {
    /// The closure verb, as AFNetworking's `GET:parameters:headers:progress:success:failure:` is called: the
    /// manager's default `HTTPRequestSerializer` builds the request, and the response serializer is
    /// `HTTPResponseSerializer` (set by `Measurement.configure`, as on every SessionKit client here), so that the
    /// status is validated and the body kept as `Data` without JSON parsing weighing on the count.
    static func closureGet(_ manager: HTTPSessionManager, scenario: Scenario, path: String, count: Int) throws -> Int {
        let headers = scenario == .handshake ? ["Connection": "close"] : nil
        let get: (@escaping (Error?) -> Void) -> Void = { done in
            _ = manager.get(path, parameters: nil, headers: headers, progress: nil,
                            success: { _, _ in done(nil) }, failure: { _, error in done(error) })
        }
        switch scenario {
        case .sequential, .soak, .handshake:
            for index in 0..<count {
                try Measurement.timed { try Measurement.wait(get) }
                if scenario == .soak { Measurement.reportRSS(index, count) }
            }
        case .concurrent64:
            try Measurement.concurrently(count: count, inFlight: 64, start: get)
        case .download100MiB, .memory100MiB, .upload10MiB, .stream:
            throw BenchError("the closure verb runs the small-GET scenarios only")
        }
        return 0
    }

    /// The HTTP core API: one swift-http-types `HTTPRequest` (built once, as the task API's `URLRequest` is), sent
    /// with `try await manager.data(for:)` from a detached Swift task while this measurement thread waits. The core API
    /// does not validate the status, so the loop does.
    static func coreData(_ manager: URLSessionManager, scenario: Scenario, url: URL, count: Int) throws -> Int {
        guard let scheme = url.scheme, let host = url.host else { throw BenchError("no scheme or host in \(url)") }
        var request = HTTPRequest(method: .get, scheme: scheme, authority: url.port.map { "\(host):\($0)" } ?? host,
                                  path: url.path)
        if scenario == .handshake { request.headerFields[.connection] = "close" }
        let built = request
        let get: @Sendable () async throws -> Void = {
            let (_, response) = try await manager.data(for: built)
            guard response.status == .ok else { throw BenchError("data(for:): status \(response.status)") }
        }
        guard [.sequential, .soak, .handshake, .concurrent64].contains(scenario) else {
            throw BenchError("the HTTP core API runs the small-GET scenarios only")
        }
        try runAsync(scenario: scenario, count: count, get)
        return 0
    }

    /// Runs `get` `count` times from a detached Swift task while this measurement thread waits: one after another
    /// (each one's latency recorded; the RSS reported in a soak) or 64 at a time.
    static func runAsync(scenario: Scenario, count: Int, _ get: @escaping @Sendable () async throws -> Void) throws {
        switch scenario {
        case .sequential, .soak, .handshake:
            try Measurement.wait { done in
                Task.detached {
                    do {
                        for index in 0..<count {
                            let start = DispatchTime.now().uptimeNanoseconds
                            try await get()
                            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                            Measurement.latencies.write { $0.append(elapsed) }
                            if scenario == .soak { Measurement.reportRSS(index, count) }
                        }
                        done(nil)
                    } catch {
                        done(error)
                    }
                }
            }
        case .concurrent64:
            let next = LockedBox(0)
            try Measurement.wait { done in
                Task.detached {
                    do {
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            for _ in 0..<min(64, count) {
                                group.addTask {
                                    while next.write({ n -> Bool in n += 1; return n <= count }) { try await get() }
                                }
                            }
                            try await group.waitForAll()
                        }
                        done(nil)
                    } catch {
                        done(error)
                    }
                }
            }
        case .download100MiB, .memory100MiB, .upload10MiB, .stream:
            throw BenchError("\(scenario.title) is not a small-GET scenario")
        }
    }
}
