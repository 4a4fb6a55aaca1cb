import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Server-Sent Events from Swift 6 code: the parser alone, a stream read on the main actor and one handed from an actor
/// to a task (`ServerSentEvents` is Sendable). The consumer's server has no event stream: its JSON answer must end the
/// sequence with a content-type error, not with events or a hang.
enum ServerSentEventsChecks {
    static func run(baseURL: URL?) async throws {
        let parsed = try ServerSentEventParser.events(in: Data("id: 1\r\nevent: greeting\r\ndata: hello\r\n\r\n".utf8))
        try expect(parsed == [ServerSentEvent(id: "1", event: "greeting", data: "hello")], "SSE parser: \(parsed)")

        guard let users = baseURL?.appendingPathComponent("users") else { throw CheckFailure("SSE: no base URL") }
        try await onMainActor(URLRequest(url: users))
        let counted = try await EventCounter(manager: URLSessionManager()).count(URLRequest(url: users))
        try expect(counted == 0, "SSE from an actor: \(counted) events")
        print("server-sent events: ok")
    }

    @MainActor private static func onMainActor(_ request: URLRequest) async throws {
        var events = URLSessionManager().events(for: request)
        events.maximumReconnectionAttempts = 1
        do {
            for try await event in events { throw CheckFailure("SSE on the main actor: unexpected \(event)") }
            throw CheckFailure("SSE on the main actor: a JSON answer must throw")
        } catch let error as CheckFailure {
            throw error
        } catch {
            guard case .responseSerializationFailed(.cannotDecodeContentData) = SessionKitError(error).kind else {
                throw CheckFailure("SSE on the main actor: \(error)")
            }
        }
    }
}

/// An actor that reads an event stream in a task of its own and keeps the count.
actor EventCounter {
    let manager: URLSessionManager
    var received = 0

    init(manager: URLSessionManager) { self.manager = manager }

    func count(_ request: URLRequest) async throws -> Int {
        let events = manager.events(for: request)
        let reader = Task.detached { () -> Int in
            var count = 0
            do {
                for try await _ in events { count += 1 }
            } catch {
                guard case .responseSerializationFailed = SessionKitError(error).kind else { throw error }
            }
            return count
        }
        received += try await reader.value
        return received
    }
}
