import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// `httpShouldUsePipelining` is deprecated by Foundation, but AFNetworking's request serializer sets it and
// `URLSessionManager`'s archive carries it. SessionKit reaches it through these protocols, whose requirement is not
// deprecated, so that the library builds without warnings (Swift has no way to silence one deprecation warning).

/// A request whose HTTP pipelining flag SessionKit sets.
protocol HTTPPipeliningRequest {
    var httpShouldUsePipelining: Bool { get set }
}

/// A session configuration whose HTTP pipelining flag SessionKit archives.
protocol HTTPPipeliningConfiguration: AnyObject {
    var httpShouldUsePipelining: Bool { get set }
}

extension URLRequest: HTTPPipeliningRequest {}

extension URLSessionConfiguration: HTTPPipeliningConfiguration {}

extension HTTPPipeliningRequest {
    /// `httpShouldUsePipelining`, without the deprecation warning.
    var usesHTTPPipelining: Bool {
        get { httpShouldUsePipelining }
        set { httpShouldUsePipelining = newValue }
    }
}

extension HTTPPipeliningConfiguration {
    /// `httpShouldUsePipelining`, without the deprecation warning.
    var usesHTTPPipelining: Bool {
        get { httpShouldUsePipelining }
        set { httpShouldUsePipelining = newValue }
    }
}
