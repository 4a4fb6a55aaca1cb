internal import CCurl
import Foundation

/// libcurl easy handles kept, reset, for the next transfer: `curl_easy_init` and `curl_easy_cleanup` cost about 13k
/// instructions per request, `curl_easy_reset` a fraction of that.
///
/// Only a handle that cannot carry anything into its next transfer comes back here (``CurlTransfer`` decides): one
/// whose transfer sent no request body and ended well. libcurl 7.88 keeps a handle's upload buffer across
/// `curl_easy_reset`, and a reset handle whose last transfer uploaded a chunked body that a redirect answered wrote
/// before that buffer (decision 34 in `Docs/Architecture.md`): such a handle is always cleaned up. A handle is
/// detached from its multi handle before it comes back (the engine holds its transfer until then), and every option
/// is set again by its next transfer, TLS session reuse off among them, so no TLS session outlives the handshake that
/// checked it.
enum CurlHandlePool {
    /// How many reset handles are kept at most; past it a returned handle is cleaned up.
    static let capacity = 16

    private static let handles = Protected<[UnsafeMutableRawPointer]>([])

    /// A handle with libcurl's default options: a kept one, or a new one (nil when libcurl cannot make one).
    static func take() -> UnsafeMutableRawPointer? {
        if let handle = handles.write({ $0.popLast() }) { return handle }
        return curl_easy_init()
    }

    /// Resets `handle` (detached from any multi handle, its transfer done) and keeps it, or cleans it up when
    /// ``capacity`` handles are already kept.
    static func recycle(_ handle: UnsafeMutableRawPointer) {
        curl_easy_reset(handle)
        let kept = handles.write { handles -> Bool in
            guard handles.count < capacity else { return false }
            handles.append(handle)
            return true
        }
        if !kept { curl_easy_cleanup(handle) }
    }
}
