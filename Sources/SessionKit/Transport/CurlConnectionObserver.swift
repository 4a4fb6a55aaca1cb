internal import CCurl
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Follows the connections of one transfer's easy handle through libcurl's socket callbacks: a socket libcurl opens
/// is a connection (active: its transfer is about to use it), a transfer that starts its request on it makes it
/// active, the end of the last transfer on it makes it idle, and libcurl closing it ends it. Reported to the
/// manager's ``ConnectionEvents``.
///
/// Connections live in the engine's pool beyond the transfer that opened them and may serve other managers'
/// transfers: they count for the manager whose transfer opened them, in one process-wide table by socket (a socket's
/// number is unique while it is open).
final class CurlConnectionObserver: @unchecked Sendable {
    // @unchecked Sendable: `inUse` is touched by its transfer's libcurl callbacks and end only, on its engine thread;
    // the shared table is a `Protected` box.

    private let events: any ConnectionEvents
    private let endpoint: ConnectionEndpoint
    /// The connection this transfer's current request runs on.
    private var inUse: (socket: curl_socket_t, generation: UInt64)?

    /// One open connection.
    private struct Entry {
        let generation: UInt64
        let events: any ConnectionEvents
        let endpoint: ConnectionEndpoint
        let opened: UInt64
        var state: ConnectionState = .active
        /// Transfers running a request on it (HTTP/2 runs several).
        var users = 0
        /// Whether a request ran on it (a socket whose connect failed never did).
        var carriedRequest = false
        /// Its local port, once connected and asked.
        var localPort: Int32?
    }

    private static let table = Protected<(next: UInt64, entries: [curl_socket_t: Entry])>((0, [:]))

    /// An observer of a transfer to `url` reporting to `events`; nil without a host.
    init?(events: any ConnectionEvents, url: URL?) {
        guard let url, let endpoint = ConnectionEndpoint(url) else { return nil }
        self.events = events
        self.endpoint = endpoint
    }

    deinit {
        transferEnded()  // a transfer removed before its end
    }

    /// Installs the socket callbacks on `easy` (the observer must live as long as the transfer).
    func attach(to easy: UnsafeMutableRawPointer) {
        _ = sk_curl_easy_setopt_opensocket_callback(easy, Self.openCallback)
        _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, Unmanaged.passUnretained(self).toOpaque())
        _ = sk_curl_easy_setopt_closesocket_callback(easy, Self.closeCallback)
    }

    /// The transfer starts a request on its connection, the one of local port `localPort` (libcurl's pre-request
    /// callback; libcurl 7.88 tells a running transfer's socket by no other means).
    func requestStarted(localPort: Int32) {
        guard localPort > 0,
            let (socket, generation) = Self.table.write({ table -> (curl_socket_t, UInt64)? in
                Self.socket(ofLocalPort: localPort, in: &table.entries).flatMap { socket in
                    table.entries[socket].map { (socket, $0.generation) }
                }
            })
        else { return }
        if let inUse, inUse.socket == socket, inUse.generation == generation { return }  // another round on it (401)
        transferEnded()  // an earlier request of this transfer (a resend) ran on another connection
        let change = Self.table.write { table -> Entry? in
            guard var entry = table.entries[socket], entry.generation == generation else { return nil }
            inUse = (socket, generation)
            entry.users += 1
            entry.carriedRequest = true
            defer { table.entries[socket] = entry }
            guard entry.state == .idle else { return nil }
            entry.state = .active
            return entry
        }
        if let entry = change { entry.events.connection(to: entry.endpoint, changedFrom: .idle, to: .active) }
    }

    /// The open socket whose local port is `port`; learns the local ports of sockets not asked yet.
    private static func socket(ofLocalPort port: Int32, in entries: inout [curl_socket_t: Entry]) -> curl_socket_t? {
        if let known = entries.first(where: { $0.value.localPort == port }) { return known.key }
        for (socket, entry) in entries where entry.localPort == nil {
            // A socket not connected yet has port 0.
            guard let local = ConnectionSocket.port(of: socket, peer: false).map(Int32.init), local != 0 else {
                continue
            }
            var learned = entry
            learned.localPort = local
            entries[socket] = learned
            if local == port { return socket }
        }
        return nil
    }

    /// The transfer ended: its connection, if still open, has one user less, and is idle without any.
    func transferEnded() {
        guard let (socket, generation) = inUse else { return }
        inUse = nil
        let change = Self.table.write { table -> Entry? in
            guard var entry = table.entries[socket], entry.generation == generation else { return nil }
            entry.users = max(0, entry.users - 1)
            defer { table.entries[socket] = entry }
            guard entry.users == 0, entry.state == .active else { return nil }
            entry.state = .idle
            return entry
        }
        if let entry = change { entry.events.connection(to: entry.endpoint, changedFrom: .active, to: .idle) }
    }

    private func opened(_ socket: curl_socket_t) {
        let stale = Self.table.write { table -> Entry? in
            table.next += 1
            defer {
                table.entries[socket] = Entry(
                    generation: table.next, events: events, endpoint: endpoint,
                    opened: DispatchTime.now().uptimeNanoseconds)
            }
            return table.entries[socket]
        }
        if let stale { Self.report(closing: stale) }
        events.connection(to: endpoint, changedFrom: nil, to: .active)
    }

    private static func closed(_ socket: curl_socket_t) {
        if let entry = table.write({ $0.entries.removeValue(forKey: socket) }) { report(closing: entry) }
    }

    private static func report(closing entry: Entry) {
        entry.events.connection(to: entry.endpoint, changedFrom: entry.state, to: nil)
        if entry.carriedRequest {
            entry.events.connectionClosed(
                to: entry.endpoint, afterNanoseconds: DispatchTime.now().uptimeNanoseconds &- entry.opened)
        }
    }

    /// Opens the socket as libcurl would, and records it.
    private static let openCallback: curl_opensocket_callback = { clientp, purpose, address in
        guard let address, purpose == CURLSOCKTYPE_IPCXN else { return curl_socket_t(-1) }
        let socket = Glibc.socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
        guard socket >= 0 else { return curl_socket_t(-1) }
        if let clientp { Unmanaged<CurlConnectionObserver>.fromOpaque(clientp).takeUnretainedValue().opened(socket) }
        return socket
    }

    /// Closes the socket, and ends its record (the observer that opened it may be gone: the table is used).
    private static let closeCallback: curl_closesocket_callback = { _, socket in
        closed(socket)
        return Glibc.close(socket)
    }
}
