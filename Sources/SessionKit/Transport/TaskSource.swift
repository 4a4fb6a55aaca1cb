import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a task is made of: its request and where its body comes from, or the reason it must fail.
enum TaskSource {
    case data(URLRequest)
    case uploadData(URLRequest, Data)
    case uploadFile(URLRequest, URL)
    case uploadStream(URLRequest)
    case download(URLRequest)
    /// A task that must fail with this error as soon as it is resumed.
    case refused(NSError, download: Bool)

    /// The request, unless the source is a refusal.
    var request: URLRequest? {
        switch self {
        case .data(let request), .uploadData(let request, _), .uploadFile(let request, _), .uploadStream(let request),
            .download(let request):
            return request
        case .refused:
            return nil
        }
    }

    /// An upload of `upload` with `request`, or a data task of `request` when there is nothing to upload.
    static func sending(_ request: URLRequest, upload: UploadBody?) -> TaskSource {
        switch upload {
        case nil:
            return .data(request)
        case .httpBody?:
            guard let body = request.httpBody else { return .data(request) }
            var request = request
            request.httpBody = nil
            return .uploadData(request, body)
        case .file(let url)?:
            return .uploadFile(request, url)
        }
    }

    /// Whether the task is an upload task.
    var isUpload: Bool {
        switch self {
        case .uploadData, .uploadFile, .uploadStream: return true
        default: return false
        }
    }

    /// The same source sending `request` instead (a refused source stays as it is).
    func replacingRequest(with request: URLRequest) -> TaskSource {
        switch self {
        case .data: return .data(request)
        case .uploadData(_, let data): return .uploadData(request, data)
        case .uploadFile(_, let url): return .uploadFile(request, url)
        case .uploadStream: return .uploadStream(request)
        case .download: return .download(request)
        case .refused: return self
        }
    }

    /// Whether the task is a download.
    var isDownload: Bool {
        switch self {
        case .download, .refused(_, download: true): return true
        default: return false
        }
    }
}

/// How the pipeline sends a request's body as an upload task (the HTTP core API's bodies).
enum UploadBody: Sendable {
    /// The request's `httpBody` as it is after the adapters (which see it, and may sign or change it), sent as an
    /// upload task's data.
    case httpBody
    /// A file, read anew for each attempt.
    case file(URL)
}
