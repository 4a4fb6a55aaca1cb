internal import CCurl
import Foundation

/// One libcurl multi handle driven by one thread of its own (`curl_multi_poll` / `curl_multi_wakeup`).
///
/// Transfers are added and removed through a locked list of pending operations that the engine thread applies
/// between polls; easy handles are touched by the engine thread only once added. Each ``SecurityPolicy``
/// configuration gets an engine of its own, so that a connection verified under one policy is never reused for a
/// request under another; policies with equal configurations (every manager's default policy, say) share one, so
/// the number of engines and threads is bounded by the distinct configurations in use.
///
/// Stream tasks (``CurlStreamConnection``) run on engines of their own, so that a connect-only connection never meets
/// the connection cache of HTTP transfers: their handles stay in the multi handle while the stream is open, and the
/// engine waits on their sockets through `curl_multi_poll`'s extra descriptors, so one thread drives them all.
final class CurlEngine: @unchecked Sendable {
    // @unchecked Sendable: `pending` is a `Protected` box; `transfers`, `streams` and the multi handle are used on the
    // engine thread only, apart from `curl_multi_wakeup`, which libcurl documents as callable from any thread.

    private enum Operation {
        case add(CurlTransfer)
        case remove(CurlTransfer)
        case unpause(CurlTransfer)
        case addStream(CurlStreamConnection)
    }

    private let multi: UnsafeMutableRawPointer
    private let key: Key
    /// Operations for the engine thread; `closed` once the engine retired (it then takes none).
    private let pending = Protected<(operations: [Operation], closed: Bool)>(([], false))
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// The emptied list of the last pass, whose storage the next pass hands to `pending` (engine thread).
    private var spareOperations: [Operation] = []
    /// Stream connections by easy handle, from the start of their connection to the end of their task.
    private var streams: [UnsafeMutableRawPointer: CurlStreamConnection] = [:]

    /// An engine without transfers for this long ends its thread and leaves the table (its idle connections close);
    /// the next request of its policy makes a new one.
    static let idleLifetime = Protected<TimeInterval>(30)

    private struct Key: Hashable {
        let policy: String
        let tlsVersions: TLSVersionRange
        let maximumConnectionsPerHost: Int
        /// Whether the engine runs stream tasks (connect-only connections) rather than HTTP transfers.
        var streams = false
        /// The client identity its connections present (``ClientIdentity/connectionKey``); "" for none.
        var identity = ""
    }

    private static let engines = Protected<[Key: CurlEngine]>([:])

    /// Runs `start` with the engine of `policy` and `tlsVersions` with this many connections per host at most (0: no
    /// limit), created on first use, while holding the table of engines. An engine leaves the table and closes under
    /// the same lock (``retire()``), so an operation `start` enqueues is always taken: a new engine whose thread
    /// found itself idle cannot retire between being found and being handed its first transfer. A connection
    /// negotiated under one TLS range is never reused under another; one that presented a client `identity` (or none)
    /// is never reused by a request with another (or none): each has an engine, and so a connection cache, of its own.
    /// `streams` selects the engines of stream tasks (connect-only connections). Nil when no engine could be made.
    ///
    /// `start` runs under the table's lock: it may take the locks of a task and enqueue operations (lock order:
    /// table, task, engine's pending list), but must not ask for an engine itself.
    static func withEngine<Result>(
        for policy: SecurityPolicy, tlsVersions: TLSVersionRange = TLSVersionRange(),
        maximumConnectionsPerHost: Int = 0, identity: ClientIdentity? = nil, streams: Bool = false,
        _ start: (CurlEngine) -> Result
    ) -> Result? {
        let key = Key(
            policy: policy.configurationKey, tlsVersions: tlsVersions,
            maximumConnectionsPerHost: streams ? 0 : maximumConnectionsPerHost, streams: streams,
            identity: streams ? "" : identity?.connectionKey ?? "")
        return engines.write { engines -> Result? in
            if let engine = engines[key] { return start(engine) }
            guard let engine = CurlEngine(key: key) else { return nil }
            engines[key] = engine
            return start(engine)
        }
    }

    /// Whether the engine of `policy` is running now.
    static func isRunning(
        for policy: SecurityPolicy, tlsVersions: TLSVersionRange = TLSVersionRange(),
        maximumConnectionsPerHost: Int
    ) -> Bool {
        let key = Key(
            policy: policy.configurationKey, tlsVersions: tlsVersions,
            maximumConnectionsPerHost: maximumConnectionsPerHost)
        return engines.read { $0[key] != nil }
    }

    private init?(key: Key) {
        let maximumConnectionsPerHost = key.maximumConnectionsPerHost
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard let multi = curl_multi_init() else { return nil }
        self.multi = multi
        self.key = key
        // libcurl's default connection cache shrinks with the handles attached: keep plenty of idle connections.
        // Streams: every open stream is a connection in the cache, none of which may be closed to make room.
        _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, key.streams ? Int(Int32.max) : 256)
        if maximumConnectionsPerHost > 0 {
            _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        }
        // The thread owns the engine while it runs: the engine lives until it retires.
        let thread = Thread { self.run() }
        thread.name = "com.sessionkit.curl"
        thread.start()
    }

    /// Starts `transfer` on the engine thread; false when this engine has retired (never inside
    /// ``withEngine(for:tlsVersions:maximumConnectionsPerHost:identity:streams:_:)``).
    func add(_ transfer: CurlTransfer) -> Bool {
        enqueue(.add(transfer))
    }

    /// Resumes a transfer that paused itself (back-pressure), on the engine thread.
    func unpause(_ transfer: CurlTransfer) {
        enqueue(.unpause(transfer))
    }

    /// Connects `connection` on the engine thread, which then drives its I/O until its task ends; false when this
    /// engine has retired (never inside ``withEngine(for:tlsVersions:maximumConnectionsPerHost:identity:streams:_:)``).
    func add(_ connection: CurlStreamConnection) -> Bool {
        enqueue(.addStream(connection))
    }

    /// Makes the engine thread run a pass now (a stream has I/O to do); nothing once the engine retired.
    func wake() {
        // Under the lock: a retiring engine marks itself closed under it before cleaning up its multi handle.
        pending.read { pending in
            if !pending.closed { curl_multi_wakeup(multi) }
        }
    }

    /// Stops `transfer` on the engine thread; it reports nothing afterwards.
    func remove(_ transfer: CurlTransfer) {
        enqueue(.remove(transfer))
    }

    @discardableResult
    private func enqueue(_ operation: Operation) -> Bool {
        let accepted = pending.write { pending -> Bool in
            guard !pending.closed else { return false }
            pending.operations.append(operation)
            return true
        }
        if accepted { curl_multi_wakeup(multi) }
        return accepted
    }

    /// Leaves the table and takes no more operations, if nothing is pending; called on the engine thread when idle.
    private func retire() -> Bool {
        Self.engines.write { engines in
            let closed = pending.write { pending -> Bool in
                guard pending.operations.isEmpty else { return false }
                pending.closed = true
                return true
            }
            if closed, engines[key] === self { engines[key] = nil }
            return closed
        }
    }

    private func run() {
        EngineThread.markCurrent()
        var running: Int32 = 0
        var idleSince: Date?
        while true {
            // The list and an empty one trade places, each keeping its storage: no allocation per operation.
            var operations: [Operation] = []
            swap(&operations, &spareOperations)
            pending.write { swap(&$0.operations, &operations) }
            for operation in operations {
                switch operation {
                case .add(let transfer):
                    if curl_multi_add_handle(multi, transfer.easy) == CURLM_OK {
                        transfers[transfer.easy] = transfer
                    } else {
                        transfer.finish(code: CURLE_FAILED_INIT)
                    }
                case .remove(let transfer):
                    if transfers.removeValue(forKey: transfer.easy) != nil {
                        // A transfer cut short leaves its connection unknown: HTTP/1.1 closes it anyway. Over HTTP/2
                        // libcurl 7.88 resets the stream, but keeps the RST_STREAM in the connection's output buffer
                        // until another transfer uses it, so the server would go on sending until then. Not reusing
                        // the connection closes it at once when no other stream uses it; another stream's next
                        // write sends the reset.
                        _ = sk_curl_easy_setopt_long(transfer.easy, CURLOPT_FORBID_REUSE, 1)
                        curl_multi_remove_handle(multi, transfer.easy)
                    }
                case .unpause(let transfer):
                    if transfers[transfer.easy] != nil {
                        transfer.willResume()
                        curl_easy_pause(transfer.easy, CURLPAUSE_CONT)
                    }
                case .addStream(let connection):
                    if curl_multi_add_handle(multi, connection.easy) == CURLM_OK {
                        streams[connection.easy] = connection
                    } else {
                        connection.didConnect(code: CURLE_FAILED_INIT)
                        connection.released()
                    }
                }
            }
            operations.removeAll(keepingCapacity: true)
            swap(&operations, &spareOperations)
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            var ended = false
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                ended = true
                if let connection = streams[easy] {
                    connected(connection, code: message.pointee.data.result)
                    continue
                }
                guard let transfer = transfers.removeValue(forKey: easy) else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(multi, easy)
                if transfer.resendsOnNewConnection(after: code), curl_multi_add_handle(multi, easy) == CURLM_OK {
                    transfers[easy] = transfer
                    continue
                }
                transfer.finish(code: code)
            }
            // A transfer whose server closed the connection while its upload waited for the body's writer ends now
            // (see `CurlTransfer.connectionWatch()`); the socket of one still waiting joins the poll.
            var watched: [curl_waitfd] = []
            var closed: [CurlTransfer] = []
            var recheck = false
            for transfer in transfers.values {
                transfer.flushEvents()
                switch transfer.connectionWatch() {
                case .none: break
                case .watch(let fd): watched.append(curl_waitfd(fd: fd, events: Int16(CURL_WAIT_POLLIN), revents: 0))
                case .recheck: recheck = true
                case .closed: closed.append(transfer)
                }
            }
            for transfer in closed {
                transfers[transfer.easy] = nil
                curl_multi_remove_handle(multi, transfer.easy)
                transfer.finish(code: CURLE_SEND_ERROR)
            }
            let (waits, timeout) = pumpStreams()
            if transfers.isEmpty && streams.isEmpty {
                let now = Date()
                let since = idleSince ?? now
                idleSince = since
                if now.timeIntervalSince(since) >= Self.idleLifetime.wrappedValue, retire() { break }
            } else {
                idleSince = nil
            }
            var fds = waits
            fds.append(contentsOf: watched)
            let idleTimeout: Int32 = transfers.isEmpty && streams.isEmpty ? 250 : 1000
            // A transfer that ended hands its connection slot (CURLMOPT_MAX_HOST_CONNECTIONS) to one that waited for
            // it. libcurl 7.88 marks that one to run at once with a timer, but `curl_multi_perform` drops the timers
            // that expired during the call without running their transfers, and a transfer met later in the call
            // reads the clock anew: a waiting transfer earlier in the list is left with no socket and no timer, and
            // the poll would sleep its whole timeout unless something else woke it (the 1 s stalls at 64 in flight).
            // Every `curl_multi_perform` runs every transfer, so after a pass in which one ended, the next one starts
            // at once, while any transfer is left to run (a lone request's end, the sequential caller's, costs no
            // pass more).
            let wait = (ended && !transfers.isEmpty) || recheck ? 0 : min(idleTimeout, timeout)
            curl_multi_poll(multi, &fds, UInt32(fds.count), wait, nil)
        }
        curl_multi_cleanup(multi)
    }

    // MARK: - Streams (engine thread)

    /// libcurl finished connecting a stream: the handle stays (removing it would close the connection) unless the
    /// connection failed.
    private func connected(_ connection: CurlStreamConnection, code: CURLcode) {
        if code != CURLE_OK {
            streams[connection.easy] = nil
            curl_multi_remove_handle(multi, connection.easy)
        }
        connection.didConnect(code: code)
        if code != CURLE_OK { connection.released() }
    }

    /// Runs each open stream's I/O; returns the sockets to wait on and how long the poll may wait (ms).
    private func pumpStreams() -> ([curl_waitfd], Int32) {
        guard !streams.isEmpty else { return ([], Int32.max) }
        let now = CurlStreamDriver.now()
        var waits: [curl_waitfd] = []
        var timeout = Int32.max
        for (easy, connection) in streams {
            let interest = connection.pump(now: now)
            if interest.release {
                streams[easy] = nil
                // Closes the connect-only connection (libcurl 7.88), also one still being set up.
                curl_multi_remove_handle(multi, easy)
                connection.released()
                continue
            }
            if interest.busy { timeout = 0 }
            if interest.events != 0, connection.socket >= 0 {
                waits.append(curl_waitfd(fd: connection.socket, events: interest.events, revents: 0))
            }
            if let deadline = interest.deadline {
                let milliseconds = deadline > now ? (deadline - now) / 1_000_000 + 1 : 0
                timeout = min(timeout, Int32(clamping: milliseconds))
            }
        }
        return (waits, timeout)
    }
}
