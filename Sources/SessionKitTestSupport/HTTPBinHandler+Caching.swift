import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The loopback server's caching endpoints, for HTTP cache tests (each body carries a serial number, so that a test
/// tells a stored body from a fresh one):
/// - `/cache`: as httpbin, 304 (without validators) to any `If-None-Match` or `If-Modified-Since`, else 200 with
///   `Last-Modified` and a new `ETag`.
/// - `/cache/{n}`: `Cache-Control: public, max-age=n`.
/// - `/etag/{etag}`: as httpbin, 304 when `If-None-Match` names the entity tag (or `*`), else 200 with `ETag`.
/// - `/cacheable?Field=value…`: the query's pairs as response fields (`post_status=N`: the status of a request other than
///   GET); 304 when the request's `If-None-Match` matches the
///   query's `ETag`, or its `If-Modified-Since` is not before the query's `Last-Modified`. The body echoes the request
///   fields the response's `Vary` names.
extension HTTPBinHandler {
    /// Counts the bodies the caching endpoints served, across connections.
    private static let servedBodies = NIOLockedValueBox(0)

    private static func nextSerial() -> Int {
        servedBodies.withLockedValue { served -> Int in
            served += 1
            return served
        }
    }

    func caching(_ context: ChannelHandlerContext, _ request: Request, parts: [String]) {
        var headers = HTTPHeaders()
        var notModified = false
        switch parts[0] {
        case "cache" where parts.count > 1:
            headers.add(name: "Cache-Control", value: "public, max-age=\(Int(parts[1]) ?? 0)")
        case "cache":
            notModified = request.header("If-None-Match") != nil || request.header("If-Modified-Since") != nil
            // httpbin's 304 carries no validator (a new random ETag on it would name another representation).
            if !notModified {
                headers.add(name: "Last-Modified", value: "Sat, 01 Jan 2000 00:00:00 GMT")
                headers.add(name: "ETag", value: "\"\(UUID().uuidString)\"")
            }
        case "etag":
            let tag = "\"\(parts.count > 1 ? parts[1] : "")\""
            headers.add(name: "ETag", value: tag)
            let asked = request.header("If-None-Match")?.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            notModified = asked?.contains { $0 == tag || $0 == "*" || $0 == "W/\(tag)" } ?? false
        default:
            for (name, value) in request.queryPairs where name != "post_status" {
                headers.add(name: name, value: value)
            }
            if request.method != "GET", let status = request.query["post_status"].flatMap({ Int($0) }) {
                return respond(
                    context, request, status: HTTPResponseStatus(statusCode: status), body: Data(), contentType: nil,
                    extraHeaders: headers)
            }
            let query = request.query
            if let tag = query["ETag"], let asked = request.header("If-None-Match") {
                notModified = asked.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == tag }
            } else if let modified = query["Last-Modified"], let since = request.header("If-Modified-Since") {
                notModified = since == modified
            }
        }
        if notModified {
            if parts[0] == "cacheable" { headers.add(name: "X-Revalidation", value: String(Self.nextSerial())) }
            return respond(
                context, request, status: .notModified, body: Data(), contentType: nil, extraHeaders: headers)
        }
        var echo: [String: Any] = ["serial": Self.nextSerial(), "path": request.path]
        let vary = headers.first(name: "Vary")?.split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        for name in vary ?? [] { echo[name] = request.header(name) ?? "" }
        respond(context, request, json: echo, extraHeaders: headers)
    }
}
