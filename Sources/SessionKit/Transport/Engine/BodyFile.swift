import Foundation

/// The temporary file a download run as a data task is written to, chunk by chunk, on the delegate queue.
final class BodyFile: @unchecked Sendable {
    // @unchecked Sendable: used on the session's serial delegate queue only.
    private(set) var url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "sessionkit-download-\(UUID().uuidString)")
    private var handle: FileHandle?
    private var error: Error?
    private var kept = false
    /// Bytes in the file.
    private(set) var length: Int64 = 0

    init() {}

    /// Continues the partial file of resume data, `length` bytes long.
    init(resuming file: URL, length: Int64) {
        url = file
        self.length = length
    }

    /// Writes `data` at the end of the file; false once writing failed.
    func append(_ data: Data) -> Bool {
        guard error == nil else { return false }
        do {
            if handle == nil {
                if !FileManager.default.fileExists(atPath: url.path) {
                    guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
                    }
                }
                let opened = try FileHandle(forWritingTo: url)
                try opened.seekToEnd()
                handle = opened
            }
            try handle?.write(contentsOf: data)
            length += Int64(data.count)
            return true
        } catch {
            self.error = error
            return false
        }
    }

    /// Empties the file (the server sent the whole entity instead of the rest).
    func truncate() {
        try? handle?.truncate(atOffset: 0)
        if handle == nil { try? Data().write(to: url) }
        length = 0
    }

    /// Closes the file (creating it empty if no byte came) and returns the write error, if any.
    func close() -> Error? {
        if handle == nil && error == nil { _ = append(Data()) }
        try? handle?.close()
        handle = nil
        return error
    }

    /// Moves the partial file where it survives the task, for resume data; nil when that fails.
    func keep() -> URL? {
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-resume-\(UUID().uuidString)")
        guard (try? FileManager.default.moveItem(at: url, to: kept)) != nil else { return nil }
        url = kept
        self.kept = true
        return kept
    }

    /// Deletes the file if it is still there (not moved to a destination or kept for resuming).
    func remove() {
        if !kept { try? FileManager.default.removeItem(at: url) }
    }
}
