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
}

/// The body being built: an ordered list of parts framed by a random boundary, CRLF line ends.
final class MultipartFormBody: MultipartFormData {
    /// One part: its header lines and its bytes.
    private struct Part {
        var headers: [(String, String)]
        var body: Data
    }

    let boundary: String
    private let stringEncoding: String.Encoding
    private var parts: [Part] = []

    init(stringEncoding: String.Encoding) {
        self.stringEncoding = stringEncoding
        self.boundary = String(format: "Boundary+%08X%08X", UInt32.random(in: .min ... .max), UInt32.random(in: .min ... .max))
    }

    func appendPart(withFileURL fileURL: URL, name: String) throws {
        let fileName = fileURL.lastPathComponent
        try appendPart(withFileURL: fileURL, name: name, fileName: fileName,
                       mimeType: MIMEType.forPathExtension(fileURL.pathExtension))
    }

    func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws {
        guard fileURL.isFileURL else {
            throw SessionKitError.requestSerialization(.badURL, "Expected a file URL, got \(fileURL.absoluteString).")
        }
        let data: Data
        do {
            data = try Data(contentsOf: fileURL)
        } catch {
            throw SessionKitError.requestSerialization(
                .badURL, "The file \(fileURL.path) cannot be read.", underlying: error)
        }
        appendPart(withFileData: data, name: name, fileName: fileName, mimeType: mimeType)
    }

    func appendPart(with inputStream: InputStream?, name: String, fileName: String, length: Int64, mimeType: String) {
        var data = Data()
        if let inputStream, length > 0 {
            inputStream.open()
            defer { inputStream.close() }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while Int64(data.count) < length {
                let wanted = Int(min(Int64(buffer.count), length - Int64(data.count)))
                let read = inputStream.read(&buffer, maxLength: wanted)
                if read <= 0 { break }
                data.append(buffer, count: read)
            }
        }
        appendPart(withHeaders: fileHeaders(name: name, fileName: fileName, mimeType: mimeType), body: data)
    }

    func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String) {
        appendPart(withHeaders: fileHeaders(name: name, fileName: fileName, mimeType: mimeType), body: data)
    }

    func appendPart(withFormData data: Data, name: String) {
        appendPart(withHeaders: ["Content-Disposition": "form-data; name=\"\(Self.quoted(name))\""], body: data)
    }

    func appendPart(withHeaders headers: [String: String]?, body: Data) {
        let ordered = (headers ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        parts.append(Part(headers: ordered, body: body))
    }

    /// The whole body, final boundary included.
    func encodedData() -> Data {
        var data = Data()
        for part in parts {
            data.append(Data("--\(boundary)\r\n".utf8))
            for (field, value) in part.headers {
                data.append(Data("\(field): \(value)\r\n".utf8))
            }
            data.append(Data("\r\n".utf8))
            data.append(part.body)
            data.append(Data("\r\n".utf8))
        }
        data.append(Data("--\(boundary)--\r\n".utf8))
        return data
    }

    private func fileHeaders(name: String, fileName: String, mimeType: String) -> [String: String] {
        [
            "Content-Disposition": "form-data; name=\"\(Self.quoted(name))\"; filename=\"\(Self.quoted(fileName))\"",
            "Content-Type": mimeType,
        ]
    }

    /// Escapes a quote, a backslash and line breaks inside a quoted header parameter.
    private static func quoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }
}
