import Foundation
import SessionKit
import XCTest

/// Thousands of damaged archives give errors, never a crash of this process.
final class HostileArchiveTests: XCTestCase {
    /// A small deterministic generator, so that a failure can be replayed.
    private struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
    }

    private func replace(_ data: Data, _ old: String, _ new: String) -> Data? {
        let oldBytes = Data(old.utf8), newBytes = Data(new.utf8)
        guard oldBytes.count == newBytes.count, let range = data.range(of: oldBytes) else { return nil }
        var copy = data
        copy.replaceSubrange(range, with: newBytes)
        return copy
    }

    func testMutatedArchivesNeverCrash() throws {
        var generator = Generator(state: 0x5E55_10CC)
        var attempts = 0
        var refused = 0
        for fixture in ArchiveFixtures.all {
            let archive = try SecureArchive.archive(fixture.object)
            var mutants: [Data] = []
            for _ in 0..<250 {  // single bit flips
                var copy = archive
                copy[generator.below(copy.count)] ^= UInt8(1 << generator.below(8))
                mutants.append(copy)
            }
            for _ in 0..<100 {  // several random bytes
                var copy = archive
                for _ in 0..<(1 + generator.below(8)) {
                    copy[generator.below(copy.count)] = UInt8(generator.below(256))
                }
                mutants.append(copy)
            }
            for _ in 0..<50 { mutants.append(archive.prefix(generator.below(archive.count))) }  // truncations
            // References out of range: every UID (marker 0x80, one byte) pointed past the object table.
            for index in archive.indices.dropLast() where archive[index] == 0x80 {
                var copy = archive
                copy[index + 1] = 0xFF
                mutants.append(copy)
            }
            // Swapped class names, same length so that the file stays well formed.
            let swaps = [
                ("NSDictionary", "NSDate\0\0\0\0\0\0"), ("NSArray", "NSSet\0\0"), ("NSURL", "NSUUI"),
                ("HTTPRequestSerializer", "JSONRequestSerializer"), ("JSONRequestSerializer", "HTTPRequestSerializer"),
                ("JSONResponseSerializer", "HTTPResponseSerializer"), ("XMLParser", "NSXMLPars"),
                ("URLSessionManager", "URLSessionManagex"), ("NSString", "NSNumber"),
            ]
            for (old, new) in swaps { if let swapped = replace(archive, old, new) { mutants.append(swapped) } }

            for (number, mutant) in mutants.enumerated() {
                if ProcessInfo.processInfo.environment["SESSIONKIT_TRACE_MUTANTS"] != nil {
                    FileHandle.standardError.write(
                        Data("mutant \(fixture.name) #\(number): \(mutant.base64EncodedString())\n".utf8))
                }
                attempts += 1
                do {
                    _ = try fixture.decode(mutant)
                } catch {
                    refused += 1
                }
            }
        }
        XCTAssertGreaterThan(attempts, 4_000)
        XCTAssertGreaterThan(refused, attempts / 2, "most damaged archives must be refused")
    }

    func testRandomBytesAndHostileShapesAreRefused() throws {
        var generator = Generator(state: 42)
        for length in [0, 1, 8, 40, 100, 1_000] {
            for _ in 0..<50 {
                var bytes = (0..<length).map { _ in UInt8(generator.below(256)) }
                if length >= 8 && generator.below(2) == 0 { bytes.replaceSubrange(0..<8, with: Array("bplist00".utf8)) }
                XCTAssertThrowsError(try SecureArchive.unarchive(HTTPSessionManager.self, from: Data(bytes)))
            }
        }
        // A well-formed property list that is not a keyed archive.
        let plain = try PropertyListSerialization.data(
            fromPropertyList: ["$objects": ["x"]], format: .binary, options: 0)
        XCTAssertThrowsError(try SecureArchive.unarchive(HTTPSessionManager.self, from: plain))
        // An XML property list is refused (archives are binary).
        let xml = try PropertyListSerialization.data(fromPropertyList: ["a": 1], format: .xml, options: 0)
        XCTAssertThrowsError(try SecureArchive.unarchive(HTTPSessionManager.self, from: xml))
    }
}
