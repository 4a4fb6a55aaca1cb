import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import SessionKit

/// The checks of issue 13, in Swift 6 language mode: SessionKit's closures called from the main actor and from an
/// actor, every async form, then the README's quick start (`quick-start`, the path given as the first argument) run
/// against the same server. Exit status 0 when everything passed; a crash (an isolation assertion) or a failed check
/// exits otherwise.
@main
struct ConsumerChecks {
    static func main() async {
        do {
            let server = try TinyServer(port: 8080)
            server.start()
            let base = URL(string: "http://127.0.0.1:\(server.port)/v1")
            try await MainActorChecks(baseURL: base).run()
            try await UserStore(baseURL: base).run()
            try await asyncForms(baseURL: base)
            try await streamTaskChecks(port: Int(server.port))
            try await webSocketChecks(port: Int(server.port))
            try await UserStore(baseURL: base).runStream(port: Int(server.port))
            try await ServerSentEventsChecks.run(baseURL: base)
            try await OpenAPIChecks.run(baseURL: base)
            if CommandLine.arguments.count > 1 {
                try await runQuickStart(CommandLine.arguments[1], httpbin: "http://127.0.0.1:\(server.port)")
            }
            print("consumer-checks: all checks passed")
        } catch {
            print("consumer-checks: FAILED: \(error)")
            exit(1)
        }
    }

    /// A stream task driven from the main actor: the closure forms (called later on the manager's delegate queue),
    /// then the async forms, against the same server spoken to by hand.
    @MainActor static func streamTaskChecks(port: Int) async throws {
        let manager = URLSessionManager()
        let request = Data("GET /v1/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        let task = manager.streamTask(withHostName: "127.0.0.1", port: port)
        task.resume()
        let writeError: Error? = await withCheckedContinuation { continuation in
            task.write(request, timeout: 10) { continuation.resume(returning: $0) }
        }
        try expect(writeError == nil, "stream write: \(String(describing: writeError))")
        let head: Data = try await withCheckedThrowingContinuation { continuation in
            task.readData(ofMinLength: 12, maxLength: 65_536, timeout: 10) { data, _, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: data ?? Data())
                }
            }
        }
        try expect(String(decoding: head, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "stream read: \(head.count) bytes")
        task.cancel()

        let second = manager.streamTask(withHostName: "127.0.0.1", port: port)
        second.resume()
        try await second.write(request, timeout: 10)
        var received = Data()
        // The server closes after answering: the chunks end there.
        for try await chunk in second.chunks(timeout: 10) { received.append(chunk) }
        try expect(
            String(decoding: received, as: UTF8.self).contains("\"Ada\""), "stream chunks: \(received.count) bytes")
    }

    /// Every async form of the managers.
    static func asyncForms(baseURL: URL?) async throws {
        let manager = HTTPSessionManager(baseURL: baseURL)
        manager.requestSerializer = JSONRequestSerializer()
        struct User: Decodable, Sendable { let id: Int; let name: String }

        for (verb, result) in [
            ("GET", try await manager.get("users/1")),
            ("HEAD", try await manager.head("users/1")),
            ("POST", try await manager.post("users", parameters: ["name": "Ada"])),
            ("PUT", try await manager.put("users/1", parameters: ["name": "Ada"])),
            ("PATCH", try await manager.patch("users/1", parameters: ["name": "Ada"])),
            ("DELETE", try await manager.delete("users/1")),
            ("OPTIONS", try await manager.request("OPTIONS", "echo")),
        ] {
            try expect((200...299).contains(result.statusCode), "\(verb): status \(result.statusCode)")
        }
        let user = try await manager.get("users/1", as: User.self)
        try expect(user.name == "Ada", "typed GET: \(user)")
        let created = try await manager.post("users", parameters: ["name": "Grace"], as: User.self)
        try expect(created.name == "Grace", "typed POST: \(created)")

        var request = URLRequest(url: URL(string: "http://127.0.0.1:8080/v1/echo")!)
        request.httpMethod = "POST"
        request.httpBody = Data(count: 1000)
        let performed = try await manager.perform(request, onCreate: { _ in })
        try expect(((performed.object as? [String: Any])?["length"] as? Int) == 1000, "perform: \(performed.data)")

        let streamed = try await manager.stream("bytes/200000")
        var received = 0
        for try await chunk in streamed.body { received += chunk.count }
        try expect(received == 200_000, "stream: \(received) bytes")

        let bytes = try await manager.bytes(for: URLRequest(url: URL(string: "http://127.0.0.1:8080/v1/bytes/1000")!))
        var total = 0
        for try await chunk in bytes.body { total += chunk.count }
        try expect(total == 1000, "bytes(for:): \(total) bytes")
        struct NewUser: Encodable, Sendable { let name: String }
        let typed = try await manager.post("users", body: NewUser(name: "Hopper"), as: User.self)
        try expect(typed.name == "Hopper", "typed body: \(typed)")
        let typedPut = try await manager.request("PUT", "users/1", body: NewUser(name: "Ada"), as: User.self)
        try expect(typedPut.id == 1, "typed request: \(typedPut)")

        // Uploads and downloads, with progress as an AsyncSequence.
        let target = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: target) }
        let download = manager.download(
            URLRequest(url: URL(string: "http://127.0.0.1:8080/v1/bytes/300000")!), to: target)
        var last = TransferProgress(completedUnitCount: 0, totalUnitCount: -1)
        for await step in download.progress { last = step }
        let (file, response) = try await download.value
        try expect(file == target && response.statusCode == 200, "download: \(file) \(response.statusCode)")
        try expect(last.completedUnitCount == 300_000, "download progress: \(last)")

        var upload = URLRequest(url: URL(string: "http://127.0.0.1:8080/v1/echo")!)
        upload.httpMethod = "POST"
        let uploaded = try await manager.upload(upload, from: Data(count: 70_000)).value
        try expect(((uploaded.object as? [String: Any])?["length"] as? Int) == 70_000, "upload(from:)")
        let fromFile = try await manager.upload(upload, fromFile: file).value
        try expect(((fromFile.object as? [String: Any])?["length"] as? Int) == 300_000, "upload(fromFile:)")
        let multipart = try manager.multipartUpload("echo", parameters: ["title": "report"]) { form in
            try form.appendPart(
                withFileURL: file, name: "file", fileName: "bytes.bin", mimeType: "application/octet-stream")
        }
        let sent = try await multipart.value
        try expect((((sent.object as? [String: Any])?["length"] as? Int) ?? 0) > 300_000, "multipartUpload")
        // Errors to switch on.
        do {
            _ = try await manager.get("missing")
            throw CheckFailure("a 404 must throw")
        } catch {
            switch SessionKitError(error).kind {
            case .unacceptableStatusCode(404): break
            default: throw CheckFailure("404: \(error)")
            }
        }
        print("async forms: ok")
    }

    /// Runs the README's quick start against the server and checks its exit status and output, without blocking
    /// the main actor (the process's end resumes a continuation). `HTTPBIN` points it at the local server: it must
    /// not reach httpbin.org, or any address but the loopback, from a test.
    static func runQuickStart(_ path: String, httpbin: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.environment = ProcessInfo.processInfo.environment.merging(["HTTPBIN": httpbin]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        print(text, terminator: "")
        try expect(status == 0, "quick-start exited with status \(status)")
        // The echoed URLs say which server answered: this one, never httpbin.org.
        for answer in ["200", "Ada", "Sample Slide Show", "POST Ada", "\(httpbin)/post", "\(httpbin)/get?page=2"] {
            try expect(text.contains(answer), "quick-start printed no \(answer): \(text)")
        }
        print("quick start: ok")
    }
}

/// Closure forms from main-actor code, as a view model would write them: the closures run on SessionKit's queues
/// and hop back to the main actor with `Task { @MainActor in … }`.
@MainActor
final class MainActorChecks {
    let manager: HTTPSessionManager
    var progressReports = 0
    var names: [String] = []

    init(baseURL: URL?) {
        manager = HTTPSessionManager(baseURL: baseURL)
        manager.requestSerializer = JSONRequestSerializer()
    }

    func run() async throws {
        // success and download progress, written in main-actor code.
        // `object` is `Any?`, which cannot cross to the main actor: the closure extracts Sendable values first.
        names = try await withCheckedThrowingContinuation { continuation in
            manager.get(
                "users", parameters: ["page": 2], headers: ["X-Trace": "1"],
                progress: { progress in Task { @MainActor in self.progressReports += 1 } },
                success: { task, object in continuation.resume(returning: userNames(in: object)) },
                failure: { task, error in continuation.resume(throwing: error) })
        }
        try expect(names == ["Ada"], "main actor GET: \(names)")

        // upload progress and a delegate override set from the main actor.
        manager.taskDidComplete = { session, task, error in Task { @MainActor in self.progressReports += 0 } }
        let status: Int = try await withCheckedThrowingContinuation { continuation in
            manager.post(
                "echo", parameters: ["blob": String(repeating: "x", count: 100_000)], headers: nil,
                progress: { progress in Task { @MainActor in self.progressReports += 1 } },
                success: { task, object in
                    continuation.resume(returning: (task.response as? HTTPURLResponse)?.statusCode ?? 0)
                },
                failure: { task, error in continuation.resume(throwing: error) })
        }
        try expect(status == 200, "main actor POST: \(status)")
        manager.taskDidComplete = nil

        // the closure form of request(_:_:) with its SessionRequest.
        let code: Int = try await withCheckedThrowingContinuation { continuation in
            manager.request(
                "GET", "users/1", success: { request, result in continuation.resume(returning: result.statusCode) },
                failure: { request, error in continuation.resume(throwing: error) })
        }
        try expect(code == 200, "main actor request(_:_:): \(code)")
        print("main actor closures: ok")
    }
}

/// Closure forms from inside an actor: the closures capture the continuation, never the actor's state, and the
/// actor updates its state after the await.
actor UserStore {
    let manager: URLSessionManager
    let baseURL: URL?
    var names: [String] = []
    var downloaded: Int64 = 0

    init(baseURL: URL?) {
        manager = URLSessionManager()
        self.baseURL = baseURL
    }

    /// A stream task from an actor: its closures hop back to the actor with a Sendable value.
    func runStream(port: Int) async throws {
        let task = manager.streamTask(withHostName: "127.0.0.1", port: port)
        task.resume()
        try await task.write(Data("GET /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8), timeout: 10)
        let (data, _) = try await task.read(minLength: 12, maxLength: 65_536, timeout: 10)
        downloaded += Int64(data.count)
        task.closeWrite()
        task.cancel()
        try expect(String(decoding: data, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "actor stream: \(data.count) bytes")
    }

    func run() async throws {
        let users = URLRequest(url: baseURL!.appendingPathComponent("users"))
        names = try await withCheckedThrowingContinuation { continuation in
            manager.dataTask(
                with: users, uploadProgress: nil, downloadProgress: { progress in },
                completionHandler: { response, object, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: userNames(in: object))
                    }
                }
            ).resume()
        }
        try expect(names == ["Ada"], "actor dataTask: \(names)")

        var upload = URLRequest(url: baseURL!.appendingPathComponent("echo"))
        upload.httpMethod = "POST"
        let echoed: Int? = try await withCheckedThrowingContinuation { continuation in
            manager.uploadTask(
                with: upload, from: Data(count: 50_000), progress: { progress in },
                completionHandler: { response, object, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: (object as? [String: Any])?["length"] as? Int)
                    }
                }
            ).resume()
        }
        try expect(echoed == 50_000, "actor upload: \(String(describing: echoed))")

        let target = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: target) }
        let download = URLRequest(url: baseURL!.appendingPathComponent("bytes/300000"))
        let file: URL = try await withCheckedThrowingContinuation { continuation in
            manager.downloadTask(
                with: download, progress: { progress in },
                destination: { temporary, response in target },
                completionHandler: { response, url, error in
                    if let url {
                        continuation.resume(returning: url)
                    } else {
                        continuation.resume(throwing: error ?? CheckFailure("download: no file"))
                    }
                }
            ).resume()
        }
        downloaded = Int64((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0)
        try expect(downloaded == 300_000, "actor download: \(downloaded) bytes")

        let chunks: Int = try await withCheckedThrowingContinuation { continuation in
            let counter = Counter()
            manager.streamTask(
                with: URLRequest(url: baseURL!.appendingPathComponent("bytes/100000")),
                chunk: { data in counter.add(data.count) },
                completion: { response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: counter.value)
                    }
                }
            ).resume()
        }
        try expect(chunks == 100_000, "actor streamTask: \(chunks) bytes")
        print("actor closures: ok")
    }
}

/// A byte count shared by a stream's chunk closure and its completion, guarded by a lock.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    func add(_ count: Int) { lock.withLock { total += count } }
    var value: Int { lock.withLock { total } }
}

/// The `name` of every user in a decoded JSON array.
func userNames(in object: Any?) -> [String] {
    ((object as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
}

func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw CheckFailure(message()) }
}
