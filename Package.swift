// swift-tools-version:6.0
import PackageDescription

// No unsafe flags: they would stop other packages from depending on a tagged release of Faultline. The run-time
// exclusivity checks that an unsafe flag used to switch off are avoided in the code instead: the loop-confined
// classes on the request path mark their stored properties `@exclusivity(unchecked)` (ARCHITECTURE §1).
let package = Package(
    name: "Faultline",
    // macOS 15: the loop's cross-thread queue uses `Mutex` (Synchronization). Linux is tested; macOS is built to
    // run, not yet tested here (docs/PORTABILITY.md).
    // iOS 16: for FaultlineClient in a simulator test bundle (`Duration` in its API); only FaultlineCore and
    // FaultlineClient are meant to build for iOS, and that is not tested yet (docs/PORTABILITY.md).
    platforms: [.macOS(.v15), .iOS(.v16)],
    products: [
        .library(name: "Faultline", targets: ["Faultline"]),
        .library(name: "FaultlineCore", targets: ["FaultlineCore"]),
        // The `.faultline(…)` Swift Testing trait: a server per test. Apart, so the library does not link Testing.
        .library(name: "FaultlineTesting", targets: ["FaultlineTesting"]),
        .library(name: "FaultlineClient", targets: ["FaultlineClient"]),
        .executable(name: "faultline", targets: ["FaultlineCLI"]),
    ],
    targets: [
        // libevent from Debian's libevent-dev or Homebrew's libevent, found through pkg-config. Only the Faultline
        // target imports it.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"]), .brew(["libevent"])]
        ),
        // OpenSSL 3 from Debian's libssl-dev or Homebrew's openssl@3 (keg-only: SwiftPM adds the brew prefix's
        // pkgconfig folder for a brew provider), found through pkg-config. Only the Faultline target imports it:
        // the TLS transport and the certificate authority.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // nghttp2 from Debian's libnghttp2-dev or Homebrew's nghttp2, found through pkg-config. Only the HTTP/2
        // codec imports it (FaultlineHTTP2, ARCHITECTURE §4a), and its tests (an nghttp2 client on memory).
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["nghttp2"])]
        ),
        // Pure Swift: parser, scenarios, engine, journal, and the control vocabulary (`FaultlineControl`, `Report`,
        // `PolicyState`). No sockets, no libevent; FoundationEssentials on Linux, never Foundation: the server and
        // the `faultline` binary link no ICU and no libcurl (ARCHITECTURE §1).
        .target(name: "FaultlineCore"),
        // The remote control of a running server (`FaultlineRemote`, over URLSession): Foundation (FoundationNetworking
        // on Linux, hence libcurl) and FaultlineCore only, no libevent, so an iOS simulator test bundle can link it to
        // drive a `faultline serve` on the Mac host. Neither the server library nor the binary depends on it.
        .target(name: "FaultlineClient", dependencies: ["FaultlineCore"]),
        // The HTTP/2 codec on nghttp2: a connection's streams as exchanges, their scripts as frames. No sockets and
        // no loop: it talks to the world through `HTTP2ConnectionIO` (a connection host, or a fake one in its tests
        // and the h2-frames fuzzer), so it builds and is tested apart from the server.
        .target(name: "FaultlineHTTP2", dependencies: ["FaultlineCore", "CNghttp2"]),
        // The OpenSSL side of a TLS connection: keys, certificates, the server context with its ClientHello
        // decisions, and a session over memory BIOs. No sockets and no loop (the transport that carries it over
        // TCP is the server's), so the tls-accept fuzzer builds it alone.
        .target(name: "FaultlineTLS", dependencies: ["FaultlineCore", "COpenSSL"]),
        // The admin API's OpenAPI document and the dashboard's page, script, style and icon are compiled into the
        // binary as bytes (`PackageResources.openapi_json`, `.dashboard_js`, …): served under `/__faultline/` with no
        // file needed at run time. docs/openapi.json links to the first.
        .target(
            name: "Faultline", dependencies: ["FaultlineCore", "FaultlineHTTP2", "FaultlineTLS", "CLibevent", "COpenSSL"],
            resources: [
                .embedInCode("Resources/openapi.json"), .embedInCode("Resources/dashboard.html"),
                .embedInCode("Resources/dashboard.js"), .embedInCode("Resources/dashboard.css"),
                .embedInCode("Resources/favicon.svg"),
            ]),
        .target(name: "FaultlineTesting", dependencies: ["Faultline"]),
        // The executable `faultline` (the product's name is the binary's): the command line's parser and commands.
        // Its target, folder and module are named apart from the library's (`Faultline`), since a case-insensitive
        // file system (macOS's default) would make `Sources/faultline` one folder with `Sources/Faultline`, and
        // `faultline.swiftmodule` one file with `Faultline.swiftmodule` in the build folder.
        // `faultline init` writes the scenarios' JSON Schema from the binary: Resources/faultline.schema.json links to
        // scenarios/faultline.schema.json, compiled in as bytes (`PackageResources.faultline_schema_json`).
        .executableTarget(
            name: "FaultlineCLI", dependencies: ["Faultline", "FaultlineTLS"],
            resources: [.embedInCode("Resources/faultline.schema.json")]),
        // Example URLSession clients, a careful one and a naive one, judged by the tests against the bundled scenarios.
        .target(name: "ExampleClients", path: "Examples/ExampleClients"),
        .testTarget(name: "FaultlineCoreTests", dependencies: ["FaultlineCore"]),
        // The HTTP/2 codec on a fake transport and clock, no socket; an nghttp2 client session on memory plays the
        // client. FuzzChecks/ (the fake IO and the h2-frames rules) is compiled into the fuzzer too.
        .testTarget(name: "FaultlineHTTP2Tests", dependencies: ["FaultlineHTTP2", "FaultlineCore", "CNghttp2"]),
        // `scenarios` there links to the bundled scenarios/, so the README's sample finds them next to its source file;
        // InitSample/ is what `faultline init --swift` writes, its test and scenarios/example.json, byte for byte.
        .testTarget(
            name: "FaultlineTests",
            dependencies: ["Faultline", "FaultlineCore", "FaultlineClient", "FaultlineTLS", "FaultlineTesting", "ExampleClients"],
            exclude: ["scenarios", "InitSample/scenarios"]),
        // The CLI's parser and commands, called directly (`@testable import FaultlineCLI`: SwiftPM links an
        // executable target's code into a test target). Tests that run the built binary stay in FaultlineTests.
        .testTarget(name: "FaultlineCLITests", dependencies: ["FaultlineCLI", "Faultline", "FaultlineCore"]),
    ],
    swiftLanguageModes: [.v6]
)
