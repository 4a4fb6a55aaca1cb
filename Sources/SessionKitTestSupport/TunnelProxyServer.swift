import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A proxy on an ephemeral 127.0.0.1 port that opens tunnels for tests: SOCKS5 (RFC 1928; no authentication or
/// username/password, RFC 1929; CONNECT to an IPv4, IPv6 or domain address) or HTTP `CONNECT` (RFC 9110 9.3.6).
///
/// It counts the connections it accepts and records each destination as requested (`127.0.0.1:8080` for an address,
/// `localhost:8080` for a name the proxy resolves), then relays bytes both ways. Only loopback destinations
/// (`127.0.0.1`, `::1`, `localhost`) are connected, to whichever loopback address listens on the port; any other is
/// refused (SOCKS reply 2, HTTP 403), so a test can never send traffic off the machine through it.
///
/// ```swift
/// let proxy = try await TunnelProxyServer.start(.socks5(username: "u", password: "p"))
/// defer { Task { try? await proxy.shutdown() } }
/// configuration.connectionProxyDictionary = ["SOCKSEnable": 1, "SOCKSProxy": "127.0.0.1", "SOCKSPort": proxy.port]
/// ```
public final class TunnelProxyServer: @unchecked Sendable {
    // @unchecked Sendable: `state` is a `NIOLockedValueBox`; the rest is immutable after start.

    /// The protocol the proxy speaks.
    public enum Kind: Sendable {
        /// SOCKS5; with a username, only username/password authentication is accepted, and those credentials.
        case socks5(username: String? = nil, password: String? = nil)
        /// HTTP `CONNECT` tunnels.
        case httpConnect
    }

    struct State {
        var connections = 0
        var destinations: [String] = []
    }

    /// The port the proxy listens on.
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let state: NIOLockedValueBox<State>

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: Channel, state: NIOLockedValueBox<State>) {
        self.port = port
        self.group = group
        self.channel = channel
        self.state = state
    }

    /// Starts a proxy of `kind` on 127.0.0.1.
    public static func start(_ kind: Kind) async throws -> TunnelProxyServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = NIOLockedValueBox(State())
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                state.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        TunnelHandler(kind: kind) { destination in
                            state.withLockedValue { $0.destinations.append(destination) }
                        })
                }
            }
        do {
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = channel.localAddress?.port else { throw LoopbackServerError.noPort }
            return TunnelProxyServer(port: port, group: group, channel: channel, state: state)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// How many connections the proxy accepted.
    public var connectionCount: Int { state.withLockedValue { $0.connections } }

    /// The destinations clients asked for, oldest first, as `host:port` (an IPv6 address in brackets).
    public var destinations: [String] { state.withLockedValue { $0.destinations } }

    /// Closes the listening socket and every tunnel.
    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

/// One client of the proxy: its handshake, then the relay to the destination.
private final class TunnelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase {
        case greeting, authentication, request, connecting, relaying, closed
    }

    private let kind: TunnelProxyServer.Kind
    private let record: @Sendable (String) -> Void
    private var phase: Phase
    /// Bytes received and not handled yet (a partial handshake message, or bytes for the destination while it
    /// connects).
    private var pending = ByteBuffer()
    private var outbound: Channel?

    init(kind: TunnelProxyServer.Kind, record: @escaping @Sendable (String) -> Void) {
        self.kind = kind
        self.record = record
        if case .httpConnect = kind { phase = .request } else { phase = .greeting }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if phase == .relaying, let outbound {
            outbound.writeAndFlush(bytes, promise: nil)
            return
        }
        pending.writeBuffer(&bytes)
        advance(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .closed
        outbound?.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    /// Handles every complete handshake message in ``pending``.
    private func advance(context: ChannelHandlerContext) {
        while true {
            let before = pending.readableBytes
            switch phase {
            case .greeting: greeting(context: context)
            case .authentication: authentication(context: context)
            case .request:
                if case .httpConnect = kind { httpConnect(context: context) } else { socksRequest(context: context) }
            case .connecting, .relaying, .closed: return
            }
            if pending.readableBytes == before { return }  // waits for more bytes
        }
    }

    // MARK: - SOCKS5

    private func greeting(context: ChannelHandlerContext) {
        guard let header = pending.getBytes(at: pending.readerIndex, length: 2) else { return }
        guard header[0] == 5 else { return fail(context) }
        guard let methods = pending.getBytes(at: pending.readerIndex + 2, length: Int(header[1])) else { return }
        pending.moveReaderIndex(forwardBy: 2 + methods.count)
        let wantsPassword: Bool
        if case .socks5(let username, _) = kind { wantsPassword = username != nil } else { wantsPassword = false }
        let method: UInt8 = wantsPassword ? 2 : 0
        guard methods.contains(method) else {
            reply(context, [5, 0xFF])
            return fail(context)
        }
        reply(context, [5, method])
        phase = wantsPassword ? .authentication : .request
    }

    private func authentication(context: ChannelHandlerContext) {
        let start = pending.readerIndex
        guard let head = pending.getBytes(at: start, length: 2),
            let user = pending.getString(at: start + 2, length: Int(head[1])),
            let passwordLength = pending.getInteger(at: start + 2 + Int(head[1]), as: UInt8.self),
            let password = pending.getString(at: start + 3 + Int(head[1]), length: Int(passwordLength))
        else { return }
        pending.moveReaderIndex(forwardBy: 3 + Int(head[1]) + Int(passwordLength))
        guard case .socks5(let expectedUser, let expectedPassword) = kind, head[0] == 1, user == expectedUser,
            password == (expectedPassword ?? "")
        else {
            reply(context, [1, 1])
            return fail(context)
        }
        reply(context, [1, 0])
        phase = .request
    }

    private func socksRequest(context: ChannelHandlerContext) {
        let start = pending.readerIndex
        guard let head = pending.getBytes(at: start, length: 4) else { return }
        guard head[0] == 5, head[1] == 1 else {
            reply(context, [5, 7, 0, 1, 0, 0, 0, 0, 0, 0])  // command not supported
            return fail(context)
        }
        var host: String
        var length: Int
        switch head[3] {
        case 1:
            guard let address = pending.getBytes(at: start + 4, length: 4) else { return }
            host = address.map(String.init).joined(separator: ".")
            length = 4
        case 3:
            guard let count = pending.getInteger(at: start + 4, as: UInt8.self),
                let name = pending.getString(at: start + 5, length: Int(count))
            else { return }
            host = name
            length = 1 + Int(count)
        case 4:
            guard let address = pending.getBytes(at: start + 4, length: 16) else { return }
            host = stride(from: 0, to: 16, by: 2).map {
                String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16)
            }
            .joined(separator: ":")
            length = 16
        default:
            reply(context, [5, 8, 0, 1, 0, 0, 0, 0, 0, 0])  // address type not supported
            return fail(context)
        }
        guard let port = pending.getInteger(at: start + 4 + length, as: UInt16.self) else { return }
        pending.moveReaderIndex(forwardBy: 4 + length + 2)
        if head[3] == 4, let normalized = Self.normalizedIPv6(host) { host = normalized }
        connect(context: context, host: host, port: Int(port)) { context, connected in
            // Bound address 0.0.0.0:0: clients do not use it.
            self.reply(context, connected ? [5, 0, 0, 1, 0, 0, 0, 0, 0, 0] : [5, 5, 0, 1, 0, 0, 0, 0, 0, 0])
        } refused: { context in
            self.reply(context, [5, 2, 0, 1, 0, 0, 0, 0, 0, 0])  // not allowed by the ruleset
        }
    }

    /// `address` in its shortest form (`::1`).
    private static func normalizedIPv6(_ address: String) -> String? {
        var storage = in6_addr()
        guard inet_pton(AF_INET6, address, &storage) == 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &storage, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: - HTTP CONNECT

    private func httpConnect(context: ChannelHandlerContext) {
        let view = pending.readableBytesView
        guard let end = view.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if pending.readableBytes > 16 * 1024 { fail(context) }
            return
        }
        let headLength = end.upperBound - view.startIndex
        let head = pending.readString(length: headLength) ?? ""
        let requestLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[0] == "CONNECT", let colon = parts[1].lastIndex(of: ":"),
            let port = Int(parts[1][parts[1].index(after: colon)...])
        else {
            replyText(context, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return fail(context)
        }
        var host = String(parts[1][..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        connect(context: context, host: host, port: port) { context, connected in
            self.replyText(
                context,
                connected
                    ? "HTTP/1.1 200 Connection established\r\n\r\n"
                    : "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        } refused: { context in
            self.replyText(context, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
    }

    // MARK: - Tunnel

    /// Records `host`:`port`, connects to it (loopback only), answers with `answer`, then relays.
    private func connect(
        context: ChannelHandlerContext, host: String, port: Int,
        answer: @escaping (ChannelHandlerContext, Bool) -> Void, refused: (ChannelHandlerContext) -> Void
    ) {
        record(host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        guard ["127.0.0.1", "::1", "localhost"].contains(host.lowercased()) else {
            refused(context)
            return fail(context)
        }
        phase = .connecting
        let client = context.channel
        let connecting = ClientBootstrap(group: context.eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RelayHandler(partner: client))
                }
            }
            // Whichever loopback address the destination listens on (the test servers bind 127.0.0.1 alone, and a
            // client that resolves `localhost` itself may ask for ::1).
            .connect(host: "localhost", port: port)
        connecting.assumeIsolated().whenComplete { result in
            guard self.phase == .connecting else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            switch result {
            case .success(let channel):
                self.outbound = channel
                answer(context, true)
                self.phase = .relaying
                if self.pending.readableBytes > 0 {
                    channel.writeAndFlush(self.pending, promise: nil)
                    self.pending.clear()
                }
            case .failure:
                answer(context, false)
                self.fail(context)
            }
        }
    }

    private func reply(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    private func replyText(_ context: ChannelHandlerContext, _ text: String) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
    }

    private func fail(_ context: ChannelHandlerContext) {
        phase = .closed
        pending.clear()
        context.close(promise: nil)
    }
}

/// The destination side of a tunnel: what it sends goes to the client; its end closes the client.
private final class RelayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let partner: Channel

    init(partner: Channel) {
        self.partner = partner
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
