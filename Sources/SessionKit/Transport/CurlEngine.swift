internal import CCurl
import Foundation

/// One libcurl multi handle driven by one thread of its own (`curl_multi_poll` / `curl_multi_wakeup`).
///
/// Transfers are added and removed through a locked list of pending operations that the engine thread applies
/// between polls; easy handles are touched by the engine thread only once added. Each ``SecurityPolicy``
/// configuration gets an engine of its own, so that a connection verified under one policy is never reused for a
/// request under another; policies with equal configurations (every manager's default policy, say) share one, so
/// the number of engines and threads is bounded by the distinct configurations in use.
final class CurlEngine: @unchecked Sendable {
    // @unchecked Sendable: `pending` is a `Protected` box; `transfers` and the multi handle are used on the engine
    // thread only, apart from `curl_multi_wakeup`, which libcurl documents as callable from any thread.

    private enum Operation {
        case add(CurlTransfer)
        case remove(CurlTransfer)
        case unpause(CurlTransfer)
    }

    private let multi: UnsafeMutableRawPointer
    private let key: Key
    /// Operations for the engine thread; `closed` once the engine retired (it then takes none).
    private let pending = Protected<(operations: [Operation], closed: Bool)>(([], false))
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    /// An engine without transfers for this long ends its thread and leaves the table (its idle connections close);
    /// the next request of its policy makes a new one.
    static let idleLifetime = Protected<TimeInterval>(30)

    private struct Key: Hashable {
        let policy: String
        let tlsVersions: TLSVersionRange
        let maximumConnectionsPerHost: Int
    }

    private static let engines = Protected<[Key: CurlEngine]>([:])

    /// The engine of `policy` and `tlsVersions` with this many connections per host at most (0: no limit), created
    /// on first use. A connection negotiated under one TLS range is never reused under another.
    static func engine(
        for policy: SecurityPolicy, tlsVersions: TLSVersionRange = TLSVersionRange(),
        maximumConnectionsPerHost: Int
    ) -> CurlEngine? {
        let key = Key(
            policy: policy.configurationKey, tlsVersions: tlsVersions,
            maximumConnectionsPerHost: maximumConnectionsPerHost)
        return engines.write { engines in
            if let engine = engines[key] { return engine }
            guard let engine = CurlEngine(key: key) else { return nil }
            engines[key] = engine
            return engine
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
        _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 256)
        if maximumConnectionsPerHost > 0 {
            _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        }
        // The thread owns the engine while it runs: the engine lives until it retires.
        let thread = Thread { self.run() }
        thread.name = "com.sessionkit.curl"
        thread.start()
    }

    /// Starts `transfer` on the engine thread; false when this engine has retired (ask ``engine(for:maximumConnectionsPerHost:)`` again).
    func add(_ transfer: CurlTransfer) -> Bool {
        enqueue(.add(transfer))
    }

    /// Resumes a transfer that paused itself (back-pressure), on the engine thread.
    func unpause(_ transfer: CurlTransfer) {
        enqueue(.unpause(transfer))
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
        var running: Int32 = 0
        var idleSince: Date?
        while true {
            for operation in pending.write({ pending -> [Operation] in
                defer { pending.operations.removeAll() }
                return pending.operations
            }) {
                switch operation {
                case .add(let transfer):
                    if curl_multi_add_handle(multi, transfer.easy) == CURLM_OK {
                        transfers[transfer.easy] = transfer
                    } else {
                        transfer.finish(code: CURLE_FAILED_INIT)
                    }
                case .remove(let transfer):
                    if transfers.removeValue(forKey: transfer.easy) != nil {
                        curl_multi_remove_handle(multi, transfer.easy)
                    }
                case .unpause(let transfer):
                    if transfers[transfer.easy] != nil { curl_easy_pause(transfer.easy, CURLPAUSE_CONT) }
                }
            }
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                    let transfer = transfers.removeValue(forKey: easy)
                else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(multi, easy)
                transfer.finish(code: code)
            }
            for transfer in transfers.values { transfer.flushEvents() }
            if transfers.isEmpty {
                let now = Date()
                let since = idleSince ?? now
                idleSince = since
                if now.timeIntervalSince(since) >= Self.idleLifetime.wrappedValue, retire() { break }
            } else {
                idleSince = nil
            }
            curl_multi_poll(multi, nil, 0, transfers.isEmpty ? 250 : 1000, nil)
        }
        curl_multi_cleanup(multi)
    }
}
