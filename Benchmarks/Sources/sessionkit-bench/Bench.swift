import BenchServer
import Foundation
import SessionKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `make bench`: SessionKit against raw libcurl, raw URLSession and AsyncHTTPClient, measured in the same run,
/// interleaved, against a local nginx (HTTP and HTTPS with a private CA) and the in-process loopback server. Each
/// measurement runs in a child process of its own, so that its peak RSS is its own.
///
///     sessionkit-bench                 the whole table (BENCH_QUICK=1: fewer iterations; BENCH_CLIENTS=a,b: those
///                                      clients only, e.g. openapi-sessionkit,openapi-ahc,sessionkit-curl-core)
///     sessionkit-bench soak N [CLIENT] N sequential GETs (default SessionKit curl, task API), RSS every 10 %;
///                                      CLIENT sessionkit-curl (task API), sessionkit-curl-get (closure verb),
///                                      sessionkit-curl-async (async verb), sessionkit-curl-core (HTTP core API), …
///     sessionkit-bench stream [MiB]    a streamed body (default 1 GiB) into a slow reader: peak RSS
///     sessionkit-bench serve           only the loopback server, for profiling a child by hand (ends after an hour)
///     sessionkit-bench nginx           only nginx (HTTP and HTTPS ports, CA file), for profiling by hand (an hour)
///     sessionkit-bench child CLIENT SCENARIO BASE COUNT   (internal: one measurement; BASE is a URL or a port)
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
                          let scenario = Scenario(rawValue: arguments[2]), let count = Int(arguments[4])
                    else { throw BenchError("usage: child CLIENT SCENARIO BASE COUNT") }
                    print(try Measurement.run(client: client, scenario: scenario, base: arguments[3], count: count))
                    exit(0)
                } catch {
                    fail(error)
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        } else {
            // Interrupted (Ctrl-C, SIGTERM): stop nginx by its PID before leaving.
            for signalNumber in [SIGINT, SIGTERM] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: signalQueue)
                source.setEventHandler {
                    stopServers()
                    exit(128 + signalNumber)
                }
                source.resume()
                signalSources.append(source)
            }
            Task.detached {
                do {
                    try await run(arguments)
                    stopServers()
                    exit(0)
                } catch {
                    fail(error)
                }
            }
        }
        // Swift concurrency runs detached; the main thread never waits on the network, it only sleeps.
        while true { sleep(60) }
    }

    nonisolated(unsafe) static var signalSources: [DispatchSourceSignal] = []
    static let signalQueue = DispatchQueue(label: "bench.signals")

    /// The nginx this process started, stopped by its PID on every way out.
    static let nginx = LockedBox<Nginx?>(nil)

    static func stopServers() {
        nginx.write { $0?.stop(); $0 = nil }
    }

    static func fail(_ error: Error) -> Never {
        stopServers()
        FileHandle.standardError.write(Data("sessionkit-bench: \(error)\n".utf8))
        exit(1)
    }

    /// `BENCH_QUICK=1`: one round instead of three, fewer requests, no in-process rows, shorter callgrind runs.
    static let quick: Bool = {
        let value = ProcessInfo.processInfo.environment["BENCH_QUICK"] ?? ""
        return !value.isEmpty && value != "0"
    }()

    static func run(_ arguments: [String]) async throws {
        switch arguments.first {
        case "soak":
            let count = arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000
            let name = arguments.count > 2 ? arguments[2] : Client.sessionKitCurl.rawValue
            guard let client = Client(rawValue: name) else {
                throw BenchError("unknown client \(name): " + Client.allCases.map(\.rawValue).joined(separator: ", "))
            }
            try await soak(count: count, client: client)
        case "stream":
            let mebibytes = arguments.count > 1 ? Int(arguments[1]) ?? 1024 : 1024
            let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
            print("stream: \(mebibytes) MiB through SessionKit (curl) into a reader that sleeps 5 ms per MiB")
            let result = try await runChild(client: .sessionKitCurl, scenario: .stream, base: String(server.port),
                                            count: mebibytes)
            print(String(format: "stream: %.1f MB/s, peak RSS %.1f MiB", result.rate ?? 0, result.peakRSSMiB))
            try await server.shutdown()
        case "serve":
            let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
            print("port \(server.port)")
            try await Task.sleep(nanoseconds: 3_600_000_000_000)
        case "nginx":
            let server = try await startNginx()
            print("nginx pid \(server.pid): \(server.httpBase) \(server.httpsBase), BENCH_CA_FILE=\(server.caFile.path)")
            try await Task.sleep(nanoseconds: 3_600_000_000_000)
        case nil:
            try await table()
        default:
            throw BenchError("unknown command \(arguments[0])")
        }
    }

    static func startNginx() async throws -> Nginx {
        guard Nginx.isInstalled else { throw BenchError("nginx is not installed (`make bench` installs it)") }
        let server = try await Nginx.start()
        nginx.write { $0 = server }
        return server
    }

    // MARK: - The table

    /// One measured cell: a scenario against a server, for the clients that take part.
    struct Row {
        let server: String
        let base: String
        let scenario: Scenario
        let count: Int
        let clients: [Client]
        var key: String { "\(server) \(scenario.rawValue)" }
    }

    static let allClients: [Client] = [
        .libcurl, .urlSession, .urlSessionDelegate, .ahc, .ahc64, .sessionKitCurlGet, .sessionKitCurlAsync,
        .sessionKitCurl, .sessionKitCurlCore, .openAPISessionKit, .openAPIAHC, .sessionKit,
    ].filter(selected)

    /// `BENCH_CLIENTS=a,b,…` (the clients' raw names, `sessionkit-bench soak`'s): only those clients run, in every
    /// row and in callgrind; a row left without a client is skipped. Unset: every client.
    static func selected(_ client: Client) -> Bool {
        guard let names = ProcessInfo.processInfo.environment["BENCH_CLIENTS"], !names.isEmpty else { return true }
        return names.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == client.rawValue }
    }

    /// The clients of the large transfers (100 MiB, 10 MiB POSTs): the closure verb, the HTTP core API and the OpenAPI
    /// clients run the small-GET rows only (wave 3 measures what users call for small GETs; large transfers stay on
    /// the task API).
    static let transferClients: [Client] = allClients.filter {
        ![.sessionKitCurlGet, .sessionKitCurlCore, .openAPISessionKit, .openAPIAHC].contains($0)
    }

    /// SessionKit's four APIs on the curl transport, as users call them.
    static let sessionKitAPIs: [Client] = [.sessionKitCurlGet, .sessionKitCurlAsync, .sessionKitCurl, .sessionKitCurlCore]
        .filter(selected)

    /// The generated OpenAPI client through SessionKit's transport and through AsyncHTTPClient's (issue 25).
    static let openAPIClients: [Client] = [.openAPISessionKit, .openAPIAHC].filter(selected)

    /// Runs every row's clients round-robin, `rounds` times (medians), then the RSS rows and callgrind, and prints
    /// one table and the issue's targets.
    static func table() async throws {
        let started = Date()
        let server = try await startNginx()
        let loopback = quick ? nil : try await LoopbackServer.start(recordsRequests: false, threads: 1)
        let rounds = quick ? 1 : 3
        let small = quick ? 1_000 : 5_000
        print("SessionKit \(SessionKitVersion.current) benchmark — libcurl \(SessionKitVersion.libcurl), "
            + "\(ProcessInfo.processInfo.activeProcessorCount) cores, nginx pid \(server.pid) on 127.0.0.1:"
            + "\(server.httpPort) (HTTP) and :\(server.httpsPort) (HTTPS, private CA)"
            + (loopback.map { ", in-process server on :\($0.port)" } ?? "")
            + (quick ? " — BENCH_QUICK: 1 round, fewer requests" : " — medians of \(rounds) interleaved rounds"))

        // URLSession on Linux trusts only the system store. SSL_CERT_FILE is tried once: if FoundationNetworking's
        // libcurl honours it, the URLSession-based clients run over HTTPS too; otherwise their HTTPS cells are n/a.
        var environment = ["BENCH_CA_FILE": server.caFile.path]
        let probe = try? await runChild(client: .urlSession, scenario: .sequential, base: server.httpsBase, count: 1,
                                        environment: environment.merging(
                                            ["SSL_CERT_FILE": server.caFile.path, "BENCH_SYSTEM_TRUST_OK": "1"]) { $1 })
        let systemTrust = probe?.rate != nil
        if systemTrust {
            environment["SSL_CERT_FILE"] = server.caFile.path
            environment["BENCH_SYSTEM_TRUST_OK"] = "1"
        }
        print("raw URLSession over HTTPS with SSL_CERT_FILE=the private CA: "
            + (systemTrust ? "trusted (URLSession rows run over HTTPS)" : "not honoured (URLSession-based HTTPS rows are n/a)")
            + "\n")

        var rows: [Row] = [
            Row(server: "nginx http", base: server.httpBase, scenario: .sequential, count: small, clients: allClients),
            Row(server: "nginx http", base: server.httpBase, scenario: .concurrent64, count: small, clients: allClients),
            Row(server: "nginx https", base: server.httpsBase, scenario: .sequential, count: small, clients: allClients),
            Row(server: "nginx https", base: server.httpsBase, scenario: .concurrent64, count: small, clients: allClients),
            Row(server: "nginx https", base: server.httpsBase, scenario: .handshake, count: quick ? 20 : 50,
                clients: allClients),
            Row(server: "nginx http", base: server.httpBase, scenario: .download100MiB, count: 1, clients: transferClients),
            Row(server: "nginx http", base: server.httpBase, scenario: .memory100MiB, count: 1, clients: transferClients),
            Row(server: "nginx http", base: server.httpBase, scenario: .upload10MiB, count: quick ? 5 : 20,
                clients: transferClients),
        ]
        if let loopback {
            let old: [Client] = [.libcurl, .urlSession, .urlSessionDelegate, .ahc, .sessionKit, .sessionKitCurl]
                .filter(selected)
            for (scenario, count) in [(Scenario.sequential, 5_000), (.concurrent64, 5_000), (.download100MiB, 1),
                                      (.memory100MiB, 1), (.upload10MiB, 20)] {
                rows.append(Row(server: "in-process http", base: String(loopback.port), scenario: scenario, count: count,
                                clients: old))
            }
        }
        rows.removeAll { $0.clients.isEmpty }
        var results: [String: [Client: [ChildResult]]] = [:]
        for row in rows {
            FileHandle.standardError.write(Data("  measuring \(row.server) \(row.scenario.title)…\n".utf8))
            for _ in 0..<rounds {
                for client in row.clients {
                    // A client that fails one measurement (AsyncHTTPClient 1.37's pool of 64 once stopped on a
                    // precondition of its connection pool) leaves its cell empty ("n/a") instead of the whole table.
                    do {
                        let result = try await runChild(client: client, scenario: row.scenario, base: row.base,
                                                        count: row.count, environment: environment)
                        results[row.key, default: [:]][client, default: []].append(result)
                    } catch {
                        FileHandle.standardError.write(Data("  \(error)\n".prefix(400).utf8))
                    }
                }
            }
        }
        // RSS after 1k and after 20k sequential GETs: one child each (the two SessionKit APIs; the others beside them).
        let soakClients: [Client] = quick ? sessionKitAPIs
            : ([.libcurl, .urlSession, .ahc] + sessionKitAPIs + [.sessionKit]).filter(selected)
        FileHandle.standardError.write(Data("  measuring RSS over 20,000 GETs…\n".utf8))
        var soaks: [Client: ChildResult] = [:]
        for client in soakClients {
            soaks[client] = try await runChild(client: client, scenario: .soak, base: server.httpBase, count: 20_000,
                                               environment: environment)
        }
        FileHandle.standardError.write(Data("  measuring instructions (callgrind)…\n".utf8))
        // Hundreds of GETs between the two runs: a one-time cost the runtime pays late (a protocol-conformance lookup
        // that misses its cache costs up to a million instructions) then moves the count by 1–2k, not by 10k.
        let instructions = try await instructionCounts(base: server.httpBase, small: quick ? 20 : 50, large: quick ? 520 : 1_050,
                                                       clients: ([.libcurl, .urlSession, .ahc] + sessionKitAPIs
                                                        + [.sessionKitCurlTraced] + openAPIClients
                                                        + (quick ? [] : [.sessionKit])).filter(selected))
        try? await loopback?.shutdown()
        stopServers()

        printTable(rows: rows, results: results, soaks: soaks, instructions: instructions)
        printAPISummary(results: results, instructions: instructions)
        printTargets(results: results, instructions: instructions)
        printHTTPCoreTargets(results: results, soaks: soaks, instructions: instructions)
        print(String(format: "\n(%.0f s; nginx stopped by PID)", Date().timeIntervalSince(started)))
    }

    static func median(_ values: [Double]) -> Double? {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return nil }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// The medians of a cell: rate, peak RSS (MiB) and p99 (ms); nil when n/a.
    struct Cell {
        let rate: Double
        let peakMiB: Double
        let p99: Double?
    }

    static func cell(_ results: [String: [Client: [ChildResult]]], _ key: String, _ client: Client) -> Cell? {
        guard let runs = results[key]?[client]?.filter({ $0.rate != nil }), !runs.isEmpty,
              let rate = median(runs.compactMap(\.rate)), let peak = median(runs.map(\.peakRSSMiB))
        else { return nil }
        return Cell(rate: rate, peakMiB: peak, p99: median(runs.compactMap(\.p99)))
    }

    /// `value` with `decimals` digits and thousands separators (12,345.6).
    static func format(_ value: Double, decimals: Int = 0) -> String {
        let text = String(format: "%.\(decimals)f", value)
        let parts = text.split(separator: ".", maxSplits: 1)
        var whole = String(parts[0])
        let negative = whole.hasPrefix("-")
        if negative { whole.removeFirst() }
        var grouped = ""
        for (index, character) in whole.reversed().enumerated() {
            if index > 0, index % 3 == 0 { grouped.append(",") }
            grouped.append(character)
        }
        return (negative ? "-" : "") + String(grouped.reversed()) + (parts.count > 1 ? "." + parts[1] : "")
    }

    static func printTable(rows: [Row], results: [String: [Client: [ChildResult]]], soaks: [Client: ChildResult],
                           instructions: [Client: Double?]) {
        print("| server | scenario | client | median | p99 latency / peak RSS | vs raw libcurl | vs AHC (default pool) "
            + "| vs AHC (pool of 64) |")
        print("|---|---|---|---|---|---|---|---|")
        for row in rows {
            let curl = cell(results, row.key, .libcurl)
            let ahc = cell(results, row.key, .ahc)
            let ahc64 = cell(results, row.key, .ahc64)
            for client in row.clients {
                let prefix = "| \(row.server) | \(row.scenario.title) (\(row.count)) | \(client.title) | "
                guard let value = cell(results, row.key, client) else {
                    print(prefix + "n/a | | | | |")
                    continue
                }
                if row.scenario == .handshake {
                    // Milliseconds per request on a new connection: lower is better, ratios are of times.
                    let ms = 1000 / value.rate
                    print(prefix + "\(format(ms, decimals: 2)) ms per new connection | "
                        + "p99 \(format(value.p99 ?? 0, decimals: 2)) ms | "
                        + ratio(ms, curl.map { 1000 / $0.rate }) + " | " + ratio(ms, ahc.map { 1000 / $0.rate }) + " | "
                        + ratio(ms, ahc64.map { 1000 / $0.rate }) + " |")
                    continue
                }
                let extra = row.scenario == .sequential
                    ? "p99 \(format(value.p99 ?? 0, decimals: 2)) ms" : "\(format(value.peakMiB, decimals: 1)) MiB"
                print(prefix + "\(format(value.rate)) \(row.scenario.unit) | "
                    + extra + " | " + ratio(value.rate, curl?.rate) + " | " + ratio(value.rate, ahc?.rate) + " | "
                    + ratio(value.rate, ahc64?.rate) + " |")
            }
        }
        for client in allClients {
            guard let soak = soaks[client] else { continue }
            print("| nginx http | RSS after 1k → 20k sequential GETs | \(client.title) | "
                + "\(format(soak.rss1k / 1024, decimals: 1)) → \(format(soak.rssEnd / 1024, decimals: 1)) MiB | "
                + "peak \(format(soak.peakRSSMiB, decimals: 1)) MiB | | | |")
        }
        let curl = instructions[.libcurl] ?? nil
        let ahc = instructions[.ahc] ?? nil
        for client in allClients + [.sessionKitCurlTraced] {
            guard let entry = instructions[client] else { continue }
            guard let count = entry else {
                print("| nginx http | instructions per small GET (callgrind) | \(client.title) | n/a (failed under valgrind) | | | | |")
                continue
            }
            print("| nginx http | instructions per small GET (callgrind) | \(client.title) | \(format(count / 1000))k | | "
                + ratio(count, curl) + " | " + ratio(count, ahc) + " | |")
        }
    }

    /// One line per API that users call (SessionKit's four on the curl transport) beside AsyncHTTPClient and raw
    /// libcurl: instructions per small GET and req/s of the small-GET rows, each with its ratio against AHC's default
    /// pool and against AHC with 64 connections per host (higher is better for req/s, lower for instructions).
    static func printAPISummary(results: [String: [Client: [ChildResult]]], instructions: [Client: Double?]) {
        let keys = ["nginx http sequential", "nginx http concurrent64", "nginx https sequential", "nginx https concurrent64"]
        print("\nWhat users call: small GETs against nginx (ratios: vs AHC default pool / vs AHC pool of 64)\n")
        print("| API | instructions per GET | HTTP sequential | HTTP 64 in flight | HTTPS sequential | HTTPS 64 in flight |")
        print("|---|---|---|---|---|---|")
        let ahcInstructions = instructions[.ahc] ?? nil
        for client in (sessionKitAPIs + openAPIClients + [.ahc, .ahc64, .libcurl]).filter(selected) {
            var line = "| \(client.title) | "
            if let entry = instructions[client], let count = entry {
                line += "\(format(count / 1000))k" + (client == .ahc ? "" : " (\(ratio(count, ahcInstructions)))")
            } else {
                line += client == .ahc64 ? "(as default pool)" : "n/a"
            }
            for key in keys {
                guard let value = cell(results, key, client) else {
                    line += " | n/a"
                    continue
                }
                line += " | \(format(value.rate))"
                if client != .ahc && client != .ahc64 {
                    // Without one of the two AHC rows (BENCH_CLIENTS), only the other ratio.
                    let ratios = [ratio(value.rate, cell(results, key, .ahc)?.rate),
                                  ratio(value.rate, cell(results, key, .ahc64)?.rate)].filter { !$0.isEmpty }
                    if !ratios.isEmpty { line += " (\(ratios.joined(separator: " / ")))" }
                }
            }
            print(line + " |")
        }
    }

    static func ratio(_ value: Double, _ base: Double?) -> String {
        guard let base, base > 0 else { return "" }
        return String(format: "%.2f×", value / base)
    }

    /// The earlier speed issue's targets (the task API first) for SessionKit on the curl transport against nginx, met
    /// or not, from this run. Issue 23's are ``printHTTPCoreTargets(results:soaks:instructions:)``'s.
    static func printTargets(results: [String: [Client: [ChildResult]]], instructions: [Client: Double?]) {
        print("\nEarlier targets (the task API's speed issue; SessionKit, curl transport, against nginx; task API unless said):\n")
        print("| target | this run | |")
        print("|---|---|---|")
        let line = targetLine
        func c(_ key: String, _ client: Client) -> Cell? { cell(results, key, client) }
        let apiInstructions = sessionKitAPIs.map { (client: $0, count: instructions[$0] ?? nil) }
        line("≤ 200k instructions per small GET, every API",
             apiInstructions.map { "\($0.client.api) \($0.count.map { format($0 / 1000) + "k" } ?? "n/a")" }
                .joined(separator: ", "),
             apiInstructions.contains { $0.count == nil } ? nil : apiInstructions.allSatisfy { ($0.count ?? 0) <= 200_000 })
        for scheme in ["http", "https"] {
            let seq = "nginx \(scheme) sequential", c64 = "nginx \(scheme) concurrent64"
            if let sk = c(seq, .sessionKitCurl), let ahc = c(seq, .ahc) {
                let factor = scheme == "http" ? 1.2 : 1.0
                line("\(scheme.uppercased()) sequential ≥ \(factor == 1.2 ? "1.2× " : "")AHC's req/s, p99 no worse",
                     "\(format(sk.rate)) vs \(format(ahc.rate)) req/s (\(ratio(sk.rate, ahc.rate))), p99 "
                        + "\(format(sk.p99 ?? 0, decimals: 2)) vs \(format(ahc.p99 ?? 0, decimals: 2)) ms",
                     sk.rate >= factor * ahc.rate && (sk.p99 ?? .infinity) <= (ahc.p99 ?? 0))
            }
            if let sk = c(c64, .sessionKitCurl), let ahc = c(c64, .ahc) {
                let moon = c(c64, .ahc64)
                line("\(scheme.uppercased()) 64 in flight ≥ AHC default pool (moonshot: pool of 64)",
                     "\(format(sk.rate)) vs \(format(ahc.rate)) req/s (\(ratio(sk.rate, ahc.rate)))"
                        + (moon.map { "; pool of 64: \(format($0.rate)) (\(ratio(sk.rate, $0.rate)))" } ?? ""),
                     sk.rate >= ahc.rate)
            }
        }
        if let sk = c("nginx https handshake", .sessionKitCurl), let curl = c("nginx https handshake", .libcurl) {
            let skMs = 1000 / sk.rate, curlMs = 1000 / curl.rate
            line("HTTPS new connection ≤ 1.5× raw libcurl's time",
                 "\(format(skMs, decimals: 2)) vs \(format(curlMs, decimals: 2)) ms (\(ratio(skMs, curlMs)))", skMs <= 1.5 * curlMs)
        }
        for key in ["nginx http sequential", "nginx http concurrent64", "nginx https sequential", "nginx https concurrent64"] {
            if let closure = c(key, .sessionKitCurl), let async = c(key, .sessionKitCurlAsync) {
                line("async verb within 10 % of the task API (\(key.dropFirst(6)))",
                     "\(format(async.rate)) vs \(format(closure.rate)) req/s (\(ratio(async.rate, closure.rate)))",
                     async.rate >= 0.9 * closure.rate)
            }
        }
        if let sk = c("nginx http download", .sessionKitCurl), let curl = c("nginx http download", .libcurl) {
            line("100 MiB to a file ≥ 90 % of raw libcurl's MB/s",
                 "\(format(sk.rate)) vs \(format(curl.rate)) MB/s (\(ratio(sk.rate, curl.rate))), peak \(format(sk.peakMiB, decimals: 1)) MiB",
                 sk.rate >= 0.9 * curl.rate)
        }
        for client in [Client.sessionKitCurl, .sessionKitCurlAsync] {
            if let sk = c("nginx http memory", client) {
                line("100 MiB into memory: peak RSS < 1.5× the body (150 MiB), \(client.api)",
                     "\(format(sk.peakMiB, decimals: 1)) MiB (\(format(sk.rate)) MB/s)", sk.peakMiB < 150)
            }
        }
        if let sk = c("nginx http upload", .sessionKitCurl), let curl = c("nginx http upload", .libcurl) {
            line("10 MiB POSTs at least today's figure (compare with the last table in Docs/Benchmark.md)",
                 "\(format(sk.rate)) MB/s (\(ratio(sk.rate, curl.rate)) of raw libcurl)", nil)
        }
        // RSS growth, a target of both issues, is in issue 23's table (`printHTTPCoreTargets`).
    }

    // MARK: - callgrind

    /// Instructions per sequential 100-byte GET, from `valgrind --tool=callgrind`: each client runs twice, with
    /// `small` and `large` requests, and the difference divided by `large - small` leaves out start-up and warm-up.
    /// A client that fails under valgrind is nil.
    static func instructionCounts(base: String, small: Int, large: Int, clients: [Client]) async throws -> [Client: Double?] {
        let valgrind = "/usr/bin/valgrind"
        guard FileManager.default.isExecutableFile(atPath: valgrind) else {
            print("Instructions per GET: skipped (valgrind is not installed; `make bench` installs it)")
            return [:]
        }
        // valgrind 3.19 cannot read the DWARF of Swift 6 binaries: it runs a copy without debug information.
        let stripped = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bench-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: stripped) }
        guard try await runProcess("/usr/bin/objcopy", ["--strip-debug", executablePath, stripped]).status == 0 else {
            throw BenchError("objcopy --strip-debug failed")
        }
        var counts: [Client: Double?] = [:]
        for client in clients {
            var collected: [Double] = []
            for count in [small, large] {
                let arguments = ["--tool=callgrind", "--callgrind-out-file=/dev/null", stripped,
                                 "child", client.rawValue, Scenario.sequential.rawValue, base, String(count)]
                let run = try await runProcess(valgrind, arguments)
                guard run.status == 0, let line = run.output.split(separator: "\n").last(where: { $0.contains("Collected :") }),
                      let value = line.split(separator: " ").last.flatMap({ Double($0) })
                else {
                    FileHandle.standardError.write(Data("callgrind of \(client.title) failed (exit \(run.status)): \(run.output.suffix(300))\n".utf8))
                    break
                }
                collected.append(value)
            }
            counts[client] = collected.count == 2 ? (collected[1] - collected[0]) / Double(large - small) : .some(nil)
        }
        return counts
    }

    // MARK: - Processes

    /// This executable's absolute path.
    static var executablePath: String { URL(fileURLWithPath: CommandLine.arguments[0]).absoluteURL.path }

    /// Runs a program to its end without blocking a thread; returns its status and what it wrote on standard
    /// output (or on standard error when `readsStandardError`; the other one is discarded). `onChunk` sees each
    /// piece as it arrives.
    static func runProcess(_ path: String, _ arguments: [String], readsStandardError: Bool = true,
                           environment: [String: String] = [:],
                           onChunk: @escaping (Data) -> Void = { _ in }) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
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

    /// N sequential GETs through `client` in a child process, against the in-process server; prints its RSS as it
    /// goes and the growth from the first tenth to the end.
    static func soak(count: Int, client: Client) async throws {
        let server = try await LoopbackServer.start(recordsRequests: false, threads: 1)
        defer { Task { try? await server.shutdown() } }
        print("soak: \(count) sequential GETs through \(client.title), child process RSS:")
        let result = try await runChild(client: client, scenario: .soak, base: String(server.port), count: count, echo: true)
        print(String(format: "soak: %d requests at %.0f req/s, peak RSS %.1f MiB, RSS %.1f MiB after 1,000 → %.1f MiB at the end",
                     count, result.rate ?? 0, result.peakRSSMiB, result.rss1k / 1024, result.rssEnd / 1024))
    }

    /// Starts this binary as `child`, waits for it without blocking a thread, and parses its result line.
    static func runChild(client: Client, scenario: Scenario, base: String, count: Int, echo: Bool = false,
                         environment: [String: String] = [:]) async throws -> ChildResult {
        let arguments = ["child", client.rawValue, scenario.rawValue, base, String(count)]
        let (status, text) = try await runProcess(executablePath, arguments, readsStandardError: false,
                                                  environment: environment) { chunk in
            guard echo, let text = String(data: chunk, encoding: .utf8) else { return }
            for line in text.split(separator: "\n") where !line.hasPrefix("result ") { print("  \(line)") }
        }
        guard status == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix("result ") }),
              let result = ChildResult(line: String(line))
        else { throw BenchError("\(client.title) / \(scenario.title) against \(base) failed (exit \(status)): \(text.suffix(500))") }
        return result
    }
}

/// Who makes the requests.
enum Client: String, CaseIterable {
    case libcurl, urlSession = "urlsession", urlSessionDelegate = "urlsession-delegate", sessionKit = "sessionkit"
    case sessionKitCurl = "sessionkit-curl", sessionKitCurlAsync = "sessionkit-curl-async"
    case sessionKitCurlGet = "sessionkit-curl-get", sessionKitCurlCore = "sessionkit-curl-core"
    case ahc, ahc64 = "ahc-64"
    /// The task API with a recording tracer and metrics factory set on the manager (callgrind only).
    case sessionKitCurlTraced = "sessionkit-curl-traced"
    case openAPISessionKit = "openapi-sessionkit", openAPIAHC = "openapi-ahc"

    var title: String {
        switch self {
        case .libcurl: return "raw libcurl"
        case .urlSession: return "raw URLSession"
        case .urlSessionDelegate: return "raw URLSession (delegate)"
        case .sessionKit: return "SessionKit foundation, dataTask(with:)"
        case .sessionKitCurl: return "SessionKit curl, dataTask(with:)"
        case .sessionKitCurlAsync: return "SessionKit curl, async get(_:)"
        case .sessionKitCurlGet: return "SessionKit curl, closure get(_:…success:failure:)"
        case .sessionKitCurlCore: return "SessionKit curl, data(for: HTTPRequest)"
        case .sessionKitCurlTraced: return "SessionKit curl, dataTask(with:), InMemoryTracer + TestMetrics"
        case .ahc: return "AsyncHTTPClient (default pool)"
        case .ahc64: return "AsyncHTTPClient (pool of 64)"
        case .openAPISessionKit: return "OpenAPI client, SessionKitTransport (curl)"
        case .openAPIAHC: return "OpenAPI client, AsyncHTTPClientTransport"
        }
    }

    /// The API's short name in the targets.
    var api: String {
        switch self {
        case .sessionKitCurlGet: return "closure verb"
        case .sessionKitCurlAsync: return "async verb"
        case .sessionKitCurlCore: return "HTTP core API"
        case .openAPISessionKit: return "OpenAPI transport"
        default: return "task API"
        }
    }

    /// Clients on URLSession's own TLS, which trusts the system store only on Linux.
    var needsSystemTrust: Bool { [.urlSession, .urlSessionDelegate, .sessionKit].contains(self) }
}

/// What is measured.
enum Scenario: String {
    case sequential, concurrent64, download100MiB = "download", memory100MiB = "memory", upload10MiB = "upload", soak
    /// Sequential GETs with `Connection: close`: one new connection (over HTTPS, one full handshake) per request.
    case handshake
    /// COUNT MiB streamed into a reader that sleeps 5 ms per MiB (SessionKit only).
    case stream

    var title: String {
        switch self {
        case .sequential: return "sequential 100-byte GETs"
        case .concurrent64: return "100-byte GETs, 64 in flight"
        case .handshake: return "new connection per GET"
        case .download100MiB: return "100 MiB download to a file"
        case .memory100MiB: return "100 MiB download into memory"
        case .upload10MiB: return "10 MiB POSTs, one after another"
        case .soak: return "soak"
        case .stream: return "streamed body into a slow reader"
        }
    }

    var path: String {
        switch self {
        case .download100MiB, .memory100MiB: return "/bytes/104857600"
        case .upload10MiB: return "/status/200"
        case .sequential, .concurrent64, .soak, .handshake: return "/bytes/100"
        case .stream: return "/bytes/"
        }
    }

    var request: String { self == .upload10MiB ? "POST \(path)" : "GET \(path)" }
    var unit: String { [.download100MiB, .memory100MiB, .upload10MiB, .stream].contains(self) ? "MB/s" : "req/s" }
}

/// One child's answer: `result RATE PEAK_RSS_KIB [p99=MS] [rss1k=KIB rssEnd=KIB]`, or `result n/a`.
struct ChildResult {
    let rate: Double?
    let peakRSSKiB: Double
    var p99: Double?
    var rss1k: Double = 0
    var rssEnd: Double = 0
    var peakRSSMiB: Double { peakRSSKiB / 1024 }

    init?(line: String) {
        let fields = line.split(separator: " ")
        if fields.count == 2, fields[1] == "n/a" {
            rate = nil
            peakRSSKiB = 0
            return
        }
        guard fields.count >= 3, let rate = Double(fields[1]), let rss = Double(fields[2]) else { return nil }
        self.rate = rate
        self.peakRSSKiB = rss
        for field in fields.dropFirst(3) {
            let pair = field.split(separator: "=")
            guard pair.count == 2, let value = Double(pair[1]) else { continue }
            switch pair[0] {
            case "p99": p99 = value
            case "rss1k": rss1k = value
            case "rssEnd": rssEnd = value
            default: break
            }
        }
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
