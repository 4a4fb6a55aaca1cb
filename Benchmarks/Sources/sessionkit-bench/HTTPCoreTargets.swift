import Foundation

extension Bench {
    /// Issue 23's targets (the HTTP core beneath the AFNetworking layer), met or not, from this run: the HTTP core API
    /// (`data(for: HTTPRequest)`), the closure verb with its serializer, the async verb against the closure verb, and
    /// RSS growth for every API. Rates are the median of the run's rounds; "AHC" is its default pool unless said.
    static func printHTTPCoreTargets(results: [String: [Client: [ChildResult]]], soaks: [Client: ChildResult],
                                     instructions: [Client: Double?]) {
        print("\nIssue 23's targets (SessionKit, curl transport, against nginx):\n")
        print("| target | this run | |")
        print("|---|---|---|")
        let line = targetLine
        func c(_ key: String, _ client: Client) -> Cell? { cell(results, key, client) }
        /// `client`'s rate on `key` against `base`'s, as "a vs b req/s (r×)", and whether it reaches `factor`.
        func compare(_ key: String, _ client: Client, _ base: Client, _ factor: Double) -> (String, Bool)? {
            guard let mine = c(key, client), let theirs = c(key, base) else { return nil }
            return ("\(format(mine.rate)) vs \(format(theirs.rate)) req/s (\(ratio(mine.rate, theirs.rate)))",
                    mine.rate >= factor * theirs.rate)
        }
        func instructionLine(_ client: Client, _ limit: Double, _ note: String) {
            let count = instructions[client] ?? nil
            let ahc = instructions[.ahc] ?? nil
            line("\(client.api), instructions per small GET ≤ \(format(limit / 1000))k\(note)",
                 count.map { "\(format($0 / 1000))k" + (ahc.map { " (AHC \(format($0 / 1000))k)" } ?? "") } ?? "n/a",
                 count.map { $0 <= limit })
        }

        instructionLine(.sessionKitCurlCore, 150_000, "")
        let core: [(String, String, Client, Double)] = [
            ("HTTP core API, HTTP sequential ≥ 1.3× AHC", "nginx http sequential", .ahc, 1.3),
            ("HTTP core API, HTTP 64 in flight ≥ AHC with 64 connections", "nginx http concurrent64", .ahc64, 1.0),
            ("HTTP core API, HTTPS sequential ≥ 1.2× AHC", "nginx https sequential", .ahc, 1.2),
        ]
        for (target, key, base, factor) in core {
            if let (measured, met) = compare(key, .sessionKitCurlCore, base, factor) { line(target, measured, met) }
        }
        instructionLine(.sessionKitCurlGet, 300_000, " (with its serializer)")
        if let (measured, met) = compare("nginx http sequential", .sessionKitCurlGet, .ahc, 1.0),
           let mine = c("nginx http sequential", .sessionKitCurlGet), let ahc = c("nginx http sequential", .ahc)
        {
            let p99 = "p99 \(format(mine.p99 ?? 0, decimals: 2)) vs \(format(ahc.p99 ?? 0, decimals: 2)) ms"
            line("closure verb, HTTP sequential ≥ 1.0× AHC, p99 no worse", "\(measured), \(p99)",
                 met && (mine.p99 ?? .infinity) <= (ahc.p99 ?? 0))
        }
        let closure: [(String, String, Double)] = [
            ("closure verb, HTTP 64 in flight ≥ 1.2× AHC default pool", "nginx http concurrent64", 1.2),
            ("closure verb, HTTPS sequential ≥ AHC", "nginx https sequential", 1.0),
            ("closure verb, HTTPS 64 in flight ≥ AHC", "nginx https concurrent64", 1.0),
        ]
        for (target, key, factor) in closure {
            if let (measured, met) = compare(key, .sessionKitCurlGet, .ahc, factor) { line(target, measured, met) }
        }
        if let asyncCount = instructions[.sessionKitCurlAsync] ?? nil,
           let closureCount = instructions[.sessionKitCurlGet] ?? nil
        {
            // Fewer instructions is better: the async verb reaches 0.9× of the closure verb's speed when it needs at
            // most 1/0.9 of its instructions.
            line("async verb ≥ 0.9× closure verb, in instructions (closure / async)",
                 "\(format(closureCount / 1000))k / \(format(asyncCount / 1000))k (\(ratio(closureCount, asyncCount)))",
                 closureCount >= 0.9 * asyncCount)
        }
        for key in ["nginx http sequential", "nginx http concurrent64", "nginx https sequential", "nginx https concurrent64"] {
            if let (measured, met) = compare(key, .sessionKitCurlAsync, .sessionKitCurlGet, 0.9) {
                line("async verb ≥ 0.9× closure verb (\(key.dropFirst(6)))", measured, met)
            }
        }
        for client in sessionKitAPIs {
            if let soak = soaks[client] {
                let growth = (soak.rssEnd - soak.rss1k) / 1024
                line("RSS growth < 1 MB over 100,000 requests, \(client.api) (here 1k → 20k; `make soak` runs 100k)",
                     "\(format(growth, decimals: 1)) MiB over 19,000 requests", growth < 1)
            }
        }
    }

    /// One row of a target table: the target, what this run measured, and met, not met, or n/a (not measured).
    static func targetLine(_ target: String, _ measured: String, _ met: Bool?) {
        print("| \(target) | \(measured) | \(met.map { $0 ? "met" : "**not met**" } ?? "n/a") |")
    }
}
