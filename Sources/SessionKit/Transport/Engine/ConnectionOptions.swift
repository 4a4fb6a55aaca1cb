internal import CCurl
import Foundation

/// Where and how a curl task's connections are made, beyond its URL: the manager's ``URLSessionManager/resolvedAddresses``,
/// ``URLSessionManager/localAddress`` and ``URLSessionManager/timeoutIntervalForResponseHead``, read when a task is
/// created.
///
/// A resolved address goes to libcurl as `CURLOPT_CONNECT_TO` (`host:port:address:port`), not `CURLOPT_RESOLVE`: the
/// latter writes into the DNS cache of the engine's multi handle, which the transfers of every manager with an equal
/// policy share, whereas a connect-to entry belongs to its transfer, and libcurl reuses a connection only for a
/// transfer with the same entry. The URL's host stays the name the TLS policy checks the certificate against (and the
/// `Host` field and SNI). A local address is `CURLOPT_INTERFACE`; libcurl reuses a connection bound to a local address
/// only for a transfer that asks for the same one.
struct ConnectionOptions: Sendable, Hashable {
    /// `host:port` → address.
    var resolvedAddresses: [String: String] = [:]
    /// An IP address or an interface name outgoing connections are bound to.
    var localAddress: String?
    /// The longest wait from sending a request to the first byte of its response head; nil for none.
    var responseHeadTimeout: TimeInterval?

    /// Whether nothing differs from a plain connection (what the Foundation transport can do).
    var isDefault: Bool { self == ConnectionOptions() }

    /// Why these options cannot be used, or nil: an entry of ``resolvedAddresses`` that is not `host:port` → an IP
    /// address, an empty local address, a response-head timeout that is not positive.
    var problem: String? {
        for (key, address) in resolvedAddresses.sorted(by: { $0.key < $1.key }) {
            guard Self.hostAndPort(key) != nil else {
                return "resolvedAddresses: \"\(key)\" is not \"host:port\" (a host name and a port 1…65535)."
            }
            guard Self.ipLiteral(address) != nil else {
                return "resolvedAddresses: \"\(address)\" (for \(key)) is not an IPv4 or IPv6 address."
            }
        }
        if let localAddress, localAddress.isEmpty || localAddress.utf8.contains(where: { $0 <= 0x20 }) {
            return "localAddress: \"\(localAddress)\" is not an IP address or an interface name."
        }
        if let responseHeadTimeout, !(responseHeadTimeout > 0) {
            return "timeoutIntervalForResponseHead must be positive (nil for no limit), not \(responseHeadTimeout)."
        }
        return nil
    }

    /// libcurl's `CURLOPT_CONNECT_TO` entries, `host:port:address:port` (IPv6 addresses in brackets).
    var connectToEntries: [String] {
        resolvedAddresses.sorted(by: { $0.key < $1.key }).compactMap { key, address in
            guard let (host, port) = Self.hostAndPort(key), let literal = Self.ipLiteral(address) else { return nil }
            return "\(host):\(port):\(literal):\(port)"
        }
    }

    /// Sets the options on `easy`; returns the list libcurl keeps a pointer to (free it with the handle), or nil.
    func apply(to easy: UnsafeMutableRawPointer) -> UnsafeMutablePointer<curl_slist>? {
        if let localAddress { _ = sk_curl_easy_setopt_string(easy, CURLOPT_INTERFACE, localAddress) }
        var list: UnsafeMutablePointer<curl_slist>?
        for entry in connectToEntries { list = curl_slist_append(list, entry) }
        if let list { _ = sk_curl_easy_setopt_pointer(easy, CURLOPT_CONNECT_TO, list) }
        return list
    }

    /// `host:port` split, the host lowercased without brackets; nil unless the port is 1…65535 and the host a name or
    /// an IP literal.
    private static func hostAndPort(_ key: String) -> (String, Int)? {
        guard let colon = key.lastIndex(of: ":"), let port = Int(key[key.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        let host = String(key[..<colon])
        if let literal = ipLiteral(host) { return (literal, port) }
        // A host name: letters, digits, `-`, `.` and `_` (Docker and Compose service names have underscores).
        let isName =
            !host.isEmpty
            && host.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            }
        return isName ? (host.lowercased(), port) : nil
    }

    /// `address` as libcurl writes it in a URL (IPv6 in brackets), or nil when it is not an IP address.
    private static func ipLiteral(_ address: String) -> String? {
        let bare = address.hasPrefix("[") && address.hasSuffix("]") ? String(address.dropFirst().dropLast()) : address
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 { return "[\(bare)]" }
        var v4 = in_addr()
        return bare == address && inet_pton(AF_INET, bare, &v4) == 1 ? bare : nil
    }
}
