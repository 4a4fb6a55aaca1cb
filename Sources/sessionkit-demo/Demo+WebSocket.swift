import Foundation
import SessionKit
import SessionKitTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Demo {
    /// 10. A wss echo, the pinning policy deciding in the TLS handshake before the upgrade request is sent.
    static func webSocketStep(_ pinned: SecurityPolicy) async throws {
        step(10, "a WebSocket over TLS (wss), the pin checked before the upgrade request")
        let server = try await WebSocketServer.start(tls: TestCertificates.localhost, protocols: ["echo.v1"])
        defer { Task { try? await server.shutdown() } }
        let manager = URLSessionManager()
        manager.securityPolicy = pinned
        let task = manager.webSocketTask(with: server.url("/echo"), protocols: ["echo.v1"])
        task.resume()
        try await task.send(.string("hello over wss"))
        let reply = try await task.receive()
        guard case .string(let text) = reply, text == "hello over wss" else { throw DemoError("the wss echo differs") }
        print(
            "   \(server.url("/echo").absoluteString) (\(task.negotiatedProtocol ?? "no subprotocol")): echoed \(text.debugDescription)"
        )
        task.cancel(with: .normalClosure, reason: Data("bye".utf8))
        for _ in 0..<100 where task.state != .completed { try await Task.sleep(nanoseconds: 10_000_000) }
        print("   closed with \(task.closeCode.rawValue), the server echoing the close handshake")
    }
}
