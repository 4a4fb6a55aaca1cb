import Foundation
import SessionKit
import SessionKitTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `make demo`: a tour of SessionKit against its embedded loopback server.
@main
struct Demo {
    static func main() async {
        setvbuf(stdout, nil, _IOLBF, 0)
        do {
            try await run()
            print("\nAll steps succeeded.")
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("\nsessionkit-demo failed: \(describe(error))\n".utf8))
            exit(1)
        }
    }

    static func run() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        print(
            "SessionKit \(SessionKitVersion.current) on libcurl \(SessionKitVersion.libcurl), \(SessionKitVersion.openSSL)"
        )
        print("Embedded server: \(server.baseURL.absoluteString)\n")

        let manager = HTTPSessionManager(baseURL: server.url("/"))
        manager.requestSerializer.setValue("sessionkit-demo", forHTTPHeaderField: "X-Client")
        let uploadBar = ProgressBar(label: "uploading")
        let downloadBar = ProgressBar(label: "downloading")

        // 1. GET with parameters, closure form.
        step(1, "GET with parameters (closure form)")
        // The closures are @Sendable and run on the completion queue: they hand back Sendable values (a String here).
        let args: String = try await withCheckedThrowingContinuation { continuation in
            manager.get(
                "get", parameters: ["q": "swift on linux", "page": 2, "tags": ["a", "b"]], headers: nil,
                progress: nil,
                success: { _, object in continuation.resume(returning: json((object as? [String: Any])?["args"])) },
                failure: { _, error in continuation.resume(throwing: error) })
        }
        show(sent: server.requests.last)
        print("   received args: \(args)")

        // 2. JSON POST, async form.
        step(2, "JSON POST (async form)")
        let jsonSerializer = JSONRequestSerializer()
        jsonSerializer.setValue("sessionkit-demo", forHTTPHeaderField: "X-Client")
        manager.requestSerializer = jsonSerializer
        let post = try await manager.post(
            "post", parameters: ["name": "Ada", "languages": ["Swift", "C"], "admin": false])
        show(sent: server.requests.last)
        print("   status \(post.statusCode); server parsed json: \(json((post.object as? [String: Any])?["json"]))")
        let formSerializer = HTTPRequestSerializer()
        formSerializer.setValue("sessionkit-demo", forHTTPHeaderField: "X-Client")
        manager.requestSerializer = formSerializer

        // 3. Multipart upload with upload progress.
        step(3, "multipart upload")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-demo-\(getpid()).txt")
        try Data(String(repeating: "SessionKit streams this file.\n", count: 4_000).utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (form, sentFile): (String, String) = try await withCheckedThrowingContinuation { continuation in
            manager.post(
                "post", parameters: ["title": "demo upload"], headers: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: file, name: "document")
                },
                progress: { progress in
                    uploadBar.draw(progress.fractionCompleted)
                },
                success: { _, object in
                    let files = (object as? [String: Any])?["files"] as? [String: Any]
                    continuation.resume(
                        returning: (
                            json((object as? [String: Any])?["form"]),
                            "\(files?["document.filename"] ?? "?") (\(files?["document.length"] ?? 0) bytes, "
                                + "\(files?["document.content-type"] ?? "?"))"
                        ))
                },
                failure: { _, error in
                    continuation.resume(throwing: error)
                })
        }
        uploadBar.finish()
        show(sent: server.requests.last)
        print("   server received form \(form) and file \(sentFile)")

        // 4. Download with a progress bar.
        step(4, "download to a file, with progress")
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-demo-\(getpid()).bin")
        defer { try? FileManager.default.removeItem(at: destination) }
        let size = 2_000_000
        let downloaded: URL = try await withCheckedThrowingContinuation { continuation in
            let request = URLRequest(url: server.url("/drip?numbytes=\(size)&duration=2"))
            let task = manager.downloadTask(
                with: request,
                progress: { progress in
                    downloadBar.draw(progress.fractionCompleted)
                }, destination: { _, _ in destination },
                completionHandler: { _, url, error in
                    if let url {
                        continuation.resume(returning: url)
                    } else {
                        continuation.resume(throwing: error ?? URLError(.unknown))
                    }
                })
            manager.resume(task)
        }
        downloadBar.finish()
        let bytes = try FileManager.default.attributesOfItem(atPath: downloaded.path)[.size] as? Int ?? -1
        print("   saved \(bytes) bytes to \(downloaded.path)")
        guard bytes == size else { throw DemoError("expected \(size) bytes, got \(bytes)") }

        // 5. Typed async form.
        step(5, "typed async GET (Decodable)")
        struct Echo: Decodable { let args: [String: String]; let headers: [String: String]; let url: String }
        let echo = try await manager.get("anything/typed", parameters: ["id": 42], as: Echo.self)
        print("   decoded Echo(url: \(echo.url), args: \(echo.args), X-Client: \(echo.headers["X-Client"] ?? "-"))")

        // 6. What a failure looks like.
        step(6, "a failing request carries its evidence")
        do {
            _ = try await manager.get("status/418")
            throw DemoError("a 418 must fail")
        } catch let error as NSError where error.domain == SessionKitError.responseSerializationDomain {
            let response = error.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse
            print("   \(error.localizedDescription) (status \(response?.statusCode ?? 0), code \(error.code))")
        }

        // 7. HTTPS with a pinned certificate, on SessionKit's own curl transport.
        step(7, "HTTPS, certificate pinned in the TLS handshake (curl transport)")
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await tls.shutdown() } }
        let root = try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)
        let pinned = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [root])
        pinned.allowInvalidCertificates = true  // the demo's root is not a system root: the pin is the trust anchor
        let secure = HTTPSessionManager(baseURL: tls.baseURL)
        secure.transport = .curl
        secure.securityPolicy = pinned
        let pinnedResult = try await secure.get("get", parameters: ["pinned": "yes"])
        print(
            "   \(tls.baseURL.absoluteString): status \(pinnedResult.statusCode) with the pinned root "
                + "(\(try Certificate(der: root).subject))")

        let wrong = HTTPSessionManager(baseURL: tls.baseURL)
        wrong.transport = .curl
        wrong.securityPolicy = SecurityPolicy(pinnedPublicKeyHashes: [
            "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        ])
        wrong.securityPolicy.allowInvalidCertificates = true
        let before = tls.requestCount
        do {
            _ = try await wrong.get("get", headers: ["Cookie": "session=secret"])
            throw DemoError("a wrong pin must be refused")
        } catch let error as URLError where error.code == .serverCertificateUntrusted {
            print("   a wrong pin is refused: \(error.localizedDescription) (URLError \(error.code.rawValue))")
            print("   requests the server received for it: \(tls.requestCount - before) (no headers, no cookie sent)")
            guard tls.requestCount == before else { throw DemoError("the refused request reached the server") }
        }

        try await cachingStep(server)
        try await streamStep(pinned)
        try await webSocketStep(pinned)
        try await eventsStep(server)
        try await tracingStep(server)
    }

    /// 9. A TCP stream task that upgrades to TLS (STARTTLS), the pinning policy deciding in the handshake.
    static func streamStep(_ pinned: SecurityPolicy) async throws {
        step(9, "a TCP stream task upgraded to TLS (STARTTLS), the pin checked in the handshake")
        let echo = try await EchoServer.start(tls: TestCertificates.localhost, behaviour: .echoUpgradingOnSTARTTLS)
        defer { Task { try? await echo.shutdown() } }
        let manager = URLSessionManager()
        manager.securityPolicy = pinned
        let stream = manager.streamTask(withHostName: "127.0.0.1", port: echo.port)
        stream.resume()
        try await stream.write(Data("STARTTLS\n".utf8), timeout: 10)
        let go = try await stream.read(minLength: 3, maxLength: 3, timeout: 10)
        print(
            "   plain text: sent STARTTLS, the server answered \(String(decoding: go.data, as: UTF8.self).debugDescription)"
        )
        stream.startSecureConnection()
        let line = Data("hello over TLS\n".utf8)
        try await stream.write(line, timeout: 10)
        var echoed = Data()
        while echoed.count < line.count {
            let chunk = try await stream.read(minLength: 1, maxLength: 64, timeout: 10)
            if chunk.atEOF && chunk.data.isEmpty { break }
            echoed.append(chunk.data)
        }
        print("   over TLS (pinned root): echoed \(String(decoding: echoed, as: UTF8.self).debugDescription)")
        guard echoed == line else { throw DemoError("the TLS echo differs") }
        stream.closeWrite()
        stream.cancel()
    }

    /// 11. Server-Sent Events: a stream that drops after two events and is resumed with `Last-Event-ID`.
    static func eventsStep(_ server: LoopbackServer) async throws {
        step(11, "Server-Sent Events, reconnecting with Last-Event-ID")
        let request = URLRequest(url: server.url("/event-stream?total=4&per=2&retry=50"))
        let stream = URLSessionManager().events(for: request)
        for try await event in stream {
            print("   event \(event.id ?? "-") (\(event.event ?? "message")): \(event.data)")
        }
        let resumed = server.requests.compactMap { $0.header("Last-Event-ID") }
        print("   the connection dropped after 2 events; reconnections sent Last-Event-ID: \(resumed); a 204 ended it")
    }

    /// 8. The HTTP cache of the curl transport: a stored response revalidated with a 304, then a fresh one.
    static func cachingStep(_ server: LoopbackServer) async throws {
        step(8, "HTTP cache: a stored response revalidated with a 304 (curl transport, URLCache)")
        let configuration = URLSessionConfiguration.default
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-demo-cache")
        configuration.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: directory.path)
        let cached = HTTPSessionManager(baseURL: server.url("/"), sessionConfiguration: configuration)
        // An entity tag and `no-cache`: stored, and revalidated before each use.
        let path = "cacheable?ETag=%22v1%22&Cache-Control=no-cache"
        let first = try await cached.get(path)
        let firstSerial = (first.object as? [String: Any])?["serial"] as? Int ?? 0
        print("   GET \(path): status \(first.statusCode) from the server (body #\(firstSerial)), stored")
        let second = try await cached.get(path)
        let sent = server.requests.last
        let secondSerial = (second.object as? [String: Any])?["serial"] as? Int ?? 0
        let revalidation = second.response.value(forHTTPHeaderField: "X-Revalidation") ?? "-"
        print("   again: sent If-None-Match: \(sent?.header("If-None-Match") ?? "nothing")")
        print("   the server answered 304 Not Modified (its X-Revalidation: \(revalidation))")
        print("   delivered: status \(second.statusCode) with the stored body (#\(secondSerial)), fields updated")
        guard sent?.header("If-None-Match") == "\"v1\"", secondSerial == firstSerial, revalidation != "-" else {
            throw DemoError("the second GET was not revalidated with a 304")
        }
        let before = server.requestCount
        _ = try await cached.get("cache/60")
        let fresh = try await cached.get("cache/60")
        print(
            "   GET cache/60 twice (max-age=60): status \(fresh.statusCode), "
                + "\(server.requestCount - before) request reached the server")
        guard server.requestCount - before == 1 else { throw DemoError("a fresh response went to the server") }
    }

    // MARK: - Printing

    static func step(_ number: Int, _ title: String) {
        print("\n\(number). \(title)")
    }

    static func show(sent request: RecordedRequest?) {
        guard let request else { return }
        let type = request.header("Content-Type").map { ", \($0)" } ?? ""
        print("   sent \(request.method) \(request.uri) (\(request.bodyLength) body bytes\(type))")
    }

    static func json(_ value: Any?) -> String {
        guard let value, JSONSerialization.isValidJSONObject(value),
            let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        else { return String(describing: value ?? "nil") }
        return String(decoding: data, as: UTF8.self)
    }

    static func describe(_ error: Error) -> String {
        let nsError = error as NSError
        return "\(nsError.localizedDescription) [\(nsError.domain) \(nsError.code)]"
    }
}

struct DemoError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A progress bar on the terminal, redrawn in place when the whole percentage changes; on a pipe or a file it
/// prints a line every 25 %.
final class ProgressBar: @unchecked Sendable {
    // @unchecked Sendable: `lastPercent` is guarded by `lock`.
    private let label: String
    private let lock = NSLock()
    private var lastPercent = -1
    private let isTerminal = isatty(STDOUT_FILENO) != 0

    init(label: String) { self.label = label }

    func draw(_ fraction: Double) {
        let clamped = max(0, min(1, fraction.isFinite ? fraction : 0))
        let percent = Int(clamped * 100)
        lock.lock()
        defer { lock.unlock() }
        let step = isTerminal ? 1 : 25
        guard percent / step != lastPercent / step || lastPercent < 0 else { return }
        lastPercent = percent
        let width = 30
        let filled = Int(clamped * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = "   \(label) [\(bar)] " + String(format: "%3d%%", percent)
        FileHandle.standardOutput.write(Data((isTerminal ? "\r" + line : line + "\n").utf8))
    }

    func finish() {
        draw(1)
        if isTerminal { print("") }
    }
}
