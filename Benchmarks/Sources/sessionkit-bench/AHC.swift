import AsyncHTTPClient
import BenchServer
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// AsyncHTTPClient 1.37 as its documentation shows it: one `HTTPClient` on NIO's shared event-loop group, its
/// future-based API (the child waits on its own measurement thread, never on an event loop), the default pool
/// (8 connections per host) or a pool of 64. A private CA is trusted with `tlsConfiguration.trustRoots`.
enum AHC {
    static func makeClient(pool64: Bool, caFile: String?) throws -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        if pool64 {
            configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        }
        if let caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
            configuration.tlsConfiguration = tls
        }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    static func run(client pool64: Bool, scenario: Scenario, url: URL, count: Int, caFile: String?,
                    latencies: LockedBox<[Double]>) throws -> Int {
        let client = try makeClient(pool64: pool64, caFile: caFile)
        defer { try? client.syncShutdown() }
        let string = url.absoluteString
        switch scenario {
        case .sequential, .soak, .handshake:
            var headers = HTTPHeaders()
            if scenario == .handshake { headers.add(name: "Connection", value: "close") }
            for index in 0..<count {
                let start = DispatchTime.now().uptimeNanoseconds
                let request = try HTTPClient.Request(url: string, method: .GET, headers: headers)
                let response = try client.execute(request: request).wait()
                guard response.status == .ok else { throw BenchError("AHC: status \(response.status)") }
                latencies.write { $0.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6) }
                if scenario == .soak { Measurement.reportRSS(index, count) }
            }
            return 0
        case .concurrent64:
            try Measurement.concurrently(count: count, inFlight: 64) { done in
                client.get(url: string).whenComplete { result in
                    switch result {
                    case .success(let response): done(response.status == .ok ? nil : BenchError("AHC: status \(response.status)"))
                    case .failure(let error): done(error)
                    }
                }
            }
            return 0
        case .download100MiB:
            let destination = Measurement.temporaryFile()
            defer { try? FileManager.default.removeItem(at: destination) }
            let delegate = try FileDownloadDelegate(path: destination.path)
            _ = try client.execute(request: try HTTPClient.Request(url: string), delegate: delegate).wait()
            return Measurement.fileSize(destination)
        case .memory100MiB:
            let response = try client.get(url: string).wait()
            return response.body?.readableBytes ?? 0
        case .upload10MiB:
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/octet-stream")
            let body = Measurement.uploadBody
            for _ in 0..<count {
                let request = try HTTPClient.Request(url: string, method: .POST, headers: headers, body: .data(body))
                let response = try client.execute(request: request).wait()
                guard response.status == .ok else { throw BenchError("AHC: status \(response.status)") }
            }
            return count * body.count
        case .stream:
            throw BenchError("the stream scenario is SessionKit's only")
        }
    }
}
