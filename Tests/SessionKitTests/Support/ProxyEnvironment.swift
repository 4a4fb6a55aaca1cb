import Foundation

/// Runs `body` with the proxy environment variables libcurl reads set as `values` says (nil: unset), the others
/// unset, and puts back what was there, whatever happens.
func withProxyEnvironment<T>(_ values: [String: String?], _ body: () async throws -> T) async rethrows -> T {
    let names = ["ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "http_proxy", "HTTPS_PROXY", "https_proxy"]
    let saved = Dictionary(uniqueKeysWithValues: names.map { ($0, ProcessInfo.processInfo.environment[$0]) })
    for name in names { unsetenv(name) }
    for (name, value) in values { if let value { setenv(name, value, 1) } }
    defer {
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }
    return try await body()
}
