import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Foundation's URLSession against the HTTPS listener, in process. On Linux, FoundationNetworking is libcurl
/// (the system's, OpenSSL) with the system's CA bundle, and no way to add a CA: the
/// `URLSessionCertificateAuthorityInfoFile` environment variable is read only on Android
/// (swift-corelibs-foundation EasyHandle.swift, `#if os(Android)`; the Linux library does not contain the
/// string), and server-trust challenges are not delivered. So here even `valid` is refused, and every refusal
/// is `URLError.Code.unknown` (-1) with libcurl's message as the description: `valid` and `expired` read
/// alike ("unable to get local issuer certificate": the chain fails before the dates are looked at),
/// `self-signed` says "self-signed certificate". On Apple
/// platforms the expected codes differ (-1202 untrusted, -1201 expired, -1203 ...), from Apple's
/// documentation; they are not measured here.
///
/// libcurl does read Debian's system bundle, /etc/ssl/certs/ca-certificates.crt: `TLSURLSessionSystemTrustTests`
/// below runs when the CA of `FAULTLINE_SYSTEM_TRUSTED_TLS_DIR` has been put there (scripts/install-test-ca.sh).
@Suite struct TLSURLSessionTests {
    static let scenario = #"""
    { "name": "tls", "routes": [ { "id": "hi", "match": { "method": "GET", "path": "/hi" },
      "responses": [ { "status": 200, "text": "hello" } ] } ] }
    """#

    /// A private folder (0700) for the authority; removed by the caller.
    static func scratchFolder() throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("faultline-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        return path
    }

    struct Outcome {
        var error: URLError?
        var status: Int?
        var body: String?
        var message: String? { error?.userInfo[NSLocalizedDescriptionKey] as? String }
    }

    /// GET https://localhost:PORT/hi on a server whose TLS listener serves `certificate`; waits for the
    /// handshake's journal entry.
    /// `tlsDirectory` is the authority's folder; nil for a new one in a scratch folder (a CA nobody trusts).
    static func fetch(
        _ certificate: TLSCertificateName, tlsDirectory: String? = nil
    ) async throws -> (Outcome, [JournalEntry]) {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try TestSupport.server([scenario]) {
            $0.tls = TLSOptions(port: 0, directory: tlsDirectory ?? folder + "/tls", certificate: certificate)
        }
        defer { Task { await server.stop() } }
        let port = try #require(server.tlsPort)
        #expect(server.httpsURL?.absoluteString == "https://127.0.0.1:\(port)")
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: URL(string: "https://localhost:\(port)/hi")!)
        request.timeoutInterval = 5
        var outcome = Outcome()
        do {
            let (data, response) = try await session.data(for: request)
            outcome.status = (response as? HTTPURLResponse)?.statusCode
            outcome.body = String(decoding: data, as: UTF8.self)
        } catch let error as URLError {
            outcome.error = error
        }
        // The handshake's entry (a connection entry when it failed), with a deadline.
        let deadline = ContinuousClock.now + .seconds(5)
        var entries = await server.requests(JournalFilter())
        while entries.isEmpty || entries.contains(where: { $0.tls?.handshake == .pending }) {
            #expect(ContinuousClock.now < deadline, "no settled journal entry for the handshake")
            if ContinuousClock.now >= deadline { break }
            try await Task.sleep(for: .milliseconds(20))
            entries = await server.requests(JournalFilter())
        }
        return (outcome, entries)
    }

    @Test func validIsUntrustedWithoutAWayToAddTheCA() async throws {
        let (outcome, entries) = try await Self.fetch(.valid)
        #expect(outcome.status == nil)
        #expect(outcome.error?.code == .unknown, "\(String(describing: outcome.error))")
        #expect(outcome.message == "SSL certificate problem: unable to get local issuer certificate")
        let entry = try #require(entries.first)
        #expect(entry.tls?.certificate == "valid" && entry.tls?.alertReceived == "unknown_ca")
    }

    @Test func expiredAndSelfSignedFail() async throws {
        let (expired, expiredEntries) = try await Self.fetch(.expired)
        #expect(expired.error?.code == .unknown, "\(String(describing: expired.error))")
        #expect(expired.message == "SSL certificate problem: unable to get local issuer certificate")
        #expect(expiredEntries.first?.tls?.certificate == "expired")
        #expect(expiredEntries.first?.tls?.alertReceived == "unknown_ca")
        let (selfSigned, selfSignedEntries) = try await Self.fetch(.selfSigned)
        #expect(selfSigned.error?.code == .unknown, "\(String(describing: selfSigned.error))")
        #expect(selfSigned.message == "SSL certificate problem: self-signed certificate")
        #expect(selfSignedEntries.first?.tls?.alertReceived == "unknown_ca")
    }

    /// A TLS state folder whose root CA is in the system's trust store (scripts/install-test-ca.sh, which
    /// `make test` runs as root on Debian with CI=true or FAULTLINE_INSTALL_TEST_CA=1); nil otherwise.
    static let systemTrustedDirectory: String? = {
        guard let path = ProcessInfo.processInfo.environment["FAULTLINE_SYSTEM_TRUSTED_TLS_DIR"], !path.isEmpty
        else { return nil }
        return path
    }()
}

/// URLSession over HTTPS where libcurl can trust Faultline: the CA of `FAULTLINE_SYSTEM_TRUSTED_TLS_DIR` is in
/// /etc/ssl/certs/ca-certificates.crt, the bundle FoundationNetworking's libcurl reads. Skipped unless that
/// variable names such a folder; nothing here touches the trust store.
@Suite(.enabled(if: TLSURLSessionTests.systemTrustedDirectory != nil,
                "set FAULTLINE_SYSTEM_TRUSTED_TLS_DIR to a --tls-dir whose CA the system trusts"))
struct TLSURLSessionSystemTrustTests {
    var directory: String { TLSURLSessionTests.systemTrustedDirectory ?? "" }

    @Test func validSucceeds() async throws {
        let (outcome, entries) = try await TLSURLSessionTests.fetch(.valid, tlsDirectory: directory)
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(outcome.status == 200 && outcome.body == "hello")
        let entry = try #require(entries.first)
        #expect(entry.tls?.certificate == "valid" && entry.tls?.handshake == .completed)
    }

    /// What libcurl (FoundationNetworking) says for each certificate when the CA is trusted, as measured on
    /// Debian 12 (libcurl 7.88, OpenSSL 3.0): every refusal is `URLError.Code.unknown` (-1) with libcurl's
    /// message, and the journal records the alert libcurl's OpenSSL sent. `wrong-host` is refused after the
    /// handshake (libcurl checks the name itself and closes without an alert), so the server saw it complete.
    /// `cn-only`, `too-long-validity` and `rotated` are accepted, as by curl: libcurl still falls back to the
    /// common name, and neither a lifetime limit nor a pin is libcurl's to check.
    static let refusals: [(TLSCertificateName, String, String?)] = [
        (.expired, "SSL certificate problem: certificate has expired", "certificate_expired"),
        (.notYetValid, "SSL certificate problem: certificate is not yet valid", "bad_certificate"),
        (.wrongHost, "SSL: no alternative certificate subject name matches target host name 'localhost'", nil),
        (.selfSigned, "SSL certificate problem: self-signed certificate", "unknown_ca"),
        (.untrustedRoot, "SSL certificate problem: unable to get local issuer certificate", "unknown_ca"),
        (.incompleteChain, "SSL certificate problem: unable to get local issuer certificate", "unknown_ca"),
        (.expiredIntermediate, "SSL certificate problem: certificate has expired", "certificate_expired"),
        (.noServerAuthEKU, "SSL certificate problem: unsuitable certificate purpose", "unsupported_certificate"),
        (.weakKey, "SSL certificate problem: EE certificate key too weak", "bad_certificate"),
    ]

    @Test(arguments: refusals)
    func refused(_ name: TLSCertificateName, _ message: String, _ alert: String?) async throws {
        let (outcome, entries) = try await TLSURLSessionTests.fetch(name, tlsDirectory: directory)
        #expect(outcome.status == nil)
        #expect(outcome.error?.code == .unknown, "\(String(describing: outcome.error))")
        #expect(outcome.message == message)
        let entry = try #require(entries.first)
        #expect(entry.tls?.certificate == name.rawValue)
        #expect(entry.tls?.alertReceived == alert)
        #expect(entry.tls?.handshake == (alert == nil ? .completed : .clientAlert))
    }

    @Test(arguments: [TLSCertificateName.cnOnly, .tooLongValidity, .rotated])
    func accepted(_ name: TLSCertificateName) async throws {
        let (outcome, _) = try await TLSURLSessionTests.fetch(name, tlsDirectory: directory)
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(outcome.status == 200 && outcome.body == "hello")
    }
}

/// URLSession over HTTP/2: FoundationNetworking's libcurl offers `h2` by ALPN, so with the CA trusted it speaks
/// HTTP/2 to the TLS port. Each bundled GET route without a fault, over h2 and over HTTP/1.1 (a second server
/// whose ALPN offers only `http/1.1`), gets the same status and body. Skipped without the trusted CA.
@Suite(.enabled(if: TLSURLSessionTests.systemTrustedDirectory != nil,
                "set FAULTLINE_SYSTEM_TRUSTED_TLS_DIR to a --tls-dir whose CA the system trusts"))
struct HTTP2URLSessionTests {
    static func server(alpn: [String]) throws -> FaultlineServer {
        var configuration = try FaultlineServer.Configuration(
            scenarios: ScenarioLoader.load(paths: [TestSupport.scenariosFolder]))
        configuration.tls = TLSOptions(
            port: 0, directory: TLSURLSessionTests.systemTrustedDirectory, certificate: .valid, alpn: alpn)
        return try FaultlineServer(configuration: configuration)
    }

    /// The bundled GET routes a plain request reaches, with no fault in their script: their paths.
    static func paths() throws -> [String] {
        try ScenarioLoader.load(paths: [TestSupport.scenariosFolder]).flatMap { scenario in
            scenario.routes.compactMap { route -> String? in
                // WebSocket routes are HTTP/1.1's: over h2 they answer HTTP_1_1_REQUIRED, and libcurl retries.
                guard route.chaos == nil, route.responses.allSatisfy({ $0.fault == nil && !$0.isWebSocket }), scenario.auth == nil,
                      route.idempotency == nil else { return nil }
                let curl = BundledScenarioTests.sampleRequest(for: route, base: "")
                // A plain GET: `-o /dev/null -X GET URL`, no header or body arguments.
                guard curl.count == 5, curl[3] == "GET" else { return nil }
                return curl[4]
            }
        }
    }

    static func fetch(_ server: FaultlineServer, _ paths: [String]) async throws -> [String] {
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let port = try #require(server.tlsPort)
        var answers: [String] = []
        for path in paths {
            var request = URLRequest(url: URL(string: "https://localhost:\(port)\(path)")!)
            request.timeoutInterval = 5
            let (data, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            answers.append("\(path) \(status) \(String(decoding: data, as: UTF8.self))")
        }
        return answers
    }

    @Test func urlSessionGetsTheSameAnswersOverH2AsOverHTTP1() async throws {
        let paths = try Self.paths()
        #expect(paths.count >= 5, "\(paths)")
        let h2 = try Self.server(alpn: ["h2", "http/1.1"])
        defer { Task { await h2.stop() } }
        let http1 = try Self.server(alpn: ["http/1.1"])
        defer { Task { await http1.stop() } }
        let overH2 = try await Self.fetch(h2, paths)
        let overHTTP1 = try await Self.fetch(http1, paths)
        #expect(overH2 == overHTTP1)
        let h2Entries = await h2.requests(JournalFilter())
        let http1Entries = await http1.requests(JournalFilter())
        #expect(Set(h2Entries.map(\.protocolName)) == ["h2"], "libcurl under URLSession negotiates h2")
        #expect(h2Entries.allSatisfy { $0.stream != nil && $0.tls?.alpn == "h2" })
        #expect(Set(http1Entries.map(\.protocolName)) == ["http/1.1"])
    }
}

/// URLSession (Linux: libcurl with nghttp2) against each HTTP/2 frame fault, on its first request: what it
/// reports, for the README's table. Skipped without the trusted CA.
@Suite(.enabled(if: TLSURLSessionTests.systemTrustedDirectory != nil,
                "set FAULTLINE_SYSTEM_TRUSTED_TLS_DIR to a --tls-dir whose CA the system trusts"))
struct HTTP2FaultURLSessionTests {
    static func route(_ id: String, _ fault: String, text: String = "first") -> String {
        #"{"id": "\#(id)", "match": {"path": "/\#(id)"}, "responses": [{"status": 200, "text": "\#(text)", "fault": \#(fault)}, {"status": 200, "text": "second"}]}"#
    }

    static let scenario = #"{"name": "h2-faults", "routes": ["# + [
        route("refused", #"{"type": "rst-stream", "code": "REFUSED_STREAM"}"#),
        route("cancel", #"{"type": "rst-stream", "code": "CANCEL"}"#),
        route("midbody", #"{"type": "rst-stream", "after": "body", "bytes": 5}"#, text: "0123456789abcdefghij"),
        route("goaway-previous", #"{"type": "goaway", "lastStreamId": "previous"}"#),
        route("goaway-current", #"{"type": "goaway", "lastStreamId": "current"}"#, text: "processed"),
        route("bad-hpack", #"{"type": "raw-frames", "preset": "bad-hpack"}"#),
        route("http1-only", #""no-close-notify""#),
    ].joined(separator: ", ") + "]}"

    /// (path, what URLSession reports): `status body`, or `error CODE message`.
    static let expected: [(String, String)] = [
        ("refused", "200 second"),
        ("cancel", "error -1 HTTP/2 stream 1 was not closed cleanly: CANCEL (err 8)"),
        ("midbody", "error -1 HTTP/2 stream 1 was not closed cleanly: INTERNAL_ERROR (err 2)"),
        ("goaway-previous", "error -1 Error in the HTTP2 framing layer"),
        ("goaway-current", "200 processed"),
        ("bad-hpack", "error -1011 Empty reply from server"),
        ("http1-only", "200 first"),
    ]

    @Test(arguments: expected)
    func eachFrameFault(_ path: String, _ expected: String) async throws {
        let server = try TestSupport.server([Self.scenario]) {
            $0.tls = TLSOptions(port: 0, directory: TLSURLSessionTests.systemTrustedDirectory, certificate: .valid)
        }
        defer { Task { await server.stop() } }
        let port = try #require(server.tlsPort)
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: URL(string: "https://localhost:\(port)/\(path)")!)
        request.timeoutInterval = 3
        var outcome: String
        do {
            let (data, response) = try await session.data(for: request)
            outcome = "\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))"
        } catch let error as URLError {
            outcome = "error \(error.code.rawValue) \(error.userInfo[NSLocalizedDescriptionKey] as? String ?? "")"
        }
        #expect(outcome == expected)
        let entries = await server.requests(JournalFilter(route: path))
        #expect(entries.first?.protocolName == "h2", "URLSession's first attempt went over h2")
    }
}
