import Foundation

/// One event of a Server-Sent Events stream (`text/event-stream`), as ``ServerSentEvents`` or
/// ``ServerSentEventParser`` dispatch it: what a browser's `EventSource` hands to its listeners as a `MessageEvent`.
///
/// ```swift
/// for try await event in manager.events(for: URLRequest(url: url)) {
///     switch event.event {
///     case nil: print("message:", event.data)          // the stream named no type: EventSource's "message"
///     case "price"?: updatePrice(event.data)
///     default: break
///     }
/// }
/// ```
public struct ServerSentEvent: Sendable, Equatable {
    /// The stream's last event ID when the event was dispatched: the value of the latest `id` field, which stays until
    /// another `id` field replaces it (EventSource's `lastEventId`), so an event without an `id` field of its own
    /// carries the one before it. Nil while the last event ID is empty (never set, or reset by an empty `id:`).
    public var id: String?
    /// The event type from the `event` field; nil when the event named none (or an empty one), the type EventSource
    /// calls `"message"`.
    public var event: String?
    /// The event's `data` lines joined with a line feed (U+000A), without a line feed at the end.
    public var data: String
    /// The reconnection time in milliseconds that a `retry` field set between the previous event and this one, or nil.
    /// ``ServerSentEvents`` applies it whether or not an event follows it; this field only reports it.
    public var retry: Int?

    /// An event.
    ///
    /// - Parameters:
    ///   - id: The last event ID at dispatch, nil when empty.
    ///   - event: The event type, nil for the default (`message`).
    ///   - data: The event's data.
    ///   - retry: The reconnection time in milliseconds that the event's block set, if any.
    public init(id: String? = nil, event: String? = nil, data: String, retry: Int? = nil) {
        self.id = id
        self.event = event
        self.data = data
        self.retry = retry
    }
}
