import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `NSSecureCoding`, `NSCopying` and `SecureArchive`: round trips, copies, committed fixtures, signatures.
final class ArchivingTests: XCTestCase {
    func testEveryClassRoundTripsWithEveryField() throws {
        for fixture in ArchiveFixtures.all {
            let data = try SecureArchive.archive(fixture.object)
            let decoded = try fixture.decode(data)
            XCTAssertEqual(fixture.check(decoded), [], fixture.name)
        }
    }

    func testCommittedArchivesOfVersionOneStillDecode() throws {
        if ProcessInfo.processInfo.environment["SESSIONKIT_WRITE_FIXTURES"] != nil {
            for fixture in ArchiveFixtures.all {
                try SecureArchive.archive(fixture.object)
                    .write(to: ArchiveFixtures.directory.appendingPathComponent("v1/\(fixture.name).archive"))
            }
        }
        for fixture in ArchiveFixtures.all {
            let url = ArchiveFixtures.directory.appendingPathComponent("v1/\(fixture.name).archive")
            let data = try Data(contentsOf: url)
            let decoded = try fixture.decode(data)
            XCTAssertEqual(fixture.check(decoded), [], "v1 fixture \(fixture.name)")
        }
    }

    func testCopiesAreIndependentAndEqual() throws {
        for fixture in ArchiveFixtures.all {
            guard let copyable = fixture.object as? NSCopying else { continue }
            let copy = copyable.copy(with: nil)
            XCTAssertFalse((copy as AnyObject) === fixture.object, fixture.name)
            XCTAssertEqual(fixture.check(copy), [], "copy of \(fixture.name)")
        }
        let manager = ArchiveFixtures.configuredManager()
        let copy = try XCTUnwrap(manager.copy() as? HTTPSessionManager)
        XCTAssertFalse(copy.session === manager.session, "a copied manager has its own session")
        XCTAssertFalse(copy.requestSerializer === manager.requestSerializer)
        copy.requestSerializer.setValue("changed", forHTTPHeaderField: "X-Fixture")
        (copy.responseSerializer as? HTTPResponseSerializer)?.acceptableStatusCodes = nil
        XCTAssertEqual(manager.requestSerializer.value(forHTTPHeaderField: "X-Fixture"), "fixture", "copies diverge")
        XCTAssertNotNil((manager.responseSerializer as? HTTPResponseSerializer)?.acceptableStatusCodes)
    }

    func testClosuresAreNotCopied() throws {
        let manager = HTTPSessionManager()
        manager.taskDidComplete = { _, _, _ in }
        let copy = try XCTUnwrap(manager.copy() as? HTTPSessionManager)
        XCTAssertNil(copy.taskDidComplete)
    }

    func testSignedArchiveVerifiesAndRefusesTampering() throws {
        let key = Data("a signing key that is long enough to matter".utf8)
        let manager = ArchiveFixtures.configuredManager()
        let signed = try SecureArchive.archive(manager, signingKey: key)
        XCTAssertEqual(
            ArchiveFixtures.checkManager(
                try SecureArchive.unarchive(HTTPSessionManager.self, from: signed, verifyingWith: key)), [])

        for position in stride(from: 0, to: signed.count, by: max(1, signed.count / 200)) {
            var flipped = signed
            flipped[position] ^= 0x01
            XCTAssertThrowsError(
                try SecureArchive.unarchive(HTTPSessionManager.self, from: flipped, verifyingWith: key)
            ) {
                XCTAssertEqual($0 as? SecureArchiveError, .signatureMismatch, "bit \(position)")
            }
        }
        XCTAssertThrowsError(
            try SecureArchive.unarchive(
                HTTPSessionManager.self, from: signed,
                verifyingWith: Data("another key".utf8)))
        XCTAssertThrowsError(
            try SecureArchive.unarchive(
                HTTPSessionManager.self, from: try SecureArchive.archive(manager),
                verifyingWith: key), "an unsigned archive is refused")
    }

    func testWrongRootTypeAndUnknownClassesAreRefused() throws {
        let data = try SecureArchive.archive(JSONResponseSerializer())
        XCTAssertThrowsError(try SecureArchive.unarchive(HTTPRequestSerializer.self, from: data)) {
            XCTAssertEqual(
                $0 as? SecureArchiveError, .wrongRootType(expected: NSStringFromClass(HTTPRequestSerializer.self)))
        }
        // A subclass decodes where its superclass is asked for.
        XCTAssertNoThrow(try SecureArchive.unarchive(HTTPResponseSerializer.self, from: data))
        let foreign = try NSKeyedArchiver.archivedData(withRootObject: NSDate(), requiringSecureCoding: true)
        XCTAssertThrowsError(try SecureArchive.unarchive(HTTPResponseSerializer.self, from: foreign)) {
            XCTAssertEqual($0 as? SecureArchiveError, .classNotAllowed("NSDate"))
        }
    }

    func testRenamedTypeIsMappedOnDecoding() throws {
        // An archive from a version in which JSONResponseSerializer had another (same-length) name.
        let current = "SessionKit.JSONResponseSerializer", old = "SessionKit.OldJSONSerializerV1abc"
        XCTAssertEqual(current.utf8.count, old.utf8.count)
        var data = try SecureArchive.archive(ArchiveFixtures.configuredResponseSerializer(JSONResponseSerializer.self))
        XCTAssertNotNil(data.range(of: Data(current.utf8)))
        while let range = data.range(of: Data(current.utf8)) { data.replaceSubrange(range, with: Data(old.utf8)) }
        XCTAssertThrowsError(try SecureArchive.unarchive(JSONResponseSerializer.self, from: data)) {
            XCTAssertEqual($0 as? SecureArchiveError, .classNotAllowed(old))
        }
        SecureArchive.registerRenamedClass(named: old, as: JSONResponseSerializer.self)
        let decoded = try SecureArchive.unarchive(JSONResponseSerializer.self, from: data)
        XCTAssertEqual(ArchiveFixtures.checkResponse(decoded, JSONResponseSerializer.self), [])
    }

    func testNewerFormatVersionIsRefused() throws {
        // The version key of the root object says 2: this SessionKit reads version 1 only.
        let data = try SecureArchive.archive(HTTPResponseSerializer())
        var plist = try XCTUnwrap(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        var objects = try XCTUnwrap(plist["$objects"] as? [Any])
        let index = try XCTUnwrap(
            objects.firstIndex {
                ($0 as? Int) == 1 && type(of: $0) != Bool.self && !String(describing: $0).contains("true")
            })
        objects[index] = 2
        plist["$objects"] = objects
        let newer = try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
        XCTAssertThrowsError(try SecureArchive.unarchive(HTTPResponseSerializer.self, from: newer))
    }
}

/// A decoded manager behaves as the original did, against the loopback server.
final class ArchivedManagerBehaviourTests: LoopbackTestCase {
    private func configured() -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-Config": "from-configuration"]
        let manager = HTTPSessionManager(baseURL: server.url("/anything/v1"), sessionConfiguration: configuration)
        let serializer = JSONRequestSerializer()
        serializer.setValue("archived", forHTTPHeaderField: "X-Archived")
        serializer.writingOptions = [.sortedKeys]
        manager.requestSerializer = serializer
        let json = JSONResponseSerializer()
        json.removesKeysWithNullValues = true
        manager.responseSerializer = json
        return manager
    }

    func testDecodedManagerSendsTheSameRequestAndDecodesTheSameWay() async throws {
        let original = configured()
        let decoded = try SecureArchive.unarchive(HTTPSessionManager.self, from: try SecureArchive.archive(original))
        var recorded: [RecordedRequest] = []
        var objects: [[String: Any]] = []
        for manager in [original, decoded] {
            let result = try await manager.post("users", parameters: ["b": 2, "a": NSNull()])
            recorded.append(try XCTUnwrap(server.requests.last))
            objects.append(try XCTUnwrap(result.object as? [String: Any]))
        }
        XCTAssertEqual(recorded[0].uri, "/anything/v1/users")
        XCTAssertEqual(recorded[1].uri, recorded[0].uri)
        XCTAssertEqual(recorded[1].body, recorded[0].body)
        XCTAssertEqual(String(decoding: recorded[1].body, as: UTF8.self), #"{"a":null,"b":2}"#)
        for name in ["X-Archived", "Content-Type", "User-Agent", "X-Config"] {
            XCTAssertEqual(recorded[1].header(name), recorded[0].header(name), name)
        }
        XCTAssertEqual(recorded[1].header("X-Archived"), "archived")
        // removesKeysWithNullValues survived: the echoed "json" has no "a".
        XCTAssertNil((objects[1]["json"] as? [String: Any])?["a"])
        XCTAssertEqual(((objects[1]["json"] as? [String: Any])?.keys).map(Set.init), ["b"])
    }
}
