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
    private let pending = Protected<[Operation]>([])
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    private struct Key: Hashable {
        let policy: String
        let maximumConnectionsPerHost: Int
    }

    private static let engines = Protected<[Key: CurlEngine]>([:])

    /// The engine of `policy` with this many connections per host at most (0: no limit), created on first use.
    static func engine(for policy: SecurityPolicy, maximumConnectionsPerHost: Int) -> CurlEngine? {
        let key = Key(policy: policy.configurationKey, maximumConnectionsPerHost: maximumConnectionsPerHost)
        return engines.write { engines in
            if let engine = engines[key] { return engine }
            guard let engine = CurlEngine(maximumConnectionsPerHost: maximumConnectionsPerHost) else { return nil }
            engines[key] = engine
            return engine
        }
    }

    private init?(maximumConnectionsPerHost: Int) {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard let multi = curl_multi_init() else { return nil }
        self.multi = multi
        // libcurl's default connection cache shrinks with the handles attached: keep plenty of idle connections.
        _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 256)
        if maximumConnectionsPerHost > 0 {
            _ = sk_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        }
        let thread = Thread { [unowned self] in self.run() }
        thread.name = "com.sessionkit.curl"
        thread.start()
    }

    /// Starts `transfer` on the engine thread.
    func add(_ transfer: CurlTransfer) {
        pending.write { $0.append(.add(transfer)) }
        curl_multi_wakeup(multi)
    }

    /// Resumes a transfer that paused itself (back-pressure), on the engine thread.
    func unpause(_ transfer: CurlTransfer) {
        pending.write { $0.append(.unpause(transfer)) }
        curl_multi_wakeup(multi)
    }

    /// Stops `transfer` on the engine thread; it reports nothing afterwards.
    func remove(_ transfer: CurlTransfer) {
        pending.write { $0.append(.remove(transfer)) }
        curl_multi_wakeup(multi)
    }

    private func run() {
        var running: Int32 = 0
        while true {
            for operation in pending.write({ operations -> [Operation] in
                defer { operations.removeAll() }
                return operations
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
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }
}
