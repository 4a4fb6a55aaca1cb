import Foundation

extension InputStream {
    /// The stream's error when it failed (`streamStatus == .error`), else nil: what to report after a `read` returned
    /// -1. swift-corelibs-foundation's `streamError` stops the process when read on a stream in another state (a
    /// closed one, read again), so it is never read then.
    var failure: Error? {
        streamStatus == .error ? streamError : nil
    }
}
