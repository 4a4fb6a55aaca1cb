import Foundation

/// The parts of a `multipart/form-data` body, appended inside the `constructingBodyWith` closure of
/// ``HTTPRequestSerializer/multipartFormRequest(withMethod:urlString:parameters:constructingBodyWith:)``.
///
/// ```swift
/// try serializer.multipartFormRequest(withMethod: "POST", urlString: url, parameters: ["title": "cat"]) { form in
///     try form.appendPart(withFileURL: photoURL, name: "photo")
///     form.appendPart(withFormData: Data("1".utf8), name: "version")
/// }
/// ```
public protocol MultipartFormData: AnyObject {
    /// Appends a file part, its file name from the path and its MIME type from the extension.
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain`` for a URL that is not a file URL or a
    ///   file that cannot be read.
    func appendPart(withFileURL fileURL: URL, name: String) throws
    /// Appends a file part with the given file name and MIME type.
    /// - Throws: As ``appendPart(withFileURL:name:)``.
    func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws
    /// Appends `length` bytes read from `inputStream` as a file part.
    func appendPart(with inputStream: InputStream?, name: String, fileName: String, length: Int64, mimeType: String)
    /// Appends `data` as a file part.
    func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String)
    /// Appends `data` as a plain form field.
    func appendPart(withFormData data: Data, name: String)
    /// Appends a part with raw headers and body.
    func appendPart(withHeaders headers: [String: String]?, body: Data)
    /// Paces the upload: each read of the body returns at most `numberOfBytes` bytes and then waits `delay`
    /// seconds, as AFNetworking does for slow links. The wait happens on the thread that reads the body.
    func throttleBandwidth(withPacketSize numberOfBytes: Int, delay: TimeInterval)
}

/// The body being built: an ordered list of parts framed by a random boundary, CRLF line ends. Nothing is read
/// here: files and streams are only checked, and read later, in chunks, by the ``MultipartBodyStream``.
final class MultipartFormBody: MultipartFormData {
    let boundary: String
    private var parts: [MultipartBodyPart] = []
    private var throttle: (packetSize: Int, delay: TimeInterval)?
    /// Why the form cannot be sent: the first part header whose name is not a token or whose value holds CR, LF or
    /// NUL (it would add a header or a part of its own). The serializer throws it once the parts are appended.
    private(set) var refusal: NSError?

    /// Whether no part was appended.
    var isEmpty: Bool { parts.isEmpty }

    init() {
        self.boundary = String(
            format: "Boundary+%08X%08X", UInt32.random(in: .min ... .max), UInt32.random(in: .min ... .max))
    }

    func appendPart(withFileURL fileURL: URL, name: String) throws {
        try appendPart(
            withFileURL: fileURL, name: name, fileName: fileURL.lastPathComponent,
            mimeType: MIMEType.forPathExtension(fileURL.pathExtension))
    }

    func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws {
        guard fileURL.isFileURL else {
            throw SessionKitError.requestSerialization(.badURL, "Expected a file URL, got \(fileURL.absoluteString).")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: fileURL.path, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: fileURL.path),
            let size = (try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size]) as? NSNumber
        else {
            throw SessionKitError.requestSerialization(
                .fileDoesNotExist, "The file \(fileURL.path) does not exist or cannot be read.")
        }
        append(
            headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
            source: .file(fileURL, length: size.int64Value))
    }

    func appendPart(with inputStream: InputStream?, name: String, fileName: String, length: Int64, mimeType: String) {
        let source: MultipartBodyPart.Source = inputStream.map { .stream($0, length: max(0, length)) } ?? .data(Data())
        append(headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType), source: source)
    }

    func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String) {
        append(headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType), source: .data(data))
    }

    func appendPart(withFormData data: Data, name: String) {
        append(headers: [("Content-Disposition", "form-data; name=\"\(Self.quoted(name))\"")], source: .data(data))
    }

    func appendPart(withHeaders headers: [String: String]?, body: Data) {
        append(headers: (headers ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, source: .data(body))
    }

    func throttleBandwidth(withPacketSize numberOfBytes: Int, delay: TimeInterval) {
        throttle = (max(1, numberOfBytes), max(0, delay))
    }

    /// The body, as a stream to be read once.
    func makeStream() -> MultipartBodyStream {
        MultipartBodyStream(parts: parts, boundary: boundary, throttle: throttle)
    }

    private func append(headers: [(String, String)], source: MultipartBodyPart.Source) {
        if let error = HTTPFieldValidation.error(forFields: headers, of: "multipart part header") {
            if refusal == nil { refusal = error }
            return
        }
        parts.append(MultipartBodyPart(headers: headers, source: source))
    }

    private func fileHeaders(name: String, fileName: String, mimeType: String) -> [(String, String)] {
        [
            ("Content-Disposition", "form-data; name=\"\(Self.quoted(name))\"; filename=\"\(Self.quoted(fileName))\""),
            ("Content-Type", mimeType),
        ]
    }

    /// A name or file name inside the quotes of `Content-Disposition`, escaped as the HTML standard's
    /// multipart/form-data encoding says and browsers do: LF as `%0A`, CR as `%0D`, `"` as `%22`, and nothing else
    /// (a backslash escape is read as two characters by most servers' parsers).
    private static func quoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\"", with: "%22")
            .replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }
}
