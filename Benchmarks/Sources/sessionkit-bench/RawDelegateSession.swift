import Foundation
import BenchServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// URLSession driven through a delegate, as AFNetworking and Alamofire drive it (SessionKit too): the fair
/// baseline for what the platform's delegate path costs, next to the completion-handler path.
final class RawDelegateSession: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    // @unchecked Sendable: `completions` and `destinations` are `LockedBox`es.
    private let completions = LockedBox<[Int: (Error?) -> Void]>([:])
    private let bodies = LockedBox<[Int: Data]>([:])
    private let destinations = LockedBox<[Int: URL]>([:])
    private(set) var session: URLSession!

    init(configuration: URLSessionConfiguration) {
        super.init()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
    }

    /// Starts a GET whose body is dropped, or kept in memory and handed to `completion` when `keepsBody`.
    func get(_ url: URL, keepsBody: Bool = false, close: Bool = false, completion: @escaping (Data, Error?) -> Void) {
        var request = URLRequest(url: url)
        if close { request.setValue("close", forHTTPHeaderField: "Connection") }
        let task = session.dataTask(with: request)
        let identifier = task.taskIdentifier
        if keepsBody { bodies.write { $0[identifier] = Data() } }
        completions.write {
            $0[identifier] = { [bodies] error in completion(bodies.write { $0.removeValue(forKey: identifier) } ?? Data(), error) }
        }
        task.resume()
    }

    /// Starts an upload of `body`.
    func upload(_ request: URLRequest, body: Data, completion: @escaping (Error?) -> Void) {
        let task = session.uploadTask(with: request, from: body)
        completions.write { $0[task.taskIdentifier] = completion }
        task.resume()
    }

    /// Starts a download moved to `destination`.
    func download(_ url: URL, to destination: URL, completion: @escaping (Error?) -> Void) {
        let task = session.downloadTask(with: url)
        completions.write { $0[task.taskIdentifier] = completion }
        destinations.write { $0[task.taskIdentifier] = destination }
        task.resume()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        bodies.write { bodies in
            if bodies[dataTask.taskIdentifier] != nil { bodies[dataTask.taskIdentifier]?.append(data) }
        }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        if let destination = destinations.write({ $0.removeValue(forKey: downloadTask.taskIdentifier) }) {
            try? FileManager.default.moveItem(at: location, to: destination)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        completions.write { $0.removeValue(forKey: task.taskIdentifier) }?(error)
    }
}
