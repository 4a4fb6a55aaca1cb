import Foundation
import SessionKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The parsers the fuzzer drives. Each input is split into a status code, a content type and a body, so that
/// validation and decoding both see hostile values.
enum FuzzTarget: String, CaseIterable {
    case http, json, xml, plist, compound, decodable

    /// The target of this process (set once from the command line, before fuzzing starts).
    nonisolated(unsafe) static var selected: FuzzTarget = .json

    private static let contentTypes = [
        "application/json", "text/json", "text/javascript", "application/xml", "text/xml", "application/x-plist",
        "text/html", "application/octet-stream", "application/json; charset=utf-8", "",
    ]

    private static let url = URL(string: "http://127.0.0.1/fuzz") ?? URL(fileURLWithPath: "/")

    /// Runs one input; anything but a crash, a hang or unbounded memory is fine.
    func run(_ input: Data) {
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
        let response = HTTPURLResponse(url: Self.url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)

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
