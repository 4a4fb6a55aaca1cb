import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A task's response head as its transport reported it, with Foundation's `URLResponse` for it built only when some
/// caller asks.
///
/// Building an `HTTPURLResponse` costs FoundationNetworking a capitalization and a locale-aware comparison of every
/// field name, and a parse of `Content-Type`: about 75k instructions for a five-field head, a fifth of a small GET.
/// The HTTP core API never needs one (it hands out `HTTPResponse`, read from the lines), nor does the engine to
/// deliver a response no one holds back; the task's `response`, the closure overrides, the serializers and the cache
/// build it on first use, once, from the same lines. A response that was a Foundation object from the start (the
/// Foundation transport's, a stored or held one) is kept as it is.
final class ReceivedResponse: @unchecked Sendable {
    // @unchecked Sendable: `source` is a `let`; the built response lives in a `Mutex` (inline: no lock object to
    // allocate per response).

    private enum Source {
        /// A head the curl transport read.
        case wire(CurlTransfer.ResponseHead)
        /// A response that came as a Foundation object.
        case foundation(URLResponse)
    }

    private let source: Source
    /// The response built from a wire head, once asked for.
    private let built = Mutex<URLResponse?>(nil)

    /// The HTTP status code (0 for a response that is not HTTP).
    let statusCode: Int
    /// The body's announced length as Foundation computes it (`Content-Length`, -1 when absent or not a number).
    let expectedContentLength: Int64

    /// A head read from the wire; its `HTTPURLResponse` is built when first asked for.
    init(_ head: CurlTransfer.ResponseHead) {
        source = .wire(head)
        statusCode = head.statusCode
        expectedContentLength = Self.expectedContentLength(of: head.lines)
    }

    /// A response that is a Foundation object already.
    init(_ response: URLResponse) {
        source = .foundation(response)
        statusCode = (response as? HTTPURLResponse)?.statusCode ?? 0
        expectedContentLength = response.expectedContentLength
    }

    /// The response as Foundation's API hands it out (built from the head on first use, then the same object).
    var urlResponse: URLResponse {
        switch source {
        case .foundation(let response):
            return response
        case .wire(let head):
            return built.withLock { built in
                if let built { return built }
                // Foundation's initializer never refuses a head; a plain response keeps the URL should it ever do so.
                let response =
                    head.makeResponse()
                    ?? URLResponse(url: head.url, mimeType: nil, expectedContentLength: -1, textEncodingName: nil)
                built = response
                return response
            }
        }
    }

    /// Whether ``urlResponse`` exists yet (it always does for a response that came as a Foundation object).
    var isBuilt: Bool {
        if case .foundation = source { return true }
        return built.withLock { $0 != nil }
    }

    /// ``urlResponse`` when it is an HTTP response.
    var httpResponse: HTTPURLResponse? { urlResponse as? HTTPURLResponse }

    /// Whether this is an HTTP response, without building Foundation's object: a head read from the wire always is
    /// (its status line was HTTP's).
    var isHTTP: Bool {
        switch source {
        case .wire: return true
        case .foundation(let response): return response is HTTPURLResponse
        }
    }

    /// ``httpResponse``, or, should Foundation ever refuse to build one from a wire head, a response with its URL
    /// and status alone: for an API whose type promises an `HTTPURLResponse` for an HTTP response.
    var httpResponseOrMinimal: HTTPURLResponse {
        if let response = httpResponse { return response }
        let url: URL
        switch source {
        case .wire(let head): url = head.url
        case .foundation(let response): url = response.url ?? URL(fileURLWithPath: "/")
        }
        // FoundationNetworking's failable initializer has no path that fails.
        return HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: nil, headerFields: nil)!
    }

    /// The field lines as received, in order, a repeated field as several lines; nil when the response came as a
    /// Foundation object that does not keep them.
    var fieldLines: [(String, String)]? {
        switch source {
        case .wire(let head): return head.lines
        case .foundation(let response): return (response as? WireHTTPURLResponse)?.fieldLines
        }
    }

    /// Whether the head has a field named `name` (any case), without building the Foundation response.
    func hasField(_ name: String) -> Bool {
        if let lines = fieldLines { return lines.contains { $0.0.equalsIgnoringASCIICase(name) } }
        return httpResponse?.value(forHTTPHeaderField: name) != nil
    }

    /// The response of `task` as its transport holds it: the curl transport's unbuilt head, or the task's
    /// Foundation response.
    static func of(_ task: URLSessionTask) -> ReceivedResponse? {
        if let task = task.asCurlTask { return task.driver.receivedResponse }
        return task.response.map(ReceivedResponse.init)
    }

    /// `Content-Length` as `HTTPURLResponse` reads it: the value of the field (repeated lines joined with ", ", which
    /// is then no number) as an `Int64`, else -1.
    private static func expectedContentLength(of lines: [(String, String)]) -> Int64 {
        var value: String?
        for (name, line) in lines where name.equalsIgnoringASCIICase("Content-Length") {
            value = value.map { $0 + ", " + line } ?? line
        }
        return value.flatMap { Int64($0) } ?? -1
    }
}
