import CCurl
import Foundation
import SessionKit
import SessionKitTestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `make bench`: SessionKit against raw URLSession and raw libcurl, measured in the same run against the same
/// loopback server. Each measurement runs in a child process of its own, so that its peak RSS is its own.
///
///     sessionkit-bench                 the whole table
///     sessionkit-bench soak N          N sequential GETs through SessionKit, RSS every 10 %
///     sessionkit-bench stream [MiB]    a streamed body (default 1 GiB) into a slow reader: peak RSS
///     sessionkit-bench serve           only the loopback server, for profiling a child by hand (ends after an hour)
///     sessionkit-bench child CLIENT SCENARIO PORT COUNT   (internal: one measurement)
@main
struct Bench {
    static func main() {
        setvbuf(stdout, nil, _IOLBF, 0)
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "child" {
            // Synchronous on a thread of its own (see `Measurement`); the main thread only sleeps until it exits.
            let thread = Thread {
                do {
                    guard arguments.count == 5, let client = Client(rawValue: arguments[1]),
                          let scenario = Scenario(rawValue: arguments[2]), let port = Int(arguments[3]),
                          let count = Int(arguments[4])
                    else { throw BenchError("usage: child CLIENT SCENARIO PORT COUNT") }
                    print(try Measurement.run(client: client, scenario: scenario, port: port, count: count))
                    exit(0)
                } catch {
                    fail(error)
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        } else {
            Task.detached {
                do {
                    try await run(arguments)
                    exit(0)
                } catch {
                    fail(error)
                }
            }
        }
        // Swift concurrency runs detached; the main thread never waits on the network, it only sleeps.
        while true { sleep(60) }
    }

    static func fail(_ error: Error) -> Never {
        FileHandle.standardError.write(Data("sessionkit-bench: \(error)\n".utf8))
        exit(1)
    }

    static func run(_ arguments: [String]) async throws {
        switch arguments.first {
        case "soak":
            let count = arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000
            let client = arguments.count > 2 ? Client(rawValue: arguments[2]) ?? .sessionKit : .sessionKit
            try await soak(count: count, client: client)
        case "stream":
            let mebibytes = arguments.count > 1 ? Int(arguments[1]) ?? 1024 : 1024
            let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
            print("stream: \(mebibytes) MiB through SessionKit (curl) into a reader that sleeps 5 ms per MiB")
            let result = try await runChild(client: .sessionKitCurl, scenario: .stream, port: server.port,
                                            count: mebibytes)
            print(String(format: "stream: %.1f MB/s, peak RSS %.1f MiB", result.rate, result.peakRSSMiB))
            try await server.shutdown()
        case "serve":
            let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
            print("port \(server.port)")
            try await Task.sleep(nanoseconds: 3_600_000_000_000)
        case nil:
            try await table()
        default:
            throw BenchError("unknown command \(arguments[0])")
        }
    }

    /// Runs every client through every scenario, each in its own process, and prints the table; then, when
    /// valgrind is installed, the instructions each client spends per GET.
    static func table() async throws {
        let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
        defer { Task { try? await server.shutdown() } }
        print("SessionKit \(SessionKitVersion.current) benchmark — libcurl \(SessionKitVersion.libcurl), "
            + "\(ProcessInfo.processInfo.activeProcessorCount) cores, loopback server in the parent process\n")
        let scenarios: [(Scenario, Int)] = [
            (.sequential, 5_000), (.concurrent64, 5_000), (.download100MiB, 1), (.memory100MiB, 1), (.upload10MiB, 20),
        ]
        for (scenario, count) in scenarios {
            print("\(scenario.title) (\(count) × \(scenario.request))")
            print("  client                     \(scenario.unit.padding(toLength: 12, withPad: " ", startingAt: 0))"
                + "  peak RSS   vs URLSession  vs libcurl")
            var results: [Client: ChildResult] = [:]
            for client in Client.allCases {
                results[client] = try await runChild(client: client, scenario: scenario, port: server.port, count: count)
            }
            for client in Client.allCases {
                guard let result = results[client] else { continue }
                let vsURLSession = results[.urlSession].map { result.rate / $0.rate } ?? 0
                let vsCurl = results[.libcurl].map { result.rate / $0.rate } ?? 0
                print("  " + client.title.padding(toLength: 26, withPad: " ", startingAt: 0)
                    + String(format: " %10.1f  %7.1f MiB  %9.2f×  %8.2f×", result.rate, result.peakRSSMiB, vsURLSession, vsCurl))
            }
            print("")
        }
        try await instructionTable(port: server.port)
    }

    /// Instructions per sequential 100-byte GET, from `valgrind --tool=callgrind`: each client runs twice, with
    /// `small` and `large` requests, and the difference divided by `large - small` leaves out start-up and warm-up.
    static func instructionTable(port: Int, small: Int = 50, large: Int = 250) async throws {
        let valgrind = "/usr/bin/valgrind"
        guard FileManager.default.isExecutableFile(atPath: valgrind) else {
            print("Instructions per GET: skipped (valgrind is not installed; `make bench` installs it)")
            return
        }
        // valgrind 3.19 cannot read the DWARF of Swift 6 binaries: it runs a copy without debug information.
        let stripped = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bench-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: stripped) }
        guard try await runProcess("/usr/bin/objcopy", ["--strip-debug", executablePath, stripped]).status == 0 else {
            throw BenchError("objcopy --strip-debug failed")
        }
        print("Instructions per sequential 100-byte GET (callgrind, (\(large) − \(small) requests) / \(large - small))")
        print("  client                     instructions  vs URLSession  vs libcurl")
        var counts: [Client: Double] = [:]
        for client in Client.allCases {
            var collected: [Double] = []
            for count in [small, large] {
                let arguments = ["--tool=callgrind", "--callgrind-out-file=/dev/null", stripped,
                                 "child", client.rawValue, Scenario.sequential.rawValue, String(port), String(count)]
                let run = try await runProcess(valgrind, arguments)
                guard run.status == 0, let line = run.output.split(separator: "\n").last(where: { $0.contains("Collected :") }),
                      let value = line.split(separator: " ").last.flatMap({ Double($0) })
                else { throw BenchError("callgrind of \(client.title) failed (exit \(run.status)): \(run.output.suffix(500))") }
                collected.append(value)
            }
            counts[client] = (collected[1] - collected[0]) / Double(large - small)
        }
        for client in Client.allCases {
            guard let count = counts[client] else { continue }
            let vsURLSession = counts[.urlSession].map { count / $0 } ?? 0
            let vsCurl = counts[.libcurl].map { count / $0 } ?? 0
            print("  " + client.title.padding(toLength: 26, withPad: " ", startingAt: 0)
                + String(format: " %11.0fk  %12.2f×  %9.2f×", count / 1000, vsURLSession, vsCurl))
        }
        print("")
    }

    /// This executable's absolute path.
    static var executablePath: String { URL(fileURLWithPath: CommandLine.arguments[0]).absoluteURL.path }

    /// Runs a program to its end without blocking a thread; returns its status and what it wrote on standard
    /// output (or on standard error when `readsStandardError`; the other one is discarded). `onChunk` sees each
    /// piece as it arrives.
    static func runProcess(_ path: String, _ arguments: [String], readsStandardError: Bool = true,
                           onChunk: @escaping (Data) -> Void = { _ in }) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        if readsStandardError {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = pipe
        } else {
            process.standardOutput = pipe
        }
        let output = LockedBox<Data>(Data())
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let chunk = handle.availableData
            onChunk(chunk)
            output.write { $0.append(chunk) }
        }
        let status: Int32 = await withCheckedContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(returning: -1) }
        }
        pipe.fileHandleForReading.readabilityHandler = nil
        let rest = (try? pipe.fileHandleForReading.readToEnd()) ?? nil
        output.write { $0.append(rest ?? Data()) }
        return (status, String(decoding: output.wrappedValue, as: UTF8.self))
    }

    /// N sequential GETs through SessionKit in a child process; prints its RSS as it goes.
    static func soak(count: Int, client: Client) async throws {
        let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
        defer { Task { try? await server.shutdown() } }
        print("soak: \(count) sequential GETs through \(client.title), child process RSS:")
        let result = try await runChild(client: client, scenario: .soak, port: server.port, count: count, echo: true)
        print(String(format: "soak: %d requests at %.0f req/s, peak RSS %.1f MiB", count, result.rate, result.peakRSSMiB))
    }

    /// Starts this binary as `child`, waits for it without blocking a thread, and parses its result line.
    static func runChild(client: Client, scenario: Scenario, port: Int, count: Int, echo: Bool = false) async throws -> ChildResult {
        let arguments = ["child", client.rawValue, scenario.rawValue, String(port), String(count)]
        let (status, text) = try await runProcess(executablePath, arguments, readsStandardError: false) { chunk in
            guard echo, let text = String(data: chunk, encoding: .utf8) else { return }
            for line in text.split(separator: "\n") where !line.hasPrefix("result ") { print("  \(line)") }
        }
        guard status == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix("result ") }),
              let result = ChildResult(line: String(line))
        else { throw BenchError("\(client.title) / \(scenario.title) failed (exit \(status)): \(text.suffix(500))") }
        return result
    }
}

/// Who makes the requests.
enum Client: String, CaseIterable {
    case libcurl, urlSession = "urlsession", urlSessionDelegate = "urlsession-delegate", sessionKit = "sessionkit"
    case sessionKitCurl = "sessionkit-curl"

    var title: String {
        switch self {
        case .libcurl: return "raw libcurl"
        case .urlSession: return "raw URLSession"
        case .urlSessionDelegate: return "raw URLSession (delegate)"
        case .sessionKit: return "SessionKit (foundation)"
        case .sessionKitCurl: return "SessionKit (curl)"
        }
    }
}

/// What is measured.
enum Scenario: String {
    case sequential, concurrent64, download100MiB = "download", memory100MiB = "memory", upload10MiB = "upload", soak
    /// COUNT MiB streamed into a reader that sleeps 5 ms per MiB (SessionKit only).
    case stream

    var title: String {
        switch self {
        case .sequential: return "Sequential 100-byte GETs"
        case .concurrent64: return "100-byte GETs, 64 in flight"
        case .download100MiB: return "100 MiB download to a file"
        case .memory100MiB: return "100 MiB download into memory"
        case .upload10MiB: return "10 MiB POSTs, one after another"
        case .soak: return "Soak"
        case .stream: return "Streamed body into a slow reader"
        }
    }

    var path: String {
        switch self {
        case .download100MiB, .memory100MiB: return "/bytes/104857600"
        case .upload10MiB: return "/status/200"
        case .sequential, .concurrent64, .soak: return "/bytes/100"
        case .stream: return "/bytes/"
        }
    }

    var request: String { self == .upload10MiB ? "POST \(path)" : "GET \(path)" }
    var unit: String { [.download100MiB, .memory100MiB, .upload10MiB, .stream].contains(self) ? "MB/s" : "req/s" }
}

/// One child's answer: `result RATE PEAK_RSS_KIB`.
struct ChildResult {
    let rate: Double
    let peakRSSKiB: Double
    var peakRSSMiB: Double { peakRSSKiB / 1024 }

    init?(line: String) {
        let fields = line.split(separator: " ")
        guard fields.count == 3, let rate = Double(fields[1]), let rss = Double(fields[2]) else { return nil }
        self.rate = rate
        self.peakRSSKiB = rss
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}


/// This process's peak resident set size (VmHWM), in KiB.
func peakRSSKiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// This process's current resident set size (VmRSS), in KiB.
func currentRSSKiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}
