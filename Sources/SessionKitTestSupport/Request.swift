import Foundation
import NIOHTTP1

/// A request the loopback server is answering, with httpbin's views of it.
struct Request {
    let head: HTTPRequestHead
    let body: Data
    let isTLS: Bool

    var method: String { head.method.rawValue }
    /// The path of the target; for a request in absolute form (sent to the server as a proxy), the path of its URL.
    var path: String {
        var target = Substring(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        if target.hasPrefix("http://") || target.hasPrefix("https://") {
            target = target.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }
        }
        return String(target)
    }
    var pathComponents: [String] { path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) } }

    /// The query's pairs, decoded, in order.
    var queryPairs: [(String, String)] {
        guard let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first else { return [] }
        return Self.formPairs(String(query))
    }

    /// The query as a dictionary (first value wins).
    var query: [String: String] { Dictionary(queryPairs, uniquingKeysWith: { first, _ in first }) }

    func header(_ name: String) -> String? { head.headers.first(name: name) }

    /// Headers as a dictionary, repeated fields joined with a comma.
    var headerDictionary: [String: String] {
        var result: [String: String] = [:]
        for (name, value) in head.headers {
            let key = name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined(
                separator: "-")
            result[key] = result[key].map { "\($0),\(value)" } ?? value
        }
        return result
    }

    /// httpbin's echo document: args, data, files, form, headers, json, method, origin, url.
    func echo() -> [String: Any] {
        var args: [String: Any] = [:]
        for (key, value) in queryPairs {
            if let existing = args[key] {
                args[key] = ((existing as? [String]) ?? [existing as? String ?? ""]) + [value]
            } else {
                args[key] = value
            }
        }
        var form: [String: Any] = [:]
        var files: [String: Any] = [:]
        var dataText = ""
        var json: Any = NSNull()
        let contentType = header("Content-Type")?.lowercased() ?? ""
        if contentType.hasPrefix("application/x-www-form-urlencoded") {
            for (key, value) in Self.formPairs(String(decoding: body, as: UTF8.self)) {
                form[key] = form[key].map { (($0 as? [String]) ?? [$0 as? String ?? ""]) + [value] } ?? value
            }
        } else if contentType.hasPrefix("multipart/form-data"),
            let boundary = Self.boundary(in: header("Content-Type") ?? "")
        {
            for part in MultipartParser.parts(of: body, boundary: boundary) {
                let text =
                    String(data: part.body, encoding: .utf8) ?? "data:application/octet-stream;base64,"
                    + part.body.base64EncodedString()
                if part.fileName != nil {
                    files[part.name] = text
                    files[part.name + ".filename"] = part.fileName
                    files[part.name + ".content-type"] = part.contentType ?? ""
                    files[part.name + ".length"] = part.body.count
                } else {
                    form[part.name] = text
                }
            }
        } else {
            dataText =
                String(data: body, encoding: .utf8) ?? "data:application/octet-stream;base64,"
                + body.base64EncodedString()
            if contentType.contains("json") {
                json = (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) ?? NSNull()
            }
        }
        let host = header("Host") ?? "127.0.0.1"
        return [
            "args": args, "data": dataText, "files": files, "form": form, "headers": headerDictionary, "json": json,
            "method": method, "origin": "127.0.0.1", "url": "\(isTLS ? "https" : "http")://\(host)\(head.uri)",
            "bodyLength": body.count,
        ]
    }

    static func formPairs(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            return (decode(kv[0]), kv.count > 1 ? decode(kv[1]) : "")
        }
    }

    static func boundary(in contentType: String) -> String? {
        for parameter in contentType.split(separator: ";") {
            let kv = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if kv.count == 2, kv[0].lowercased() == "boundary" {
                return kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        return nil
    }
}

/// Splits a `multipart/form-data` body into its parts.
enum MultipartParser {
    struct Part {
        var name: String
        var fileName: String?
        var contentType: String?
        var body: Data
    }

    static func parts(of body: Data, boundary: String) -> [Part] {
        let delimiter = Data("--\(boundary)".utf8)
        let headerEnd = Data("\r\n\r\n".utf8)
        var parts: [Part] = []
        var searchStart = body.startIndex
        var ranges: [Range<Data.Index>] = []
        while let range = body.range(of: delimiter, in: searchStart..<body.endIndex) {
            ranges.append(range)
            searchStart = range.upperBound
        }
        for (current, next) in zip(ranges, ranges.dropFirst()) {
            // Each part: CRLF, headers, CRLF CRLF, body, CRLF, then the next delimiter.
            let start = current.upperBound + 2
            let end = next.lowerBound - 2
            guard start < end, let split = body.range(of: headerEnd, in: start..<end) else { continue }
            let headerText = String(decoding: body[start..<split.lowerBound], as: UTF8.self)
            var part = Part(name: "", fileName: nil, contentType: nil, body: Data(body[split.upperBound..<end]))
            for line in headerText.components(separatedBy: "\r\n") {
                let lower = line.lowercased()
                if lower.hasPrefix("content-disposition:") {
                    part.name = parameter("name", in: line) ?? ""
                    part.fileName = parameter("filename", in: line)
                } else if lower.hasPrefix("content-type:") {
                    part.contentType = line.dropFirst("content-type:".count).trimmingCharacters(in: .whitespaces)
                }
            }
            parts.append(part)
        }
        return parts
    }

    private static func parameter(_ name: String, in line: String) -> String? {
        for piece in line.split(separator: ";") {
            let kv = piece.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if kv.count == 2, kv[0].lowercased() == name {
                return kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        return nil
    }
}
