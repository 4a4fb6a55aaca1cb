internal import CCurl
internal import COpenSSL
import Foundation

/// The versions of SessionKit and of the C libraries it runs on.
public enum SessionKitVersion {
    /// SessionKit's own version, as sent in the default `User-Agent`.
    public static let current = "0.1.0"

    /// The version of the libcurl the process loaded, e.g. `7.88.1`.
    public static var libcurl: String { String(cString: sk_curl_version_string()) }

    /// The version of the OpenSSL the process loaded, e.g. `OpenSSL 3.0.19 27 Jan 2026`.
    public static var openSSL: String { String(cString: sk_openssl_version_string()) }
}
