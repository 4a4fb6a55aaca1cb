// swift-tools-version:6.1
import PackageDescription

// A consumer of SessionKit as a new user writes one (issue 13): swift-tools-version 6.0, so Swift 6 language mode,
// SessionKit by path and nothing else. `make consumer-test` builds it with warnings as errors and runs
// `consumer-checks`, which serves 127.0.0.1:8080 with a small server of its own (Foundation and Glibc sockets), runs
// the closure forms from the main actor and from an actor and every async form, then runs `quick-start` (the README's
// quick start, checked against the README by the make target) against the same server. Any crash, failed check or
// compiler diagnostic fails the target. `consumer-checks` also uses the OpenAPI transport (SessionKit's `OpenAPI` trait
// and the OpenAPISessionKit product, with swift-openapi-runtime and swift-http-types as a user of it declares them).
let package = Package(
    name: "SessionKitConsumer",
    dependencies: [
        .package(name: "SessionKit", path: "../..", traits: ["OpenAPI"]),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "quick-start",
            dependencies: [.product(name: "SessionKit", package: "SessionKit")],
            path: "Sources/QuickStart",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "consumer-checks",
            dependencies: [
                .product(name: "SessionKit", package: "SessionKit"),
                .product(name: "OpenAPISessionKit", package: "SessionKit"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/ConsumerChecks",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
