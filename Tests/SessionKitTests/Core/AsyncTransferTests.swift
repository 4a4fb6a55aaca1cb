import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The async forms of uploads and downloads (issue 13): progress as an `AsyncSequence`, the result, cancellation.
final class AsyncTransferTests: LoopbackTestCase {
    private func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-transfer-\(UUID().uuidString)")
    }

    func testDownloadToFileStreamsProgressAndReturnsTheFile() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        let transfer = manager.download(URLRequest(url: server.url("/bytes/500000?seed=3")), to: destination)
        var reports: [TransferProgress] = []
        for await step in transfer.progress { reports.append(step) }
        let (fileURL, response) = try await transfer.value
        XCTAssertEqual(fileURL, destination)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: 500_000, seed: 3))
        XCTAssertEqual(reports.last?.fractionCompleted ?? 0, 1.0, accuracy: 0.0001)
        XCTAssertEqual(reports.map(\.completedUnitCount), reports.map(\.completedUnitCount).sorted())
    }

    func testDownloadWithFailingStatusThrowsAndLeavesNoFile() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        do {
            _ = try await manager.download(URLRequest(url: server.url("/status/404")), to: destination).value
            XCTFail("a 404 must throw")
        } catch {
            XCTAssertEqual((error as NSError).domain, SessionKitError.responseSerializationDomain)
        }
    }

    func testUploadDataReturnsTheServersAnswerWithProgress() async throws {
        let manager = makeManager()
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let transfer = manager.upload(request, from: Data(String(repeating: "a", count: 200_000).utf8))
        var last: TransferProgress?
        for await step in transfer.progress { last = step }
        let result = try await transfer.value
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(((result.object as? [String: Any])?["data"] as? String)?.count, 200_000)
        XCTAssertEqual(last?.completedUnitCount, 200_000)
    }

    func testUploadFileSendsTheFile() async throws {
        let manager = makeManager()
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("file body".utf8).write(to: file)
        var request = URLRequest(url: server.url("/put"))
        request.httpMethod = "PUT"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let result = try await manager.upload(request, fromFile: file).value
        XCTAssertEqual((result.object as? [String: Any])?["data"] as? String, "file body")
    }

    /// A caller's body stream is read once: a 307 that keeps the body fails the task rather than send the stream
    /// again (on the curl transport a second transfer would read it beside the first one's reader), and nothing goes
    /// to the redirect's target with a body cut short.
    func testACallersStreamAnsweredByA307IsNeverReadTwice() async throws {
        let manager = makeManager()
        let body = Data("streamed body".utf8)
        var request = URLRequest(url: server.url("/redirect-to?url=/post&status_code=307"))
        request.httpMethod = "POST"
        request.setValue(String(body.count), forHTTPHeaderField: "Content-Length")
        request.httpBodyStream = InputStream(data: body)
        let once = OnceBox<(URLResponse?, Error?)>()
        manager.uploadTask(withStreamedRequest: request) { response, _, error in once.resolve((response, error)) }
            .resume()
        let (response, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual(server.requests.first { $0.path == "/redirect-to" }?.body, body)
        XCTAssertFalse(server.requests.contains { $0.path == "/post" && $0.body != body }, "\(server.requests)")
        if LoopbackTestCase.testTransport == .curl {
            XCTAssertEqual((error as? URLError)?.code, .requestBodyStreamExhausted, "\(String(describing: error))")
            XCTAssertFalse(server.requests.contains { $0.path == "/post" })
        } else {
            XCTAssertTrue(error != nil || response != nil)
        }
    }

    func testAnUploadAnsweredByA307IsSentWholeOrNotFollowed() async throws {
        let manager = makeManager()
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let body = ByteGenerator.bytes(count: 300_000, seed: 5)
        try body.write(to: file)
        var request = URLRequest(url: server.url("/redirect-to?url=/post&status_code=307"))
        request.httpMethod = "POST"
        for upload in ["file", "data"] {
            let once = OnceBox<(URLResponse?, Error?)>()
            let complete: @Sendable (URLResponse?, Any?, Error?) -> Void = { response, _, error in
                once.resolve((response, error))
            }
            if upload == "file" {
                manager.uploadTask(with: request, fromFile: file, completionHandler: complete).resume()
            } else {
                manager.uploadTask(with: request, from: body, completionHandler: complete).resume()
            }
            let (response, _) = try await once.value(timeout: 30, file: #filePath, line: #line)
            let requests = server.requests.suffix(LoopbackTestCase.testTransport == .curl ? 2 : 1)
            if LoopbackTestCase.testTransport == .curl {
                // Each transfer opens the file anew: the redirect's request carries the whole body again.
                XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, upload)
                XCTAssertEqual(requests.map(\.path), ["/redirect-to", "/post"], upload)
                XCTAssertEqual(requests.map(\.bodyLength), [body.count, body.count], upload)
                XCTAssertEqual(requests.last?.body, body.prefix(requests.last?.body.count ?? 0), upload)
            } else {
                // URLSession on Linux would follow with an empty body: the 307 is the task's response instead.
                XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 307, upload)
                XCTAssertEqual(requests.map(\.path), ["/redirect-to"], upload)
            }
        }
        XCTAssertFalse(server.requests.contains { $0.path == "/post" && $0.bodyLength != body.count })
        // A 303 turns the upload into a GET: the 308 after it is followed on both transports (no body to lose).
        let inner = "/redirect-to?url=/get&status_code=308".addingPercentEncoding(
            withAllowedCharacters: .alphanumerics)!
        request.url = server.url("/redirect-to?url=\(inner)&status_code=303")
        let once = OnceBox<(URLResponse?, Error?)>()
        manager.uploadTask(with: request, from: body) { response, _, error in once.resolve((response, error)) }.resume()
        let (response, error) = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(server.requests.last?.path, "/get")
    }

    func testMultipartUploadSendsFormPartsAndFile() async throws {
        let manager = makeManager()
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("report body".utf8).write(to: file)
        let transfer = try manager.multipartUpload("post", parameters: ["title": "report"]) { form in
            try form.appendPart(withFileURL: file, name: "file", fileName: "report.txt", mimeType: "text/plain")
        }
        let result = try await transfer.value
        let echo = result.object as? [String: Any]
        XCTAssertEqual((echo?["form"] as? [String: Any])?["title"] as? String, "report")
        XCTAssertEqual((echo?["files"] as? [String: Any])?["file"] as? String, "report body")
    }

    func testCancellingTheAwaitingTaskCancelsTheTransfer() async throws {
        let manager = makeManager()
        let destination = temporaryFile()
        defer { try? FileManager.default.removeItem(at: destination) }
        let transfer = manager.download(URLRequest(url: server.url("/drip?numbytes=100&duration=20")), to: destination)
        let waiter = Task { try await transfer.value }
        try await Task.sleep(nanoseconds: 200_000_000)
        waiter.cancel()
        do {
            _ = try await waiter.value
            XCTFail("a cancelled transfer must throw")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cancelled)
        }
        for await _ in transfer.progress {}  // the progress sequence ends too
    }
}
