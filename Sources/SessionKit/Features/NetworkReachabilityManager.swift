internal import CNetlink
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Notification.Name {
    /// Posted by a listening ``NetworkReachabilityManager`` when its status changes; `object` is the manager and
    /// `userInfo[NetworkReachabilityManager.statusKey]` the new ``NetworkReachabilityManager/Status``.
    public static let sessionKitReachabilityDidChange = Notification.Name("com.sessionkit.reachability.change")
}

/// Whether a host, or the network at large, can be reached, and through what kind of link, watched on Linux through
/// the kernel's routing netlink (links, addresses and routes).
///
/// Reachable means: the kernel has a route to the host (to the internet, for no host: the route it would use for a
/// public address, usually the default route) and the interface of that route is up and has a carrier. The link
/// type comes from the interface: Wi-Fi when `/sys/class/net/<name>/wireless` exists, Ethernet for other Ethernet
/// links, `other` for loopback, tunnels and the rest. As on Apple platforms, reachable does not mean a request will
/// succeed: only that it can leave the machine.
///
/// ```swift
/// let reachability = NetworkReachabilityManager(host: "api.example.com")
/// reachability?.startListening { status in print("network:", status) }
/// ```
public final class NetworkReachabilityManager: Sendable {
    // Sendable, checked by the compiler: the listening state is inside `listening`, a `Protected` box; the rest is `let`.

    /// How the host can be reached.
    public enum Status: Equatable, Sendable {
        /// Not evaluated yet.
        case unknown
        /// No route, or its interface is down.
        case notReachable
        /// A route over an interface that is up.
        case reachable(ConnectionType)
    }

    /// The kind of link a route leaves through.
    public enum ConnectionType: Equatable, Sendable {
        /// A wired Ethernet link (or a virtual one that looks like it: veth, bridges).
        case ethernet
        /// A wireless LAN link.
        case wifi
        /// Loopback, tunnels, anything else.
        case other
    }

    /// The `userInfo` key of the status in `Notification.Name.sessionKitReachabilityDidChange`.
    public static let statusKey = "com.sessionkit.reachability.status"

    /// The host watched; nil for the network at large.
    public let host: String?
    private let namespaceDescriptor: Int32
    private let querySocket: Int32

    private struct Listening {
        var thread: Thread?
        var stop = false
        var last = Status.unknown
    }

    private let listening = Protected(Listening())

    /// A manager for `host` (a name or an address), or for the network at large when nil.
    /// Returns nil when the kernel's routing netlink cannot be opened.
    public convenience init?(host: String? = nil) {
        self.init(host: host, networkNamespace: nil)
    }

    /// A manager that evaluates inside another network namespace, given as a path such as
    /// `/var/run/netns/NAME` (what `ip netns add NAME` creates): for agents that watch containers, and for tests.
    /// Returns nil when the namespace or the netlink socket cannot be opened.
    public init?(host: String? = nil, networkNamespace path: String?) {
        var descriptor: Int32 = -1
        if let path {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
        }
        let query = sk_nl_query_socket(descriptor)
        guard query >= 0 else {
            if descriptor >= 0 { close(descriptor) }
            return nil
        }
        self.host = host
        self.namespaceDescriptor = descriptor
        self.querySocket = query
    }

    deinit {
        stopListening()
        close(querySocket)
        if namespaceDescriptor >= 0 { close(namespaceDescriptor) }
    }

    /// The status now, evaluated on the caller's thread (a route lookup; a name lookup for a host name).
    public var status: Status {
        for address in addresses() {
            let index = address.withUnsafeBufferPointer { bytes in
                sk_nl_route_interface(querySocket, address.count == 16 ? AF_INET6 : AF_INET, bytes.baseAddress)
            }
            guard index > 0 else { continue }
            var flags: UInt32 = 0
            var type: UInt16 = 0
            var name = [CChar](repeating: 0, count: Int(IFNAMSIZ))
            guard sk_nl_link(querySocket, index, &flags, &type, &name) == 0 else { continue }
            let up = flags & UInt32(IFF_UP) != 0 && flags & UInt32(IFF_RUNNING) != 0
            guard up else { continue }
            return .reachable(
                Self.connectionType(
                    name: String(
                        decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self),
                    type: type, flags: flags))
        }
        return .notReachable
    }

    /// Whether ``status`` is reachable.
    public var isReachable: Bool {
        if case .reachable = status { return true }
        return false
    }

    /// Starts watching: `onUpdate` gets the current status at once, then every change, on `queue` (default: a
    /// private serial queue; never the main queue unless given), and `Notification.Name.sessionKitReachabilityDidChange`
    /// is posted. A thread of its own waits on the netlink socket. Returns false when it cannot listen (already
    /// listening, or the socket cannot be opened).
    @discardableResult
    public func startListening(
        onQueue queue: DispatchQueue = DispatchQueue(label: "com.sessionkit.reachability"),
        onUpdate: @escaping @Sendable (Status) -> Void
    ) -> Bool {
        let socket = sk_nl_open(namespaceDescriptor)
        guard socket >= 0 else { return false }
        let started = listening.write { state -> Bool in
            guard state.thread == nil else { return false }
            state.stop = false
            state.last = .unknown
            // The thread holds the manager weakly: dropping the manager ends the watch.
            let manager: @Sendable () -> NetworkReachabilityManager? = { [weak self] in self }
            let thread = Thread { Self.listen(to: manager, on: socket, queue: queue, onUpdate: onUpdate) }
            thread.name = "com.sessionkit.reachability"
            state.thread = thread
            thread.start()
            return true
        }
        if !started { close(socket) }
        return started
    }

    /// Stops watching: no update is delivered after this returns (the thread ends within 200 ms).
    public func stopListening() {
        listening.write { state in
            state.stop = true
            state.thread = nil
        }
    }

    // MARK: - Private

    private static func listen(
        to manager: @Sendable () -> NetworkReachabilityManager?, on socket: Int32, queue: DispatchQueue,
        onUpdate: @escaping @Sendable (Status) -> Void
    ) {
        defer { close(socket) }
        var changed = true
        while true {
            do {
                guard let manager = manager(), !manager.listening.read({ $0.stop }) else { return }
                if changed { manager.report(queue: queue, onUpdate: onUpdate) }
            }
            let result = sk_nl_wait(socket, 200)
            if result < 0 { return }
            changed = result > 0
        }
    }

    private func report(queue: DispatchQueue, onUpdate: @escaping @Sendable (Status) -> Void) {
        let now = status
        let isNew = listening.write { state -> Bool in
            guard !state.stop, state.last != now else { return false }
            state.last = now
            return true
        }
        guard isNew else { return }
        queue.async { [self] in
            guard !listening.read({ $0.stop }) else { return }
            onUpdate(now)
            NotificationCenter.default.post(
                name: .sessionKitReachabilityDidChange, object: self,
                userInfo: [Self.statusKey: now])
        }
    }

    /// The addresses to look a route up for: the host's (resolved now), or a public address of each family.
    private func addresses() -> [[UInt8]] {
        guard let host else {
            return [[8, 8, 8, 8], [0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88]]
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(bare, nil, &hints, &results) == 0 else { return [] }
        defer { freeaddrinfo(results) }
        var found: [[UInt8]] = []
        var cursor = results
        while let entry = cursor?.pointee {
            if entry.ai_family == AF_INET, let raw = entry.ai_addr {
                raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var bytes = address.pointee.sin_addr
                    found.append(withUnsafeBytes(of: &bytes) { Array($0) })
                }
            } else if entry.ai_family == AF_INET6, let raw = entry.ai_addr {
                raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var bytes = address.pointee.sin6_addr
                    found.append(withUnsafeBytes(of: &bytes) { Array($0) })
                }
            }
            cursor = entry.ai_next
        }
        return found
    }

    private static func connectionType(name: String, type: UInt16, flags: UInt32) -> ConnectionType {
        if flags & UInt32(IFF_LOOPBACK) != 0 { return .other }
        if FileManager.default.fileExists(atPath: "/sys/class/net/\(name)/wireless")
            || FileManager.default.fileExists(atPath: "/sys/class/net/\(name)/phy80211")
        {
            return .wifi
        }
        return type == 1 ? .ethernet : .other  // ARPHRD_ETHER
    }
}
