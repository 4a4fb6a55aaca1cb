import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The streamed multipart body: framing, exact length, lazy file reading, errors, throttling, writing to a file.
final class MultipartTests: XCTestCase {
    private let serializer = HTTPRequestSerializer()
    private var files: [URL] = []

    override func tearDown() {
        files.forEach { try? FileManager.default.removeItem(at: $0) }
        super.tearDown()
    }

    private func temporaryFile(_ name: String, contents: Data) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sk-mp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(name)
        try contents.write(to: url)
        files.append(directory)
        return url
    }

    /// Reads a whole stream, `chunk` bytes at a time; nil when the stream reported an error.
    private func drain(
        _ stream: InputStream, chunk: Int = 4096, maxReads: Int = 1_000_000
    ) -> (data: Data, largestRead: Int)? {
        stream.open()
        defer { stream.close() }
        var data = Data()
        var largest = 0
        var buffer = [UInt8](repeating: 0, count: chunk)
        for _ in 0..<maxReads {
            let count = stream.read(&buffer, maxLength: chunk)
            if count < 0 { return nil }
            if count == 0 { break }
            largest = max(largest, count)
            data.append(buffer, count: count)
        }
        return (data, largest)
    }

    private func boundary(of request: URLRequest) throws -> String {
        let type = try XCTUnwrap(request.value(forHTTPHeaderField: "Content-Type"))
        return try XCTUnwrap(type.components(separatedBy: "boundary=").last)
    }

    func testBodyFramingAndExactContentLength() throws {
        let file = try temporaryFile("notes.txt", contents: Data("file text".utf8))
        let request = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/upload",
            parameters: ["title": "cat", "n": 1]
        ) { form in
            try form.appendPart(withFileURL: file, name: "doc")
            form.appendPart(withHeaders: ["X-Part": "raw"], body: Data("raw body".utf8))
        }
        let boundary = try boundary(of: request)
        let body = try XCTUnwrap(drain(try XCTUnwrap(request.httpBodyStream))).data
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Length"), String(body.count))
        XCTAssertNil(request.httpBody)
        let expected =
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\n1"
            + "\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\ncat"
            + "\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nfile text"
            + "\r\n--\(boundary)\r\nX-Part: raw\r\n\r\nraw body"
            + "\r\n--\(boundary)--\r\n"
        XCTAssertEqual(String(decoding: body, as: UTF8.self), expected)
    }

    /// What a probe found against four multipart parsers: names are escaped as the HTML standard says (`"` as
    /// `%22`, CR and LF as `%0D` and `%0A`, nothing else); parameters go as AFNetworking sends them (`Data` as its
    /// bytes, `NSNull` empty); a form without parts is no body.
    func testNamesParametersAndAnEmptyFormAsBrowsersAndAFNetworkingSendThem() throws {
        let request = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/upload",
            parameters: ["blob": Data([0x72, 0x00, 0xFF]), "null": NSNull()]
        ) { form in
            form.appendPart(
                withFileData: Data("x".utf8), name: "q\"uote\\back", fileName: "a\r\nb%.txt", mimeType: "text/plain")
        }
        let boundary = try boundary(of: request)
        let body = try XCTUnwrap(drain(try XCTUnwrap(request.httpBodyStream))).data
        let expected =
            Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"blob\"\r\n\r\n".utf8)
            + Data([0x72, 0x00, 0xFF])
            + Data("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"null\"\r\n\r\n".utf8)
            + Data(
                ("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"q%22uote\\back\"; filename=\"a%0D%0Ab%.txt\""
                    + "\r\nContent-Type: text/plain\r\n\r\nx\r\n--\(boundary)--\r\n").utf8)
        XCTAssertEqual(body, expected, String(decoding: body, as: UTF8.self))

        let empty = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/upload", parameters: nil, constructingBodyWith: nil)
        XCTAssertNil(empty.httpBodyStream)
        XCTAssertEqual(empty.httpBody ?? Data(), Data())
        // AFNetworking returns the request as its serializer made it: an empty form-encoded POST.
        XCTAssertEqual(empty.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded")
    }

    /// A part header that would add a header or a part of its own (a MIME type or a raw header with CR or LF, a name
    /// that is not a token) fails the request before anything is sent; the part was written as given.
    func testPartHeadersThatWouldInjectAreRefused() {
        let cases: [(String, (MultipartFormData) throws -> Void)] = [
            (
                "MIME type",
                { $0.appendPart(withFileData: Data(), name: "f", fileName: "f", mimeType: "text/plain\r\nX: 1") }
            ),
            ("stream MIME type", { $0.appendPart(with: nil, name: "f", fileName: "f", length: 0, mimeType: "a\nb") }),
            ("header value", { $0.appendPart(withHeaders: ["X-Val": "a\r\n\r\nBODY"], body: Data()) }),
            ("header name", { $0.appendPart(withHeaders: ["Bad Name:\r\nX": "v"], body: Data()) }),
        ]
        for (label, append) in cases {
            XCTAssertThrowsError(
                try serializer.multipartFormRequest(
                    withMethod: "POST", urlString: "http://h/upload", parameters: nil, constructingBodyWith: append),
                label
            ) {
                XCTAssertEqual(($0 as NSError).code, SessionKitError.Code.invalidRequestField.rawValue, label)
            }
        }
    }

    func testEachRequestGetsItsOwnBoundary() throws {
        let first = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/", parameters: ["a": "1"], constructingBodyWith: nil)
        let second = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/", parameters: ["a": "1"], constructingBodyWith: nil)
        XCTAssertNotEqual(try boundary(of: first), try boundary(of: second))
        let body = try XCTUnwrap(drain(try XCTUnwrap(first.httpBodyStream))).data
        let boundary = try boundary(of: first)
        XCTAssertEqual(
            String(decoding: body, as: UTF8.self),
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--\(boundary)--\r\n")
        XCTAssertEqual(first.value(forHTTPHeaderField: "Content-Length"), String(body.count))
    }

    func testStreamPartAndMIMETypes() throws {
        let png = try temporaryFile("image.png", contents: Data([0x89, 0x50]))
        let unknown = try temporaryFile("data.zzzunknown", contents: Data([1]))
        let request = try serializer.multipartFormRequest(withMethod: "POST", urlString: "http://h/", parameters: nil) {
            form in
            try form.appendPart(withFileURL: png, name: "a")
            try form.appendPart(withFileURL: unknown, name: "b")
            form.appendPart(
                with: InputStream(data: Data("0123456789".utf8)), name: "s", fileName: "s.txt", length: 10,
                mimeType: "text/plain")
        }
        let text = String(decoding: try XCTUnwrap(drain(try XCTUnwrap(request.httpBodyStream))).data, as: UTF8.self)
        XCTAssertTrue(text.contains("filename=\"image.png\"\r\nContent-Type: image/png"), text)
        XCTAssertTrue(text.contains("filename=\"data.zzzunknown\"\r\nContent-Type: application/octet-stream"), text)
        XCTAssertTrue(text.contains("\r\n\r\n0123456789\r\n"), text)
    }

    func testFileErrorsAreRequestSerializationErrors() throws {
        let directory = try temporaryFile("x", contents: Data()).deletingLastPathComponent()
        let cases: [URL] = [URL(string: "http://h/remote.txt")!, URL(fileURLWithPath: "/nonexistent/file"), directory]
        for url in cases {
            XCTAssertThrowsError(
                try serializer.multipartFormRequest(withMethod: "POST", urlString: "http://h/", parameters: nil) {
                    try $0.appendPart(withFileURL: url, name: "f")
                }, "\(url)"
            ) { error in
                XCTAssertEqual((error as NSError).domain, SessionKitError.requestSerializationDomain)
            }
        }
    }

    func testStreamPartShorterThanDeclaredFailsTheRead() throws {
        let request = try serializer.multipartFormRequest(withMethod: "POST", urlString: "http://h/", parameters: nil) {
            form in
            form.appendPart(
                with: InputStream(data: Data("short".utf8)), name: "s", fileName: "s", length: 100,
                mimeType: "text/plain")
        }
        let stream = try XCTUnwrap(request.httpBodyStream)
        XCTAssertNil(drain(stream), "a part that ends early must fail, not send a wrong length")
        let error = try XCTUnwrap(stream.streamError as NSError?)
        XCTAssertEqual(error.domain, SessionKitError.requestSerializationDomain)
        XCTAssertTrue(error.localizedDescription.contains("5 of its declared 100 bytes"), error.localizedDescription)
    }

    func testLargeFileIsReadInChunksWithFlatMemory() throws {
        // A 256 MiB sparse file: reading it through the body must not hold it in memory.
        let url = try temporaryFile("big.bin", contents: Data())
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 256 << 20)
        try handle.close()
        let request = try serializer.multipartFormRequest(withMethod: "POST", urlString: "http://h/", parameters: nil) {
            try $0.appendPart(withFileURL: url, name: "big")
        }
        let stream = try XCTUnwrap(request.httpBodyStream)
        let before = residentMiB()
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var total: Int64 = 0
        var peak = before
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            XCTAssertGreaterThanOrEqual(count, 0)
            if count <= 0 { break }
            total += Int64(count)
            if total % (32 << 20) < Int64(buffer.count) { peak = max(peak, residentMiB()) }
        }
        stream.close()
        XCTAssertEqual(String(total), request.value(forHTTPHeaderField: "Content-Length"))
        XCTAssertLessThan(peak - before, 64, "RSS grew by \(peak - before) MiB while streaming 256 MiB")
    }

    func testThrottlingLimitsEachRead() throws {
        let request = try serializer.multipartFormRequest(withMethod: "POST", urlString: "http://h/", parameters: nil) {
            form in
            form.appendPart(
                withFileData: Data(count: 10_000), name: "f", fileName: "f", mimeType: "application/octet-stream")
            form.throttleBandwidth(withPacketSize: 1024, delay: 0)
        }
        let result = try XCTUnwrap(drain(try XCTUnwrap(request.httpBodyStream), chunk: 65_536))
        XCTAssertEqual(result.largestRead, 1024)
        XCTAssertEqual(String(result.data.count), request.value(forHTTPHeaderField: "Content-Length"))
    }

    func testWritingTheBodyToAFile() async throws {
        let request = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: "http://h/", parameters: ["a": "b"],
            constructingBodyWith: nil)
        let expected = try XCTUnwrap(
            drain(
                try XCTUnwrap(
                    try serializer.multipartFormRequest(
                        withMethod: "POST", urlString: "http://h/", parameters: ["a": "b"],
                        constructingBodyWith: nil
                    ).httpBodyStream))
        ).data.count
        let destination = try temporaryFile("body.multipart", contents: Data())
        try FileManager.default.removeItem(at: destination)
        let box = OnceBox<Error?>()
        let stripped = serializer.request(withMultipartFormRequest: request, writingStreamContentsToFile: destination) {
            box.resolve($0)
        }
        XCTAssertNil(stripped.httpBodyStream)
        let writeError = try await box.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(writeError)
        let written = try Data(contentsOf: destination)
        XCTAssertEqual(written.count, expected)
        XCTAssertEqual(String(written.count), stripped.value(forHTTPHeaderField: "Content-Length"))
        XCTAssertTrue(String(decoding: written, as: UTF8.self).hasSuffix("--\r\n"))
    }

    private func residentMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
        }
        return 0
    }
}

/// Multipart, Encodable and property-list bodies through a manager, against the loopback server.
final class RequestSerializationEndToEndTests: LoopbackTestCase {
    struct Signup: Encodable {
        let name: String
        let age: Int
        let admin: Bool
        let tags: [String]
        let address: [String: String]
    }

    func testEncodableParametersFollowTheSameRulesAsDictionaries() async throws {
        let manager = makeManager()
        let value = Signup(name: "Ada L", age: 36, admin: true, tags: ["x", "y"], address: ["city": "London"])
        _ = try await manager.get("/get", parameters: value)
        XCTAssertEqual(
            server.requests.last?.uri,
            "/get?address%5Bcity%5D=London&admin=1&age=36&name=Ada%20L&tags%5B%5D=x&tags%5B%5D=y")
        manager.requestSerializer = JSONRequestSerializer()
        let result = try await manager.post("/post", parameters: value)
        let json = try XCTUnwrap((result.object as? [String: Any])?["json"] as? [String: Any])
        XCTAssertEqual(json["name"] as? String, "Ada L")
        XCTAssertEqual(json["admin"] as? Bool, true)
    }

    func testPropertyListBody() async throws {
        let manager = makeManager()
        let plist = PropertyListRequestSerializer(format: .binary, writeOptions: 0)
        manager.requestSerializer = plist
        _ = try await manager.post("/post", parameters: ["a": [1, 2], "b": "text"])
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(recorded.header("Content-Type"), "application/x-plist")
        let decoded = try PropertyListSerialization.propertyList(from: recorded.body, format: nil) as? [String: Any]
        XCTAssertEqual(decoded?["b"] as? String, "text")
        XCTAssertTrue(recorded.body.starts(with: Data("bplist00".utf8)))
        do {
            _ = try await manager.post("/post", parameters: ["null": NSNull()])
            XCTFail("null is not a property list")
        } catch {
            XCTAssertEqual((error as NSError).domain, SessionKitError.requestSerializationDomain)
        }
    }

    func testCustomQueryClosureErrorReachesFailureWithoutTask() async throws {
        let manager = makeManager()
        struct Refused: Error {}
        manager.requestSerializer.setQueryStringSerialization { _, _ in throw Refused() }
        let (task, error): (URLSessionDataTask?, Error) = try await awaitCallback { done in
            let returned = manager.get(
                "/get", parameters: ["a": "b"], headers: nil, progress: nil,
                success: { _, _ in XCTFail("must fail") }, failure: { done(($0, $1)) })
            XCTAssertNil(returned)
        }
        XCTAssertNil(task)
        XCTAssertTrue(error is Refused)
        XCTAssertEqual(server.requestCount, 0)
    }

    func testStreamedMultipartUploadOfAFileWithProgress() async throws {
        let manager = makeManager(timeout: 60)
        let body = ByteGenerator.bytes(count: 3_000_000, seed: 11)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sk-up-\(UUID().uuidString).bin")
        try body.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let last = LockedBox<Double>(0)
        let object: Any? = try await awaitCallback { done in
            manager.post(
                "/post", parameters: ["k": "v"], headers: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: url, name: "file")
                }, progress: { last.wrappedValue = $0.fractionCompleted },
                success: { _, object in done(object) },
                failure: { _, error in
                    XCTFail("\(error)"); done(nil)
                })
        }
        let files = try XCTUnwrap((object as? [String: Any])?["files"] as? [String: Any])
        XCTAssertEqual(files["file.length"] as? Int, body.count)
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)
        let recorded = try XCTUnwrap(server.requests.last)
        let boundary = try XCTUnwrap(recorded.header("Content-Type")?.components(separatedBy: "boundary=").last)
        XCTAssertTrue(recorded.body.range(of: body) != nil, "the file arrived byte for byte")
        XCTAssertTrue(String(decoding: recorded.body.suffix(64), as: UTF8.self).hasSuffix("--\(boundary)--\r\n"))
    }

    func testUploadFromTheWrittenFileCarriesExactContentLength() async throws {
        let manager = makeManager()
        let serializer = HTTPRequestSerializer()
        let request = try serializer.multipartFormRequest(
            withMethod: "POST", urlString: server.url("/post").absoluteString,
            parameters: ["field": "value"], constructingBodyWith: nil)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-body-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let written = OnceBox<Error?>()
        let stripped = serializer.request(withMultipartFormRequest: request, writingStreamContentsToFile: file) {
            written.resolve($0)
        }
        let writeError = try await written.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertNil(writeError)
        let object: Any? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(with: stripped, fromFile: file, completionHandler: { _, object, _ in done(object) }))
        }
        XCTAssertEqual((object as? [String: Any])?["form"] as? [String: String], ["field": "value"])
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(recorded.header("Content-Length"), stripped.value(forHTTPHeaderField: "Content-Length"))
        XCTAssertNil(recorded.header("Transfer-Encoding"))
    }
}
