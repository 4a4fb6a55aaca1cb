import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPISessionKit
import SessionKit

/// The OpenAPI transport from Swift 6 code: operations sent as a generated client sends them (a request with a path
/// only, the server URL apart), from the main actor and from an actor, with a JSON body and a response body read after
/// `send` returned.
enum OpenAPIChecks {
    static func run(baseURL: URL?) async throws {
        guard let baseURL else { throw CheckFailure("OpenAPI: no base URL") }
        let transport = SessionKitTransport(manager: URLSessionManager())
        try await onMainActor(transport, baseURL: baseURL)
        let created = try await UserCreator(transport: transport).create(named: "Grace", baseURL: baseURL)
        try expect(created.contains("\"name\":\"Grace\""), "OpenAPI from an actor: \(created)")
        print("openapi: ok")
    }

    @MainActor private static func onMainActor(_ transport: SessionKitTransport, baseURL: URL) async throws {
        let list = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/users")
        let (response, body) = try await transport.send(list, body: nil, baseURL: baseURL, operationID: "listUsers")
        try expect(response.status == .ok, "OpenAPI on the main actor: \(response.status)")
        let users = try await String(collecting: body ?? HTTPBody(), upTo: 1 << 20)
        try expect(users == #"[{"id":1,"name":"Ada"}]"#, "OpenAPI on the main actor: \(users)")

        let bytes = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/bytes/100000")
        let (_, streamed) = try await transport.send(bytes, body: nil, baseURL: baseURL, operationID: "bytes")
        var count = 0
        for try await chunk in streamed ?? HTTPBody() { count += chunk.count }
        try expect(count == 100_000, "OpenAPI streamed body: \(count) bytes")
    }
}

/// An actor that creates users through the transport.
actor UserCreator {
    let transport: SessionKitTransport

    init(transport: SessionKitTransport) { self.transport = transport }

    func create(named name: String, baseURL: URL) async throws -> String {
        let request = HTTPRequest(
            method: .post, scheme: nil, authority: nil, path: "/users", headerFields: [.contentType: "application/json"]
        )
        let (response, body) = try await transport.send(
            request, body: HTTPBody(#"{"name":"\#(name)"}"#), baseURL: baseURL, operationID: "createUser")
        try expect(response.status == .created, "OpenAPI POST: \(response.status)")
        return try await String(collecting: body ?? HTTPBody(), upTo: 1 << 20)
    }
}
