import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A TCP server on an ephemeral 127.0.0.1 port, plain or TLS, for stream tasks: it echoes what it reads, or sends
/// given bytes (and closes), or stays silent, and records every application byte each connection received (after
/// TLS), so that a test can prove that nothing was sent.
///
/// The server sees a client's half-close (`shutdown(SHUT_WR)`) as ``Connection/inputClosed``; an echoing server then
/// closes its side too.
///
/// ```swift
/// let server = try await EchoServer.start()
/// defer { Task { try? await server.shutdown() } }
/// let task = manager.streamTask(withHostName: "127.0.0.1", port: server.port)
/// ```
public final class EchoServer: @unchecked Sendable {
    // @unchecked Sendable: `log` is a `NIOLockedValueBox`; the rest is immutable after start.

    /// What the server does on each connection.
    public enum Behaviour: Sendable {
        /// Writes back every byte it reads; closes once the client closed its write side.
        case echo
        /// Writes these bytes once the connection is up, then closes it when `thenClose` is true.
        case send(Data, thenClose: Bool)
        /// Writes these bytes once the connection is up, then shuts its write side (`shutdown(SHUT_WR)`, a half-close:
        /// the client reads the end of stream) and keeps reading.
        case sendThenHalfClose(Data)
        /// Writes these bytes once the connection is up and closes its write side (the client reads the end of
        /// stream), then answers the first bytes the client sends with a reset (`SO_LINGER` 0), as a closed socket's
        /// system does: what a client finds after its last message (a goodbye, a TLS `close_notify`) reached a peer
        /// that had closed.
        case sendThenCloseResettingOnRead(Data)
        /// Writes this many bytes once the connection is up, in 64 KiB writes each made once the socket took the one
        /// before (the server holds one at a time), then closes: a long download.
        case stream(byteCount: Int)
        /// Never writes.
        case silent
        /// Never reads nor writes: what a client sends fills the socket buffers.
        case unread
        /// Plain until the line `STARTTLS\n`, answered with `GO\n`; then TLS with the server's `tls` identity, echoing;
        /// `DROP\n` over TLS closes the TCP connection without a TLS close alert (`close_notify`).
        case echoUpgradingOnSTARTTLS
    }

    /// What one connection received.
    public struct Connection: Sendable {
        /// Every application byte read on it, in order.
        public var received = Data()
        /// Whether the client closed its write side while the connection was open (a half-close).
        public var inputClosed = false
        /// Whether the connection is closed.
        public var closed = false
    }

    /// The port the server listens on.
    public let port: Int
    /// Whether the server speaks TLS.
    public let isTLS: Bool
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let log: NIOLockedValueBox<[Connection]>

    private init(
        port: Int, isTLS: Bool, group: MultiThreadedEventLoopGroup, channel: Channel,
        log: NIOLockedValueBox<[Connection]>
    ) {
        self.port = port
        self.isTLS = isTLS
        self.group = group
        self.channel = channel
        self.log = log
    }

    /// Starts a server.
    ///
    /// - Parameters:
    ///   - tls: The server's certificate and key, or nil for plain TCP.
    ///   - behaviour: What it does on each connection.
    ///   - clientCertificateRoots: With `tls`, require a client certificate issued under these PEM roots (mutual
    ///     TLS; the handshake fails without one).
    public static func start(
        tls: TestCertificates.Identity? = nil, behaviour: Behaviour = .echo, clientCertificateRoots: URL? = nil
    ) async throws
        -> EchoServer
    {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let log = NIOLockedValueBox<[Connection]>([])
        let tlsContext = try tls.map {
            try NIOSSLContext(configuration: $0.serverConfiguration(clientCertificateRoots: clientCertificateRoots))
        }
        var sslContext = tlsContext
        if case .echoUpgradingOnSTARTTLS = behaviour { sslContext = nil }
        let upgradeContext = sslContext == nil ? tlsContext : nil
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                let index = log.withLockedValue { log -> Int in
                    log.append(Connection())
                    return log.count - 1
                }
                let handler = EchoHandler(behaviour: behaviour, upgradeContext: upgradeContext) { update in
                    log.withLockedValue { update(&$0[index]) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    if case .unread = behaviour {
                        try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                    }
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await group.shutdownGracefully()
            throw LoopbackServerError.noPort
        }
        return EchoServer(port: port, isTLS: tlsContext != nil, group: group, channel: channel, log: log)
    }

    /// Every connection accepted so far (a refused TLS handshake counts), in order.
    public var connections: [Connection] { log.withLockedValue { $0 } }

    /// The application bytes received on all connections.
    public var receivedByteCount: Int { log.withLockedValue { $0.reduce(0) { $0 + $1.received.count } } }

    /// Stops the server.
    public func shutdown() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

/// Echoes, sends or stays silent on one connection, and records what it reads.
private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let behaviour: EchoServer.Behaviour
    private let record: (@escaping (inout EchoServer.Connection) -> Void) -> Void
    /// The TLS to switch to on `STARTTLS`, until it is switched to.
    private var upgradeContext: NIOSSLContext?
    /// The TLS of the upgrade, once switched to.
    private var upgradeHandler: NIOSSLServerHandler?
    private var line = Data()

    init(
        behaviour: EchoServer.Behaviour, upgradeContext: NIOSSLContext?,
        record: @escaping (@escaping (inout EchoServer.Connection) -> Void) -> Void
    ) {
        self.behaviour = behaviour
        self.upgradeContext = upgradeContext
        self.record = record
    }

    func channelActive(context: ChannelHandlerContext) {
        // With TLS, writes wait in NIOSSL until the handshake is done.
        if case .sendThenHalfClose(let data) = behaviour {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: data))).whenComplete { _ in
                channel.close(mode: .output, promise: nil)
            }
            return
        }
        if case .sendThenCloseResettingOnRead(let data) = behaviour {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(bytes: data))).whenComplete { _ in
                channel.close(mode: .output, promise: nil)
            }
            return
        }
        if case .stream(let byteCount) = behaviour {
            let chunk = context.channel.allocator.buffer(
                bytes: (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            Self.stream(chunk, remaining: byteCount, on: context.channel)
            return
        }
        guard case .send(let data, let thenClose) = behaviour else { return }
        let written = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: data)))
        if thenClose {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Writes `remaining` bytes of `chunk` repeated, one write at a time, then closes.
    private static func stream(_ chunk: ByteBuffer, remaining: Int, on channel: Channel) {
        guard remaining > 0 else { return channel.close(promise: nil) }
        let count = min(remaining, chunk.readableBytes)
        let piece = chunk.getSlice(at: chunk.readerIndex, length: count) ?? chunk
        channel.writeAndFlush(piece).whenComplete { result in
            guard case .success = result else { return channel.close(promise: nil) }
            // A write the socket took at once completes inline: a new event loop task keeps the stack flat.
            channel.eventLoop.execute { stream(chunk, remaining: remaining - count, on: channel) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let bytes = Data(buffer.readableBytesView)
        record { $0.received.append(bytes) }
        if let upgradeContext {
            line.append(bytes)
            guard line == Data("STARTTLS\n".utf8) else { return }
            self.upgradeContext = nil
            // The answer leaves in plain text; everything after goes through TLS.
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: "GO\n")), promise: nil)
            do {
                let handler = NIOSSLServerHandler(context: upgradeContext)
                try context.pipeline.syncOperations.addHandler(handler, position: .first)
                upgradeHandler = handler
            } catch {
                context.close(promise: nil)
            }
            return
        }
        if case .sendThenCloseResettingOnRead = behaviour {
            // With a zero linger time, closing sends a reset instead of the end of stream.
            let channel = context.channel
            guard let options = channel as? SocketOptionProvider else { return channel.close(promise: nil) }
            options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        if let upgradeHandler, bytes == Data("DROP\n".utf8) {
            // Without the TLS handler, the close sends no close_notify: the client sees a bare end of stream.
            let pipeline = context.pipeline
            let channel = context.channel
            context.eventLoop.execute {
                pipeline.removeHandler(upgradeHandler).whenComplete { _ in channel.close(promise: nil) }
            }
            return
        }
        switch behaviour {
        case .echo, .echoUpgradingOnSTARTTLS: context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        default: break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            record { $0.inputClosed = true }
            switch behaviour {
            case .echo, .echoUpgradingOnSTARTTLS: context.close(promise: nil)
            default: break
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        record { $0.closed = true }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
