import Foundation
@_spi(Fuzzing) import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The parsers the fuzzer drives. For the response serializers each input is split into a status code, a content type
/// and a body, so that validation and decoding both see hostile values. The parsers that read network bytes
/// (`head`, `trailer`, `date`, `cache`, `challenge`) are checked for properties, not only for crashes: a broken
/// property stops the process like a crash, so libFuzzer keeps the input.
///
/// Adding a parser is one case here and one line in ``run(_:)``; `websocket`, `utf8`, `sse`, `deflate` and `cookie`
/// joined that way.
enum FuzzTarget: String, CaseIterable {
    case http, json, xml, plist, compound, decodable, archive
    case head, trailer, date, cache, challenge, websocket, utf8, sse, deflate, cookie

    /// The target of this process (set once from the command line, before fuzzing starts).
    nonisolated(unsafe) static var selected: FuzzTarget = .json

    private static let contentTypes = [
        "application/json", "text/json", "text/javascript", "application/xml", "text/xml", "application/x-plist",
        "text/html", "application/octet-stream", "application/json; charset=utf-8", "",
    ]

    private static let url = URL(string: "http://127.0.0.1/fuzz") ?? URL(fileURLWithPath: "/")

    /// The archivable classes, picked by the first byte of an `archive` input.
    // Read only, by libFuzzer's single thread.
    nonisolated(unsafe) static let archiveDecoders: [(NSObject & NSSecureCoding, (Data) throws -> Any)] = [
        (
            HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1/v1")),
            { try SecureArchive.unarchive(HTTPSessionManager.self, from: $0) }
        ),
        (URLSessionManager(), { try SecureArchive.unarchive(URLSessionManager.self, from: $0) }),
        (JSONRequestSerializer(), { try SecureArchive.unarchive(HTTPRequestSerializer.self, from: $0) }),
        (
            PropertyListRequestSerializer(),
            { try SecureArchive.unarchive(PropertyListRequestSerializer.self, from: $0) }
        ),
        (JSONResponseSerializer(), { try SecureArchive.unarchive(HTTPResponseSerializer.self, from: $0) }),
        (
            PropertyListResponseSerializer(),
            { try SecureArchive.unarchive(PropertyListResponseSerializer.self, from: $0) }
        ),
        (
            CompoundResponseSerializer(responseSerializers: [JSONResponseSerializer(), XMLParserResponseSerializer()]),
            { try SecureArchive.unarchive(CompoundResponseSerializer.self, from: $0) }
        ),
        (
            SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]),
            { try SecureArchive.unarchive(SecurityPolicy.self, from: $0) }
        ),
        (HTTPRequestSerializer(), { try SecureArchive.unarchive(HTTPRequestSerializer.self, from: $0) }),
        (HTTPResponseSerializer(), { try SecureArchive.unarchive(HTTPResponseSerializer.self, from: $0) }),
        (XMLParserResponseSerializer(), { try SecureArchive.unarchive(XMLParserResponseSerializer.self, from: $0) }),
    ]

    /// Writes one seed per archivable class to `directory` (`sessionkit-fuzz --write-archive-seeds DIR`).
    static func writeArchiveSeeds(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (index, entry) in archiveDecoders.enumerated() {
            let data = Data([UInt8(index)]) + (try SecureArchive.archive(entry.0))
            try data.write(to: URL(fileURLWithPath: "\(directory)/seed-\(index)"))
        }
    }

    /// Runs one input; anything but a crash, a hang, unbounded memory or a broken property is fine.
    func run(_ input: Data) {
        switch self {
        case .head: return NetworkParserProperties.head(input)
        case .trailer: return NetworkParserProperties.trailer(input)
        case .date: return NetworkParserProperties.date(input)
        case .cache: return NetworkParserProperties.cache(input)
        case .challenge: return NetworkParserProperties.challenge(input)
        case .websocket: return NetworkParserProperties.webSocket(input)
        case .utf8: return NetworkParserProperties.utf8(input)
        case .sse: return NetworkParserProperties.serverSentEvents(input)
        case .deflate: return NetworkParserProperties.deflate(input)
        case .cookie: return NetworkParserProperties.cookie(input)
        default: break
        }
        if self == .archive {
            guard let selector = input.first else { return }
            let decode = Self.archiveDecoders[Int(selector) % Self.archiveDecoders.count].1
            _ = try? decode(Data(input.dropFirst()))
            return
        }
        let bytes = [UInt8](input)
        guard bytes.count >= 2 else { return }
        let status = 100 + Int(bytes[0]) * 2 % 500
        var index = 2
        var contentType: String
        if bytes[1] < 200 {
            contentType = Self.contentTypes[Int(bytes[1]) % Self.contentTypes.count]
        } else {
            let end = bytes[2...].firstIndex(of: 0) ?? bytes.count
            contentType = String(decoding: bytes[2..<end], as: UTF8.self)
            index = min(end + 1, bytes.count)
        }
        let body = Data(bytes[index...])
        var headers: [String: String] = [:]
        if !contentType.isEmpty { headers["Content-Type"] = contentType }
        let response = HTTPURLResponse(
            url: Self.url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)

        switch self {
        case .http:
            _ = try? HTTPResponseSerializer().responseObject(for: response, data: body)
        case .json:
            let serializer = JSONResponseSerializer()
            serializer.removesKeysWithNullValues = bytes[0] & 1 == 1
            serializer.readingOptions = bytes[0] & 2 == 2 ? [.fragmentsAllowed] : []
            _ = try? serializer.responseObject(for: response, data: body)
        case .xml:
            if let parser = try? XMLParserResponseSerializer().responseObject(for: response, data: body) as? XMLParser {
                parser.shouldResolveExternalEntities = false
                _ = parser.parse()
            }
        case .plist:
            _ = try? PropertyListResponseSerializer().responseObject(for: response, data: body)
        case .compound:
            let compound = CompoundResponseSerializer(responseSerializers: [
                JSONResponseSerializer(), PropertyListResponseSerializer(), XMLParserResponseSerializer(),
            ])
            _ = try? compound.responseObject(for: response, data: body)
        case .decodable:
            _ = try? DecodableResponseSerializer(FuzzDocument.self).responseObject(for: response, data: body)
        case .archive, .head, .trailer, .date, .cache, .challenge, .websocket, .utf8, .sse, .deflate, .cookie:
            break
        }
    }
}

/// A nested type for the Decodable target.
struct FuzzDocument: Decodable {
    struct Item: Decodable {
        let id: Int
        let name: String?
        let tags: [String]?
        let ratio: Double?
    }
    let items: [Item]
    let next: String?
    let meta: [String: [Int]]?
}
