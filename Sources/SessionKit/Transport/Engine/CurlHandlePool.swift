internal import CCurl
import Foundation

/// libcurl easy handles kept, reset, for the next transfer: `curl_easy_init` and `curl_easy_cleanup` cost about 13k
/// instructions per request, `curl_easy_reset` a fraction of that.
///
/// Only a handle that cannot carry anything into its next transfer comes back here (``CurlTransfer`` decides): one
/// whose transfer sent no request body, never paused its writes, and ended well. libcurl 7.88 keeps state across
/// `curl_easy_reset` that only a new handle starts without: after a chunked upload whose trailers were sent
/// (`CURLOPT_TRAILERFUNCTION`), the handle's trailer state stays "done", and its next chunked upload writes a chunk's
/// size line before its upload buffer (decision 34 in `Docs/Architecture.md`). So a handle that ever had a trailer
/// callback, or any body, is always cleaned up; so is one whose writes paused (an HTTP/2 transfer's paused bytes stay
/// in the handle). A handle is detached from its multi handle before it comes back (the engine holds its transfer
/// until then), and every option is set again by its next transfer, TLS session reuse off among them, so no TLS
/// session outlives the handshake that checked it.
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
