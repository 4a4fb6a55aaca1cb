import CFuzzDriver
import Foundation
import SessionKit

// sessionkit-fuzz TARGET [libFuzzer arguments…]
//
// Feeds arbitrary bytes to one of SessionKit's parsers. Built with `make fuzz` (`-sanitize=fuzzer`) it runs
// libFuzzer; in a plain build it replays the files (or folders of files) given as arguments, which is how the test
// suite re-runs the committed corpus.

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "--write-archive-seeds" {
    do {
        try FuzzTarget.writeArchiveSeeds(to: arguments[2])
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cannot write seeds: \(error)\n".utf8))
        exit(1)
    }
}
guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
    FileHandle.standardError.write(Data("usage: sessionkit-fuzz TARGET [options] [corpus…]; targets: \(names)\n".utf8))
    exit(2)
}
FuzzTarget.selected = target

// libFuzzer sees argv without the target name.
var driverArguments = [arguments[0]] + arguments.dropFirst(2)
var argc = Int32(driverArguments.count)
var cStrings: [UnsafeMutablePointer<CChar>?] = driverArguments.map { strdup($0) } + [nil]
let status: Int32 = cStrings.withUnsafeMutableBufferPointer { buffer in
    var argv = buffer.baseAddress
    return sk_run_fuzzer(&argc, &argv) { data, size in
        FuzzTarget.selected.run(Data(bytes: data!, count: size))
        return 0
    }
}
if status != -1 { exit(status) }

// Not a fuzzer build: replay every file named (folders are walked), `-runs=N` times over.
var replayed = 0
let rounds = driverArguments.first { $0.hasPrefix("-runs=") }.flatMap { Int($0.dropFirst(6)) } ?? 1
for _ in 0..<max(1, rounds) {
    for path in driverArguments.dropFirst() where !path.hasPrefix("-") {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
        let files =
            isDirectory.boolValue
            ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
            : [path]
        for file in files {
            if let data = FileManager.default.contents(atPath: file) {
                target.run(data)
                replayed += 1
            }
        }
    }
}
let procStatus = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
let peak =
    procStatus.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.map {
        $0.dropFirst(6).trimmingCharacters(in: .whitespaces)
    } ?? "?"
print(
    "sessionkit-fuzz \(target.rawValue): replayed \(replayed) inputs without a crash, peak RSS \(peak) (not a fuzzer build)"
)
