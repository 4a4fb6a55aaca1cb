import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The loopback server's Server-Sent Events endpoint, for event stream tests:
///
/// `/event-stream?total=T&per=P&retry=R&end=E&size=S&big=B&key=K` serves the events 1…T of one stream, P per
/// connection (default all), each as `id: N`, `event: tick` and `data: event N` (or S bytes of `x` with `size`; with
/// `big` only event B has them), with CRLF line ends whose CR and LF go out in separate writes. A request with
/// `Last-Event-ID: N` resumes after event N; once every event was served the answer is 204. A connection starts with a
/// comment and, with `retry`, a `retry: R` block. After its events it ends as `end` says: `drop` (the default: the
/// connection closes in the middle of the chunked body), `finish` (the body ends cleanly) or `hold` (stays open,
/// silent). `status=N` answers N instead (a 500, a 204), `type=T` serves the events with that content type and
/// `cache=C` with `Cache-Control: C` (else `no-cache`). With
/// `key`, ``LoopbackServer/openEventStreams(key:)`` counts the responses of that key still being sent, so a test sees
/// the client close its connection.
extension HTTPBinHandler {
    /// Event stream responses in progress, by `key`, across connections and servers.
    static let openEventStreams = NIOLockedValueBox<[String: Int]>([:])

    func eventStream(_ context: ChannelHandlerContext, _ request: Request) {
        let query = request.query
        if let status = query["status"].flatMap({ Int($0) }) {
            return respond(
                context, request, status: HTTPResponseStatus(statusCode: status),
                body: Data("no events here\n".utf8), contentType: "text/plain")
        }
        let total = max(0, min(Int(query["total"] ?? "") ?? 3, 10_000))
        let resumeAfter = max(0, Int(request.header("Last-Event-ID") ?? "") ?? 0)
        guard resumeAfter < total else {
            return respond(context, request, status: .noContent, body: Data(), contentType: nil)
        }
        let perConnection = max(0, Int(query["per"] ?? "") ?? total)
        let last = min(total, resumeAfter + perConnection)
        let events = resumeAfter < last ? Array((resumeAfter + 1)...last) : []
        let size = query["size"].flatMap { Int($0) }.map { max(0, min($0, 16 << 20)) }
        let big = query["big"].flatMap { Int($0) }

        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: query["type"] ?? "text/event-stream")
        headers.add(name: "Cache-Control", value: query["cache"] ?? "no-cache")
        let head = HTTPResponseHead(version: request.head.version, status: .ok, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)

        let key = query["key"] ?? ""
        Self.openEventStreams.withLockedValue { $0[key, default: 0] += 1 }
        let counted = NIOLockedValueBox(true)
        // Uncounted once, at the clean end of the response or when the connection closes, whichever comes first.
        let uncount: @Sendable () -> Void = {
            let wasCounted = counted.withLockedValue { counted -> Bool in
                defer { counted = false }
                return counted
            }
            if wasCounted { Self.openEventStreams.withLockedValue { $0[key, default: 1] -= 1 } }
        }
        context.channel.closeFuture.whenComplete { _ in uncount() }

        var pieces = [": event stream of \(total) events\n"]
        if let retry = query["retry"] { pieces.append("retry: \(retry)\n\n") }
        for number in events {
            let sized = size.flatMap { size in big.map { $0 == number } ?? true ? size : nil }
            let data = sized.map { String(repeating: "x", count: $0) } ?? "event \(number)"
            pieces.append("id: \(number)\r")
            pieces.append("\nevent: tick\ndata: \(data)\r\n\r\n")
        }
        var written = context.eventLoop.makeSucceededVoidFuture()
        for piece in pieces {
            written = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: piece)))))
        }
        switch query["end"] ?? "drop" {
        case "finish":
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                uncount()
                if !request.head.isKeepAlive { context.close(promise: nil) }
            }
        case "hold":
            break  // until the client closes the connection
        default:
            // Closed once the events went out, without the final chunk: the client sees the connection drop.
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}

extension LoopbackServer {
    /// How many `/event-stream?key=KEY` responses are still being sent: a client that closed its connection is no
    /// longer counted.
    public func openEventStreams(key: String) -> Int {
        HTTPBinHandler.openEventStreams.withLockedValue { $0[key] ?? 0 }
    }
}
