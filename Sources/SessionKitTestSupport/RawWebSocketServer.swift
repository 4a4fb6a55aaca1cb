import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP server on 127.0.0.1 that answers a WebSocket upgrade request with exactly the bytes its script returns —
/// a handshake and frames no conforming server library would send — and records every byte the client sends after
/// its request, so that a test can read the client's close frame (and its code) or prove nothing was sent.
///
/// ```swift
/// let server = try await RawWebSocketServer.start { upgrade in
///     RawWebSocketServer.upgradeResponse(for: upgrade) + RawWebSocketServer.frame(opcode: 0x1, payload: [0xFF])
/// }
/// ```
public final class RawWebSocketServer: @unchecked Sendable {
    // @unchecked Sendable: `log` is a `NIOLockedValueBox`; the rest is immutable after start.

    /// One upgrade request as received.
    public struct Upgrade: Sendable {
        /// The request head's text, up to the empty line.
        public let head: String
        /// Its `Sec-WebSocket-Key`.
        public let key: String
        /// The value of a header field (the first of that name, case-insensitive).
        public func value(of name: String) -> String? {
            for line in head.components(separatedBy: "\r\n").dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                if line[..<colon].caseInsensitiveCompare(name) == .orderedSame {
                    return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }
    }

    /// A client frame, unmasked.
    public struct ClientFrame: Sendable, Equatable {
        /// Its opcode (0x1 text, 0x2 binary, 0x8 close, 0x9 ping, 0xA pong).
        public let opcode: UInt8
        /// Whether the client masked it.
        public let masked: Bool
        /// Its mask key, as sent.
        public let maskKey: [UInt8]
        /// Its unmasked payload.
        public let payload: Data

        /// A close frame's code.
        public var closeCode: Int? {
            guard opcode == 0x8, payload.count >= 2 else { return nil }
            return Int(payload[payload.startIndex]) << 8 | Int(payload[payload.startIndex + 1])
        }
    }

    /// The port the server listens on.
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let log: NIOLockedValueBox<Log>

    /// Which side closed a connection first.
    public enum Closer: Sendable, Equatable {
        /// The client (its FIN, or its reset, came before the server closed).
        case client
        /// The server.
        case server
    }

    /// What the server saw, per connection.
    struct Log {
        var upgrades: [Upgrade] = []
        var afterHead: [Data] = []
        var connections = 0
        var firstToClose: [Int: Closer] = [:]
    }

    private init(
        port: Int, group: MultiThreadedEventLoopGroup, channel: Channel, log: NIOLockedValueBox<Log>
    ) {
        self.port = port
        self.group = group
        self.channel = channel
        self.log = log
    }

    /// Starts a server whose `script` gives the bytes to answer each upgrade request with. With
    /// `closingAfterClientClose`, the server closes a connection that many seconds after the client's close frame
    /// arrived (as RFC 6455 7.1.1 asks of a server), unless the client closed it first: ``firstToClose(connection:)``.
    public static func start(
        closingAfterClientClose closeDelay: TimeInterval? = nil, script: @escaping @Sendable (Upgrade) -> Data
    ) async throws -> RawWebSocketServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let log = NIOLockedValueBox(Log())
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let index = log.withLockedValue { log -> Int in
                    log.connections += 1
                    log.afterHead.append(Data())
                    return log.afterHead.count - 1
                }
                let handler = RawWebSocketHandler(script: script, closeDelay: closeDelay) { event in
                    log.withLockedValue { log in
                        switch event {
                        case .upgrade(let upgrade): log.upgrades.append(upgrade)
                        case .bytes(let bytes): log.afterHead[index].append(bytes)
                        case .closed(let closer): log.firstToClose[index] = log.firstToClose[index] ?? closer
                        }
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await group.shutdownGracefully()
            throw LoopbackServerError.noPort
        }
        return RawWebSocketServer(port: port, group: group, channel: channel, log: log)
    }

    /// `ws://127.0.0.1:PORT` + `path`.
    public func url(_ path: String = "/") -> URL {
        URL(string: "ws://127.0.0.1:\(port)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// The upgrade requests read so far.
    public var upgrades: [Upgrade] { log.withLockedValue { $0.upgrades } }

    /// TCP connections accepted.
    public var connections: Int { log.withLockedValue { $0.connections } }

    /// Which side closed connection `index` first; nil while it is open.
    public func firstToClose(connection index: Int = 0) -> Closer? {
        log.withLockedValue { $0.firstToClose[index] }
    }

    /// The frames the client sent after its request on connection `index` (complete ones only).
    public func clientFrames(connection index: Int = 0) -> [ClientFrame] {
        let bytes = log.withLockedValue { index < $0.afterHead.count ? $0.afterHead[index] : Data() }
        return Self.decode(Array(bytes))
    }

    /// Stops the server.
    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }

    // MARK: - Building answers

    /// `base64(SHA-1(key + GUID))`, computed apart from the client (RFC 6455 4.2.2).
    public static func acceptValue(for key: String) -> String {
        Data(SHA1.digest(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    }

    /// A `101 Switching Protocols` for `upgrade`, with `fields` replacing or adding header lines (a nil value drops
    /// the field): `["Sec-WebSocket-Accept": "wrong"]`, `["Upgrade": nil]`.
    public static func upgradeResponse(for upgrade: Upgrade, status: Int = 101, fields: [String: String?] = [:]) -> Data
    {
        var lines: [(String, String?)] = [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", acceptValue(for: upgrade.key)),
        ]
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            if let index = lines.firstIndex(where: { $0.0 == name }) {
                lines[index].1 = value
            } else {
                lines.append((name, value))
            }
        }
        var head = "HTTP/1.1 \(status) Switching Protocols\r\n"
        for case let (name, value?) in lines { head += "\(name): \(value)\r\n" }
        return Data((head + "\r\n").utf8)
    }

    /// A server frame: `opcode` and `payload`, with the given FIN and RSV bits, masked with `mask` when one is given
    /// (which a server must never do), the length in its minimal form.
    public static func frame(
        opcode: UInt8, payload: [UInt8] = [], fin: Bool = true, rsv: UInt8 = 0, mask: [UInt8]? = nil
    ) -> Data {
        var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 0x7) << 4 | (opcode & 0x0F)]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            out += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: payload.count >> shift))
            }
        }
        if let mask {
            out += mask
            out += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            out += payload
        }
        return Data(out)
    }

    /// Client frames in `bytes`, in order (a trailing incomplete one is left out).
    static func decode(_ bytes: [UInt8]) -> [ClientFrame] {
        var frames: [ClientFrame] = []
        var index = 0
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0F
            let masked = bytes[index + 1] & 0x80 != 0
            var length = Int(bytes[index + 1] & 0x7F)
            var cursor = index + 2
            if length == 126 {
                guard cursor + 2 <= bytes.count else { break }
                length = Int(bytes[cursor]) << 8 | Int(bytes[cursor + 1])
                cursor += 2
            } else if length == 127 {
                guard cursor + 8 <= bytes.count else { break }
                length = bytes[cursor..<cursor + 8].reduce(0) { $0 << 8 | Int($1) }
                cursor += 8
            }
            let key = masked && cursor + 4 <= bytes.count ? Array(bytes[cursor..<cursor + 4]) : []
            if masked { cursor += 4 }
            guard length >= 0, cursor + length <= bytes.count else { break }
            var payload = Array(bytes[cursor..<cursor + length])
            if masked, key.count == 4 { payload = payload.enumerated().map { $0.element ^ key[$0.offset % 4] } }
            frames.append(ClientFrame(opcode: opcode, masked: masked, maskKey: key, payload: Data(payload)))
            index = cursor + length
        }
        return frames
    }
}

/// Reads one upgrade request, answers it with the script's bytes, then records what the client sends.
private final class RawWebSocketHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Event {
        case upgrade(RawWebSocketServer.Upgrade)
        case bytes(Data)
        case closed(RawWebSocketServer.Closer)
    }

    private let script: @Sendable (RawWebSocketServer.Upgrade) -> Data
    private let record: (Event) -> Void
    private let closeDelay: TimeInterval?
    private var head = Data()
    private var answered = false
    /// What the client sent after its request, to find its close frame in.
    private var afterHead: [UInt8] = []
    private var closeScheduled = false
    private var closed = false

    init(
        script: @escaping @Sendable (RawWebSocketServer.Upgrade) -> Data, closeDelay: TimeInterval?,
        record: @escaping (Event) -> Void
    ) {
        self.script = script
        self.closeDelay = closeDelay
        self.record = record
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        if answered {
            record(.bytes(Data(bytes)))
            afterHead += bytes
            closeAfterClientClose(context: context)
            return
        }
        head.append(contentsOf: bytes)
        guard let end = head.range(of: Data("\r\n\r\n".utf8)) else { return }
        answered = true
        let text = String(decoding: head[..<end.lowerBound], as: UTF8.self)
        let rest = Data(head[end.upperBound...])
        var key = ""
        for line in text.components(separatedBy: "\r\n") where line.lowercased().hasPrefix("sec-websocket-key:") {
            key = line.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces)
        }
        let upgrade = RawWebSocketServer.Upgrade(head: text, key: key)
        record(.upgrade(upgrade))
        if !rest.isEmpty { record(.bytes(rest)) }
        let answer = script(upgrade)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer)), promise: nil)
    }

    /// Once the client's close frame came, closes the connection after the delay, unless the client closed it.
    private func closeAfterClientClose(context: ChannelHandlerContext) {
        guard let closeDelay, !closeScheduled,
            RawWebSocketServer.decode(afterHead).contains(where: { $0.opcode == 0x8 })
        else { return }
        closeScheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(Int64(closeDelay * 1000))) {
            let (handler, context) = bound.value
            guard !handler.closed else { return }
            handler.closed = true
            handler.record(.closed(.server))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !closed {
            closed = true
            record(.closed(.client))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if !closed {
            closed = true
            record(.closed(.client))  // a reset
        }
        context.close(promise: nil)
    }
}
