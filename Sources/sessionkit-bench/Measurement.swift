import CCurl
import Foundation
import SessionKit
import SessionKitTestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One measurement, run inside a child process.
enum Measurement {
    /// Children end themselves after this long, whatever happens.
    static let timeLimit: TimeInterval = 300

    static func run(client: Client, scenario: Scenario, port: Int, count: Int) async throws -> String {
        DispatchQueue(label: "bench.watchdog").asyncAfter(deadline: .now() + timeLimit) {
            FileHandle.standardError.write(Data("time limit reached\n".utf8))
            exit(2)
        }
        let url = URL(string: "http://127.0.0.1:\(port)\(scenario.path)") ?? URL(fileURLWithPath: "/")
        let started = Date()
        var bytes = 0
        switch (client, scenario) {
        case (.libcurl, .sequential), (.libcurl, .soak):
            try await onThread { try Curl.sequential(url: url, count: count) }
        case (.libcurl, .concurrent64):
            try await onThread { try Curl.concurrent(url: url, count: count, inFlight: 64) }
        case (.libcurl, .download100MiB):
            bytes = try await onThread { try Curl.download(url: url, to: temporaryFile()) }
        case (.urlSession, .sequential), (.urlSession, .soak):
            let session = URLSession(configuration: configuration)
            for index in 0..<count {
                try await rawGet(session, url)
                if scenario == .soak { reportRSS(index, count) }
            }
        case (.urlSession, .concurrent64):
            let shared = URLSession(configuration: configuration)
            try await concurrently(count: count, inFlight: 64) { done in
                shared.dataTask(with: url) { _, _, error in done(error) }.resume()
            }
        case (.urlSession, .download100MiB):
            bytes = try await rawDownload(URLSession(configuration: configuration), url)
        case (.urlSessionDelegate, .sequential), (.urlSessionDelegate, .soak):
            let raw = RawDelegateSession(configuration: configuration)
            for index in 0..<count {
                let error: Error? = await withCheckedContinuation { continuation in
                    raw.get(url) { continuation.resume(returning: $0) }
                }
                if let error { throw error }
                if scenario == .soak { reportRSS(index, count) }
            }
        case (.urlSessionDelegate, .concurrent64):
            let raw = RawDelegateSession(configuration: configuration)
            try await concurrently(count: count, inFlight: 64) { done in raw.get(url, completion: done) }
        case (.urlSessionDelegate, .download100MiB):
            let raw = RawDelegateSession(configuration: configuration)
            let destination = temporaryFile()
            defer { try? FileManager.default.removeItem(at: destination) }
            let error: Error? = await withCheckedContinuation { continuation in
                raw.download(url, to: destination) { continuation.resume(returning: $0) }
            }
            if let error { throw error }
            bytes = fileSize(destination)
        case (.sessionKit, .sequential), (.sessionKit, .soak), (.sessionKitCurl, .sequential), (.sessionKitCurl, .soak):
            let manager = makeManager(transport: client == .sessionKitCurl ? .curl : .foundation)
            for index in 0..<count {
                try await sessionKitGet(manager, url)
                if scenario == .soak { reportRSS(index, count) }
            }
        case (.sessionKit, .concurrent64), (.sessionKitCurl, .concurrent64):
            let manager = makeManager(transport: client == .sessionKitCurl ? .curl : .foundation)
            try await concurrently(count: count, inFlight: 64) { done in
                manager.resume(manager.dataTask(with: URLRequest(url: url), completionHandler: { _, _, error in done(error) }))
            }
        case (.sessionKit, .download100MiB):
            bytes = try await sessionKitDownload(makeManager(), url)
        case (.sessionKitCurl, .download100MiB):
            bytes = try await sessionKitDownload(makeManager(transport: .curl), url)
        }
        let elapsed = Date().timeIntervalSince(started)
        let rate = scenario == .download100MiB ? Double(bytes) / elapsed / 1_000_000 : Double(count) / elapsed
        return String(format: "result %.3f %.0f", rate, peakRSSKiB())
    }

    /// Prints the RSS every tenth of a soak.
    static func reportRSS(_ index: Int, _ count: Int) {
        let step = max(1, count / 10)
        guard (index + 1) % step == 0 else { return }
        print(String(format: "%8d requests: RSS %.1f MiB", index + 1, currentRSSKiB() / 1024))
    }

    /// The session configuration every client uses: `.default`, or without a URL cache when
    /// `SESSIONKIT_BENCH_NO_CACHE` is set (to tell URLSession's own growth from SessionKit's).
    static var configuration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        if ProcessInfo.processInfo.environment["SESSIONKIT_BENCH_NO_CACHE"] != nil { configuration.urlCache = nil }
        return configuration
    }

    static func makeManager(transport: Transport = .foundation) -> URLSessionManager {
        let manager = URLSessionManager(sessionConfiguration: configuration)
        manager.transport = transport
        manager.responseSerializer = HTTPResponseSerializer()
        return manager
    }

    static func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bench-\(getpid())-\(UUID().uuidString)")
    }

    // MARK: - URLSession and SessionKit

    static func rawGet(_ session: URLSession, _ url: URL) async throws {
        let error: Error? = await withCheckedContinuation { continuation in
            session.dataTask(with: url) { _, _, error in continuation.resume(returning: error) }.resume()
        }
        if let error { throw error }
    }

    static func sessionKitGet(_ manager: URLSessionManager, _ url: URL) async throws {
        let error: Error? = await withCheckedContinuation { continuation in
            manager.resume(manager.dataTask(with: URLRequest(url: url), completionHandler: { _, _, error in
                continuation.resume(returning: error)
            }))
        }
        if let error { throw error }
    }

    static func rawDownload(_ session: URLSession, _ url: URL) async throws -> Int {
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        let error: Error? = await withCheckedContinuation { continuation in
            session.downloadTask(with: url) { location, _, error in
                if let location { try? FileManager.default.moveItem(at: location, to: destination) }
                continuation.resume(returning: error)
            }.resume()
        }
        if let error { throw error }
        return fileSize(destination)
    }

    static func sessionKitDownload(_ manager: URLSessionManager, _ url: URL) async throws -> Int {
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        let error: Error? = await withCheckedContinuation { continuation in
            manager.resume(manager.downloadTask(with: URLRequest(url: url), destination: { _, _ in destination },
                                                completionHandler: { _, _, error in continuation.resume(returning: error) }))
        }
        if let error { throw error }
        return fileSize(destination)
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size]) as? NSNumber)?.intValue ?? 0
    }

    /// Keeps `inFlight` requests running until `count` completed; `start` calls its callback once per request.
    static func concurrently(count: Int, inFlight: Int, start: @escaping (@escaping (Error?) -> Void) -> Void) async throws {
        let state = LockedBox<(started: Int, finished: Int, error: Error?)>((0, 0, nil))
        let _: Void = await withCheckedContinuation { continuation in
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
                    if done { continuation.resume() } else { launch() }
                }
            }
            for _ in 0..<min(inFlight, count) { launch() }
        }
        if let error = state.wrappedValue.error { throw error }
    }

    /// Runs blocking libcurl work on a thread of its own (never a global-queue thread).
    static func onThread<T>(_ work: @escaping () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do { continuation.resume(returning: try work()) } catch { continuation.resume(throwing: error) }
            }
            thread.start()
        }
    }
}

/// Raw libcurl, as a C program would use it: the upper bound of what any client here can do.
enum Curl {
    private static let discard: sk_curl_data_callback = { _, size, count, _ in size * count }
    private static let toFile: sk_curl_data_callback = { buffer, size, count, file in
        guard let buffer, let file else { return 0 }
        return fwrite(buffer, size, count, file.assumingMemoryBound(to: FILE.self))
    }

    static func check(_ code: CURLcode) throws {
        guard code == CURLE_OK else { throw BenchError("libcurl: \(String(cString: curl_easy_strerror(code)))") }
    }

    static func makeHandle(_ url: URL) throws -> UnsafeMutableRawPointer {
        guard let handle = curl_easy_init() else { throw BenchError("curl_easy_init failed") }
        try check(sk_curl_easy_setopt_string(handle, CURLOPT_URL, url.absoluteString))
        try check(sk_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, discard))
        return handle
    }

    static func sequential(url: URL, count: Int) throws {
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        for _ in 0..<count { try check(curl_easy_perform(handle)) }
    }

    static func concurrent(url: URL, count: Int, inFlight: Int) throws {
        guard let multi = curl_multi_init() else { throw BenchError("curl_multi_init failed") }
        defer { curl_multi_cleanup(multi) }
        _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, inFlight)
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

    static func download(url: URL, to destination: URL) throws -> Int {
        guard let file = fopen(destination.path, "wb") else { throw BenchError("cannot open \(destination.path)") }
        defer { try? FileManager.default.removeItem(at: destination) }
        let handle = try makeHandle(url)
        defer { curl_easy_cleanup(handle) }
        try check(sk_curl_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, toFile))
        try check(sk_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, file))
        let code = curl_easy_perform(handle)
        fclose(file)
        try check(code)
        return Measurement.fileSize(destination)
    }
}
