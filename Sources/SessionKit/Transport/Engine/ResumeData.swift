import Foundation

/// SessionKit's resume data for a download on the curl transport: where the partial file is, how many bytes it
/// holds, and the validator (`ETag` or `Last-Modified`) that makes the server send the rest of the same entity
/// (`Range` with `If-Range`). Encoded as `SKRD1` followed by JSON; anything else is refused.
struct ResumeData: Codable, Equatable {
    var version = 1
    let url: String
    let partialFile: String
    let bytes: Int64
    let validator: String

    private static let magic = Data("SKRD1".utf8)

    /// The bytes to hand to the caller.
    func encoded() -> Data? {
        (try? JSONEncoder().encode(self)).map { Self.magic + $0 }
    }

    /// Resume data from `data`, or nil when it is not SessionKit's, of another version, or its partial file is gone
    /// or changed size.
    static func decode(_ data: Data) -> ResumeData? {
        guard data.count < 64 * 1024, data.starts(with: magic),
            let value = try? JSONDecoder().decode(ResumeData.self, from: data.dropFirst(magic.count)),
            value.version == 1, value.bytes > 0, URL(string: value.url) != nil,
            let size = (try? FileManager.default.attributesOfItem(atPath: value.partialFile)[.size]) as? NSNumber,
            size.int64Value == value.bytes
        else { return nil }
        return value
    }
}
