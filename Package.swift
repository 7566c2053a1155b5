// swift-tools-version:6.0
import PackageDescription

// Release builds skip Swift's run-time exclusivity checks (swift_beginAccess on every class property that is
// mutated in place): under load they were a tenth of the server's user time. Debug builds, which `swift test`
// and the fuzzers' CI run use, keep the checks, so an overlapping access still fails the suite. An unsafe flag
// means a package can use Faultline by path or branch, not by version tag.
let requestPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Faultline",
    products: [
        .library(name: "Faultline", targets: ["Faultline"]),
        .library(name: "FaultlineCore", targets: ["FaultlineCore"]),
        .executable(name: "faultline", targets: ["faultline"]),
    ],
    targets: [
        // libevent from Debian's libevent-dev, found through pkg-config. Only the Faultline target imports it.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"])]
        ),
        // Pure Swift: parser, scenarios, engine, journal. No sockets, no libevent.
        .target(name: "FaultlineCore", swiftSettings: requestPath),
        .target(name: "Faultline", dependencies: ["FaultlineCore", "CLibevent"], swiftSettings: requestPath),
        .executableTarget(name: "faultline", dependencies: ["Faultline"]),
        // Example URLSession clients, a careful one and a naive one, judged by the tests against the bundled scenarios.
        .target(name: "ExampleClients", path: "Examples/ExampleClients"),
        .testTarget(name: "FaultlineCoreTests", dependencies: ["FaultlineCore"]),
        .testTarget(name: "FaultlineTests", dependencies: ["Faultline", "FaultlineCore", "ExampleClients"]),
    ],
    swiftLanguageModes: [.v6]
)
