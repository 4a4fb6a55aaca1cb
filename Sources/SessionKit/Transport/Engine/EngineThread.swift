import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The check behind "on the engine thread only": each ``CurlEngine``'s thread marks itself when it starts, and the
/// code that libcurl and OpenSSL call back there (a transfer's callbacks and end, the policy's handshake check, a
/// stream connection's I/O) checks the mark before it touches state that nothing else guards.
///
/// The check runs in release builds too: one `pthread_getspecific`, a few instructions per callback. A failure is a
/// SessionKit bug (state of a transfer reached from another thread), and stops the process where it happened rather
/// than let a data race go on.
enum EngineThread {
    /// The thread-specific key whose value is non-nil on an engine's thread.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed (\(status))")
        return key
    }()

    /// Marks the calling thread as an engine's; called once, first thing, by ``CurlEngine``'s thread.
    static func markCurrent() {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
    }

    /// Whether the calling thread is an engine's.
    static var isCurrent: Bool { pthread_getspecific(key) != nil }

    /// Stops the process unless the calling thread is an engine's: `what` names the confined code.
    static func check(_ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        precondition(isCurrent, "\(what()) ran off the engine thread", file: file, line: line)
    }
}
