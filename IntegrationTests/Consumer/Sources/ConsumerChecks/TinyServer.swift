import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A small HTTP/1.1 server on 127.0.0.1 for the consumer checks, with Foundation and Glibc sockets only: one thread
/// accepts, one thread per connection reads a request, answers it and closes (`Connection: close`). Its threads are its
/// own, never the main thread or Dispatch's global queues.
final class TinyServer: Sendable {
    let port: UInt16
    private let listener: Int32

    /// Binds 127.0.0.1:`port`; throws when the port is taken.
    init(port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CheckFailure("socket() failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw CheckFailure("cannot listen on 127.0.0.1:\(port) (errno \(errno)); is the port taken?")
        }
        self.port = port
        self.listener = fd
    }

    func start() {
        let listener = self.listener
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { continue }
                Thread.detachNewThread { TinyServer.serve(client) }
            }
        }
    }

    private static func serve(_ fd: Int32) {
        defer { close(fd) }
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        while headerEnd == nil {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return }
            buffer += chunk[0..<n]
            headerEnd = find([13, 10, 13, 10], in: buffer)
        }
        guard let end = headerEnd, let head = String(bytes: buffer[0..<end], encoding: .utf8) else { return }
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2 else { return }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append(
                (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let length = Int(headers.first { $0.name.lowercased() == "content-length" }?.value ?? "0") ?? 0
        var body = Array(buffer[(end + 4)...])
        while body.count < length {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return }
            body += chunk[0..<n]
        }
        let (status, type, payload) = answer(
            method: String(parts[0]), target: String(parts[1]), headers: headers, body: Data(body))
        let reasons = [200: "OK", 201: "Created", 404: "Not Found", 405: "Method Not Allowed"]
        var response = Data("HTTP/1.1 \(status) \(reasons[status] ?? "OK")\r\n".utf8)
        response += Data("Content-Type: \(type)\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n".utf8)
        if parts[0] != "HEAD" { response += payload }
        response.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = write(fd, raw.baseAddress! + sent, raw.count - sent)
                if n <= 0 { return }
                sent += n
            }
        }
    }

    /// The routes: httpbin's `/get`, `/post`, `/anything` and `/json` (the README's quick start, which runs against
    /// httpbin.org as well), and for the other checks `/v1/users`, `/v1/bytes/N` (N bytes) and `/v1/echo` (the
    /// body's length).
    private static func answer(
        method: String, target: String, headers: [(name: String, value: String)], body: Data
    ) -> (Int, String, Data) {
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let json = "application/json"
        switch (method, path) {
        case ("GET", "/get"), ("HEAD", "/get"):
            return (200, json, HTTPBinEcho(method: method, target: target, headers: headers, body: body).document())
        case ("POST", "/post"):
            return (
                200, json,
                HTTPBinEcho(method: method, target: target, headers: headers, body: body).document(withBody: true)
            )
        case (_, "/anything"),
            (_, _) where path.hasPrefix("/anything/"):
            let echo = HTTPBinEcho(method: method, target: target, headers: headers, body: body)
            return (200, json, echo.document(withBody: true, withMethod: true))
        case ("GET", "/json"), ("HEAD", "/json"):
            return (200, json, HTTPBinEcho.slideshow)
        case (_, "/get"), (_, "/post"), (_, "/json"):
            return (405, "text/html", Data("<h1>Method Not Allowed</h1>".utf8))
        case ("POST", "/v1/users"):
            let sent = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
            let name = sent?["name"] as? String ?? "?"
            return (201, json, Data(#"{"id":2,"name":"\#(name)"}"#.utf8))
        case ("GET", "/v1/users/1"), ("HEAD", "/v1/users/1"), ("PUT", "/v1/users/1"), ("PATCH", "/v1/users/1"),
            ("DELETE", "/v1/users/1"):
            return (200, json, Data(#"{"id":1,"name":"Ada"}"#.utf8))
        case ("GET", "/v1/users"):
            return (200, json, Data(#"[{"id":1,"name":"Ada"}]"#.utf8))
        case (_, "/v1/echo"):
            return (200, json, Data(#"{"method":"\#(method)","length":\#(body.count)}"#.utf8))
        case ("GET", _) where path.hasPrefix("/v1/bytes/"):
            let count = Int(path.dropFirst("/v1/bytes/".count)) ?? 0
            return (200, "application/octet-stream", Data((0..<count).map { UInt8(truncatingIfNeeded: $0) }))
        default:
            return (404, "text/plain", Data("not found".utf8))
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }
}

/// What httpbin answers on its echo endpoints, field for field: the query as `args`, the headers with httpbin's
/// capitalization, the body as `data`, `form` and `json`, the caller as `origin` and the URL asked for.
struct HTTPBinEcho {
    let method: String
    let target: String
    let headers: [(name: String, value: String)]
    let body: Data

    /// `/json`'s fixed document.
    static let slideshow = Data(
        #"""
        {"slideshow":{"author":"Yours Truly","date":"date of publication","slides":[{"title":"Wake up to WonderWidgets!","type":"all"},{"items":["Why <em>WonderWidgets</em> are great","Who <em>buys</em> WonderWidgets"],"title":"Overview","type":"all"}],"title":"Sample Slide Show"}}
        """#.utf8)

    /// The echo document: `/get`'s fields, with the body's fields for `/post` and `/anything`, and the method for
    /// `/anything`.
    func document(withBody: Bool = false, withMethod: Bool = false) -> Data {
        var headerFields: [String: String] = [:]
        for (name, value) in headers {
            let capitalized = name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }
            headerFields[capitalized.joined(separator: "-")] = value
        }
        let host = headerFields["Host"] ?? "127.0.0.1"
        var document: [String: Any] = [
            "args": Self.fields(URLComponents(string: target)?.queryItems ?? []),
            "headers": headerFields,
            "origin": "127.0.0.1",
            "url": "http://\(host)\(target)",
        ]
        if withBody {
            let type = headerFields["Content-Type"] ?? ""
            let isForm = type.hasPrefix("application/x-www-form-urlencoded")
            var form = URLComponents()
            form.percentEncodedQuery =
                isForm ? String(decoding: body, as: UTF8.self).replacingOccurrences(of: "+", with: "%20") : nil
            document["data"] = isForm ? "" : String(decoding: body, as: UTF8.self)
            document["files"] = [String: Any]()
            document["form"] = Self.fields(form.queryItems ?? [])
            document["json"] = (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) ?? NSNull()
        }
        if withMethod { document["method"] = method }
        return (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    /// Query or form fields as httpbin gives them: a string for a name given once, an array for a repeated one.
    private static func fields(_ items: [URLQueryItem]) -> [String: Any] {
        var values: [String: [String]] = [:]
        for item in items { values[item.name, default: []].append(item.value ?? "") }
        return values.mapValues { $0.count == 1 ? $0[0] as Any : $0 as Any }
    }
}

struct CheckFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
