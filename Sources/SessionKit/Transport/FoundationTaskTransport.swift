import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSession's own tasks and transport: it trusts the system CA bundle only, cannot enforce a ``SecurityPolicy``,
/// keeps no resume data, and ignores the resource timeout on Linux (the manager enforces it).
struct FoundationTaskTransport: TaskTransport {
    /// Whether the configuration names a SOCKS5 proxy, which URLSession on Linux does not use.
    var hasSOCKSProxy = false

    func refusal(for request: URLRequest, connection: ConnectionOptions) -> NSError? {
        if UnixSocketURL.isUnixSocket(request.url) {
            return URLError(
                .unsupportedURL,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "URLSession cannot reach a Unix domain socket (\(request.url?.absoluteString ?? "")); use "
                        + "Transport.curl.",
                    NSURLErrorFailingURLErrorKey: request.url as Any,
                ]) as NSError
        }
        var unsupported: [String] = []
        if !connection.resolvedAddresses.isEmpty { unsupported.append("resolvedAddresses") }
        if connection.localAddress != nil { unsupported.append("localAddress") }
        if connection.responseHeadTimeout != nil { unsupported.append("timeoutIntervalForResponseHead") }
        if hasSOCKSProxy { unsupported.append("a SOCKS proxy in connectionProxyDictionary") }
        guard !unsupported.isEmpty else { return nil }
        return SessionKitError.session(
            .transportOptionUnsupported,
            "The Foundation transport cannot honour \(unsupported.joined(separator: ", ")) (URLSession on Linux has no "
                + "such setting); use Transport.curl.")
    }

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
