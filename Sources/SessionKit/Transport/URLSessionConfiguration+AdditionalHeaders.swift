import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionConfiguration {
    /// The configuration's `httpAdditionalHeaders` as the fields SessionKit sends: the entries whose name and value
    /// are strings (swift-corelibs-foundation stops the process when a value of another type is set, so there are no
    /// others on Linux; one that came some other way would be ignored).
    ///
    /// The one reading of them: what is checked before a task is made (`HTTPFieldValidation`), what the curl transport
    /// adds to each request and what a WebSocket's upgrade request carries are the same fields.
    var additionalHeaderFields: [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in httpAdditionalHeaders ?? [:] {
            if let name = name.base as? String, let value = value as? String { fields[name] = value }
        }
        return fields
    }
}
