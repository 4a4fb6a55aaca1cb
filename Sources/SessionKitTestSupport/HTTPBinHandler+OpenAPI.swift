import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The endpoints of `Tests/OpenAPISessionKitTests/openapi.yaml`, under `/openapi`, for the client generated from it:
///
/// - `GET /openapi/items/ID?verbose=B`: `{"id":ID,"name":"item ID","tags":["loopback"]}` (plus `"verbose"` with
///   `verbose=true`); a 404 with `{"message":…}` for an ID of 1000 or more. `PUT` echoes the JSON item it got, with
///   the ID of the path.
/// - `GET /openapi/bytes/N`: the N bytes of ``ByteGenerator`` (seed 42) with a `Content-Length`, sent as the client
///   reads them.
/// - `GET /openapi/stream/ID`: chunked ``ByteGenerator`` bytes without end (cut at 4 GiB or 120 s), sent as the client
///   reads them; ``LoopbackServer/openAPIStream(_:)`` says how many bytes went out and whether the connection closed.
/// - `POST /openapi/upload?redirect=true`: a 307 to `/openapi/upload`; without `redirect`, what arrived:
///   `{"bytes":N,"chunked":B,"contentLength":"…","matchesGenerator":B}`.
/// - `POST /openapi/upload/multipart`: a form with `description` and `file`: `{"description":…,"fileName":…,
///   "fileBytes":N,"fileMatchesGenerator":B}`.
extension HTTPBinHandler {
    /// What `/openapi/stream/ID` sent, by ID, across connections and servers.
    static let openAPIStreams = NIOLockedValueBox<[String: LoopbackServer.OpenAPIStream]>([:])

    func openAPI(_ context: ChannelHandlerContext, _ request: Request, parts: [String]) {
        let resource = parts.count > 1 ? parts[1] : ""
        let argument = parts.count > 2 ? parts[2] : ""
        switch (request.method, resource) {
        case ("GET", "items"), ("PUT", "items"):
            item(context, request, id: Int64(argument) ?? 0)
        case ("GET", "bytes"):
            let count = max(0, min(Int64(argument) ?? 0, 4 << 30))
            sendGeneratedBytes(context, request, count: count, streamID: nil)
        case ("GET", "stream"):
            sendGeneratedBytes(context, request, count: nil, streamID: argument)
        case ("POST", "upload") where argument == "multipart":
            formReceipt(context, request)
        case ("POST", "upload"):
            guard request.query["redirect"] != "true" else {
                var headers = HTTPHeaders()
                headers.add(name: "Location", value: "/openapi/upload")
                return respond(
                    context, request, status: .temporaryRedirect, body: Data(), contentType: nil, extraHeaders: headers)
            }
            respond(
                context, request,
                json: [
                    "bytes": request.body.count,
                    "chunked": request.header("Transfer-Encoding")?.lowercased().contains("chunked") ?? false,
                    "contentLength": request.header("Content-Length") as Any? ?? NSNull(),
                    "matchesGenerator": request.body == ByteGenerator.bytes(count: request.body.count),
                ])
        default:
            respond(context, request, status: .notFound, json: ["message": "no such endpoint: \(request.path)"])
        }
    }

    private func item(_ context: ChannelHandlerContext, _ request: Request, id: Int64) {
        guard id < 1000 else {
            return respond(context, request, status: .notFound, json: ["message": "no item \(id)"])
        }
        if request.method == "PUT" {
            guard var stored = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any] else {
                return respond(context, request, status: .badRequest, json: ["message": "not a JSON object"])
            }
            stored["id"] = id
            return respond(context, request, json: stored)
        }
        var tags = ["loopback"]
        if request.query["verbose"] == "true" { tags.append("verbose") }
        respond(context, request, json: ["id": id, "name": "item \(id)", "tags": tags])
    }

    private func formReceipt(_ context: ChannelHandlerContext, _ request: Request) {
        guard let boundary = Request.boundary(in: request.header("Content-Type") ?? "") else {
            return respond(context, request, status: .badRequest, json: ["message": "not a multipart form"])
        }
        let parts = MultipartParser.parts(of: request.body, boundary: boundary)
        let description = parts.first { $0.name == "description" }.map { String(decoding: $0.body, as: UTF8.self) }
        guard let description, let file = parts.first(where: { $0.name == "file" }) else {
            return respond(context, request, status: .badRequest, json: ["message": "description and file needed"])
        }
        respond(
            context, request,
            json: [
                "description": description, "fileName": file.fileName as Any? ?? NSNull(), "fileBytes": file.body.count,
                "fileMatchesGenerator": file.body == ByteGenerator.bytes(count: file.body.count),
            ])
    }

    /// Sends ``ByteGenerator``'s bytes, one 64 KiB block per write, each once the previous one went out (so at the
    /// client's pace): `count` of them with a `Content-Length`, or, with `streamID`, chunked until the connection
    /// closes (at most 4 GiB or 120 s), recorded in ``openAPIStreams``.
    private func sendGeneratedBytes(
        _ context: ChannelHandlerContext, _ request: Request, count: Int64?, streamID: String?
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Server", value: "SessionKitLoopback")
        if let count {
            headers.add(name: "Content-Length", value: String(count))
        } else {
            headers.add(name: "Transfer-Encoding", value: "chunked")
        }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.head.version, status: .ok, headers: headers))),
            promise: nil)
        if let streamID {
            Self.openAPIStreams.withLockedValue { $0[streamID] = LoopbackServer.OpenAPIStream() }
            context.channel.closeFuture.whenComplete { _ in
                Self.openAPIStreams.withLockedValue { $0[streamID]?.connectionClosed = true }
            }
        }
        let block = ByteGenerator.block(seed: 42)
        let deadline = NIODeadline.now() + .seconds(120)
        var remaining = count ?? (4 << 30)
        let isolated = context.eventLoop.assumeIsolated()
        func writeNext() {
            guard context.channel.isActive else { return }
            guard remaining > 0, NIODeadline.now() < deadline else {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            let size = Int(min(Int64(block.count), remaining))
            remaining -= Int64(size)
            var buffer = context.channel.allocator.buffer(capacity: size)
            buffer.writeBytes(block[0..<size])
            let written = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))))
            written.assumeIsolated().whenComplete { result in
                guard case .success = result else { return }
                if let streamID { Self.openAPIStreams.withLockedValue { $0[streamID]?.sentBytes += size } }
                isolated.execute { writeNext() }
            }
        }
        writeNext()
    }
}

extension LoopbackServer {
    /// What the server sent on an `/openapi/stream/ID` response.
    public struct OpenAPIStream: Sendable {
        /// The body bytes written to the connection so far.
        public var sentBytes = 0
        /// Whether the connection closed (the client went away).
        public var connectionClosed = false
    }

    /// What the server sent on the `/openapi/stream/ID` response of `id`; nil before its request arrived.
    public func openAPIStream(_ id: String) -> OpenAPIStream? {
        HTTPBinHandler.openAPIStreams.withLockedValue { $0[id] }
    }
}
