import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The socket of a running transfer's TCP connection, found and looked at without taking a byte from libcurl.
///
/// libcurl 7.88 tells a running transfer's socket by no public means (`CURLINFO_ACTIVESOCKET` answers -1 until a
/// transfer ended, or for `CURLOPT_CONNECT_ONLY`), but it tells the connection's two ends (`CURLINFO_LOCAL_IP` and
/// `CURLINFO_LOCAL_PORT`, `CURLINFO_PRIMARY_IP` and `CURLINFO_PRIMARY_PORT`): the process's open descriptors are
/// searched for the socket with both (a TCP connection is the one socket of its two ends). The search is a few system
/// calls per open descriptor, so it is made on a rare path only (an upload waiting for its writer), once per request.
enum ConnectionSocket {
    /// What a look at a connection's socket found.
    enum State: Equatable {
        /// Nothing to read: the connection is open and quiet.
        case quiet
        /// Bytes wait to be read.
        case readable
        /// The peer closed the connection (its end was read, or it was reset).
        case ended
        /// The socket could not be looked at.
        case unknown
    }

    /// One end of a TCP connection: its address as `inet_ntop` writes it, and its port.
    struct End: Equatable {
        let address: String
        let port: Int
    }

    /// The open socket whose local end is `local` and remote end `peer`; nil when there is none, or the process's
    /// descriptors cannot be listed. A socket the peer reset has no remote end any more: the one socket of that local
    /// end without one is taken when none has both.
    static func find(local: End, peer: End) -> Int32? {
        guard local.port > 0, peer.port > 0, let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        let listing = dirfd(directory)
        var reset: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let descriptor = Int32(name), descriptor != listing, end(of: descriptor, peer: false) == local
            else { continue }
            guard let remote = end(of: descriptor, peer: true) else {
                if errno == ENOTCONN { reset.append(descriptor) }
                continue
            }
            if remote == peer { return descriptor }
        }
        return reset.count == 1 ? reset[0] : nil
    }

    /// A look at `socket`: `MSG_PEEK` leaves what it sees for libcurl to read.
    static func state(of socket: Int32) -> State {
        var byte: UInt8 = 0
        let peeked = recv(socket, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if peeked > 0 { return .readable }
        if peeked == 0 { return .ended }
        switch errno {
        case EAGAIN, EWOULDBLOCK, EINTR: return .quiet
        case ECONNRESET, EPIPE, ETIMEDOUT: return .ended
        default: return .unknown
        }
    }

    /// The local (or, with `peer`, the remote) TCP port of `socket` (0 before it is bound or connected); nil for
    /// another kind of descriptor.
    static func port(of socket: Int32, peer: Bool) -> Int? {
        end(of: socket, peer: peer, withAddress: false)?.port
    }

    /// The local (or, with `peer`, the remote) end of `socket`; its address is left empty unless `withAddress`.
    private static func end(of socket: Int32, peer: Bool, withAddress: Bool = true) -> End? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(socket, $0, &length) : getsockname(socket, $0, &length)
            }
        }
        guard named == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    if withAddress { inet_ntop(AF_INET, &address.pointee.sin_addr, &text, socklen_t(text.count)) }
                    return End(address: text.string, port: Int(UInt16(bigEndian: address.pointee.sin_port)))
                }
            }
        case AF_INET6:
            return withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    if withAddress { inet_ntop(AF_INET6, &address.pointee.sin6_addr, &text, socklen_t(text.count)) }
                    return End(address: text.string, port: Int(UInt16(bigEndian: address.pointee.sin6_port)))
                }
            }
        default:
            return nil
        }
    }
}

extension [CChar] {
    /// The text up to the first NUL, as UTF-8.
    fileprivate var string: String {
        String(decoding: prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
