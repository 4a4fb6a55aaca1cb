import Foundation
import SessionKit

@main
struct Example {
    static func main() async throws {
        let manager = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:8080/v1"))
        manager.requestSerializer = JSONRequestSerializer()

        // Async form: the serialized object, the response and the raw body.
        let result = try await manager.post("users", parameters: ["name": "Ada"])
        print(result.statusCode, result.object ?? "no body")

        // Typed form.
        struct User: Decodable { let id: Int; let name: String }
        let user = try await manager.get("users/1", as: User.self)
        print(user.name)

        // Closure form, as in AFNetworking: created and resumed, completion on the manager's completion queue.
        // The closures are `@Sendable`: they run on that queue, not on the caller's actor.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            manager.get("users", parameters: ["page": 2], headers: ["X-Trace": "1"], progress: nil,
                        success: { task, object in print(object ?? ""); done.resume() },
                        failure: { task, error in print(error); done.resume() })
        }
    }
}
