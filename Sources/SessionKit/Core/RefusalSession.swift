import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A session that never touches the network, for tasks a manager must return but cannot run: a manager whose
/// session was invalidated (URLSession stops the process if a task is created in it), resume data the transport
/// cannot use, a file that cannot be read.
///
/// Its tasks use a URL scheme no protocol handles, so URLSession fails them at once when they are resumed; their
/// per-task delegate then replaces that failure with the real reason.
final class RefusalSession: Sendable {
    // Sendable, checked by the compiler: immutable after init; `session` and `registry` are thread-safe.

    /// The one refusal session of the process.
    static let shared = RefusalSession()

    let registry = TaskRegistry()
    private let session: URLSession
    private static let url = URL(string: "sessionkit-refused:task") ?? URL(fileURLWithPath: "/")

    private init() {
        // Its tasks' events take the path every task's take: URLSession's callbacks, then a hub of its own.
        let hub = SessionDelegateHub(registry: registry, overrides: Protected(DelegateOverrides()))
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "com.sessionkit.refusal.delegate"
        session = URLSession(
            configuration: .ephemeral, delegate: FoundationSessionDelegate(sink: hub), delegateQueue: queue)
    }

    /// A data task that fails as soon as it is resumed.
    func dataTask() -> URLSessionDataTask {
        session.dataTask(with: URLRequest(url: Self.url))
    }

    /// A download task that fails as soon as it is resumed.
    func downloadTask() -> URLSessionDownloadTask {
        session.downloadTask(with: URLRequest(url: Self.url))
    }
}
