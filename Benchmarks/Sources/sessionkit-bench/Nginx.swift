import Foundation

/// A local nginx for the benchmark: a configuration written into a temporary directory, a private CA and a leaf for
/// 127.0.0.1 and localhost made there with the openssl command line, one HTTP and one HTTPS port on 127.0.0.1, and
/// the same paths as the in-process server (`/bytes/100`, `/bytes/104857600`, `POST /status/200`). nginx runs as a
/// child process in the foreground (`daemon off`) and is stopped by its PID, never by name.
final class Nginx: @unchecked Sendable {
    // @unchecked Sendable: `process` is set once in `start` and only read afterwards.
    static let executable = "/usr/sbin/nginx"
    static let largeBody = 100 << 20

    let directory: URL
    let httpPort: Int
    let httpsPort: Int
    /// The private CA's certificate (PEM): what each client trusts its own way.
    let caFile: URL
    private var process: Process?

    var httpBase: String { "http://127.0.0.1:\(httpPort)" }
    var httpsBase: String { "https://127.0.0.1:\(httpsPort)" }
    var pid: Int32 { process?.processIdentifier ?? 0 }

    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// Makes the directory, the certificates, the bodies and the configuration, starts nginx and waits until both
    /// ports accept connections (at most 10 s).
    static func start() async throws -> Nginx {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bench-nginx-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        for sub in ["www/bytes", "tmp"] {
            try FileManager.default.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        // nginx's workers run as `nobody` when the master is root: they read the bodies and write request bodies.
        chmod(directory.path, 0o755)
        chmod(directory.appendingPathComponent("www").path, 0o755)
        chmod(directory.appendingPathComponent("www/bytes").path, 0o755)
        chmod(directory.appendingPathComponent("tmp").path, 0o777)
        try makeCertificates(in: directory)
        let large = directory.appendingPathComponent("www/bytes/\(largeBody)")
        guard FileManager.default.createFile(atPath: large.path, contents: nil) else { throw BenchError("cannot create \(large.path)") }
        let handle = try FileHandle(forWritingTo: large)
        let chunk = Data(repeating: UInt8(ascii: "d"), count: 1 << 20)
        for _ in 0..<(largeBody >> 20) { handle.write(chunk) }
        try handle.close()
        chmod(large.path, 0o644)

        let http = try freePort(), https = try freePort()
        let nginx = Nginx(directory: directory, httpPort: http, httpsPort: https, caFile: directory.appendingPathComponent("ca.pem"))
        let configuration = directory.appendingPathComponent("nginx.conf")
        try nginx.configuration.write(to: configuration, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-p", directory.path, "-c", configuration.path, "-e", directory.appendingPathComponent("error.log").path,
                             "-g", "daemon off;"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        nginx.process = process
        for _ in 0..<100 {
            if canConnect(http), canConnect(https) { return nginx }
            guard process.isRunning else { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        nginx.stop()
        throw BenchError("nginx did not start: \(log.suffix(800))")
    }

    private init(directory: URL, httpPort: Int, httpsPort: Int, caFile: URL) {
        self.directory = directory
        self.httpPort = httpPort
        self.httpsPort = httpsPort
        self.caFile = caFile
    }

    /// Stops nginx by its PID (SIGTERM to the master, which stops its worker), waits for it and removes the directory.
    func stop() {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            for _ in 0..<50 where process.isRunning { usleep(100_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process = nil
        try? FileManager.default.removeItem(at: directory)
    }

    /// One worker, no access log, keep-alive without a request limit, no TLS session reuse (every new connection is a
    /// full handshake). `/bytes/100` answers 100 bytes from the configuration, `/bytes/104857600` is a file sent with
    /// sendfile, and `POST /status/200` takes up to 16 MiB and discards it (nginx reads and drops the body of a request
    /// it answers with `return`).
    var configuration: String {
        let dir = directory.path
        let small = String(repeating: "s", count: 100)
        return """
        worker_processes 1;
        pid \(dir)/nginx.pid;
        error_log \(dir)/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            client_body_temp_path \(dir)/tmp/body;
            proxy_temp_path \(dir)/tmp/proxy;
            fastcgi_temp_path \(dir)/tmp/fastcgi;
            uwsgi_temp_path \(dir)/tmp/uwsgi;
            scgi_temp_path \(dir)/tmp/scgi;
            sendfile on;
            tcp_nopush on;
            tcp_nodelay on;
            keepalive_requests 10000000;
            keepalive_timeout 120s;
            server {
                listen 127.0.0.1:\(httpPort) backlog=4096;
                listen 127.0.0.1:\(httpsPort) ssl backlog=4096;
                ssl_certificate \(dir)/leaf.pem;
                ssl_certificate_key \(dir)/leaf.key;
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_session_cache off;
                ssl_session_tickets off;
                root \(dir)/www;
                location = /bytes/100 {
                    default_type application/octet-stream;
                    return 200 "\(small)";
                }
                location /bytes/ {
                    default_type application/octet-stream;
                }
                location = /status/200 {
                    client_max_body_size 16m;
                    return 200 "";
                }
            }
        }

        """
    }

    /// A private CA (P-256) and a leaf for IP 127.0.0.1 and DNS localhost, signed by it, valid for two days.
    static func makeCertificates(in directory: URL) throws {
        let dir = directory.path
        let extensions = directory.appendingPathComponent("leaf.ext")
        try """
        basicConstraints=critical,CA:FALSE
        keyUsage=critical,digitalSignature,keyEncipherment
        extendedKeyUsage=serverAuth
        subjectAltName=IP:127.0.0.1,DNS:localhost

        """.write(to: extensions, atomically: true, encoding: .utf8)
        let commands: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(dir)/ca.key",
             "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=SessionKit benchmark CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(dir)/leaf.key",
             "-out", "\(dir)/leaf.csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "\(dir)/leaf.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key", "-CAcreateserial",
             "-out", "\(dir)/leaf.pem", "-days", "2", "-extfile", extensions.path],
        ]
        for arguments in commands {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()  // a short local command, on the parent's own task thread
            guard process.terminationStatus == 0 else { throw BenchError("openssl \(arguments[0]) failed") }
        }
        chmod("\(dir)/ca.pem", 0o644)
    }

    /// A port on 127.0.0.1 that was free a moment ago (bound to port 0 and closed).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw BenchError("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
