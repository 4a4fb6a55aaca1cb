import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// An httpbin-like HTTP/1.1 server on an ephemeral 127.0.0.1 port, over plain TCP or TLS, for tests, the demo
/// and benchmarks.
///
/// Endpoints echo what they received as JSON (`/get`, `/post`, `/put`, `/patch`, `/delete`, `/anything`,
/// `/headers`), or produce a given response (`/status/N`, `/bytes/N`, `/stream-bytes/N`, `/drip`, `/delay/S`,
/// `/redirect/N`, `/redirect-to?url=`, `/response-headers`, `/basic-auth/u/p`, `/gzip`, `/json`, `/xml`,
/// `/cookies`, `/cookies/set`), or misbehave on purpose (`/fault/close-mid-body`, `/fault/short-body`,
/// `/fault/never-answer`, `/fault/reset`). Every request is recorded in ``requests``, so a test can prove what was
/// or was not sent.
///
/// ```swift
/// let server = try await LoopbackServer.start()
/// defer { Task { try? await server.shutdown() } }
/// let url = server.url("/get?a=1")
/// ```
public final class LoopbackServer: @unchecked Sendable {
    // @unchecked Sendable: `log` and `counters` are `NIOLockedValueBox`es; the rest is immutable after start.

    /// How many bytes of each request body the log keeps.
    public static let recordedBodyLimit = 16 << 20

    /// The port the server listens on (0 on a Unix socket).
    public let port: Int
    /// The Unix domain socket the server listens on, nil for TCP.
    public let unixSocketPath: String?
    /// Whether the server speaks TLS.
    public let isTLS: Bool

    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let log: NIOLockedValueBox<[RecordedRequest]>
    private let counters: NIOLockedValueBox<Counters>
    private let recordsRequests: Bool

    struct Counters {
        var connections = 0
        var closedConnections = 0
        var requests = 0
    }

    private init(
        port: Int, isTLS: Bool, group: MultiThreadedEventLoopGroup, channel: Channel,
        log: NIOLockedValueBox<[RecordedRequest]>, counters: NIOLockedValueBox<Counters>, recordsRequests: Bool,
        unixSocketPath: String? = nil
    ) {
        self.unixSocketPath = unixSocketPath
        self.port = port
        self.isTLS = isTLS
        self.group = group
        self.channel = channel
        self.log = log
        self.counters = counters
        self.recordsRequests = recordsRequests
    }

    /// Starts a server.
    ///
    /// - Parameters:
    ///   - tls: The server's certificate and key, or nil for plain HTTP.
    ///   - http2: With `tls`, offer HTTP/2 by ALPN (`h2`, then `http/1.1`); each stream is served like a request of
    ///     its own.
    ///   - recordsRequests: Keep every request in ``requests``; turn off for long load runs.
    ///   - threads: Event-loop threads.
    ///   - maximumTLSVersion: With `tls`, the newest TLS version the server speaks (to test a client's floor).
    ///   - unixSocketPath: Listen on a Unix domain socket at this path (created; removed by ``shutdown()``) instead of
    ///     127.0.0.1; ``baseURL`` is then `http+unix://<percent-encoded path>` (or `https+unix`).
    ///   - clientCertificateRoots: With `tls` (HTTP/1.1), require a client certificate issued under these PEM roots
    ///     (mutual TLS; the handshake fails without one), and add `X-Client-Certificate: <its common name>` to each
    ///     request (``clientCertificateField``).
    public static func start(
        tls: TestCertificates.Identity? = nil,
        http2: Bool = false,
        recordsRequests: Bool = true,
        threads: Int = 1,
        maximumTLSVersion: TLSVersion? = nil,
        unixSocketPath: String? = nil,
        clientCertificateRoots: URL? = nil
    ) async throws -> LoopbackServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let log = NIOLockedValueBox<[RecordedRequest]>([])
        let counters = NIOLockedValueBox(Counters())
        let sslContext = try tls.map { identity in
            var configuration = try identity.serverConfiguration(clientCertificateRoots: clientCertificateRoots)
            if http2 { configuration.applicationProtocols = ["h2", "http/1.1"] }
            if let maximumTLSVersion {
                configuration.minimumTLSVersion = .tlsv1
                configuration.maximumTLSVersion = maximumTLSVersion
            }
            return try NIOSSLContext(configuration: configuration)
        }
        let isTLS = sslContext != nil
        let recorder: @Sendable (RecordedRequest) -> Void = { request in
            counters.withLockedValue { $0.requests += 1 }
            if recordsRequests { log.withLockedValue { $0.append(request) } }
        }
        let base = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 512)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        // TCP only: a Unix socket has no such option.
        let bootstrap = (unixSocketPath == nil ? base.childChannelOption(.socketOption(.tcp_nodelay), value: 1) : base)
            .childChannelInitializer { channel in
                counters.withLockedValue { $0.connections += 1 }
                channel.closeFuture.whenComplete { _ in counters.withLockedValue { $0.closedConnections += 1 } }
                if http2, let sslContext {
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }.flatMap {
                        channel.configureHTTP2SecureUpgrade(
                            h2ChannelConfigurator: { connection in
                                connection.configureHTTP2Pipeline(
                                    mode: .server,
                                    inboundStreamInitializer: { stream in
                                        stream.eventLoop.makeCompletedFuture {
                                            try stream.pipeline.syncOperations.addHandler(
                                                HTTP2FramePayloadToHTTP1ServerCodec())
                                            try stream.pipeline.syncOperations.addHandler(
                                                HTTPBinHandler(isTLS: true, record: recorder))
                                        }
                                    }
                                ).map { _ in }
                            },
                            http1ChannelConfigurator: { connection in
                                connection.eventLoop.makeCompletedFuture {
                                    try connection.pipeline.syncOperations.configureHTTPServerPipeline(
                                        withErrorHandling: true)
                                    try connection.pipeline.syncOperations.addHandler(
                                        HTTPBinHandler(isTLS: true, record: recorder))
                                }
                            })
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    if clientCertificateRoots != nil {
                        try channel.pipeline.syncOperations.addHandler(ClientCertificateHeader())
                    }
                    try channel.pipeline.syncOperations.addHandler(HTTPBinHandler(isTLS: isTLS, record: recorder))
                }
            }
        do {
            if let unixSocketPath {
                let channel = try await bootstrap.bind(
                    unixDomainSocketPath: unixSocketPath, cleanupExistingSocketFile: true
                ).get()
                return LoopbackServer(
                    port: 0, isTLS: isTLS, group: group, channel: channel, log: log, counters: counters,
                    recordsRequests: recordsRequests, unixSocketPath: unixSocketPath)
            }
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = channel.localAddress?.port else {
                throw LoopbackServerError.noPort
            }
            return LoopbackServer(
                port: port, isTLS: isTLS, group: group, channel: channel, log: log, counters: counters,
                recordsRequests: recordsRequests)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// The header a server started with `clientCertificateRoots` adds to each request: the common name of the client
    /// certificate of its connection.
    public static let clientCertificateField = ClientCertificateHeader.field

    /// `http://127.0.0.1:PORT` (or `https://…`); on a Unix socket `http+unix://<percent-encoded path>` (or
    /// `https+unix://…`).
    public var baseURL: URL {
        if let unixSocketPath {
            let encoded =
                unixSocketPath.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? unixSocketPath
            return URL(string: "\(isTLS ? "https" : "http")+unix://\(encoded)") ?? URL(fileURLWithPath: "/")
        }
        return URL(string: "\(isTLS ? "https" : "http")://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/")
    }

    /// The absolute URL of `pathAndQuery` on this server, e.g. `url("/get?a=1")`.
    public func url(_ pathAndQuery: String) -> URL {
        URL(string: baseURL.absoluteString + pathAndQuery) ?? baseURL
    }

    /// Every request received so far, oldest first (empty when recording is off).
    public var requests: [RecordedRequest] { log.withLockedValue { $0 } }

    /// Forgets the recorded requests.
    public func clearRequests() { log.withLockedValue { $0.removeAll() } }

    /// How many TCP connections were accepted.
    public var connectionCount: Int { counters.withLockedValue { $0.connections } }

    /// How many connections accepted so far are still open.
    public var openConnectionCount: Int { counters.withLockedValue { $0.connections - $0.closedConnections } }

    /// How many requests were received (counted even when recording is off).
    public var requestCount: Int { counters.withLockedValue { $0.requests } }

    /// Closes the listening socket and every connection, and stops the event loops.
    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
        if let unixSocketPath { try? FileManager.default.removeItem(atPath: unixSocketPath) }
    }
}

/// Why the server could not start.
public enum LoopbackServerError: Error {
    /// The listening socket has no port.
    case noPort
}
