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
        var message: String? { error?.userInfo[NSLocalizedDescriptionKey] as? String }
    }

    /// GET https://localhost:PORT/hi on a server whose TLS listener serves `certificate`; waits for the
    /// handshake's journal entry.
    static func fetch(_ certificate: TLSCertificateName) async throws -> (Outcome, [JournalEntry]) {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try TestSupport.server([scenario]) {
            $0.tls = TLSOptions(port: 0, directory: folder + "/tls", certificate: certificate)
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
            let (_, response) = try await session.data(for: request)
            outcome.status = (response as? HTTPURLResponse)?.statusCode
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
}
