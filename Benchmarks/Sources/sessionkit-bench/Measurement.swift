import CBenchCurl
import Foundation
import InMemoryTracing
import MetricsTestKit
import SessionKit
import BenchServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One measurement, run inside a child process, synchronously on a thread of its own: no Swift concurrency, so
/// that the same child also runs under valgrind (3.19 crashes on Swift's async entry points), and never on a
/// global-queue thread. Every wait is a semaphore on this measurement thread; delivery happens on URLSession's and
/// libcurl's own threads.
enum Measurement {
    /// Children end themselves after this long, whatever happens.
    static let timeLimit: TimeInterval = 900

    /// Per-request latencies of the sequential scenarios, in milliseconds.
    static let latencies = LockedBox<[Double]>([])
    /// RSS (KiB) after the first 1,000 requests of a soak.
    static let rssAfter1k = LockedBox<Double>(0)
    /// The private CA (PEM) that HTTPS clients trust, from the parent (`BENCH_CA_FILE`).
    static var caFile: String? { ProcessInfo.processInfo.environment["BENCH_CA_FILE"] }

    /// Runs one measurement against `base` (`http://127.0.0.1:PORT` or `https://…`, or a bare port: the in-process
    /// server over HTTP) and returns the result line: `result RATE PEAK_RSS_KIB [p99=MS] [rss1k=KIB rssEnd=KIB]`.
    static func run(client: Client, scenario: Scenario, base: String, count: Int) throws -> String {
        DispatchQueue(label: "bench.watchdog").asyncAfter(deadline: .now() + timeLimit) {
            FileHandle.standardError.write(Data("time limit reached\n".utf8))
            exit(2)
        }
        if scenario == .soak {
            // A soak reads RSS as it goes, and every client logs 8 bytes of latency per request (0.08 MiB per 10,000):
            // the log's storage is made resident before the first reading, so that it is not counted as the client's
            // growth.
            latencies.write { log in
                log = [Double](repeating: 0, count: count)
                log.removeAll(keepingCapacity: true)
            }
        }
        let root = Int(base) != nil ? "http://127.0.0.1:\(base)" : base
        let url = URL(string: root + scenario.path) ?? URL(fileURLWithPath: "/")
        let https = url.scheme == "https"
        if https, client.needsSystemTrust, ProcessInfo.processInfo.environment["BENCH_SYSTEM_TRUST_OK"] == nil {
            // URLSession on Linux trusts the system store only (no CA option, no server-trust challenge).
            return "result n/a"
        }
        let started = Date()
        var bytes = 0
        switch (client, scenario) {
        case (.libcurl, .sequential), (.libcurl, .soak):
            try Curl.sequential(url: url, count: count, scenario: scenario)
        case (.libcurl, .handshake):
            try Curl.sequential(url: url, count: count, scenario: scenario, newConnections: true)
        case (.libcurl, .concurrent64):
            try Curl.concurrent(url: url, count: count, inFlight: 64)
        case (.libcurl, .download100MiB):
            bytes = try Curl.download(url: url, to: temporaryFile())
        case (.libcurl, .memory100MiB):
            bytes = try Curl.downloadToMemory(url: url)
        case (.libcurl, .upload10MiB):
            bytes = try Curl.upload(url: url, body: uploadBody, count: count)

        case (.urlSession, .sequential), (.urlSession, .soak), (.urlSession, .handshake):
            let session = URLSession(configuration: configuration)
            let request = getRequest(url, scenario)
            for index in 0..<count {
                try timed { try wait { done in session.dataTask(with: request) { _, _, error in done(error) }.resume() } }
                if scenario == .soak { reportRSS(index, count) }
            }
        case (.urlSession, .concurrent64):
            let session = URLSession(configuration: configuration)
            try concurrently(count: count, inFlight: 64) { done in
                session.dataTask(with: url) { _, _, error in done(error) }.resume()
            }
        case (.urlSession, .download100MiB):
            let session = URLSession(configuration: configuration)
            let destination = temporaryFile()
            defer { try? FileManager.default.removeItem(at: destination) }
            try wait { done in
                session.downloadTask(with: url) { location, _, error in
                    if let location { try? FileManager.default.moveItem(at: location, to: destination) }
                    done(error)
                }.resume()
            }
            bytes = fileSize(destination)
        case (.urlSession, .memory100MiB):
            let session = URLSession(configuration: configuration)
            let received = LockedBox(0)
            try wait { done in
                session.dataTask(with: url) { data, _, error in received.write { $0 = data?.count ?? 0 }; done(error) }.resume()
            }
            bytes = received.wrappedValue
        case (.urlSession, .upload10MiB):
            let session = URLSession(configuration: configuration)
            for _ in 0..<count {
                try wait { done in session.uploadTask(with: uploadRequest(url), from: uploadBody) { _, _, error in done(error) }.resume() }
                bytes += uploadBody.count
            }

        case (.urlSessionDelegate, .sequential), (.urlSessionDelegate, .soak), (.urlSessionDelegate, .handshake):
            let raw = RawDelegateSession(configuration: configuration)
            for index in 0..<count {
                try timed { try wait { done in raw.get(url, close: scenario == .handshake) { _, error in done(error) } } }
                if scenario == .soak { reportRSS(index, count) }
            }
        case (.urlSessionDelegate, .concurrent64):
            let raw = RawDelegateSession(configuration: configuration)
            try concurrently(count: count, inFlight: 64) { done in raw.get(url) { _, error in done(error) } }
        case (.urlSessionDelegate, .download100MiB):
            let raw = RawDelegateSession(configuration: configuration)
            let destination = temporaryFile()
            defer { try? FileManager.default.removeItem(at: destination) }
            try wait { done in raw.download(url, to: destination, completion: done) }
            bytes = fileSize(destination)
        case (.urlSessionDelegate, .memory100MiB):
            let raw = RawDelegateSession(configuration: configuration)
            let received = LockedBox(0)
            try wait { done in raw.get(url, keepsBody: true) { data, error in received.write { $0 = data.count }; done(error) } }
            bytes = received.wrappedValue
        case (.urlSessionDelegate, .upload10MiB):
            let raw = RawDelegateSession(configuration: configuration)
            for _ in 0..<count {
                try wait { done in raw.upload(uploadRequest(url), body: uploadBody, completion: done) }
                bytes += uploadBody.count
            }

        case (.libcurl, .stream), (.urlSession, .stream), (.urlSessionDelegate, .stream):
            throw BenchError("the stream scenario is SessionKit's only")
        case (.ahc, _), (.ahc64, _):
            bytes = try AHC.run(client: client == .ahc64, scenario: scenario, url: url, count: count,
                                caFile: https ? caFile : nil, latencies: latencies)
        case (.sessionKit, _), (.sessionKitCurl, _):
            let manager = makeManager(transport: client == .sessionKitCurl ? .curl : .foundation, https: https)
            bytes = try runSessionKit(manager, scenario: scenario, url: url, count: count)
        case (.sessionKitCurlTraced, _):
            // Spans and metrics recorded in memory: the cost of SessionKit's observability with a backend, less the
            // backend's export.
            let manager = makeManager(transport: .curl, https: https)
            manager.tracer = InMemoryTracer(recordInjections: false, recordExtractions: false)
            manager.metricsFactory = TestMetrics()
            bytes = try runSessionKit(manager, scenario: scenario, url: url, count: count)
        case (.sessionKitCurlAsync, _):
            let manager = HTTPSessionManager(baseURL: URL(string: root), sessionConfiguration: configuration)
            configure(manager, transport: .curl, https: https)
            bytes = try runSessionKitAsync(manager, scenario: scenario, path: String(scenario.path.dropFirst()), count: count)
        case (.sessionKitCurlGet, _):
            let manager = HTTPSessionManager(baseURL: URL(string: root), sessionConfiguration: configuration)
            configure(manager, transport: .curl, https: https)
            bytes = try SessionKitVerbs.closureGet(manager, scenario: scenario, path: String(scenario.path.dropFirst()),
                                                   count: count)
        case (.sessionKitCurlCore, _):
            let manager = makeManager(transport: .curl, https: https)
            bytes = try SessionKitVerbs.coreData(manager, scenario: scenario, url: url, count: count)
        case (.openAPISessionKit, _), (.openAPIAHC, _):
            bytes = try OpenAPIClients.run(client: client, scenario: scenario, url: url, count: count,
                                           caFile: https ? caFile : nil)
        }
        let elapsed = Date().timeIntervalSince(started)
        let rate = scenario.unit == "MB/s" ? Double(bytes) / elapsed / 1_000_000 : Double(count) / elapsed
        var line = String(format: "result %.3f %.0f", rate, peakRSSKiB())
        // Read before the latencies are sorted: the sorted copy (8 bytes per request) is the harness's, not the client's.
        if trimsBeforeReading && scenario == .soak { malloc_trim(0) }
        let rssEnd = currentRSSKiB()
        let sorted = latencies.wrappedValue.sorted()
        if !sorted.isEmpty {
            line += String(format: " p99=%.3f", sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)])
        }
        if scenario == .soak {
            line += String(format: " rss1k=%.0f rssEnd=%.0f", rssAfter1k.wrappedValue, rssEnd)
        }
        return line
    }

    /// Runs `body` and records its duration as one request's latency.
    static func timed(_ body: () throws -> Void) throws {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        latencies.write { $0.append(elapsed) }
    }

    /// A GET of `url`; for the handshake scenario with `Connection: close`, so that every request opens a new
    /// connection (nginx closes it after the response; it keeps no TLS sessions, so every handshake is a full one).
    static func getRequest(_ url: URL, _ scenario: Scenario) -> URLRequest {
        var request = URLRequest(url: url)
        if scenario == .handshake { request.setValue("close", forHTTPHeaderField: "Connection") }
        return request
    }

    /// SessionKit's async API (`HTTPSessionManager.get`), from a detached Swift task; this measurement thread waits.
    static func runSessionKitAsync(_ manager: HTTPSessionManager, scenario: Scenario, path: String, count: Int) throws -> Int {
        let headers = scenario == .handshake ? ["Connection": "close"] : nil
        switch scenario {
        case .sequential, .soak, .handshake:
            try wait { done in
                Task.detached {
                    do {
                        for index in 0..<count {
                            let start = DispatchTime.now().uptimeNanoseconds
                            _ = try await manager.get(path, headers: headers)
                            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                            latencies.write { $0.append(elapsed) }
                            if scenario == .soak { reportRSS(index, count) }
                        }
                        done(nil)
                    } catch {
                        done(error)
                    }
                }
            }
            return 0
        case .concurrent64:
            let next = LockedBox(0)
            try wait { done in
                Task.detached {
                    do {
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            for _ in 0..<min(64, count) {
                                group.addTask {
                                    while next.write({ n -> Bool in n += 1; return n <= count }) {
                                        _ = try await manager.get(path)
                                    }
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
            return 0
        case .memory100MiB:
            let received = LockedBox(0)
            try wait { done in
                Task.detached {
                    do {
                        let result = try await manager.get(path)
                        received.write { $0 = result.data.count }
                        done(nil)
                    } catch {
                        done(error)
                    }
                }
            }
            return received.wrappedValue
        case .upload10MiB:
            // The async API takes parameters, not a body: the closure API's upload path stands in.
            return try runSessionKit(manager, scenario: scenario, url: URL(string: path, relativeTo: manager.baseURL)!.absoluteURL,
                                     count: count)
        case .download100MiB, .stream:
            return try runSessionKit(manager, scenario: scenario, url: URL(string: path, relativeTo: manager.baseURL)!.absoluteURL,
                                     count: count)
        }
    }

    /// The SessionKit side of every scenario; returns the bytes moved.
    static func runSessionKit(_ manager: URLSessionManager, scenario: Scenario, url: URL, count: Int) throws -> Int {
        switch scenario {
        case .sequential, .soak, .handshake:
            let request = getRequest(url, scenario)
            for index in 0..<count {
                try timed {
                    try wait { done in
                        manager.resume(manager.dataTask(with: request, completionHandler: { _, _, error in done(error) }))
                    }
                }
                if scenario == .soak { reportRSS(index, count) }
            }
            return 0
        case .concurrent64:
            try concurrently(count: count, inFlight: 64) { done in
                manager.resume(manager.dataTask(with: URLRequest(url: url), completionHandler: { _, _, error in done(error) }))
            }
            return 0
        case .download100MiB:
            let destination = temporaryFile()
            defer { try? FileManager.default.removeItem(at: destination) }
            try wait { done in
                manager.resume(manager.downloadTask(with: URLRequest(url: url), destination: { _, _ in destination },
                                                    completionHandler: { _, _, error in done(error) }))
            }
            return fileSize(destination)
        case .memory100MiB:
            let received = LockedBox(0)
            try wait { done in
                manager.resume(manager.dataTask(with: URLRequest(url: url), completionHandler: { _, object, error in
                    received.write { $0 = (object as? Data)?.count ?? 0 }
                    done(error)
                }))
            }
            return received.wrappedValue
        case .upload10MiB:
            for _ in 0..<count {
                try wait { done in
                    manager.resume(manager.uploadTask(with: uploadRequest(url), from: uploadBody,
                                                      completionHandler: { _, _, error in done(error) }))
                }
            }
            return count * uploadBody.count
        case .stream:
            return try streamIntoSlowReader(manager, url: URL(string: url.absoluteString + String(count << 20)) ?? url)
        }
    }

    /// Streams `url` through `bytes(for:)` into a reader that sleeps 5 ms per MiB; returns the bytes read. The
    /// async reader runs in a detached Swift task; this measurement thread waits for it.
    static func streamIntoSlowReader(_ manager: URLSessionManager, url: URL) throws -> Int {
        let total = LockedBox(0)
        try wait { done in
            Task.detached {
                do {
                    let streamed = try await manager.bytes(for: URLRequest(url: url))
                    var sinceSleep = 0
                    for try await chunk in streamed.body {
                        let count = total.write { total -> Int in
                            total += chunk.count
                            return total
                        }
                        sinceSleep += chunk.count
                        if sinceSleep >= 1 << 20 {
                            sinceSleep = 0
                            try await Task.sleep(nanoseconds: 5_000_000)
                        }
                        if count % (128 << 20) < chunk.count {
                            print(String(format: "%6d MiB read: RSS %.1f MiB", count >> 20, currentRSSKiB() / 1024))
                        }
                    }
                    done(nil)
                } catch {
                    done(error)
                }
            }
        }
        return total.wrappedValue
    }

    /// Prints the RSS every tenth of a soak. With `SESSIONKIT_BENCH_TRIM` set, glibc first returns the free memory it
    /// can to the system (`malloc_trim(0)`) at each reading: what is left is what the process holds, not what the
    /// allocator keeps of freed blocks.
    static func reportRSS(_ index: Int, _ count: Int) {
        let step = max(1, count / 10)
        if index == 0 {
            // The reading's own code (reading and parsing `/proc/self/status`, formatting the line) is paged in now,
            // before the reading at 1,000 that growth is measured from: 64–256 KiB of libswiftCore, libFoundation and
            // this binary were counted as the clients' growth otherwise, raw libcurl's included.
            _ = String(format: "%8d requests: RSS %.1f MiB", index, currentRSSKiB() / 1024)
        }
        guard index == 999 || (index + 1) % step == 0 else { return }
        if trimsBeforeReading { malloc_trim(0) }
        if index == 999 { rssAfter1k.write { $0 = currentRSSKiB() } }
        guard (index + 1) % step == 0 else { return }
        print(String(format: "%8d requests: RSS %.1f MiB", index + 1, currentRSSKiB() / 1024))
    }

    static let trimsBeforeReading = ProcessInfo.processInfo.environment["SESSIONKIT_BENCH_TRIM"] != nil

    /// The session configuration every client uses: `.default`, or without a URL cache when
    /// `SESSIONKIT_BENCH_NO_CACHE` is set (to tell URLSession's own growth from SessionKit's), with
    /// `httpMaximumConnectionsPerHost` from `SESSIONKIT_BENCH_CONNECTIONS` when set (URLSession's default is 6).
    static var configuration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        let environment = ProcessInfo.processInfo.environment
        if environment["SESSIONKIT_BENCH_NO_CACHE"] != nil { configuration.urlCache = nil }
        if let connections = environment["SESSIONKIT_BENCH_CONNECTIONS"].flatMap(Int.init) {
            configuration.httpMaximumConnectionsPerHost = connections
        }
        return configuration
    }

    static func makeManager(transport: Transport = .foundation, https: Bool = false) -> URLSessionManager {
        let manager = URLSessionManager(sessionConfiguration: configuration)
        configure(manager, transport: transport, https: https)
        return manager
    }

    /// The transport, a serializer that keeps the body as `Data`, and over HTTPS (curl transport) AFNetworking's rule
    /// for a private CA: certificate pinning of the CA, `allowInvalidCertificates` (the CA is not in the system
    /// store) and `validatesDomainName`.
    static func configure(_ manager: URLSessionManager, transport: Transport, https: Bool) {
        manager.transport = transport
        manager.responseSerializer = HTTPResponseSerializer()
        // The 100 MiB-into-memory row is above the default in-memory limit (64 MiB): lifted, as a user would.
        manager.responseBodyLimits.maximumInMemory = nil
        if https, let caFile, let der = try? TestCertificates.derCertificate(at: URL(fileURLWithPath: caFile)) {
            let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [der])
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = true
            manager.securityPolicy = policy
        }
    }

    /// The 10 MiB body of the upload scenario.
    static let uploadBody = Data(repeating: UInt8(ascii: "u"), count: 10 << 20)

    static func uploadRequest(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        return request
    }

    static func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bench-\(getpid())-\(UUID().uuidString)")
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size]) as? NSNumber)?.intValue ?? 0
    }

    /// Starts one request and blocks this measurement thread (never a global-queue thread) until it calls back.
    static func wait(_ start: (@escaping (Error?) -> Void) -> Void) throws {
        let semaphore = DispatchSemaphore(value: 0)
        let failure = LockedBox<Error?>(nil)
        start { error in
            failure.write { $0 = error }
            semaphore.signal()
        }
        semaphore.wait()
        if let error = failure.wrappedValue { throw error }
    }

    /// Keeps `inFlight` requests running until `count` completed; `start` calls its callback once per request.
    static func concurrently(count: Int, inFlight: Int, start: @escaping (@escaping (Error?) -> Void) -> Void) throws {
        let state = LockedBox<(started: Int, finished: Int, error: Error?)>((0, 0, nil))
        try wait { finished in
            func launch() {
                let go = state.write { s -> Bool in
                    guard s.started < count else { return false }
                    s.started += 1
                    return true
                }
                guard go else { return }
                start { error in
                    let done = state.write { s -> Bool in
                        s.finished += 1
                        if let error, s.error == nil { s.error = error }
                        return s.finished == count
                    }
                    if done { finished(state.wrappedValue.error) } else { launch() }
                }
            }
            for _ in 0..<min(inFlight, count) { launch() }
        }
    }
}

/// Raw libcurl, as a C program would use it: the upper bound of what any client here can do.
enum Curl {
    private static let discard: bench_curl_data_callback = { _, size, count, _ in size * count }
    private static let toFile: bench_curl_data_callback = { buffer, size, count, file in
        guard let buffer, let file else { return 0 }
        return fwrite(buffer, size, count, file.assumingMemoryBound(to: FILE.self))
    }

    static func check(_ code: CURLcode) throws {
        guard code == CURLE_OK else { throw BenchError("libcurl: \(String(cString: curl_easy_strerror(code)))") }
    }

    /// An easy handle for `url`; over HTTPS it trusts the private CA (`CURLOPT_CAINFO`) and keeps no TLS session, so
    /// that a new connection is a full handshake.
    static func makeHandle(_ url: URL) throws -> UnsafeMutableRawPointer {
        guard let handle = curl_easy_init() else { throw BenchError("curl_easy_init failed") }
        try check(bench_curl_easy_setopt_string(handle, CURLOPT_URL, url.absoluteString))
        try check(bench_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, discard))
        if url.scheme == "https", let caFile = Measurement.caFile {
            try check(bench_curl_easy_setopt_string(handle, CURLOPT_CAINFO, caFile))
            try check(bench_curl_easy_setopt_long(handle, CURLOPT_SSL_SESSIONID_CACHE, 0))
        }
        return handle
    }

    /// `count` GETs on one handle; with `newConnections`, each with `Connection: close`.
    static func sequential(url: URL, count: Int, scenario: Scenario, newConnections: Bool = false) throws {
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        let headers: UnsafeMutablePointer<curl_slist>? = newConnections ? curl_slist_append(nil, "Connection: close") : nil
        defer { curl_slist_free_all(headers) }
        if headers != nil { try check(bench_curl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, headers)) }
        for index in 0..<count {
            try Measurement.timed { try check(curl_easy_perform(handle)) }
            if scenario == .soak { Measurement.reportRSS(index, count) }
        }
    }

    static func concurrent(url: URL, count: Int, inFlight: Int) throws {
        guard let multi = curl_multi_init() else { throw BenchError("curl_multi_init failed") }
        defer { curl_multi_cleanup(multi) }
        _ = bench_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, inFlight)
        var handles: [UnsafeMutableRawPointer] = []
        defer { handles.forEach { curl_multi_remove_handle(multi, $0); curl_easy_cleanup($0) } }
        var started = 0
        var finished = 0
        for _ in 0..<min(inFlight, count) {
            let handle = try makeHandle(url)
            handles.append(handle)
            curl_multi_add_handle(multi, handle)
            started += 1
        }
        var running: Int32 = 0
        while finished < count {
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                try check(message.pointee.data.result)
                finished += 1
                curl_multi_remove_handle(multi, handle)
                if started < count {
                    curl_multi_add_handle(multi, handle)
                    started += 1
                }
            }
            if finished < count { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
    }

    /// A growing buffer that the write callback appends to.
    final class Sink {
        var data = Data()
    }

    private static let toSink: bench_curl_data_callback = { buffer, size, count, sink in
        guard let buffer, let sink else { return 0 }
        Unmanaged<Sink>.fromOpaque(sink).takeUnretainedValue().data.append(UnsafeRawPointer(buffer).assumingMemoryBound(to: UInt8.self),
                                                                          count: size * count)
        return size * count
    }

    static func downloadToMemory(url: URL) throws -> Int {
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        let sink = Sink()
        try check(bench_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, toSink))
        try check(bench_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque()))
        try check(curl_easy_perform(handle))
        return sink.data.count
    }

    /// `count` POSTs of `body`, one connection.
    static func upload(url: URL, body: Data, count: Int) throws -> Int {
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        var headers: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Content-Type: application/octet-stream")
        headers = curl_slist_append(headers, "Expect:")
        defer { curl_slist_free_all(headers) }
        try check(bench_curl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, headers))
        try body.withUnsafeBytes { bytes in
            try check(bench_curl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count)))
            try check(bench_curl_easy_setopt_pointer(handle, CURLOPT_POSTFIELDS, bytes.baseAddress))
            for _ in 0..<count { try check(curl_easy_perform(handle)) }
        }
        return body.count * count
    }

    static func download(url: URL, to destination: URL) throws -> Int {
        guard let file = fopen(destination.path, "wb") else { throw BenchError("cannot open \(destination.path)") }
        defer { try? FileManager.default.removeItem(at: destination) }
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        try check(bench_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, toFile))
        try check(bench_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, file))
        let code = curl_easy_perform(handle)
        fclose(file)
        try check(code)
        return Measurement.fileSize(destination)
    }
}
