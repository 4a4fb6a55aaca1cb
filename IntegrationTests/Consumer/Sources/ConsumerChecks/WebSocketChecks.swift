import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ConsumerChecks {
    /// A WebSocket task driven from the main actor, in Swift 6 mode: its closure forms (`@Sendable`, called on the
    /// manager's delegate queue) and async forms compile and run. The small server speaks no WebSocket: it answers
    /// the upgrade with a 404, which the task must refuse (the handshake is checked), failing every pending
    /// operation once.
    @MainActor static func webSocketChecks(port: Int) async throws {
        let manager = URLSessionManager()
        let url = try unwrap(URL(string: "ws://127.0.0.1:\(port)/v1/socket"), "ws URL")
        let task = manager.webSocketTask(with: url, protocols: ["chat"])
        task.maximumMessageSize = 64 * 1024
        let ping: Error? = await withCheckedContinuation { continuation in
            task.sendPing { continuation.resume(returning: $0) }
            task.resume()
        }
        try expect(ping != nil, "a ping over a refused handshake fails")
        do {
            _ = try await task.receive()
            throw CheckFailure("websocket: received over a refused handshake")
        } catch let error as URLError {
            try expect(error.code == .badServerResponse, "websocket refusal: \(error.code)")
        }
        do {
            try await task.send(.string("late"))
            throw CheckFailure("websocket: sent over a refused handshake")
        } catch is URLError {}
        try expect(task.negotiatedProtocol == nil, "websocket: no subprotocol")
        task.cancel(with: .normalClosure, reason: nil)
    }

    private static func unwrap<T>(_ value: T?, _ what: String) throws -> T {
        guard let value else { throw CheckFailure("\(what) is nil") }
        return value
    }
}
