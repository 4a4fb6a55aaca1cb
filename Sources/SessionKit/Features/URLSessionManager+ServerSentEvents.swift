import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionManager {
    /// The Server-Sent Events of `request` (a `text/event-stream` resource), as an async sequence that reconnects as
    /// a browser's `EventSource` does, resuming with `Last-Event-ID`. Nothing is sent until the first event is asked
    /// for; every connection goes through this manager's request pipeline (interceptors, event monitors, security
    /// policy, cookies, redirects). See ``ServerSentEvents`` for reconnection, errors and limits.
    ///
    /// ```swift
    /// for try await event in manager.events(for: URLRequest(url: url)) {
    ///     print(event.event ?? "message", event.data)
    /// }
    /// ```
    ///
    /// - Parameter request: The stream's request, usually a GET. `Accept` and `Cache-Control` are set for an event
    ///   stream; a `Last-Event-ID` it carries resumes a stream read before.
    /// - Returns: The events; each iterator has a connection of its own.
    public func events(for request: URLRequest) -> ServerSentEvents {
        ServerSentEvents(manager: self, request: request)
    }
}
