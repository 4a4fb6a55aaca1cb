import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// Serves the loopback server's endpoints on one connection. Runs on the channel's event loop only.
final class HTTPBinHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let isTLS: Bool
    private let record: @Sendable (RecordedRequest) -> Void
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    /// `/duplex`: the request being echoed as it arrives, and the bytes echoed so far.
    private var duplex: (head: HTTPRequestHead, bytes: Int)?

    init(isTLS: Bool, record: @escaping @Sendable (RecordedRequest) -> Void) {
        self.isTLS = isTLS
        self.record = record
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if duplex(part, context: context) { return }
        switch part {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            self.head = nil
            let bodyData = Data(body.readableBytesView)
            var recorded = RecordedRequest(
                method: head.method.rawValue, uri: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) },
                body: bodyData.prefix(LoopbackServer.recordedBodyLimit), bodyLength: bodyData.count, isTLS: isTLS)
            recorded.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
            recorded.peerAddress = context.channel.remoteAddress?.ipAddress
            record(recorded)
            route(Request(head: head, body: bodyData, isTLS: isTLS), context: context)
        }
    }

    /// `/duplex`: answers at once, then echoes each chunk of the request body as it arrives (full duplex), and ends
    /// with the request's trailers as `x-echo-NAME` trailers plus `x-received-bytes`. `/trailers`: `payload` then the
    /// trailers `x-checksum: 7` and `x-count: 1`. True when `part` was handled here.
    private func duplex(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) -> Bool {
        switch part {
        case .head(let head) where head.uri.hasPrefix("/duplex"):
            duplex = (head, 0)
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok))), promise: nil)
            return true
        case .head(let head) where head.uri.hasPrefix("/trailers"):
            self.head = head
            return true
        case .body(let chunk) where duplex != nil:
            duplex?.bytes += chunk.readableBytes
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
            return true
        case .end(let trailers) where duplex != nil:
            guard let (head, bytes) = duplex else { return true }
            duplex = nil
            var echoed = HTTPHeaders()
            for (name, value) in trailers ?? [:] { echoed.add(name: "x-echo-\(name)", value: value) }
            echoed.add(name: "x-received-bytes", value: String(bytes))
            context.writeAndFlush(wrapOutboundOut(.end(echoed)), promise: nil)
            var recorded = RecordedRequest(
                method: head.method.rawValue, uri: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) }, body: Data(), bodyLength: bytes,
                isTLS: isTLS)
            recorded.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
            record(recorded)
            return true
        case .body where head?.uri.hasPrefix("/trailers") == true:
            return true
        case .end where head?.uri.hasPrefix("/trailers") == true:
            guard let head else { return true }
            self.head = nil
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "payload")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(["x-checksum": "7", "x-count": "1"])), promise: nil)
            record(
                RecordedRequest(
                    method: head.method.rawValue, uri: head.uri,
                    headers: head.headers.map { (name: $0.name, value: $0.value) }, body: Data(), bodyLength: 0,
                    isTLS: isTLS))
            return true
        default:
            return false
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: - Routing

    private func route(_ request: Request, context: ChannelHandlerContext) {
        let parts = request.pathComponents
        let first = parts.first ?? ""
        switch first {
        case "get", "post", "put", "patch", "delete":
            guard request.method.lowercased() == first || (first == "get" && request.method == "HEAD") else {
                return respond(context, request, status: .methodNotAllowed, json: ["error": "method not allowed"])
            }
            respond(context, request, json: request.echo())
        case "anything":
            respond(context, request, json: request.echo())
        case "headers":
            respond(context, request, json: ["headers": request.headerDictionary])
        case "status":
            let code = parts.count > 1 ? Int(parts[1]) ?? 400 : 400
            if code == 418 {
                // As httpbin: a teapot drawing with an `x-more-info` header and no Content-Type.
                var headers = HTTPHeaders()
                headers.add(name: "x-more-info", value: "http://tools.ietf.org/html/rfc2324")
                return respond(
                    context, request, status: HTTPResponseStatus(statusCode: code), body: Self.teapot,
                    contentType: nil, extraHeaders: headers)
            }
            var headers = HTTPHeaders()
            // As httpbin: a 401 names a scheme, a 407 too, so that clients raise an authentication challenge.
            if code == 401 { headers.add(name: "WWW-Authenticate", value: "Basic realm=\"Fake Realm\"") }
            if code == 407 { headers.add(name: "Proxy-Authenticate", value: "Basic realm=\"Fake Realm\"") }
            respond(
                context, request, status: HTTPResponseStatus(statusCode: code), body: Data(), contentType: nil,
                extraHeaders: headers)
        case "digest-auth", "auth-redirect-to", "proxy-auth":
            authenticate(context, request, parts: parts)
        case "bytes":
            let count = parts.count > 1 ? min(Int(parts[1]) ?? 0, 4 << 30) : 0
            streamBytes(context, request, count: count, chunked: false, chunkSize: 64 * 1024)
        case "stream-bytes":
            let count = parts.count > 1 ? min(Int(parts[1]) ?? 0, 4 << 30) : 0
            let chunkSize = max(1, Int(request.query["chunk_size"] ?? "") ?? 10_240)
            streamBytes(context, request, count: count, chunked: true, chunkSize: chunkSize)
        case "drip":
            drip(context, request)
        case "delay":
            let seconds = min(Double(parts.count > 1 ? parts[1] : "0") ?? 0, 10)
            let echo = request.echo()
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
                respond(context, request, json: echo)
            }
        case "redirect":
            let remaining = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
            let location = remaining <= 1 ? "/get" : "/redirect/\(remaining - 1)"
            redirect(context, request, to: location, status: .found)
        case "redirect-loop":
            redirect(context, request, to: "/redirect-loop", status: .found)
        case "redirect-to":
            // `body=B`: the redirect carries B as its body (what a client that refuses the redirect gets).
            let status = HTTPResponseStatus(statusCode: Int(request.query["status_code"] ?? "") ?? 302)
            redirect(context, request, to: request.query["url"] ?? "/get", status: status, body: request.query["body"])
        case "cookie-gate":
            // A cookie check: a redirect to itself that sets `gate=open`, then a 200 once the cookie comes back.
            if request.header("Cookie")?.contains("gate=open") == true {
                respond(context, request, json: ["gate": "open"])
            } else {
                var headers = HTTPHeaders()
                headers.add(name: "Set-Cookie", value: "gate=open; Path=/")
                headers.add(name: "Location", value: "/cookie-gate")
                respond(context, request, status: .found, body: Data(), contentType: nil, extraHeaders: headers)
            }
        case "goaway":
            goAway(context, request)
        case "reset":
            resetStream(context, request)
        case "response-headers":
            var headers = HTTPHeaders()
            for (name, value) in request.queryPairs { headers.add(name: name, value: value) }
            let object = Dictionary(request.queryPairs, uniquingKeysWith: { first, _ in first })
            respond(context, request, json: object, extraHeaders: headers)
        case "basic-auth":
            basicAuth(
                context, request, user: parts.count > 1 ? parts[1] : "", password: parts.count > 2 ? parts[2] : "")
        case "gzip":
            var echo = request.echo()
            echo["gzipped"] = true
            let json = (try? JSONSerialization.data(withJSONObject: echo, options: [.sortedKeys])) ?? Data()
            var headers = HTTPHeaders()
            headers.add(name: "Content-Encoding", value: "gzip")
            respond(context, request, body: Gzip.encode(json), contentType: "application/json", extraHeaders: headers)
        case "json":
            respond(context, request, json: Self.sampleDocument)
        case "large-json":
            let bytes = parts.count > 1 ? min(Int(parts[1]) ?? 0, 256 << 20) : 0
            respond(context, request, body: Self.largeJSON(bytes: bytes), contentType: "application/json")
        case "plist":
            let plist =
                (try? PropertyListSerialization.data(
                    fromPropertyList: ["name": "SessionKit", "items": [1, 2, 3], "nested": ["ok": true]],
                    format: request.query["format"] == "binary" ? .binary : .xml, options: 0)) ?? Data()
            respond(context, request, body: plist, contentType: "application/x-plist")
        case "xml":
            let xml =
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<slideshow title=\"Sample\"><slide><title>One</title></slide></slideshow>\n"
            respond(context, request, body: Data(xml.utf8), contentType: "application/xml")
        case "cookies":
            cookies(context, request, parts: parts)
        case "fault":
            fault(context, request, mode: parts.count > 1 ? parts[1] : "")
        case "cache", "etag", "cacheable":
            caching(context, request, parts: parts)
        case "event-stream":
            eventStream(context, request)
        case "openapi":
            openAPI(context, request, parts: parts)
        case "flaky":
            flaky(context, request, key: parts.count > 1 ? parts[1] : "")
        case "bearer":
            // 200 when `Authorization: Bearer <token>` carries the `token` of the query, else 401.
            let expected = "Bearer \(request.query["token"] ?? "")"
            if request.header("Authorization") == expected {
                respond(context, request, json: ["authenticated": true, "token": request.query["token"] ?? ""])
            } else {
                var headers = HTTPHeaders()
                headers.add(name: "WWW-Authenticate", value: "Bearer")
                respond(context, request, status: .unauthorized, json: ["authenticated": false], extraHeaders: headers)
            }
        default:
            respond(context, request, status: .notFound, json: ["error": "no such endpoint: \(request.path)"])
        }
    }

    // MARK: - Endpoints

    /// Attempts seen so far by each `/flaky/KEY`, across connections.
    private static let flakyAttempts = NIOLockedValueBox<[String: Int]>([:])

    /// `/flaky/KEY?failures=N&status=S&retry_after=R`: the first N requests for KEY get status S (default 503),
    /// with `Retry-After: R` when given (seconds, or `date:N` for an HTTP date N seconds ahead); later ones get the
    /// echo with the attempt number.
    private func flaky(_ context: ChannelHandlerContext, _ request: Request, key: String) {
        let attempt = Self.flakyAttempts.withLockedValue { attempts -> Int in
            attempts[key, default: 0] += 1
            return attempts[key, default: 0]
        }
        let failures = Int(request.query["failures"] ?? "") ?? 2
        guard attempt <= failures else {
            var echo = request.echo()
            echo["attempt"] = attempt
            return respond(context, request, json: echo)
        }
        var headers = HTTPHeaders()
        if let retryAfter = request.query["retry_after"] {
            if retryAfter.hasPrefix("date:"), let seconds = Double(retryAfter.dropFirst(5)) {
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: "GMT")
                formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                headers.add(name: "Retry-After", value: formatter.string(from: Date().addingTimeInterval(seconds)))
            } else {
                headers.add(name: "Retry-After", value: retryAfter)
            }
        }
        let status = HTTPResponseStatus(statusCode: Int(request.query["status"] ?? "") ?? 503)
        respond(context, request, status: status, json: ["attempt": attempt], extraHeaders: headers)
    }

    /// N deterministic bytes; for `/bytes`, a `Range: bytes=S-` request (with an `If-Range` that matches the ETag,
    /// or none) gets the rest with 206, and `drop_after=K` closes the connection after K bytes of body (of a request
    /// without `Range`).
    private func streamBytes(
        _ context: ChannelHandlerContext, _ request: Request, count: Int, chunked: Bool, chunkSize: Int
    ) {
        let seed = UInt64(request.query["seed"] ?? "") ?? 42
        let etag = "\"bytes-\(count)-\(seed)\""
        var start = 0
        var status = HTTPResponseStatus.ok
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/octet-stream")
        if !chunked {
            headers.add(name: "ETag", value: etag)
            headers.add(name: "Accept-Ranges", value: "bytes")
            if let range = request.header("Range"), range.hasPrefix("bytes="), range.hasSuffix("-"),
                let first = Int(range.dropFirst(6).dropLast()), first < count,
                request.header("If-Range").map({ $0 == etag }) ?? true
            {
                start = first
                status = .partialContent
                headers.add(name: "Content-Range", value: "bytes \(first)-\(count - 1)/\(count)")
            }
        }
        if chunked {
            headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            headers.add(name: "Content-Length", value: String(count - start))
        }
        writeHead(context, request, status: status, headers: headers)
        guard request.method != "HEAD" else { return finish(context, request) }
        let block = ByteGenerator.block(seed: seed)
        var remaining = count - start
        var offset = start % block.count
        // The cut applies to the first attempt only: a request with a Range (a resume) gets the rest whole.
        var budget = request.header("Range") == nil ? Int(request.query["drop_after"] ?? "") ?? Int.max : Int.max
        func writeNext() {
            guard remaining > 0 else { return finish(context, request) }
            guard budget > 0 else {
                context.close(promise: nil)  // the connection drops mid-body
                return
            }
            let size = min(chunkSize, remaining, budget)
            remaining -= size
            budget -= size
            var buffer = context.channel.allocator.buffer(capacity: size)
            var filled = 0
            while filled < size {
                let piece = min(size - filled, block.count - offset)
                buffer.writeBytes(block[offset..<offset + piece])
                offset = (offset + piece) % block.count
                filled += piece
            }
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { result in
                if case .success = result { writeNext() }
            }
        }
        writeNext()
    }

    private func drip(_ context: ChannelHandlerContext, _ request: Request) {
        let count = max(0, min(Int(request.query["numbytes"] ?? "") ?? 10, 10 << 20))
        let duration = max(0, min(Double(request.query["duration"] ?? "") ?? 2, 30))
        let delay = max(0, min(Double(request.query["delay"] ?? "") ?? 0, 30))
        let status = HTTPResponseStatus(statusCode: Int(request.query["code"] ?? "") ?? 200)
        let pieces = max(1, min(count, 100))
        let interval = Int64(duration * 1000) / Int64(pieces)
        // On the channel's event loop: the handler and its context are used on that loop only.
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay * 1000))) { [self] in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/octet-stream")
            headers.add(name: "Content-Length", value: String(count))
            writeHead(context, request, status: status, headers: headers)
            var sent = 0
            func next(_ index: Int) {
                guard context.channel.isActive else { return }
                guard index < pieces, sent < count else { return finish(context, request) }
                let size = index == pieces - 1 ? count - sent : count / pieces
                sent += size
                var buffer = context.channel.allocator.buffer(capacity: size)
                buffer.writeRepeatingByte(UInt8(ascii: "*"), count: size)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(interval)) { next(index + 1) }
            }
            next(0)
        }
    }

    private func redirect(
        _ context: ChannelHandlerContext, _ request: Request, to location: String, status: HTTPResponseStatus,
        body: String? = nil
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Location", value: location)
        respond(
            context, request, status: status, body: Data((body ?? "").utf8),
            contentType: body.map { _ in "text/plain" },
            extraHeaders: headers)
    }

    /// Counts the bodies `/basic-auth` served.
    private static let basicAuthServed = NIOLockedValueBox(0)

    private func basicAuth(_ context: ChannelHandlerContext, _ request: Request, user: String, password: String) {
        let expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        if request.header("Authorization") == expected {
            // The query's pairs as response fields (for cache tests), and a serial to tell a stored body apart.
            var headers = HTTPHeaders()
            for (name, value) in request.queryPairs { headers.add(name: name, value: value) }
            let serial = Self.basicAuthServed.withLockedValue { served -> Int in
                served += 1
                return served
            }
            respond(
                context, request, json: ["authenticated": true, "user": user, "serial": serial], extraHeaders: headers)
        } else {
            var headers = HTTPHeaders()
            headers.add(name: "WWW-Authenticate", value: "Basic realm=\"Fake Realm\"")
            respond(context, request, status: .unauthorized, body: Data(), contentType: nil, extraHeaders: headers)
        }
    }

    private func cookies(_ context: ChannelHandlerContext, _ request: Request, parts: [String]) {
        if parts.count > 1 && parts[1] == "set" {
            var headers = HTTPHeaders()
            for (name, value) in request.queryPairs {
                headers.add(name: "Set-Cookie", value: "\(name)=\(value); Path=/")
            }
            headers.add(name: "Location", value: "/cookies")
            return respond(context, request, status: .found, body: Data(), contentType: nil, extraHeaders: headers)
        }
        var cookies: [String: String] = [:]
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if kv.count == 2 { cookies[kv[0]] = kv[1] }
        }
        respond(context, request, json: ["cookies": cookies])
    }

    /// Misbehaviours a test can ask for.
    private func fault(_ context: ChannelHandlerContext, _ request: Request, mode: String) {
        switch mode {
        case "close-mid-body":
            // A chunked body that stops after some chunks: the connection closes with no final chunk.
            partialBodyThenClose(
                context, request, headers: ["Content-Type": "application/json", "Transfer-Encoding": "chunked"],
                body: Data("{\"partial\": [1, 2, 3, ".utf8))
        case "short-body":
            // Content-Length promises 1000 bytes; 100 arrive, then the connection closes.
            partialBodyThenClose(
                context, request, headers: ["Content-Type": "application/octet-stream", "Content-Length": "1000"],
                body: Data(repeating: UInt8(ascii: "x"), count: 100))
        case "never-answer":
            break  // The request was read; no byte of a response will follow.
        case "reset":
            // SO_LINGER 0 makes close() send a TCP RST before any status line.
            guard let provider = context.channel as? SocketOptionProvider else {
                context.close(promise: nil)
                return
            }
            provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
                context.close(promise: nil)
            }
        default:
            respond(context, request, status: .notFound, json: ["error": "no such fault: \(mode)"])
        }
    }

    // MARK: - Writing

    /// Writes a 200 head with `headers`, then `body`, then closes the connection without ending the response.
    private func partialBodyThenClose(
        _ context: ChannelHandlerContext, _ request: Request, headers fields: [String: String], body: Data
    ) {
        var headers = HTTPHeaders()
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        writeHead(context, request, status: .ok, headers: headers)
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// The body of `/status/418`.
    private static let teapot = Data(
        """

            -=[ teapot ]=-

               _...._
             .'  _ _ `.
            | ."` ^ `". _,
            \\_;`"---"`|//
              |       ;/
              \\_     _/
                `\"\"\"`

        """.utf8)

    func respond(
        _ context: ChannelHandlerContext, _ request: Request, status: HTTPResponseStatus = .ok, json: Any,
        extraHeaders: HTTPHeaders = HTTPHeaders()
    ) {
        let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data("{}".utf8)
        respond(
            context, request, status: status, body: data, contentType: "application/json", extraHeaders: extraHeaders)
    }

    func respond(
        _ context: ChannelHandlerContext, _ request: Request, status: HTTPResponseStatus = .ok, body: Data,
        contentType: String?, extraHeaders: HTTPHeaders = HTTPHeaders()
    ) {
        guard context.channel.isActive else { return }
        var headers = extraHeaders
        if let contentType { headers.add(name: "Content-Type", value: contentType) }
        headers.add(name: "Content-Length", value: String(body.count))
        writeHead(context, request, status: status, headers: headers)
        if request.method != "HEAD" && !body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        finish(context, request)
    }

    private func writeHead(
        _ context: ChannelHandlerContext, _ request: Request, status: HTTPResponseStatus, headers: HTTPHeaders
    ) {
        var headers = headers
        headers.add(name: "Server", value: "SessionKitLoopback")
        if !request.head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: request.head.version, status: status, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    private func finish(_ context: ChannelHandlerContext, _ request: Request) {
        let keepAlive = request.head.isKeepAlive
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { context.close(promise: nil) }
        }
    }

    /// A JSON array of records, at least `bytes` long: `[{"id":0,"name":"item 0","tags":["a","b"],"note":null},…]`.
    static func largeJSON(bytes: Int) -> Data {
        var data = Data("[".utf8)
        data.reserveCapacity(bytes + 128)
        var index = 0
        while data.count < bytes {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(
                contentsOf: Array(
                    "{\"id\":\(index),\"name\":\"item \(index)\",\"tags\":[\"a\",\"b\"],\"note\":null}".utf8))
            index += 1
        }
        data.append(UInt8(ascii: "]"))
        return data
    }

    /// A JSON document with nesting, nulls and every JSON type.
    // A `let` of plain values, never mutated.
    nonisolated(unsafe) static let sampleDocument: [String: Any] = [
        "slideshow": [
            "author": "SessionKit", "date": "2026-11-22", "title": "Sample Slide Show", "draft": NSNull(),
            "slides": [
                ["title": "Wake up", "type": "all", "count": 1, "ratio": 0.5, "visible": true, "notes": NSNull()]
            ],
        ] as [String: Any]
    ]
}

/// The bytes `/bytes/N?seed=S` and `/stream-bytes/N` serve: a 64 KiB xorshift block for the seed, repeated.
public enum ByteGenerator {
    /// The length of the repeated block.
    public static let blockSize = 64 * 1024

    /// The block for `seed`.
    public static func block(seed: UInt64) -> [UInt8] {
        var state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed
        var bytes = [UInt8]()
        bytes.reserveCapacity(blockSize)
        while bytes.count < blockSize {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            withUnsafeBytes(of: state.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// The first `count` bytes the server sends for `seed`.
    public static func bytes(count: Int, seed: UInt64 = 42) -> Data {
        let block = self.block(seed: seed)
        var data = Data(capacity: count)
        while data.count < count { data.append(contentsOf: block.prefix(count - data.count)) }
        return data
    }
}
