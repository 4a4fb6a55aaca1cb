import Foundation
import SessionKit

@main
struct Example {
    static func main() async throws {
        // httpbin.org answers every request with what it received. HTTPBIN=http://127.0.0.1:8080 runs this against
        // a local httpbin instead (`docker run -p 8080:80 kennethreitz/httpbin`).
        let base = ProcessInfo.processInfo.environment["HTTPBIN"] ?? "https://httpbin.org"
        let manager = HTTPSessionManager(baseURL: URL(string: base))
        manager.requestSerializer = JSONRequestSerializer()

        // Async form: the serialized object, the response and the raw body.
        let result = try await manager.post("post", parameters: ["name": "Ada"])
        print(result.statusCode, result.object ?? "no body")

        // Typed forms: the JSON body decoded, and an Encodable body sent as JSON.
        struct Slideshow: Decodable { struct Show: Decodable { let title: String }; let slideshow: Show }
        let sample = try await manager.get("json", as: Slideshow.self)
        print(sample.slideshow.title)
        struct User: Codable { let name: String }
        struct Echo: Decodable { let method: String; let json: User }
        let echo = try await manager.post("anything", body: User(name: "Ada"), as: Echo.self)
        print(echo.method, echo.json.name)

        // Closure form, as in AFNetworking: created and resumed, completion on the manager's completion queue.
        // The closures are `@Sendable`: they run on that queue, not on the caller's actor.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            manager.get(
                "get", parameters: ["page": 2], headers: ["X-Trace": "1"], progress: nil,
                success: { task, object in
                    print(object ?? ""); done.resume()
                },
                failure: { task, error in
                    print(error); done.resume()
                })
        }
    }
}
