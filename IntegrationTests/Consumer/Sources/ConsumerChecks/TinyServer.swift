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
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
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
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        var body = Array(buffer[(end + 4)...])
        while body.count < length {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return }
            body += chunk[0..<n]
        }
        let (status, type, payload) = answer(method: String(parts[0]), target: String(parts[1]), body: Data(body))
        var response = Data("HTTP/1.1 \(status) \(status == 404 ? "Not Found" : "OK")\r\n".utf8)
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

    /// The routes: `/v1/users` (the README's quick start), `/v1/bytes/N` (N bytes), `/v1/echo` (the body's length).
    private static func answer(method: String, target: String, body: Data) -> (Int, String, Data) {
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let json = "application/json"
        switch (method, path) {
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

struct CheckFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
