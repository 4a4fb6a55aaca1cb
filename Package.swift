// swift-tools-version:6.1
import PackageDescription

// SessionKit runs on Linux only (Debian 12 / Ubuntu 22.04+ with Swift 6.1 or later); macOS is not supported: the
// library is built on FoundationNetworking, libcurl with OpenSSL and the Linux routing netlink (CNetlink), so no
// `platforms` are declared.
//
// The core library (`SessionKit`) depends only on Foundation, FoundationNetworking, libcurl, OpenSSL, zlib (WebSocket
// permessage-deflate; libcurl links it already) and the server ecosystem's API packages without I/O (swift-log,
// swift-http-types, swift-distributed-tracing with swift-service-context, swift-metrics): a package that depends on it
// resolves those and nothing else. `OpenAPISessionKit` (the
// swift-openapi-runtime `ClientTransport`) is a product of its own whose dependency on swift-openapi-runtime is
// conditional on the trait `OpenAPI` (tools 6.1): SwiftPM resolves for a dependent whatever any product uses, so
// without the trait every consumer of SessionKit would fetch the runtime. Its users ask for the trait; this repository
// builds with `--traits OpenAPI` (the Makefile's `TRAITS`). SwiftNIO (the loopback test server), the DocC plugin, the
// demo and the fuzzer stay in this package as targets without products; SwiftPM still builds and runs a root package's
// executable targets by name (`swift run sessionkit-demo`). The benchmark is a
// package of its own, `Benchmarks/`, so that AsyncHTTPClient (one of its clients) is never resolved by a consumer.
// Dependencies are version ranges, so that a consumer can share them with its own.
let package = Package(
    name: "SessionKit",
    products: [
        .library(name: "SessionKit", targets: ["SessionKit"]),
        .library(name: "OpenAPISessionKit", targets: ["OpenAPISessionKit"]),
    ],
    traits: [
        .trait(
            name: "OpenAPI",
            description:
                "SessionKitTransport, the swift-openapi-runtime ClientTransport of the OpenAPISessionKit product."
        )
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-service-context", from: "1.5.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "CCurl",
            path: "Sources/CCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        .target(
            name: "COpenSSL",
            path: "Sources/COpenSSL",
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        .target(
            name: "CNetlink",
            path: "Sources/CNetlink"
        ),
        .target(
            name: "CZlib",
            path: "Sources/CZlib",
            linkerSettings: [.linkedLibrary("z")]
        ),
        .target(
            name: "SessionKit",
            dependencies: [
                "CCurl", "COpenSSL", "CNetlink", "CZlib", .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceContextModule", package: "swift-service-context"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Sources/SessionKit",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "OpenAPISessionKit",
            dependencies: [
                "SessionKit",
                .product(
                    name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: .when(traits: ["OpenAPI"])),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/OpenAPISessionKit",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "SessionKitTestSupport",
            dependencies: [
                "CZlib",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            path: "Sources/SessionKitTestSupport",
            resources: [.copy("Certificates")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "sessionkit-demo",
            dependencies: [
                "SessionKit", "SessionKitTestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/sessionkit-demo",
            // Swift 5 mode: `setvbuf(stdout, …)` reads a C global that Swift 6 refuses; the demo's code is otherwise
            // Swift 6 clean.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "CFuzzDriver",
            path: "Sources/CFuzzDriver"
        ),
        .executableTarget(
            name: "sessionkit-fuzz",
            dependencies: ["SessionKit", "CFuzzDriver"],
            path: "Sources/sessionkit-fuzz",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "SessionKitTests",
            dependencies: [
                "SessionKit", "SessionKitTestSupport", "CCurl", "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            path: "Tests/SessionKitTests",
            exclude: ["Fixtures"],
            // Swift 5 mode for now: the tests' callback helpers (`awaitCallback`'s `done`) are not `@Sendable`, and
            // in Swift 6 mode hundreds of closures that capture them would need rewriting. IntegrationTests/Consumer
            // checks SessionKit's API from Swift 6 code.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "OpenAPISessionKitTests",
            dependencies: [
                "OpenAPISessionKit", "SessionKit", "SessionKitTestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            path: "Tests/OpenAPISessionKitTests",
            // The client in Generated/ was generated once from openapi.yaml (README.md says how), so that neither CI
            // nor a consumer runs swift-openapi-generator.
            exclude: ["openapi.yaml", "openapi-generator-config.yaml", "README.md"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
