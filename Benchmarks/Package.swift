// swift-tools-version:6.1
import PackageDescription

// The benchmark of SessionKit (`make bench`, `make soak`): a package of its own, so that a consumer of SessionKit never
// resolves AsyncHTTPClient, SwiftNIO or anything else the benchmark compares against (shared decision 10).
//
// - SessionKit comes from the enclosing package by path, through its `SessionKit` product (and `OpenAPISessionKit`
//   for the OpenAPI rows, below).
// - The in-process loopback server is the root package's `SessionKitTestSupport` sources, reached through a directory
//   symlink (`Sources/BenchServer` → `../../Sources/SessionKitTestSupport`) and compiled here as a module of this
//   package, named `BenchServer` so that it never clashes with the root package's own target; nothing is exported.
// - zlib for the server's permessage-deflate goes through `CBenchZlib` (the root package's `CZlib` is no product).
// - Raw libcurl goes through `CBenchCurl`, the benchmark's own module map and typed setopt wrappers, since SessionKit
//   imports its `CCurl` internally.
// - swift-http-types for the HTTP core API's rows (`data(for: HTTPRequest)`), swift-distributed-tracing's
//   `InMemoryTracer` and swift-metrics' `TestMetrics` for the traced row; SessionKit depends on them too, so the
//   benchmark resolves nothing new.
// - The OpenAPI rows: the root package's `OpenAPISessionKit` product, with the root package's trait `OpenAPI` asked for
//   (tools 6.1), and swift-openapi-async-http-client for AsyncHTTPClient's transport. The generated client is the test
//   suite's: `BenchOpenAPIClient` compiles it (`Sources/BenchOpenAPIClient/Generated` is a directory symlink to
//   `../../../Tests/OpenAPISessionKitTests/Generated`) with a public wrapper, since its declarations are internal (and
//   its `Client` would clash with the benchmark's own).
let package = Package(
    name: "SessionKitBenchmarks",
    dependencies: [
        .package(name: "SessionKit", path: "..", traits: ["OpenAPI"]),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CBenchCurl",
            path: "Sources/CBenchCurl"
        ),
        .systemLibrary(
            name: "CBenchZlib",
            path: "Sources/CBenchZlib"
        ),
        .target(
            name: "BenchServer",
            dependencies: [
                "CBenchZlib",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            path: "Sources/BenchServer",
            resources: [.copy("Certificates")],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "BenchOpenAPIClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/BenchOpenAPIClient"
        ),
        .executableTarget(
            name: "sessionkit-bench",
            dependencies: [
                .product(name: "SessionKit", package: "SessionKit"),
                "BenchServer",
                "CBenchCurl",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "OpenAPISessionKit", package: "SessionKit"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                "BenchOpenAPIClient",
            ],
            path: "Sources/sessionkit-bench",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ]
)
