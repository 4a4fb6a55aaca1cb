import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// A WebSocket server (SwiftNIO's `NIOWebSocket`) on an ephemeral 127.0.0.1 port, over plain TCP or TLS, for tests
/// and the demo: a well-behaved peer that echoes, answers pings and closes when asked.
///
/// Text commands: `close <code> <reason>` makes the server close with that code; `fragments` makes it send the text
/// `"héllo wörld"` in fragments split inside code points with a ping between them; `ping` makes it ping the client;
/// `binary <n>` makes it send `n` bytes. Any other message comes back as it went (text or binary). It answers
/// pings with pongs, and a client's close frame with its own (the same code), then closes the connection.
///
/// Started with a ``Deflate``, it accepts a client's permessage-deflate offer (RFC 7692, which NIOWebSocket does not
/// implement) with zlib of its own (``RawDeflate``): it inflates the client's compressed messages and compresses
/// every message it sends, resetting each context per the parameters it answered, so that a client that keeps a
/// context it was told to reset fails to be understood. `bomb <n>` then sends `n` zero bytes as one compressed
/// message (about a thousandth of `n` on the wire).
///
/// ```swift
/// let server = try await WebSocketServer.start(protocols: ["chat"])
/// let task = manager.webSocketTask(with: server.url("/echo"), protocols: ["chat"])
/// ```
public final class WebSocketServer: @unchecked Sendable {
    // @unchecked Sendable: `log` is a `NIOLockedValueBox`; the rest is immutable after start.

    /// What the server saw of its clients.
    public struct Log: Sendable {
        /// The upgrade requests' heads: target and header fields, in order.
        public var upgrades: [(target: String, headers: [(String, String)])] = []
        /// The close codes clients sent (nil for a close frame without a code).
        public var closeCodes: [Int?] = []
        /// Pongs received for the server's pings.
        public var pongs = 0
        /// Connections accepted (TCP), and connections upgraded.
        public var connections = 0
        /// Compressed messages received (RSV1 set).
        public var compressedMessages = 0
        /// Compressed messages the server could not inflate (it closed with 1007).
        public var undecodableMessages = 0
    }

    /// How the server answers a client's permessage-deflate offer.
    public struct Deflate: Sendable {
        /// Answer `server_no_context_takeover`: the server resets its compression context after each message.
        public var serverNoContextTakeover: Bool
        /// Answer `client_no_context_takeover`: the client must reset its own (the server resets its inflater).
        public var clientNoContextTakeover: Bool
        /// Text appended to the answer as it is (`"; x_unknown=1"`), to test how a client refuses it.
        public var extra: String

        /// An answer with the given parameters.
        public init(serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false, extra: String = "") {
            self.serverNoContextTakeover = serverNoContextTakeover
            self.clientNoContextTakeover = clientNoContextTakeover
            self.extra = extra
        }

        /// The `Sec-WebSocket-Extensions` answer.
        var answer: String {
            "permessage-deflate" + (serverNoContextTakeover ? "; server_no_context_takeover" : "")
                + (clientNoContextTakeover ? "; client_no_context_takeover" : "") + extra
        }

        /// The answer's parameters when `head` offers permessage-deflate, nil otherwise.
        static func negotiated(_ deflate: Deflate?, in head: HTTPRequestHead) -> Deflate? {
            guard let deflate else { return nil }
            let offered = head.headers["Sec-WebSocket-Extensions"].flatMap { $0.split(separator: ",") }.contains {
                $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                    == "permessage-deflate"
            }
            return offered ? deflate : nil
        }
    }

    /// The port the server listens on.
    public let port: Int
    /// Whether the server speaks TLS.
    public let isTLS: Bool
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let log: NIOLockedValueBox<Log>

    private init(
        port: Int, isTLS: Bool, group: MultiThreadedEventLoopGroup, channel: Channel, log: NIOLockedValueBox<Log>
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
    ///   - protocols: The subprotocols it speaks; it chooses the first of the client's it knows.
    ///   - deflate: How it answers a permessage-deflate offer; nil to accept no extension.
    ///   - threads: Event-loop threads.
    ///   - clientCertificateRoots: With `tls`, require a client certificate issued under these PEM roots (mutual
    ///     TLS; the handshake fails without one).
    public static func start(
        tls: TestCertificates.Identity? = nil, protocols: [String] = [], deflate: Deflate? = nil, threads: Int = 1,
        clientCertificateRoots: URL? = nil
    ) async throws -> WebSocketServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let log = NIOLockedValueBox(Log())
        let sslContext = try tls.map {
            try NIOSSLContext(configuration: $0.serverConfiguration(clientCertificateRoots: clientCertificateRoots))
        }
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 1 << 24, automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                var headers = HTTPHeaders()
                let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",") }.map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if let chosen = offered.first(where: { protocols.contains($0) }) {
                    headers.add(name: "Sec-WebSocket-Protocol", value: chosen)
                }
                if let answer = Deflate.negotiated(deflate, in: head)?.answer {
                    headers.add(name: "Sec-WebSocket-Extensions", value: answer)
                }
                log.withLockedValue {
                    $0.upgrades.append((head.uri, head.headers.map { ($0.name, $0.value) }))
                }
                return channel.eventLoop.makeSucceededFuture(headers)
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 10_000,
                            maxAccumulatedFrameSize: 1 << 24))
                    try channel.pipeline.syncOperations.addHandler(
                        WebSocketServerHandler(log: log, deflate: Deflate.negotiated(deflate, in: head)))
                }
            })
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 512)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                log.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = channel.localAddress?.port else { throw LoopbackServerError.noPort }
            return WebSocketServer(port: port, isTLS: sslContext != nil, group: group, channel: channel, log: log)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// `ws://127.0.0.1:PORT` + `path` (or `wss://…`).
    public func url(_ path: String = "/") -> URL {
        URL(string: "\(isTLS ? "wss" : "ws")://127.0.0.1:\(port)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// What the server saw so far.
    public var seen: Log { log.withLockedValue { $0 } }

    /// Closes the listening socket and every connection, and stops the event loops.
    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

/// One upgraded connection: echoes, answers pings, runs the text commands, closes when asked.
private final class WebSocketServerHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let log: NIOLockedValueBox<WebSocketServer.Log>
    private var closing = false
    private let deflate: WebSocketServer.Deflate?
    private let deflater: RawDeflate?
    private let inflater: RawDeflate?

    init(log: NIOLockedValueBox<WebSocketServer.Log>, deflate: WebSocketServer.Deflate?) {
        self.log = log
        self.deflate = deflate
        deflater = deflate.map { _ in RawDeflate(compressing: true) }
        inflater = deflate.map { _ in RawDeflate(compressing: false) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        var payload = Self.unmasked(frame)
        if frame.rsv1, let inflater, frame.opcode == .text || frame.opcode == .binary {
            log.withLockedValue { $0.compressedMessages += 1 }
            let inflated = inflater.decompress(Data(payload.readableBytesView))
            if deflate?.clientNoContextTakeover == true { inflater.reset() }
            guard let inflated else {
                log.withLockedValue { $0.undecodableMessages += 1 }
                return send(.connectionClose, context.channel.allocator.buffer(bytes: [0x03, 0xEF]), context: context)
            }
            payload = context.channel.allocator.buffer(bytes: inflated)
        }
        switch frame.opcode {
        case .ping:
            send(.pong, payload, context: context)
        case .pong:
            log.withLockedValue { $0.pongs += 1 }
        case .connectionClose:
            let code = payload.readableBytes >= 2 ? payload.getInteger(at: payload.readerIndex, as: UInt16.self) : nil
            log.withLockedValue { $0.closeCodes.append(code.map(Int.init)) }
            if closing {
                context.close(promise: nil)
                return
            }
            closing = true
            var reply = context.channel.allocator.buffer(capacity: 2)
            if let code { reply.writeInteger(code) }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: reply)))
                .whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
        case .text:
            let text = payload.readString(length: payload.readableBytes) ?? ""
            command(text, context: context)
        case .binary:
            send(.binary, payload, context: context)
        default:
            break
        }
    }

    /// The frame's payload unmasked eight bytes at a time. NIO's `unmaskedData` goes byte by byte through generic
    /// code that, in a debug build, costs more than the rest of a 600 MiB echo together.
    private static func unmasked(_ frame: WebSocketFrame) -> ByteBuffer {
        guard let key = frame.maskKey else { return frame.data }
        var data = frame.data
        let keyBytes = [key[0], key[1], key[2], key[3]]
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { for index in 0..<8 { $0[index] = keyBytes[index & 3] } }
        data.withUnsafeMutableReadableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            let words = buffer.count / 8
            for index in 0..<words {
                let address = base + index * 8
                address.storeBytes(of: address.loadUnaligned(as: UInt64.self) ^ word, as: UInt64.self)
            }
            for index in (words * 8)..<buffer.count { buffer[index] ^= keyBytes[index & 3] }
        }
        return data
    }

    private func command(_ text: String, context: ChannelHandlerContext) {
        let words = text.split(separator: " ", maxSplits: 2).map(String.init)
        switch words.first {
        case "close" where words.count >= 2:
            closing = true
            var payload = context.channel.allocator.buffer(capacity: 64)
            payload.writeInteger(UInt16(words[1]) ?? 1000)
            if words.count > 2 { payload.writeString(words[2]) }
            send(.connectionClose, payload, context: context)
        case "fragments":
            let bytes = Array("héllo wörld".utf8)
            // Split inside "é" (bytes 1…2) and inside "ö" (bytes 8…9), with a ping between fragments.
            let pieces = [Array(bytes[0..<2]), Array(bytes[2..<9]), Array(bytes[9...])]
            for (index, piece) in pieces.enumerated() {
                let buffer = context.channel.allocator.buffer(bytes: piece)
                let opcode: WebSocketOpcode = index == 0 ? .text : .continuation
                context.write(
                    wrapOutboundOut(WebSocketFrame(fin: index == pieces.count - 1, opcode: opcode, data: buffer)),
                    promise: nil)
                if index == 0 { send(.ping, context.channel.allocator.buffer(string: "between"), context: context) }
            }
            context.flush()
        case "ping":
            send(.ping, context.channel.allocator.buffer(string: "server"), context: context)
        case "binary" where words.count == 2:
            let count = Int(words[1]) ?? 0
            send(.binary, context.channel.allocator.buffer(repeating: 0x5A, count: count), context: context)
        case "bomb" where words.count == 2:
            let count = Int(words[1]) ?? 0
            send(.binary, context.channel.allocator.buffer(repeating: 0, count: count), context: context)
        default:
            send(.text, context.channel.allocator.buffer(string: text), context: context)
        }
    }

    /// Sends one frame; a text or binary message compressed when permessage-deflate was negotiated.
    private func send(_ opcode: WebSocketOpcode, _ payload: ByteBuffer, context: ChannelHandlerContext) {
        guard let deflater, opcode == .text || opcode == .binary else {
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: opcode, data: payload)), promise: nil)
            return
        }
        let compressed = deflater.compress(Data(payload.readableBytesView))
        if deflate?.serverNoContextTakeover == true { deflater.reset() }
        let frame = WebSocketFrame(
            fin: true, rsv1: true, opcode: opcode, data: context.channel.allocator.buffer(bytes: compressed))
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
