// swift-tools-version:6.0
import PackageDescription

// The core library (`SessionKit`) depends only on Foundation, FoundationNetworking, libcurl, OpenSSL and swift-log
// (decision 5 of the shared architecture map). SwiftNIO is used by the loopback test server only.
let package = Package(
    name: "SessionKit",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "SessionKit", targets: ["SessionKit"]),
        .executable(name: "sessionkit-demo", targets: ["sessionkit-demo"]),
        .executable(name: "sessionkit-bench", targets: ["sessionkit-bench"]),
        .executable(name: "sessionkit-fuzz", targets: ["sessionkit-fuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", exact: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", exact: "1.46.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", exact: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
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
            name: "SessionKit",
            dependencies: ["CCurl", "COpenSSL", "CNetlink", .product(name: "Logging", package: "swift-log")],
            path: "Sources/SessionKit",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "SessionKitTestSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            path: "Sources/SessionKitTestSupport",
            resources: [.copy("Certificates")],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "sessionkit-demo",
            dependencies: ["SessionKit", "SessionKitTestSupport"],
            path: "Sources/sessionkit-demo",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "sessionkit-bench",
            dependencies: ["SessionKit", "SessionKitTestSupport", "CCurl"],
            path: "Sources/sessionkit-bench",
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
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "SessionKitTests",
            dependencies: ["SessionKit", "SessionKitTestSupport", "CCurl", .product(name: "Logging", package: "swift-log")],
            path: "Tests/SessionKitTests",
            exclude: ["Fixtures"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ]
)
