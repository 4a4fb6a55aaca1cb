import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a finished download goes: the task's own destination closure, unless the manager-wide one answered.
///
/// Used for both transports' downloads: the file URLSession wrote (Foundation) and the one the curl transport's
/// ``FileBodySink`` wrote.
struct DownloadDestination {
    /// The task's destination, asked with the temporary file and the response; nil when the caller gave none.
    let destination: (@Sendable (URL, URLResponse) -> URL)?

    /// Moves the download at `location` to `override` when set, else where ``destination`` says. A move posts
    /// `sessionKitDownloadTaskDidMoveFileSuccessfully` or `sessionKitDownloadTaskDidFailToMoveFile`, as AFNetworking
    /// does. Returns the file's new place, or the error of a failed move; both nil when nobody wanted the file.
    func move(_ location: URL, of task: URLSessionTask, override: URL?) -> (fileURL: URL?, error: NSError?) {
        let target: URL
        if let override {
            target = override
        } else if let destination, let response = task.response {
            target = destination(location, response)
        } else {
            return (nil, nil)
        }
        do {
            try FileManager.default.moveItem(at: location, to: target)
            NotificationCenter.default.post(name: .sessionKitDownloadTaskDidMoveFileSuccessfully, object: task)
            return (target, nil)
        } catch {
            let moveError = SessionKitError.session(
                .cannotMoveDownloadedFile,
                "The downloaded file could not be moved to \(target.path): \(error.localizedDescription)",
                underlying: error)
            NotificationCenter.default.post(
                name: .sessionKitDownloadTaskDidFailToMoveFile, object: task, userInfo: (error as NSError).userInfo)
            return (nil, moveError)
        }
    }
}
