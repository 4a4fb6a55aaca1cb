import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `URLRequest.curlDescription`: the command line and its quoting.
final class CURLDescriptionTests: XCTestCase {
    func testMethodHeadersBodyAndQuoting() throws {
        let serializer = JSONRequestSerializer()
        serializer.setValue("it's \"quoted\" $HOME `x`", forHTTPHeaderField: "X-Odd")
        let request = try serializer.request(
            withMethod: "POST", urlString: "http://127.0.0.1:8080/users?a=1&b=2",
            parameters: ["name": "O'Brien"])
        let line = request.curlDescription()
        XCTAssertTrue(line.hasPrefix("curl -X 'POST' 'http://127.0.0.1:8080/users?a=1&b=2'"), line)
        XCTAssertTrue(line.contains(#"-H 'X-Odd: it'\''s "quoted" $HOME `x`'"#), line)
        XCTAssertTrue(line.contains(#"--data-binary '{"name":"O'\''Brien"}'"#), line)
        XCTAssertTrue(line.contains("-H 'Content-Type: application/json'"), line)
    }

    func testCookiesFileBodyPinsAndHead() throws {
        let storage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: "sessionkit.curl.tests")
        let url = URL(string: "https://api.example.test/v1")!
        let cookie = try XCTUnwrap(
            HTTPCookie(properties: [.domain: "api.example.test", .path: "/", .name: "session", .value: "abc"]))
        storage.setCookie(cookie)
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        let policy = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/BBBB", "sha256/AAAA"])
        let line = request.curlDescription(
            cookies: storage, policy: policy, bodyFile: URL(fileURLWithPath: "/tmp/body file.bin"))
        XCTAssertTrue(line.contains("-b 'session=<redacted>'"), line)
        XCTAssertFalse(line.contains("abc"), line)
        XCTAssertTrue(request.curlDescription(cookies: storage, includingSecrets: true).contains("-b 'session=abc'"))
        XCTAssertTrue(line.contains("--data-binary '@/tmp/body file.bin'"), line)
        XCTAssertTrue(line.contains("--pinnedpubkey 'sha256/AAAA;sha256/BBBB'"), line)
        request.httpMethod = "HEAD"
        XCTAssertTrue(request.curlDescription().hasPrefix("curl --head 'https://api.example.test/v1'"))
        storage.deleteCookie(cookie)
    }

    func testSecretsAreRedactedUnlessAskedFor() throws {
        var request = URLRequest(url: try XCTUnwrap(URL(string: "https://ada:pa55word@api.example.test/v1?q=1")))
        request.setValue("Bearer abc.def.ghi", forHTTPHeaderField: "Authorization")
        request.setValue("Basic cHJveHk6c2VjcmV0", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("a=xq1; b=two", forHTTPHeaderField: "Cookie")
        request.setValue("sid=xyz; Path=/; HttpOnly", forHTTPHeaderField: "Set-Cookie")
        request.setValue("kept", forHTTPHeaderField: "X-Visible")

        let line = request.curlDescription()
        for secret in ["abc.def.ghi", "cHJveHk6c2VjcmV0", "xq1", "two", "xyz", "pa55word"] {
            XCTAssertFalse(line.contains(secret), "\(secret) in \(line)")
        }
        XCTAssertTrue(line.contains("'https://ada:redacted@api.example.test/v1?q=1'"), line)
        XCTAssertTrue(line.contains("-H 'Authorization: Bearer <redacted>'"), line)
        XCTAssertTrue(line.contains("-H 'Proxy-Authorization: Basic <redacted>'"), line)
        XCTAssertTrue(line.contains("-b 'a=<redacted>; b=<redacted>'"), line)
        XCTAssertTrue(line.contains("-H 'Set-Cookie: sid=<redacted>; Path=/; HttpOnly'"), line)
        XCTAssertTrue(line.contains("-H 'X-Visible: kept'"), line)

        let clear = request.curlDescription(includingSecrets: true)
        XCTAssertTrue(clear.contains("'https://ada:pa55word@api.example.test/v1?q=1'"), clear)
        XCTAssertTrue(clear.contains("-H 'Authorization: Bearer abc.def.ghi'"), clear)
        XCTAssertTrue(clear.contains("-H 'Proxy-Authorization: Basic cHJveHk6c2VjcmV0'"), clear)
        XCTAssertTrue(clear.contains("-b 'a=xq1; b=two'"), clear)
        XCTAssertTrue(clear.contains("-H 'Set-Cookie: sid=xyz; Path=/; HttpOnly'"), clear)

        // A scheme-less credential is redacted whole; a URL without a password is unchanged.
        var bare = URLRequest(url: try XCTUnwrap(URL(string: "https://ada@api.example.test/")))
        bare.setValue("token123", forHTTPHeaderField: "authorization")
        let bareLine = bare.curlDescription()
        XCTAssertTrue(bareLine.lowercased().contains("-h 'authorization: <redacted>'"), bareLine)
        XCTAssertTrue(bareLine.contains("'https://ada@api.example.test/'"), bareLine)
    }
}

/// The command line, run by a real shell and curl against the loopback server, sends what the request would.
final class CURLDescriptionLiveTests: LoopbackTestCase {
    func testTheCommandSendsTheSameRequest() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else {
            throw XCTSkip("no curl command here")
        }
        let serializer = JSONRequestSerializer()
        serializer.setValue("it's \"quoted\" $HOME `x` \\ end", forHTTPHeaderField: "X-Odd")
        serializer.setAuthorizationHeaderField(username: "ada", password: "it's secret")
        let request = try serializer.request(
            withMethod: "PATCH", urlString: server.url("/anything/a?b=1&c=2").absoluteString,
            parameters: ["name": "O'Brien $USER"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        XCTAssertFalse(request.curlDescription().contains("YWRh"), "the credentials are redacted by default")
        process.arguments = ["-c", request.curlDescription(includingSecrets: true) + " --silent --output /dev/null"]
        let status: Int32 = await withCheckedContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(returning: -1) }
        }
        XCTAssertEqual(status, 0)
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(recorded.method, "PATCH")
        XCTAssertEqual(recorded.uri, "/anything/a?b=1&c=2")
        XCTAssertEqual(recorded.header("X-Odd"), "it's \"quoted\" $HOME `x` \\ end")
        XCTAssertEqual(recorded.header("Authorization"), request.value(forHTTPHeaderField: "Authorization"))
        XCTAssertEqual(recorded.body, request.httpBody)
    }
}
