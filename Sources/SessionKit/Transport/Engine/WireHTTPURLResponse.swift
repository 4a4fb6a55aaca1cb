import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An `HTTPURLResponse` that also keeps its field lines as they came on the wire: in order, with their names as
/// spelled, and a repeated field (two `Set-Cookie` lines) as two lines.
///
/// Foundation's response joins a repeated field into one value under one name (RFC 9110 5.3), which is right for most
/// fields and wrong for `Set-Cookie` (RFC 6265 3: never combined); the HTTP core API hands out swift-http-types'
/// `HTTPFields`, which keep each line, so it reads them from here. To every other caller, and in an archive, it is an
/// `HTTPURLResponse` like any other.
final class WireHTTPURLResponse: HTTPURLResponse, @unchecked Sendable {
    // @unchecked Sendable as its superclass: `fieldLines` is a `let`.

    /// The head's field lines, as received.
    let fieldLines: [(String, String)]

    /// A response whose fields are `fields` (the lines joined by name) and whose lines are `lines`; nil when Foundation
    /// refuses it.
    init?(url: URL, statusCode: Int, httpVersion: String?, fields: [String: String], lines: [(String, String)]) {
        fieldLines = lines
        super.init(url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: fields)
    }

    required init?(coder: NSCoder) {
        fieldLines = []
        super.init(coder: coder)
    }

    /// Archived as Foundation's class, so that any reader of the archive knows it.
    override var classForCoder: AnyClass { HTTPURLResponse.self }
}
