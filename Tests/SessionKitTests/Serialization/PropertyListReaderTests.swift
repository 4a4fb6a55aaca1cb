import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// SessionKit's own property-list readers, through `PropertyListResponseSerializer`: they agree with Foundation on
/// what Foundation writes, and refuse hostile bytes with an error.
final class PropertyListReaderTests: XCTestCase {
    private let response = HTTPURLResponse(
        url: URL(string: "http://h/p")!, statusCode: 200, httpVersion: "HTTP/1.1",
        headerFields: ["Content-Type": "application/x-plist"])!

    private func read(_ data: Data) throws -> Any? {
        try PropertyListResponseSerializer().responseObject(for: response, data: data)
    }

    private let sample: [String: Any] = [
        "string": "héllo ✓ 👋", "ascii": "plain", "int": 42, "negative": -7, "big": Int64(1) << 40,
        "double": 2.5, "true": true, "false": false, "data": Data([0, 1, 2, 255]),
        "date": Date(timeIntervalSinceReferenceDate: 700_000_000),
        "array": [1, "two", [3.0], ["k": "v"]] as [Any], "empty": [String: Any](), "emptyArray": [Any](),
    ]

    private func assertSample(_ object: Any?, file: StaticString = #filePath, line: UInt = #line) throws {
        let dictionary = try XCTUnwrap(object as? [String: Any], file: file, line: line)
        XCTAssertEqual(dictionary["string"] as? String, "héllo ✓ 👋", file: file, line: line)
        XCTAssertEqual(dictionary["ascii"] as? String, "plain", file: file, line: line)
        XCTAssertEqual(dictionary["int"] as? Int, 42, file: file, line: line)
        XCTAssertEqual(dictionary["negative"] as? Int, -7, file: file, line: line)
        XCTAssertEqual(dictionary["big"] as? Int, 1 << 40, file: file, line: line)
        XCTAssertEqual(dictionary["double"] as? Double, 2.5, file: file, line: line)
        XCTAssertEqual(dictionary["true"] as? Bool, true, file: file, line: line)
        XCTAssertEqual(dictionary["false"] as? Bool, false, file: file, line: line)
        XCTAssertEqual(dictionary["data"] as? Data, Data([0, 1, 2, 255]), file: file, line: line)
        XCTAssertEqual(
            dictionary["date"] as? Date, Date(timeIntervalSinceReferenceDate: 700_000_000), file: file, line: line)
        let array = try XCTUnwrap(dictionary["array"] as? [Any], file: file, line: line)
        XCTAssertEqual(array.count, 4, file: file, line: line)
        XCTAssertEqual((array[3] as? [String: String])?["k"], "v", file: file, line: line)
        XCTAssertEqual((dictionary["empty"] as? [String: Any])?.count, 0, file: file, line: line)
    }

    func testReadsWhatFoundationWritesInBothFormats() throws {
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let data = try PropertyListSerialization.data(fromPropertyList: sample, format: format, options: 0)
            try assertSample(try read(data))
        }
    }

    /// What Python's plistlib (and Foundation on Apple platforms) write and read, found by a probe: empty `<data>` laid
    /// out over lines, unsigned 64-bit and hexadecimal integers, dates before 1582 (the Gregorian calendar, not the
    /// Julian one), and XML's CR LF read as LF.
    func testWhatOtherWritersWriteIsReadAsTheyMeanIt() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><array>
            <data>
            </data>
            <data>
            \tAAEC
            \t/w==
            </data>
            <integer>9223372036854775808</integer>
            <integer>18446744073709551615</integer>
            <integer>-9223372036854775808</integer>
            <integer>0x10</integer>
            <date>0001-01-01T00:00:00Z</date>
            <date>1582-10-10T12:00:00Z</date>
            <string>a\r\nb\rc&#13;</string>
            </array></plist>
            """
        let array = try XCTUnwrap(try read(Data(xml.utf8)) as? [Any])
        XCTAssertEqual(array.count, 9)
        XCTAssertEqual(array[0] as? Data, Data())
        XCTAssertEqual(array[1] as? Data, Data([0, 1, 2, 255]))
        XCTAssertEqual(array[2] as? UInt64, 1 << 63)
        XCTAssertEqual(array[3] as? UInt64, .max)
        XCTAssertEqual(array[4] as? Int, .min)
        XCTAssertEqual(array[5] as? Int, 16)
        XCTAssertEqual((array[6] as? Date)?.timeIntervalSince1970, -62_135_596_800)
        XCTAssertEqual((array[7] as? Date)?.timeIntervalSince1970, -12_219_681_600)
        XCTAssertEqual(array[8] as? String, "a\nb\nc\r")
        for bad in ["<integer>18446744073709551616</integer>", "<integer>-+5</integer>", "<integer>0x</integer>"] {
            XCTAssertThrowsError(try read(Data("<plist>\(bad)</plist>".utf8)), bad)
        }
        // Binary: 2^64 − 1 and −1 as 16-byte integers.
        let max = binaryList([[0x14] + [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 0xFF, count: 8)])
        XCTAssertEqual(try read(max) as? UInt64, .max)
        let minusOne = binaryList([[0x14] + [UInt8](repeating: 0xFF, count: 16)])
        XCTAssertEqual(try read(minusOne) as? Int, -1)
    }

    func testLargeBinaryListWithManyObjects() throws {
        let items = (0..<20_000).map { ["id": $0, "name": "item \($0)"] as [String: Any] }
        let data = try PropertyListSerialization.data(fromPropertyList: ["items": items], format: .binary, options: 0)
        let object = try XCTUnwrap(try read(data) as? [String: Any])
        let read = try XCTUnwrap(object["items"] as? [[String: Any]])
        XCTAssertEqual(read.count, 20_000)
        XCTAssertEqual(read.last?["name"] as? String, "item 19999")
    }

    func testTheFuzzerCrashInputIsRefused() throws {
        // Found by `make fuzz`: a binary set that Foundation's decoder crashes on. Kept in Fuzz/regressions/plist.
        let body = Data(base64Encoded: "MgVicGxpc3QwMMEBAlFhEAEICw0AAAAAAAABAQAAAAAAAAADAAAAAAAAAAAAAAAAAAAADw==")!
            .dropFirst(2)
        XCTAssertThrowsError(try read(Data(body))) {
            XCTAssertEqual(($0 as NSError).code, URLError.cannotDecodeContentData.rawValue)
        }
    }

    /// A binary list with the given objects (already encoded, one-byte references) and top object 0.
    private func binaryList(_ objects: [[UInt8]]) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(bytes.count)
            bytes += object
        }
        let table = bytes.count
        bytes += offsets.map { UInt8($0) }
        bytes += [0, 0, 0, 0, 0, 0, 1, 1]
        for value in [objects.count, 0, table] {
            bytes += (0..<8).reversed().map { UInt8((value >> ($0 * 8)) & 0xff) }
        }
        return Data(bytes)
    }

    func testHostileBinaryListsAreRefused() {
        let cases: [(String, Data)] = [
            ("cycle", binaryList([[0xA1, 0x00]])),  // an array containing itself
            ("reference out of range", binaryList([[0xA1, 0x07]])),
            ("set", binaryList([[0xC1, 0x01], [0x51, 0x61]])),
            ("non-string key", binaryList([[0xD1, 0x01, 0x01], [0x10, 0x05]])),
            ("length past the end", binaryList([[0x5F, 0x10, 0xFF]])),
            ("unknown marker", binaryList([[0x70]])),
            ("truncated", Data("bplist00".utf8)),
            ("bad trailer", Data(Array("bplist00".utf8) + [UInt8](repeating: 0xFF, count: 40))),
        ]
        for (name, data) in cases {
            XCTAssertThrowsError(try read(data), name) {
                XCTAssertEqual(($0 as NSError).domain, SessionKitError.responseSerializationDomain, name)
            }
        }
    }

    /// 40 arrays, each holding the next one twice: 130 bytes that a walk meets as 2^40 leaves (a probe's input; the
    /// reader built it in milliseconds, then a caller's cast to `NSArray` ran for minutes). Sharing one container a
    /// few times, or a string many times, is fine.
    func testSharedContainersThatExpandPastTheInputAreRefused() throws {
        var objects = (0..<40).map { index -> [UInt8] in [0xA2, UInt8(index + 1), UInt8(index + 1)] }
        objects.append([0x10, 0x01])
        XCTAssertThrowsError(try read(binaryList(objects))) {
            XCTAssertTrue(
                ($0 as NSError).localizedDescription.contains("shared containers"), ($0 as NSError).localizedDescription
            )
        }
        // Two levels of sharing, and one string referenced 200 times: read.
        let shared = binaryList([
            [0xA2, 0x01, 0x01], [0xA2, 0x02, 0x02], [0xAF, 0x10, 200] + [UInt8](repeating: 3, count: 200),
            [0x51, 0x61],
        ])
        let top = try XCTUnwrap(try read(shared) as? [Any])
        XCTAssertEqual(((top.first as? [Any])?.first as? [Any])?.count, 200)
    }

    func testDeepNestingIsRefused() {
        // 600 arrays, each holding the next, with two-byte offsets and references.
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for index in 0..<600 {
            offsets.append(bytes.count)
            bytes += index == 599 ? [0x10, 0x01] : [0xA1, UInt8((index + 1) >> 8), UInt8((index + 1) & 0xff)]
        }
        let table = bytes.count
        for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xff)] }
        bytes += [0, 0, 0, 0, 0, 0, 2, 2]
        for value in [600, 0, table] { bytes += (0..<8).reversed().map { UInt8((value >> ($0 * 8)) & 0xff) } }
        XCTAssertThrowsError(try read(Data(bytes))) {
            XCTAssertTrue(
                ($0 as NSError).localizedDescription.contains("nested more deeply than"),
                ($0 as NSError).localizedDescription)
        }
    }

    func testMalformedXMLAndOpenStepAreRefused() {
        let cases = [
            "<plist><dict><key>a</key></dict></plist>",
            "<plist><array><integer>x</integer></array></plist>",
            "<plist><dict><string>no key</string></dict></plist>",
            "<plist><foo/></plist>",
            "<plist><string>a</string><string>b</string></plist>",
            "{ a = b; }",
            "just text",
        ]
        for text in cases {
            XCTAssertThrowsError(try read(Data(text.utf8)), text) {
                XCTAssertEqual(($0 as NSError).code, URLError.cannotDecodeContentData.rawValue, text)
            }
        }
    }

    func testMalformedInputsDoNotLeak() throws {
        // Foundation's own parser leaks ~600 bytes per malformed input; SessionKit's readers must not.
        let inputs = [
            Data("<plist><dict><key>a</key></plist>".utf8), Data("{ a = b".utf8),
            binaryList([[0xA1, 0x07]]), Data("<plist><array><integer>x</integer></array></plist>".utf8),
        ]
        for input in inputs { _ = try? read(input) }
        let before = residentKiB()
        for _ in 0..<20_000 {
            for input in inputs { _ = try? read(input) }
        }
        let grown = residentKiB() - before
        XCTAssertLessThan(grown, 16 * 1024, "RSS grew by \(grown) KiB over 80,000 malformed bodies")
    }

    private func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}
