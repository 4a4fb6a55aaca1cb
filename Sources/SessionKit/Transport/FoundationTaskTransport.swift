import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSession's own tasks and transport: it trusts the system CA bundle only, cannot enforce a ``SecurityPolicy``,
/// keeps no resume data, and ignores the resource timeout on Linux (the manager enforces it).
struct FoundationTaskTransport: TaskTransport {
    func refusal(for request: URLRequest, policy: SecurityPolicy) -> NSError? {
        if let refusal = Transport.pinningRefusal(for: request, policy: policy) { return refusal }
        guard
            policy.pinningMode != .none || policy.allowInvalidCertificates || !policy.validatesDomainName
                || policy.trustedRootCertificates != nil
        else {
            return nil
        }
        return SessionKitError.session(
            .policyNotEnforceable,
            "The Foundation transport cannot enforce a SecurityPolicy (URLSession on Linux never shows the server's chain); use Transport.curl."
        )
    }

    var clientIdentityRefusal: NSError? {
        SessionKitError.session(
            .unsupportedByTransport,
            "The Foundation transport cannot present a client certificate (URLSession on Linux has no mutual TLS); "
                + "use Transport.curl, or set no clientIdentity.")
    }

    var resumesDownloads: Bool { false }

    var needsResourceDeadlines: Bool { true }

    func makeTask(
        for source: TaskSource, uploadLength: Int64?, options: TransportTaskOptions, session: URLSession
    )
        -> TransportTask?
    {
        let task: URLSessionTask
        switch source {
        case .data(let request):
            task = session.dataTask(with: request)
        case .uploadData(let request, let data):
            task = session.uploadTask(with: request, from: data)
        case .uploadFile(let request, let fileURL):
            task = session.uploadTask(with: request, fromFile: fileURL)
        case .uploadStream(var request):
            // URLSession on Linux sends every stream body chunked; with a Content-Length header as well, strict
            // servers answer 400. The length still sizes the upload progress.
            request.setValue(nil, forHTTPHeaderField: "Content-Length")
            task = session.uploadTask(withStreamedRequest: request)
        case .download(let request):
            task = session.downloadTask(with: request)
        case .refused:
            return nil
        }
        return TransportTask(task: task, flowControl: nil, writesBodyToFile: false, adoptProgress: { _, _ in })
    }
}
