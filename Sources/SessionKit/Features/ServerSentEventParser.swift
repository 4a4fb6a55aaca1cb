import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The event stream interpretation of the WHATWG HTML standard (§9.2.6, "server-sent events"), without I/O: fed the
/// bytes of a `text/event-stream` body in chunks of any size, it returns the events each chunk completed.
///
/// ``ServerSentEvents`` uses it for every connection; use it alone for a body that arrives another way (a POST's
/// ``URLSessionManager/bytes(for:interceptor:)``, a file):
///
/// ```swift
/// var parser = ServerSentEventParser()
/// for try await chunk in streamed.body {
///     for event in try parser.parse(chunk) { handle(event) }
/// }
/// parser.endOfStream()   // an event without its closing blank line is not dispatched
/// ```
///
/// What it implements, as the standard says: UTF-8 decoding (invalid bytes become U+FFFD) with one leading byte order
/// mark skipped; lines ending with CRLF, LF or CR, a CR at the end of one chunk and an LF at the start of the next
/// being one line end; comments (`:` first); a field without a colon taken as a name with an empty value; one space
/// after the colon removed; `data` lines joined with LF; an event dispatched at a blank line, and only when its data
/// is not empty; `event`, `id` (ignored when it holds NUL; it also updates the last event ID of a block without
/// data) and `retry` (ASCII digits only) fields, other fields ignored; what is pending at the end of a stream
/// discarded.
///
/// Memory is bounded by one event: the bytes held for the event being read (its data and type so far, and the line
/// being read) may not pass ``maximumEventSize``.
public struct ServerSentEventParser: Sendable {
    /// The default of ``maximumEventSize``: 1 MiB.
    public static let defaultMaximumEventSize = 1 << 20

    /// The most bytes held for one event: its `data` and `event` values so far plus the line being read (a `data`
    /// line counts with its field name while it is read). Past it ``parse(_:)`` throws
    /// `URLError.dataLengthExceedsMaximum` and drops the event.
    public var maximumEventSize: Int
    /// The last event ID: the `id` of the latest block dispatched (EventSource's "last event ID string"), empty when
    /// none was set. ``ServerSentEvents`` sends it as `Last-Event-ID` when it reconnects.
    public private(set) var lastEventID: String
    /// The reconnection time in milliseconds from the latest valid `retry` field, or nil when the stream sent none.
    /// Values too large for an `Int` are ignored.
    public private(set) var reconnectionTime: Int?

    /// The `id` seen since the last dispatch, which becomes ``lastEventID`` at the next blank line.
    private var lastEventIDBuffer: [UInt8]
    private var dataBuffer: [UInt8] = []
    private var eventTypeBuffer: [UInt8] = []
    /// A `retry` since the last blank line, for the next event's ``ServerSentEvent/retry``.
    private var blockRetry: Int?
    /// The bytes of the line being read, before its line end arrived.
    private var line: [UInt8] = []
    /// The previous chunk ended with CR: an LF starting this one ends no second line.
    private var skipsLeadingLF = false
    /// No line ended yet in this stream: the first line may start with a byte order mark.
    private var atStreamStart = true

    /// A parser for a new stream.
    ///
    /// - Parameters:
    ///   - maximumEventSize: The most bytes held for one event (see ``maximumEventSize``).
    ///   - lastEventID: The last event ID to start from, as when a stream resumes.
    public init(maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize, lastEventID: String = "") {
        self.maximumEventSize = maximumEventSize
        self.lastEventID = lastEventID
        self.lastEventIDBuffer = Array(lastEventID.utf8)
    }

    /// The events of a whole stream, from its first byte to its end (an event without its closing blank line is not
    /// among them): a one-call entry point, for tests and fuzzing.
    ///
    /// - Parameters:
    ///   - stream: The bytes of one `text/event-stream` body.
    ///   - maximumEventSize: The most bytes held for one event.
    /// - Throws: `URLError.dataLengthExceedsMaximum` when an event passes `maximumEventSize`.
    public static func events(
        in stream: Data, maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize
    ) throws -> [ServerSentEvent] {
        var parser = ServerSentEventParser(maximumEventSize: maximumEventSize)
        return try parser.parse(stream)
    }

    /// Reads the next chunk of the stream and returns the events it completed, in order.
    ///
    /// - Parameter chunk: The next bytes of the stream, of any length; they may end anywhere, even inside a UTF-8
    ///   sequence or between the CR and the LF of a line end.
    /// - Throws: `URLError.dataLengthExceedsMaximum` when the event being read passes ``maximumEventSize``; the
    ///   event is dropped, so the parser's memory stays bounded, and the stream should be given up.
    public mutating func parse(_ chunk: Data) throws -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        try parse(chunk, into: &events)
        return events
    }

    /// ``parse(_:)``, appending to `events`: the events completed before an oversized one are kept when it throws.
    mutating func parse(_ chunk: Data, into events: inout [ServerSentEvent]) throws {
        try chunk.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var start = 0
            if skipsLeadingLF, let first = bytes.first {
                skipsLeadingLF = false
                if first == Self.lf { start = 1 }
            }
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                guard byte == Self.lf || byte == Self.cr else {
                    index += 1
                    continue
                }
                try append(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                if let event = endLine() { events.append(event) }
                if byte == Self.cr {
                    // The line ends at the CR now, so that its event is not held back until the next chunk shows
                    // whether an LF follows.
                    if index + 1 < bytes.count {
                        if bytes[index + 1] == Self.lf { index += 1 }
                    } else {
                        skipsLeadingLF = true
                    }
                }
                index += 1
                start = index
            }
            try append(UnsafeRawBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
    }

    /// The stream ended (or the connection dropped): what is pending — the line being read and an event without its
    /// closing blank line — is discarded, and the next byte starts a new stream (which may start with a byte order
    /// mark). ``lastEventID`` and ``reconnectionTime`` stay: they carry over to the next connection.
    public mutating func endOfStream() {
        // The `id` of a block that never ended is dropped with it: the stream resumes from the last dispatched one,
        // so the server sends that block again (browsers keep the last event ID the same way).
        lastEventIDBuffer = Array(lastEventID.utf8)
        discardPendingEvent()
        skipsLeadingLF = false
        atStreamStart = true
    }

    // MARK: - Lines

    private static let lf = UInt8(ascii: "\n")
    private static let cr = UInt8(ascii: "\r")
    private static let colon = UInt8(ascii: ":")
    private static let space = UInt8(ascii: " ")
    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Adds bytes to the line being read, within the event's size bound.
    private mutating func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard !bytes.isEmpty else { return }
        let held = line.count + dataBuffer.count + eventTypeBuffer.count
        guard held <= maximumEventSize, bytes.count <= maximumEventSize - held else {
            discardPendingEvent()
            throw URLError(
                .dataLengthExceedsMaximum,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "A server-sent event exceeded the maximum event size (\(maximumEventSize) bytes); the event "
                        + "was discarded. Raise `maximumEventSize` if such events are expected."
                ])
        }
        line.append(contentsOf: bytes)
    }

    /// The line being read ended: interprets it, and returns the event a blank line dispatched, if any.
    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: line.count <= 4096) }
        var content = line[...]
        if atStreamStart {
            atStreamStart = false
            if content.starts(with: Self.byteOrderMark) { content = content.dropFirst(Self.byteOrderMark.count) }
        }
        guard let first = content.first else { return dispatch() }
        guard first != Self.colon else { return nil }  // a comment
        let name: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = content.firstIndex(of: Self.colon) {
            name = content[..<colon]
            value = content[(colon + 1)...]
            if value.first == Self.space { value = value.dropFirst() }
        } else {
            name = content
            value = []
        }
        process(name: name, value: value)
        return nil
    }

    /// One field, as the standard's "process the field" steps say. The names are compared as bytes: they are ASCII,
    /// and no invalid byte decodes to an ASCII character.
    private mutating func process(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>) {
        if name.elementsEqual("data".utf8) {
            dataBuffer.append(contentsOf: value)
            dataBuffer.append(Self.lf)
        } else if name.elementsEqual("event".utf8) {
            eventTypeBuffer = Array(value)
        } else if name.elementsEqual("id".utf8) {
            if !value.contains(0) { lastEventIDBuffer = Array(value) }
        } else if name.elementsEqual("retry".utf8) {
            guard let milliseconds = Self.milliseconds(value) else { return }
            reconnectionTime = milliseconds
            blockRetry = milliseconds
        }
    }

    /// `value` as a base-ten integer when it is nothing but ASCII digits and fits an `Int`.
    private static func milliseconds(_ value: ArraySlice<UInt8>) -> Int? {
        guard !value.isEmpty else { return nil }
        var result = 0
        for byte in value {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times10, overflowA) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            guard !overflowA && !overflowB else { return nil }
            result = sum
        }
        return result
    }

    /// A blank line: the standard's "dispatch the event" steps.
    private mutating func dispatch() -> ServerSentEvent? {
        lastEventID = String(decoding: lastEventIDBuffer, as: UTF8.self)
        let retry = blockRetry
        blockRetry = nil
        guard !dataBuffer.isEmpty else {
            eventTypeBuffer.removeAll()
            return nil
        }
        if dataBuffer.last == Self.lf { dataBuffer.removeLast() }
        let event = ServerSentEvent(
            id: lastEventID.isEmpty ? nil : lastEventID,
            event: eventTypeBuffer.isEmpty ? nil : String(decoding: eventTypeBuffer, as: UTF8.self),
            data: String(decoding: dataBuffer, as: UTF8.self), retry: retry)
        dataBuffer.removeAll(keepingCapacity: dataBuffer.count <= 4096)
        eventTypeBuffer.removeAll()
        return event
    }

    private mutating func discardPendingEvent() {
        line.removeAll()
        dataBuffer.removeAll()
        eventTypeBuffer.removeAll()
        blockRetry = nil
    }
}
