import Foundation

/// MIME types by file extension: the system's `/etc/mime.types` when present, then a built-in table,
/// then `application/octet-stream`.
enum MIMEType {
    private static let builtIn: [String: String] = [
        "txt": "text/plain", "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "xml": "application/xml", "json": "application/json", "js": "text/javascript", "pdf": "application/pdf",
        "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon", "mp3": "audio/mpeg", "wav": "audio/wav",
        "mp4": "video/mp4", "mov": "video/quicktime", "plist": "application/x-plist", "bin": "application/octet-stream",
    ]

    private static let system: [String: String] = {
        guard let text = try? String(contentsOfFile: "/etc/mime.types", encoding: .utf8) else { return [:] }
        var table: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let type = fields.first, fields.count > 1 else { continue }
            for ext in fields.dropFirst() where table[String(ext)] == nil {
                table[String(ext).lowercased()] = String(type)
            }
        }
        return table
    }()

    /// The MIME type FoundationNetworking's `HTTPURLResponse` gives a head of these field lines, lowercased, read
    /// without building one: `.some(nil)` without a `Content-Type` field; nil (not read) when the field is repeated
    /// or its media type is not a plain `type/subtype` of tokens, which Foundation's own parser then has to read.
    static func ofContentType(_ lines: [(String, String)]) -> String?? {
        var found: String?
        for (name, value) in lines where name.equalsIgnoringASCIICase("Content-Type") {
            guard found == nil else { return nil }  // Foundation joins repeated lines
            found = value
        }
        guard let value = found else { return .some(nil) }
        // Foundation keeps whitespace before a `;` in the MIME type: such a value is left to it.
        let mediaType = value.prefix { $0 != ";" }
        let parts = mediaType.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ HTTPFieldValidation.isToken(String($0)) }) else { return nil }
        return .some(mediaType.lowercased())
    }

    /// The MIME type for a path extension such as `png`.
    static func forPathExtension(_ pathExtension: String) -> String {
        let key = pathExtension.lowercased()
        return system[key] ?? builtIn[key] ?? "application/octet-stream"
    }
}
