import Foundation

/// The connection lifecycle of one iteration of ``ServerSentEvents``, without I/O: what a response head means, when to
/// reconnect and after how long, when to give up. The iterator performs what it returns.
///
/// A connection counts as a failure when it brought no byte of an event stream: the request failed, or the stream
/// ended (or dropped) before its first byte. A connection that brought bytes resets the count. Past
/// `maximumReconnectionAttempts` failures in a row the iteration gives up; until then each failure doubles the wait
/// (the WHATWG standard allows such a back-off), which is capped at ``maximumDelay``.
struct EventStreamLifecycle: Sendable {
    enum State: Equatable {
        /// Waiting this many seconds before the next connection (0 for the first one).
        case waiting(TimeInterval)
        /// A request is on its way; no response head yet.
        case connecting
        /// The stream is being read; `receivedBytes` once any byte of it arrived.
        case open(receivedBytes: Bool)
        /// The iteration ended: the server asked so (204), a response was refused, or it gave up.
        case finished
    }

    /// What a response head means.
    enum Verdict: Equatable {
        /// An event stream: read it.
        case read
        /// 204 No Content: the server asks the client not to reconnect; the sequence ends without an error.
        case end
        /// A status other than 200 (or 204): the sequence ends with the status's error, as the WHATWG's "fail the
        /// connection" says of any other status, 201 and 205 included.
        case refuseStatus
        /// A 200 that is not `text/event-stream`: the sequence ends with a content-type error.
        case refuseContentType
    }

    /// What to do once a connection ended.
    enum Next: Equatable {
        /// Connect again after this many seconds.
        case reconnect(after: TimeInterval)
        /// Stop: too many connections in a row brought nothing.
        case giveUp
    }

    /// The longest wait before a reconnection, whatever the server's `retry` or the back-off: one hour.
    static let maximumDelay: TimeInterval = 3600
    /// The jitter added to a wait: up to this fraction of it, so that clients cut off together do not come back
    /// together.
    static let jitterFraction = 0.2

    private(set) var state = State.waiting(0)
    /// Connections in a row that brought nothing.
    private(set) var consecutiveFailures = 0
    /// Failures in a row after which the iteration gives up.
    let maximumReconnectionAttempts: Int
    /// The reconnection time in seconds: the caller's default until a `retry` field replaces it.
    var reconnectionTime: TimeInterval

    init(reconnectionTime: TimeInterval, maximumReconnectionAttempts: Int) {
        self.reconnectionTime = reconnectionTime
        self.maximumReconnectionAttempts = maximumReconnectionAttempts
    }

    /// The request of the next connection is being sent.
    mutating func connecting() {
        state = .connecting
    }

    /// The response head arrived.
    mutating func responseArrived(status: Int, contentType: String?) -> Verdict {
        let verdict: Verdict
        if status == 204 {
            verdict = .end
        } else if status != 200 {
            verdict = .refuseStatus
        } else if !Self.isEventStream(contentType) {
            verdict = .refuseContentType
        } else {
            verdict = .read
        }
        state = verdict == .read ? .open(receivedBytes: false) : .finished
        return verdict
    }

    /// Bytes of the stream arrived: the connection is not a failure.
    mutating func receivedBytes() {
        guard case .open(false) = state else { return }
        state = .open(receivedBytes: true)
        consecutiveFailures = 0
    }

    /// The connection ended — the request failed with an error worth retrying, the stream ended, or it dropped.
    ///
    /// - Parameter jitter: A number in `0..<1` that picks the jitter (random in use, fixed in tests).
    mutating func connectionEnded(jitter: Double) -> Next {
        if state != .open(receivedBytes: true) { consecutiveFailures += 1 }
        guard consecutiveFailures <= maximumReconnectionAttempts else {
            state = .finished
            return .giveUp
        }
        // 1×, 2×, 4×… the reconnection time after failures; the exponent is capped so that nothing overflows.
        let backOff = Double(1 << min(max(consecutiveFailures - 1, 0), 16))
        let time = reconnectionTime.isFinite ? max(reconnectionTime, 0) : Self.maximumDelay
        let base = min(time * backOff, Self.maximumDelay)
        let fraction = jitter.isFinite ? min(max(jitter, 0), 1) : 0
        let delay = min(base + base * Self.jitterFraction * fraction, Self.maximumDelay)
        state = .waiting(delay)
        return .reconnect(after: delay)
    }

    /// The iteration ended for another reason (cancelled, an error that retrying cannot mend, an oversized event).
    mutating func finish() {
        state = .finished
    }

    /// Whether a `Content-Type` value names `text/event-stream` (parameters such as `charset` aside).
    static func isEventStream(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let essence = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return essence.trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream"
    }
}
