import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The lifecycle of one stream task (``SessionStreamTask``), as a value: its phase, its queued reads and writes, the
/// bytes received and not yet read, and which directions are closed. Each method returns what its caller must do
/// (``Step``); the driver performs it, and the engine thread does the I/O the machine asks for (``nextIO(readBlocked:writeBlocked:)``).
///
/// Reads and writes each have one FIFO; `closeRead` and `closeWrite` are barriers in theirs, and an upgrade to TLS
/// (`startSecureConnection` after plain operations, STARTTLS) is a barrier in both: the handshake starts once every
/// operation queued before it is done, and the operations queued after it wait for the handshake. Every operation gets
/// exactly one ``Completion``: when it is satisfied, when its deadline passes (`URLError.timedOut`), or when the task
/// ends (cancelled, failed). The task ends once: on cancel, on an error (an upgrade's handshake past its deadline is
/// one), or when both directions are closed.
struct StreamLifecycle {
    /// Where the connection is.
    enum Phase: Equatable {
        /// Resumed or not, no connection yet: it opens when the first operation comes after `resume`.
        case idle
        case connecting
        case open
        /// Ended: nil when both directions closed, else why.
        case ended(URLError?)
    }

    /// A queued read: it completes once `minimum` bytes (at least one) are there, with at most `maximum`.
    struct Read: Equatable {
        let id: Int
        let minimum: Int
        let maximum: Int
        /// Monotonic nanoseconds after which it fails with `.timedOut`; nil for never.
        let deadline: UInt64?
    }

    /// A queued write and how much of it went out.
    struct Write: Equatable {
        let id: Int
        let data: Data
        var sent = 0
        let deadline: UInt64?
        /// Whether a send of it would have blocked: on TLS, OpenSSL then holds a record of its bytes that the next
        /// send must repeat, so the write can no longer be dropped.
        var blocked = false
    }

    /// An entry of a direction's FIFO: an operation, the close barrier, or the TLS upgrade barrier.
    enum Entry<Operation: Equatable>: Equatable {
        case operation(Operation)
        case close
        case upgrade
    }

    /// What the task reports, in order, on the delegate queue.
    enum Completion: Equatable {
        case read(id: Int, data: Data?, atEOF: Bool, error: URLError?)
        case write(id: Int, error: URLError?)
        /// The read side closed: the peer's end of stream, or `closeRead` once earlier reads were done.
        case readClosed
        /// The write side closed: `closeWrite` once earlier writes were sent.
        case writeClosed
        /// The task ended, exactly once.
        case finished(URLError?)
    }

    /// What the caller must do after a transition.
    struct Step: Equatable {
        var completions: [Completion] = []
        /// Open the connection (plain or TLS, ``isSecure``) now.
        var connect = false
        /// The engine thread has I/O to do, or the connection to release.
        var wake = false
    }

    /// The I/O the engine thread should do next.
    enum IO: Equatable {
        case none
        /// Receive at most this many bytes.
        case receive(Int)
        /// Send these bytes (the unsent rest of the first write).
        case send(Data)
        /// Shut the socket's write side (`SHUT_WR`).
        case shutdownWrite
        /// Run (a step of) the TLS handshake of an upgrade.
        case handshake
        /// The task ended: remove the connection from the engine.
        case release
    }

    /// What the engine thread's I/O produced.
    enum IOEvent: Equatable {
        case received(Data)
        /// The peer closed its side: end of stream.
        case endOfStream
        case sent(Int)
        /// Sending the first write would have blocked.
        case sendBlocked
        case shutDownWrite
        /// Shutting the write side failed with bytes still unread: after the peer's close, a byte sent to it (the
        /// upgrade's `close_notify`) is answered with a reset, which makes the shutdown fail. The read side tells
        /// which it was: the peer's end of stream behind those bytes, or a broken connection.
        case writeShutdownFailed(URLError)
        /// The upgrade's handshake started at this time (monotonic nanoseconds): its deadline runs from then.
        case handshakeStarted(at: UInt64)
        /// The upgrade's handshake completed: the stream is TLS from now on.
        case secured
        case failed(URLError)
    }

    private(set) var phase = Phase.idle
    /// Tasks start suspended, as URLSession's do.
    private(set) var isSuspended = true
    /// Whether the stream is TLS: from the start (``startSecureConnection(error:)`` came before any operation), or
    /// since its upgrade.
    private(set) var isSecure = false
    /// Set when `startSecureConnection` came after a direction was closed: every later operation fails with it.
    private var upgradeRefusal: URLError?
    private var anyOperationQueued = false
    private var reads: [Entry<Read>] = []
    private var writes: [Entry<Write>] = []
    /// Bytes received and not yet handed to a read.
    private var inbox = StreamInbox()
    private var endOfStream = false
    private var readClosed = false
    private var writeClosed = false
    /// Set when the user closed the read side: later reads get the end of stream at once.
    private var readClosedByUser = false
    private(set) var bytesReceived: Int64 = 0
    private(set) var bytesSent: Int64 = 0
    /// How long the TLS handshake of an upgrade may take, in nanoseconds.
    private let handshakeTimeout: UInt64
    /// When the running handshake of an upgrade fails with `.timedOut`: without it, a peer that never answers the
    /// ClientHello would hold the stream and its operations forever (their own timeouts may be none).
    private var handshakeDeadline: UInt64?

    /// A lifecycle whose upgrade handshake (STARTTLS) may take `handshakeTimeout` seconds, as libcurl's connect
    /// timeout bounds the handshake of a stream that is TLS from the start: the configuration's request timeout, or
    /// libcurl's default of 300 s when that is not a positive number of seconds libcurl accepts.
    init(handshakeTimeout: TimeInterval = 0) {
        let accepted = handshakeTimeout > 0 && handshakeTimeout < TimeInterval(Int32.max / 1000)
        self.handshakeTimeout = UInt64((accepted ? handshakeTimeout : 300) * 1e9)
    }

    /// The state a `URLSessionTask` reports.
    var taskState: URLSessionTask.State {
        if case .ended = phase { return .completed }
        return isSuspended ? .suspended : .running
    }

    /// The error the task ended with, if it ended with one.
    var error: URLError? {
        if case .ended(let error) = phase { return error }
        return nil
    }

    private var hasEnded: Bool {
        if case .ended = phase { return true }
        return false
    }

    // MARK: - Calls of the task (any thread, under the driver's lock)

    /// Starts or continues the task; false when it was not suspended.
    mutating func resume() -> (Step, changed: Bool) {
        guard isSuspended, !hasEnded else { return (Step(), false) }
        isSuspended = false
        return (advance(), true)
    }

    /// Holds the task's I/O (queued operations wait; their deadlines still run); false when it was suspended or ended.
    mutating func suspend() -> Bool {
        guard !isSuspended, !hasEnded else { return false }
        isSuspended = true
        return true
    }

    mutating func read(_ read: Read) -> Step {
        if let refusal = newOperationRefusal {
            return Step(completions: [.read(id: read.id, data: nil, atEOF: false, error: refusal)])
        }
        if hasEnded {
            return Step(completions: [.read(id: read.id, data: Data(), atEOF: true, error: nil)])
        }
        anyOperationQueued = true
        reads.append(.operation(read))
        return advance()
    }

    mutating func write(_ write: Write) -> Step {
        if let refusal = newOperationRefusal {
            return Step(completions: [.write(id: write.id, error: refusal)])
        }
        if hasEnded || writeClosed || writes.contains(.close) {
            return Step(completions: [
                .write(
                    id: write.id,
                    error: Self.error(.networkConnectionLost, "The stream's write side is closed; nothing was sent."))
            ])
        }
        anyOperationQueued = true
        writes.append(.operation(write))
        return advance()
    }

    mutating func closeRead() -> Step {
        guard !hasEnded, !readClosedByUser else { return Step() }
        readClosedByUser = true
        anyOperationQueued = true
        reads.append(.close)
        return advance()
    }

    mutating func closeWrite() -> Step {
        guard !hasEnded, !writeClosed, !writes.contains(.close) else { return Step() }
        anyOperationQueued = true
        writes.append(.close)
        return advance()
    }

    /// TLS from the start when nothing was queued before; otherwise an upgrade of the plain stream (STARTTLS) once
    /// the operations queued before are done. A stream with a closed direction cannot be upgraded: every later
    /// operation fails with `error`.
    mutating func startSecureConnection(error: URLError) -> Step {
        guard !hasEnded, !isSecure, !reads.contains(.upgrade) else { return Step() }
        if !anyOperationQueued && phase == .idle {
            isSecure = true
            return advance()
        }
        if writeClosed || writes.contains(.close) || readClosed || readClosedByUser {
            upgradeRefusal = upgradeRefusal ?? error
            return Step()
        }
        reads.append(.upgrade)
        writes.append(.upgrade)
        return advance()
    }

    /// Ends the task: every pending operation completes with `URLError.cancelled`.
    mutating func cancel() -> Step {
        end(with: Self.error(.cancelled, "The stream task was cancelled."))
    }

    // MARK: - Timeouts (engine thread)

    /// Fails the operations whose deadline is `now` or earlier. A write that times out once part of it was sent (or,
    /// on TLS, once OpenSSL built a record of it) ends the task: the stream would be out of step with the peer; so
    /// does an upgrade's handshake past its deadline, half done.
    mutating func expire(now: UInt64) -> Step {
        guard !hasEnded else { return Step() }
        if let handshakeDeadline, handshakeDeadline <= now {
            return end(with: Self.error(.timedOut, "The TLS handshake of the upgrade got no answer in time."))
        }
        for entry in writes {
            guard case .operation(let write) = entry, let deadline = write.deadline, deadline <= now,
                write.sent > 0 || (isSecure && write.blocked)
            else { continue }
            return end(
                with: Self.error(
                    .timedOut,
                    "A write timed out after part of it went out; the stream is out of step, so the task ended."))
        }
        var step = Step()
        reads.removeAll { entry in
            guard case .operation(let read) = entry, let deadline = read.deadline, deadline <= now else { return false }
            step.completions.append(
                .read(id: read.id, data: nil, atEOF: false, error: Self.error(.timedOut, "The read timed out.")))
            return true
        }
        writes.removeAll { entry in
            guard case .operation(let write) = entry, let deadline = write.deadline, deadline <= now else {
                return false
            }
            step.completions.append(
                .write(
                    id: write.id, error: Self.error(.timedOut, "The write timed out; its unsent bytes were dropped.")))
            return true
        }
        guard !step.completions.isEmpty else { return step }
        let next = advance()
        step.completions += next.completions
        step.wake = step.wake || next.wake
        return step
    }

    /// The earliest deadline of a queued operation or of the running handshake.
    var nextDeadline: UInt64? {
        let readDeadlines = reads.compactMap { entry -> UInt64? in
            if case .operation(let read) = entry { return read.deadline }
            return nil
        }
        let writeDeadlines = writes.compactMap { entry -> UInt64? in
            if case .operation(let write) = entry { return write.deadline }
            return nil
        }
        return (readDeadlines + writeDeadlines + [handshakeDeadline].compactMap { $0 }).min()
    }

    // MARK: - The connection (engine thread)

    /// The connection opened (nil) or could not be opened.
    mutating func connected(_ error: URLError?) -> Step {
        guard phase == .connecting else { return Step() }
        if let error { return end(with: error) }
        phase = .open
        return advance()
    }

    /// The next I/O to do; `readBlocked`/`writeBlocked` say the socket would block in that direction now.
    func nextIO(readBlocked: Bool, writeBlocked: Bool) -> IO {
        if hasEnded { return .release }
        guard phase == .open, !isSuspended else { return .none }
        if reads.first == .upgrade && writes.first == .upgrade {
            // A handshake waiting for the socket marks both directions blocked.
            return readBlocked || writeBlocked ? .none : .handshake
        }
        if !writeBlocked, let first = writes.first {
            switch first {
            case .operation(let write) where write.sent < write.data.count:
                // A slice: it shares the write's bytes rather than copying them on every attempt.
                return .send(write.data[(write.data.startIndex + write.sent)...])
            case .close:
                return .shutdownWrite
            default:
                break
            }
        }
        if !readBlocked, !endOfStream, case .operation(let read)? = reads.first, inbox.count < read.maximum {
            return .receive(read.maximum - inbox.count)
        }
        return .none
    }

    /// Whether the engine must wait for the socket to become readable / writable.
    var wantsReadable: Bool {
        guard phase == .open, !isSuspended, !endOfStream, case .operation? = reads.first else { return false }
        return true
    }

    var wantsWritable: Bool {
        guard phase == .open, !isSuspended, case .operation? = writes.first else { return false }
        return true
    }

    mutating func handle(_ event: IOEvent) -> Step {
        guard phase == .open else { return Step() }
        switch event {
        case .received(let data):
            bytesReceived += Int64(data.count)
            inbox.append(data)
        case .endOfStream:
            endOfStream = true
        case .sent(let count):
            bytesSent += Int64(count)
            if case .operation(var write)? = writes.first {
                write.sent += count
                writes[0] = .operation(write)
            }
        case .handshakeStarted(let now):
            handshakeDeadline = handshakeDeadline ?? now + handshakeTimeout
            return Step()
        case .secured:
            if reads.first == .upgrade { reads.removeFirst() }
            if writes.first == .upgrade { writes.removeFirst() }
            isSecure = true
            handshakeDeadline = nil
        case .sendBlocked:
            if case .operation(var write)? = writes.first, !write.blocked {
                write.blocked = true
                writes[0] = .operation(write)
            }
            return Step()
        case .writeShutdownFailed(let error):
            // Bytes the user gave up reading (`closeRead`) cannot tell the peer's end from a broken connection.
            guard endOfStream || !readClosedByUser else { return end(with: error) }
            return handle(.shutDownWrite)
        case .shutDownWrite:
            if writes.first == .close { writes.removeFirst() }
            writeClosed = true
            var step = Step(completions: [.writeClosed])
            let next = advance()
            step.completions += next.completions
            step.wake = next.wake
            return step
        case .failed(let error):
            return end(with: error)
        }
        return advance()
    }

    // MARK: - Transitions

    /// Why an operation queued now fails at once, if it does.
    private var newOperationRefusal: URLError? {
        if let upgradeRefusal { return upgradeRefusal }
        if case .ended(let error?) = phase { return error }
        return nil
    }

    /// Completes what can complete, closes what is due, and says whether to connect or wake the engine.
    private mutating func advance() -> Step {
        var step = Step()
        guard !hasEnded else { return step }
        completeReads(into: &step)
        while case .operation(let write)? = writes.first, write.sent >= write.data.count {
            writes.removeFirst()
            step.completions.append(.write(id: write.id, error: nil))
        }
        if reads.first == .upgrade && writes.first == .upgrade && !inbox.isEmpty {
            // Bytes that came in plain text before the handshake (a timed-out read's) must never reach a read after
            // it as if they came over TLS (STARTTLS injection, CVE-2011-0411).
            var failure = end(with: Self.plaintextBeforeHandshake)
            failure.completions = step.completions + failure.completions
            return failure
        }
        if readClosed && writeClosed {
            phase = .ended(nil)
            step.completions.append(.finished(nil))
            step.wake = true
            return step
        }
        let hasWork = !reads.isEmpty || !writes.isEmpty
        if phase == .idle && !isSuspended && (hasWork || isSecure) {
            phase = .connecting
            step.connect = true
        }
        if phase == .open && hasWork && !isSuspended { step.wake = true }
        return step
    }

    private mutating func completeReads(into step: inout Step) {
        while let first = reads.first {
            switch first {
            case .close:
                reads.removeFirst()
                markReadClosed(into: &step)
            case .upgrade:
                return
            case .operation(let read):
                if readClosedByUser && !reads.contains(.close) {
                    // Reads queued after `closeRead`: the end of stream.
                    reads.removeFirst()
                    step.completions.append(.read(id: read.id, data: Data(), atEOF: true, error: nil))
                    continue
                }
                guard inbox.count >= max(read.minimum, 1) || endOfStream else { return }
                let data = inbox.removeFirst(min(read.maximum, inbox.count))
                reads.removeFirst()
                step.completions.append(
                    .read(id: read.id, data: data, atEOF: endOfStream && inbox.isEmpty, error: nil))
            }
        }
        if endOfStream && inbox.isEmpty { markReadClosed(into: &step) }
    }

    private mutating func markReadClosed(into step: inout Step) {
        guard !readClosed else { return }
        readClosed = true
        step.completions.append(.readClosed)
    }

    /// Fails every pending operation with `error` and ends the task.
    private mutating func end(with error: URLError) -> Step {
        guard !hasEnded else { return Step() }
        var step = Step()
        for entry in reads {
            if case .operation(let read) = entry {
                step.completions.append(.read(id: read.id, data: nil, atEOF: false, error: error))
            }
        }
        for entry in writes {
            if case .operation(let write) = entry { step.completions.append(.write(id: write.id, error: error)) }
        }
        reads.removeAll()
        writes.removeAll()
        inbox.removeAll()
        phase = .ended(error)
        step.completions.append(.finished(error))
        step.wake = true
        return step
    }

    /// The failure of an upgrade that finds plain-text bytes received and not read when its handshake is due.
    static let plaintextBeforeHandshake = error(
        .secureConnectionFailed,
        "Plaintext bytes arrived before the TLS handshake of the upgrade; they cannot be trusted, so the stream ended.")

    /// A `URLError` with a sentence for the user.
    static func error(_ code: URLError.Code, _ description: String) -> URLError {
        URLError(code, userInfo: [NSLocalizedDescriptionKey: description])
    }
}
