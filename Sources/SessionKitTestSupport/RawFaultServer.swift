import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP server on 127.0.0.1 that answers each HTTP request it reads with exactly the bytes, or the fault, its
/// script names, and records exactly what it received: for testing a client against servers that misbehave in ways
/// a well-formed HTTP server library cannot.
///
/// A request counts as read once its head (up to the empty line) and its `Content-Length` body (or a chunked body up
/// to its last chunk) have arrived. The script is asked with the request's number in the whole run (0, 1, …) and on
/// its connection, and returns what to do.
///
/// ```swift
/// let server = try await RawFaultServer.start { request in
///     request.indexOnConnection == 1 ? .reset : .respond(RawFaultServer.response(body: "ok"))
/// }
/// ```
public final class RawFaultServer: @unchecked Sendable {
    // @unchecked Sendable: `log` and `counters` are `NIOLockedValueBox`es; the rest is immutable after start.

    /// What the server does with one request.
    public enum Action: Sendable {
        /// Writes these bytes and keeps the connection open.
        case respond(Data)
        /// Writes these bytes, then closes the connection.
        case respondAndClose(Data)
        /// Resets the connection (an RST, no response byte).
        case reset
        /// Writes these bytes, then resets the connection.
        case respondAndReset(Data)
        /// Closes the connection without a byte.
        case close
        /// Writes these bytes, then never writes again (the connection stays open).
        case stall(Data)
        /// Writes `head`, then `chunk` again and again, without end (until the client goes away).
        case endless(head: Data, chunk: Data)
        /// Writes these bytes after `milliseconds`, keeping the connection open (requests that overlap in time make a
        /// client open connections side by side).
        case respondAfter(milliseconds: Int64, Data)
    }

    /// One request as received.
    public struct ReceivedRequest: Sendable {
        /// The request's number in the whole run, from 0.
        public let index: Int
        /// Its number on its connection, from 0.
        public let indexOnConnection: Int
        /// The connection's number, from 0.
        public let connection: Int
        /// The request line's method.
        public let method: String
        /// The request line's target (its path and query, or an absolute URL for a proxy).
        public let target: String
        /// Every byte of the request, head and body.
        public let bytes: Data
        /// The body's bytes.
        public let body: Data
    }

    /// The port the server listens on.
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    private let log: NIOLockedValueBox<[ReceivedRequest]>

    private init(
        port: Int, group: MultiThreadedEventLoopGroup, channel: Channel, log: NIOLockedValueBox<[ReceivedRequest]>
    ) {
        self.port = port
        self.group = group
        self.channel = channel
        self.log = log
    }

    /// Starts a server whose `script` decides what each request gets. With `closesBeforeBody`, a connection is
    /// closed as soon as a request's head has arrived while its body has not all arrived yet (a server that gives up
    /// on an upload); the script never sees that request.
    public static func start(
        closesBeforeBody: Bool = false, script: @escaping @Sendable (ReceivedRequest) -> Action
    ) async throws -> RawFaultServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let log = NIOLockedValueBox<[ReceivedRequest]>([])
        let counters = NIOLockedValueBox((connections: 0, requests: 0))
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let connection = counters.withLockedValue { counters -> Int in
                    defer { counters.connections += 1 }
                    return counters.connections
                }
                let handler = RawFaultHandler(
                    connection: connection, closesBeforeBody: closesBeforeBody, script: script,
                    record: { request in
                        log.withLockedValue { $0.append(request) }
                    },
                    nextIndex: {
                        counters.withLockedValue { counters -> Int in
                            defer { counters.requests += 1 }
                            return counters.requests
                        }
                    })
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await group.shutdownGracefully()
            throw LoopbackServerError.noPort
        }
        return RawFaultServer(port: port, group: group, channel: channel, log: log)
    }

    /// `http://127.0.0.1:PORT` + `path`.
    public func url(_ path: String = "/") -> URL {
        URL(string: "http://127.0.0.1:\(port)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// Every request read so far, in order.
    public var requests: [ReceivedRequest] { log.withLockedValue { $0 } }

    /// Stops the server.
    public func shutdown() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    /// A well-formed HTTP/1.1 response with `body`, keep-alive.
    public static func response(status: Int = 200, body: String = "ok", headers: [String] = []) -> Data {
        var head = "HTTP/1.1 \(status) OK\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: text/plain\r\n"
        for header in headers { head += header + "\r\n" }
        return Data((head + "\r\n" + body).utf8)
    }
}

/// Reads requests off one connection and performs the script's action for each.
private final class RawFaultHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: Int
    private let script: @Sendable (RawFaultServer.ReceivedRequest) -> RawFaultServer.Action
    private let record: (RawFaultServer.ReceivedRequest) -> Void
    private let nextIndex: () -> Int
    private var buffer = Data()
    private var requestsOnConnection = 0
    private var done = false
    private let closesBeforeBody: Bool

    init(
        connection: Int, closesBeforeBody: Bool,
        script: @escaping @Sendable (RawFaultServer.ReceivedRequest) -> RawFaultServer.Action,
        record: @escaping (RawFaultServer.ReceivedRequest) -> Void, nextIndex: @escaping () -> Int
    ) {
        self.connection = connection
        self.closesBeforeBody = closesBeforeBody
        self.script = script
        self.record = record
        self.nextIndex = nextIndex
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard !done, let read = bytes.readBytes(length: bytes.readableBytes) else { return }
        buffer.append(contentsOf: read)
        while !done, let (length, bodyRange) = Self.completeRequest(in: buffer) {
            let raw = buffer.prefix(length)
            buffer.removeFirst(length)
            let line = String(decoding: raw.prefix { $0 != 0x0D }, as: UTF8.self).split(separator: " ")
            let request = RawFaultServer.ReceivedRequest(
                index: nextIndex(), indexOnConnection: requestsOnConnection, connection: connection,
                method: line.first.map(String.init) ?? "", target: line.dropFirst().first.map(String.init) ?? "",
                bytes: Data(raw),
                body: Data(raw[raw.startIndex + bodyRange.lowerBound..<raw.startIndex + bodyRange.upperBound]))
            requestsOnConnection += 1
            record(request)
            perform(script(request), context: context)
        }
        if closesBeforeBody, !done, Self.find([0x0D, 0x0A, 0x0D, 0x0A], in: [UInt8](buffer), from: 0) != nil {
            done = true
            context.close(promise: nil)
        }
    }

    private func perform(_ action: RawFaultServer.Action, context: ChannelHandlerContext) {
        switch action {
        case .respond(let data):
            write(data, context: context)
        case .respondAndClose(let data):
            done = true
            write(data, context: context)
            context.close(promise: nil)
        case .reset:
            done = true
            reset(context)
        case .respondAndReset(let data):
            done = true
            write(data, context: context)
            reset(context)
        case .close:
            done = true
            context.close(promise: nil)
        case .stall(let data):
            done = true
            write(data, context: context)
        case .endless(let head, let chunk):
            done = true
            write(head, context: context)
            writeForever(chunk, context: context)
        case .respondAfter(let milliseconds, let data):
            let channel = context.channel
            context.eventLoop.scheduleTask(in: .milliseconds(milliseconds)) { [self] in
                guard channel.isActive else { return }
                write(data, context: context)
            }
        }
    }

    private func write(_ data: Data, context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: data.count)
        out.writeBytes(data)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    private func writeForever(_ chunk: Data, context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: chunk.count)
        out.writeBytes(chunk)
        let channel = context.channel
        channel.writeAndFlush(out).whenComplete { result in
            guard case .success = result, channel.isActive else { return }
            channel.eventLoop.execute { [self] in
                guard channel.isActive else { return }
                writeForever(chunk, context: context)
            }
        }
    }

    private func reset(_ context: ChannelHandlerContext) {
        // SO_LINGER 0 makes close() send a TCP RST.
        guard let provider = context.channel as? SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    /// The length of the first complete request in `data` and its body's range, or nil while it is incomplete.
    private static func completeRequest(in data: Data) -> (Int, Range<Int>)? {
        let bytes = [UInt8](data)
        guard let headEnd = find([0x0D, 0x0A, 0x0D, 0x0A], in: bytes, from: 0) else { return nil }
        let bodyStart = headEnd + 4
        let head = String(decoding: bytes[..<headEnd], as: UTF8.self).lowercased()
        var length = 0
        var chunked = false
        for line in head.split(separator: "\r\n") {
            if line.hasPrefix("content-length:") {
                length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            if line.hasPrefix("transfer-encoding:") && line.contains("chunked") { chunked = true }
        }
        if chunked {
            guard let end = find([0x0D, 0x0A, 0x30, 0x0D, 0x0A, 0x0D, 0x0A], in: bytes, from: bodyStart - 2) else {
                return nil
            }
            return (end + 7, bodyStart..<end + 7)
        }
        guard bytes.count >= bodyStart + length else { return nil }
        return (bodyStart + length, bodyStart..<bodyStart + length)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for index in max(0, start)...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<index + needle.count]) == needle { return index }
        }
        return nil
    }
}
