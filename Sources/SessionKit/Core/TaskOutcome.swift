import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything a finished task produced, handed to its completion.
struct TaskOutcome {
    let task: URLSessionTask
    let response: URLResponse?
    let data: Data
    let object: Any?
    let fileURL: URL?
    let error: Error?
}
