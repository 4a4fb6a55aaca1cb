import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An ``EventMonitor`` that logs each request's life through swift-log.
///
/// Secrets stay out of the log unless asked for: the values of `Authorization`, `Proxy-Authorization`, `Cookie` and
/// `Set-Cookie` (and of any header in ``redactedHeaders``) are written as `<redacted>`, a password in a URL as well,
/// and bodies are not logged at all unless ``logsBodies``.
///
/// ```swift
/// manager.eventMonitors = [LoggingEventMonitor(logger: Logger(label: "api"))]
/// ```
///
/// Levels: `info` for the start and the end of a request, `notice` for a retry, `warning` for a failure and for a pin
/// mismatch a report-only ``SecurityPolicy`` let through, `debug`
/// for headers, redirects and timings, `trace` for each chunk of the body.
public final class LoggingEventMonitor: EventMonitor, Sendable {
    // Sendable, checked by the compiler: every property is a `let`; `Logger` is a value type used on `queue` only.

    /// Header names (lowercased) whose values are never logged unless ``logsSecrets``.
    public static let defaultRedactedHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie",
    ]

    /// Where the events go.
    public let logger: Logger
    /// Where the monitor runs; one serial queue, so lines of one request keep their order.
    public let queue = DispatchQueue(label: "com.sessionkit.eventmonitor.logging")
    /// Whether request and response bodies are logged (their first ``bodyLimit`` bytes, as UTF-8). Default false.
    public let logsBodies: Bool
    /// Whether the values of ``redactedHeaders`` and URL passwords are logged as they are. Default false.
    public let logsSecrets: Bool
    /// Header names (lowercased) whose values are written as `<redacted>`.
    public let redactedHeaders: Set<String>
    /// The most bytes of a body that are logged. Default 4,096.
    public let bodyLimit: Int

    /// A monitor writing to `logger`.
    public init(
        logger: Logger = Logger(label: "com.sessionkit"),
        logsBodies: Bool = false,
        logsSecrets: Bool = false,
        redactedHeaders: Set<String> = LoggingEventMonitor.defaultRedactedHeaders,
        bodyLimit: Int = 4_096
    ) {
        self.logger = logger
        self.logsBodies = logsBodies
        self.logsSecrets = logsSecrets
        self.redactedHeaders = Set(redactedHeaders.map { $0.lowercased() })
        self.bodyLimit = max(0, bodyLimit)
    }

    // MARK: - Events

    /// Logs the event through the monitor's `Logger`.
    public func requestDidCreate(_ request: SessionRequest) {
        logger.info("\(describe(request.initialRequest))", metadata: metadata(request))
        logger.debug(
            "headers: \(headers(request.initialRequest.allHTTPHeaderFields ?? [:]))", metadata: metadata(request))
        if logsBodies, let body = request.initialRequest.httpBody {
            logger.debug("request body: \(text(body))", metadata: metadata(request))
        }
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didAdapt initial: URLRequest, to adapted: URLRequest) {
        logger.debug("adapted headers: \(headers(adapted.allHTTPHeaderFields ?? [:]))", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didFailToAdapt initial: URLRequest, withError error: Error) {
        logger.warning("refused by an adapter: \(error.localizedDescription)", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didResumeTask task: URLSessionTask) {
        logger.debug(
            "attempt \(request.retryCount + 1) started (task \(task.taskIdentifier))", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didSuspendTask task: URLSessionTask) {
        logger.debug("suspended", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func requestDidCancel(_ request: SessionRequest) {
        logger.info("cancelled", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(
        _ request: SessionRequest, willRedirectWith response: HTTPURLResponse, to newRequest: URLRequest
    ) {
        logger.debug("redirect \(response.statusCode) → \(url(newRequest.url))", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didReceive data: Data) {
        logger.trace("received \(data.count) bytes", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didGather timings: TransferTimings) {
        logger.debug(
            "timings: dns \(ms(timings.nameLookup)), connect \(ms(timings.connect)), tls \(ms(timings.tlsHandshake)), first byte \(ms(timings.firstByte)), total \(ms(timings.total))\(timings.newConnection ? "" : " (reused connection)")",
            metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`, as a warning naming the host and the public-key hashes of the
    /// chain the server presented (public values, the pins that would have matched).
    public func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport) {
        let hashes = report.publicKeyHashes.joined(separator: ", ")
        logger.warning(
            "pinning failed for \(host), allowed by a report-only policy: \(report.reason) The chain's public keys: \(hashes)",
            metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?) {
        guard let response = task.response as? HTTPURLResponse else { return }
        var fields: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        logger.debug("response \(response.statusCode): \(headers(fields))", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, didSerialize object: Any?, error: Error?) {
        guard logsBodies, let object else { return }
        logger.debug("response body: \(String(describing: object).prefix(bodyLimit))", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func request(_ request: SessionRequest, isRetryingAfter delay: TimeInterval, dueTo error: Error) {
        logger.notice("retrying in \(ms(delay)) after: \(error.localizedDescription)", metadata: metadata(request))
    }

    /// Logs the event through the monitor's `Logger`.
    public func requestDidFinish(_ request: SessionRequest, error: Error?) {
        let retries = request.retryCount == 0 ? "" : ", \(request.retryCount) retries"
        if let error {
            logger.warning("failed\(retries): \(error.localizedDescription)", metadata: metadata(request))
        } else {
            logger.info("\(request.response?.statusCode ?? 0)\(retries)", metadata: metadata(request))
        }
    }

    // MARK: - Formatting

    private func metadata(_ request: SessionRequest) -> Logger.Metadata {
        ["request": "\(request.id.uuidString.prefix(8))"]
    }

    private func describe(_ request: URLRequest) -> String {
        "\(request.httpMethod ?? "GET") \(url(request.url))"
    }

    /// The URL with its password hidden.
    func url(_ url: URL?) -> String {
        guard let url else { return "(no URL)" }
        guard !logsSecrets, url.password != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url.absoluteString }
        components.password = "redacted"
        return components.string ?? url.absoluteString
    }

    /// Header fields, sorted, with secret values hidden.
    func headers(_ fields: [String: String]) -> String {
        fields.sorted { $0.key.lowercased() < $1.key.lowercased() }.map { name, value in
            let shown = !logsSecrets && redactedHeaders.contains(name.lowercased()) ? "<redacted>" : value
            return "\(name): \(shown)"
        }.joined(separator: "; ")
    }

    private func text(_ body: Data) -> String {
        String(decoding: body.prefix(bodyLimit), as: UTF8.self)
    }

    private func ms(_ seconds: TimeInterval) -> String {
        String(format: "%.1f ms", seconds * 1000)
    }
}
