import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Keeps the body in memory, for the response serializer.
final class MemoryBodySink: BodySink {
    /// The body so far; the completion may take it on another thread than the one appending.
    private let body = Protected(Data())

    /// Reserves the announced length at once; the download progress needs no correction.
    func receive(_ response: ReceivedResponse) -> Int64? {
        let expected = response.expectedContentLength
        if expected > 0 {
            // One allocation of the announced size (at most 1 GiB; pages are only touched as bytes arrive)
            // instead of doubling: a body in memory then peaks near its own size, not twice it.
            body.write { $0.reserveCapacity(Int(min(expected, 1 << 30))) }
        }
        return nil
    }

    func append(_ data: Data) -> BodySinkReceipt {
        body.write { $0.append(data) }
        return .stored
    }

    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool { false }

    func finish(error: Error?, moveFile: (URL, URL?) -> Void) -> Error? { error }

    func takeBody() -> Data {
        body.write { body in
            defer { body = Data() }
            return body
        }
    }
}
