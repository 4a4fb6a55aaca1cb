import Foundation
@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A verb's path is resolved against the base URL exactly as Foundation resolves it, whether by Foundation or, for a
/// plain relative path, by appending it to the base.
final class BaseURLResolutionTests: XCTestCase {
    func testEveryPathResolvesAsFoundationResolvesIt() throws {
        let bases = [
            "http://a/v1/", "http://a/", "http://127.0.0.1:8080/v1", "https://h:1/a/b/", "http://a/v1/?x=1",
            "http://a/v1/#top", "http://a", "http+unix://%2Ftmp%2Fs.sock/api/", "http://127.0.0.1:8080",
            "https://[::1]:9",
            "http+unix://%2Ftmp%2Fs.sock",
        ]
        let paths = [
            "get", "bytes/100", "a/b/c", "a//b", "x.json", ".hidden", "a/...", "...", "a/./b", "../up", "./x", "a/..",
            "a/.", ".", "..", "?q=1", "/abs", "http://other/x", "a%20b", "a b", "a:b", "#f", "~user/x_y-z", "v2/",
            "é",
        ]
        for base in bases {
            let manager = HTTPSessionManager(baseURL: URL(string: base))
            for path in paths {
                let expected = URL(string: path, relativeTo: manager.baseURL)?.absoluteString
                XCTAssertEqual(try? manager.absoluteURLString(path), expected, "\(base) + \(path)")
            }
        }
    }

    func testOnlyPlainRelativePathsAreAppended() {
        for path in ["get", "a/b", "a//b", "x.json", ".hidden", "...", "a/...", "v2/", "~u/a_b-c"] {
            XCTAssertTrue(HTTPSessionManager.isPlainRelativePath(path), path)
        }
        for path in [
            "", "/abs", ".", "..", "./x", "../x", "a/./b", "a/..", "a/.", "?q", "#f", "a:b", "a%20b", "a b", "é",
        ] {
            XCTAssertFalse(HTTPSessionManager.isPlainRelativePath(path), path)
        }
    }
}
