@testable import Faultline
import FaultlineTLS
import FaultlineCore
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The local certificate authority: its folder's files and modes, one authority however many processes start at
/// once, and each catalogue certificate judged by `openssl verify` for the reason its name gives.
@Suite struct CertificateAuthorityTests {
    /// A fresh folder under the temporary folder, removed by `remove()`.
    struct Scratch {
        let path: String

        init() throws {
            path = FileManager.default.temporaryDirectory
                .appendingPathComponent("faultline-ca-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        func remove() { try? FileManager.default.removeItem(atPath: path) }

        /// Writes `text` to the file `name` in the folder; returns its path.
        @discardableResult
        func write(_ text: String, _ name: String) throws -> String {
            let file = path + "/" + name
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            return file
        }
    }

    /// The permission bits of `path`.
    static func mode(_ path: String) -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0o7777 }
        return info.st_mode & 0o777
    }

    static func openssl(_ arguments: [String]) throws -> TestSupport.ProcessResult {
        try TestSupport.run("/usr/bin/openssl", arguments)
    }

    /// `openssl verify` of `identity` as a TLS server for `localhost`, trusting only `ca.pem` of `folder`, with
    /// the identity's chain as untrusted intermediates; stdout and stderr together.
    static func verify(
        _ identity: ServerIdentity, in scratch: Scratch, caFile: String, extra: [String] = []
    ) throws -> (ok: Bool, output: String) {
        let leaf = try scratch.write(identity.certificatePEM, "leaf-\(UUID().uuidString).pem")
        var arguments = ["verify", "-CAfile", caFile, "-purpose", "sslserver"] + extra
        if !identity.chainPEM.isEmpty {
            arguments += ["-untrusted", try scratch.write(identity.chainPEM, "chain-\(UUID().uuidString).pem")]
        }
        let result = try openssl(arguments + [leaf])
        return (result.status == 0, result.stdout + result.stderr)
    }

    @Test func filesAreCreatedPrivateAndReloadedUnchanged() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // Missing parents are created too.
        let folder = scratch.path + "/cache/faultline/tls"
        let first = try CertificateAuthority(directory: folder)
        #expect(Self.mode(folder) == 0o700)
        #expect(Self.mode(folder + "/keys") == 0o700)
        #expect(Self.mode(scratch.path + "/cache") == 0o700)
        let keys = ["ca-key.pem", "intermediate-key.pem", "untrusted-ca-key.pem", "client-ca-key.pem"]
            + TLSCertificateName.allCases.map { "keys/\($0.rawValue)-key.pem" }
        for key in keys {
            #expect(Self.mode(folder + "/" + key) == 0o600, "\(key)")
        }
        for certificate in ["ca.pem", "intermediate.pem", "untrusted-ca.pem", "client-ca.pem"] {
            let mode = Self.mode(folder + "/" + certificate)
            #expect(mode & 0o600 == 0o600 && mode & 0o022 == 0, "\(certificate): \(String(mode, radix: 8))")
        }
        // No temporary file is left behind.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty)
        #expect(try String(contentsOfFile: folder + "/ca.pem", encoding: .utf8) == first.caCertificatePEM)

        let second = try CertificateAuthority(directory: folder)
        #expect(second.caCertificatePEM == first.caCertificatePEM)
        #expect(second.clientCACertificatePEM == first.clientCACertificatePEM)
        let firstPins = try first.pins()
        let secondPins = try second.pins()
        #expect(firstPins.map(\.name) == TLSCertificateName.allCases)
        #expect(firstPins.map(\.sha256) == secondPins.map(\.sha256))
        #expect(Set(firstPins.map(\.sha256)).count == TLSCertificateName.allCases.count, "every name has its own key")
        // An issued identity's pin is its persisted key's pin.
        #expect(try first.identity(.valid).spkiSHA256Base64 == firstPins[0].sha256)
        #expect(try first.identity(.valid) === first.identity(.valid), "issued once, then cached")
    }

    @Test(arguments: [(0o777 as mode_t, "its group and others"), (0o775, "its group"), (0o702, "others")])
    func aFolderOthersCanWriteIsRefused(mode: mode_t, who: String) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path + "/tls"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(chmod(folder, mode) == 0)
        do {
            _ = try CertificateAuthority(directory: folder)
            Issue.record("a folder with mode \(String(mode, radix: 8)) was accepted")
        } catch {
            #expect(error.message.contains(folder), "\(error.message)")
            #expect(error.message.contains("mode \(String(mode, radix: 8))"), "\(error.message)")
            #expect(error.message.contains("writable by \(who)"), "\(error.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder + "/ca-key.pem"), "nothing is written there")
    }

    @Test func manyStartingAtOnceEndWithOneAuthority() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path + "/tls"
        // Processes (the CLI) and threads of this process race to create the authority on a fresh folder: the
        // processes are all started before any is waited for, and the threads all wait at one gate.
        var processes: [(Process, Pipe)] = []
        for _ in 0..<6 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CLITests.binary)
            process.arguments = ["ca", "--tls-dir", folder, "--export"]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try TestSupport.launchLock.withLock { try process.run() }
            processes.append((process, out))
        }
        let gate = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let results = Mutex<[String]>([])
        for _ in 0..<8 {
            done.enter()
            Thread.detachNewThread {
                gate.wait()
                let pem: String
                do { pem = try CertificateAuthority(directory: folder).caCertificatePEM } catch { pem = "\(error)" }
                results.withLock { $0.append(pem) }
                done.leave()
            }
        }
        for _ in 0..<8 { gate.signal() }
        #expect(done.wait(timeout: .now() + 60) == .success)
        var pems = results.withLock { $0 }
        for (process, out) in processes {
            let stdout = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let status = process.terminationStatus
            pems.append(status == 0 ? String(decoding: stdout, as: UTF8.self) : "exit \(status)")
        }
        let file = try String(contentsOfFile: folder + "/ca.pem", encoding: .utf8)
        #expect(file.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(pems.count == 14)
        #expect(pems.allSatisfy { $0 == file }, "\(Set(pems).count) different answers")
    }

    /// What `openssl verify -purpose sslserver -verify_hostname localhost` says of each catalogue certificate:
    /// nil for success, else the error text it must print.
    static let verdicts: [TLSCertificateName: String?] = [
        .valid: nil,
        .expired: "error 10 at 0 depth lookup: certificate has expired",
        .notYetValid: "error 9 at 0 depth lookup: certificate is not yet valid",
        .wrongHost: "error 62 at 0 depth lookup: hostname mismatch",
        .selfSigned: "error 18 at 0 depth lookup: self-signed certificate",
        .untrustedRoot: "error 20 at 0 depth lookup: unable to get local issuer certificate",
        .incompleteChain: "error 20 at 0 depth lookup: unable to get local issuer certificate",
        .expiredIntermediate: "error 10 at 1 depth lookup: certificate has expired",
        // OpenSSL still falls back to the commonName when there is no subjectAltName; Apple and browsers do not.
        .cnOnly: nil,
        // X509_V_ERR_INVALID_PURPOSE: OpenSSL 3.0 words it "unsuitable certificate purpose", later ones
        // "unsupported certificate purpose".
        .noServerAuthEKU: "error 26 at 0 depth lookup: uns",
        // Apple's 825-day limit and its 2048-bit minimum are policies OpenSSL's default verification lacks.
        .tooLongValidity: nil,
        .weakKey: nil,
        .rotated: nil,
    ]

    @Test(arguments: TLSCertificateName.allCases)
    func opensslVerifyFailsEachCertificateForItsReason(name: TLSCertificateName) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let authority = try CertificateAuthority(directory: scratch.path + "/tls")
        let caFile = scratch.path + "/tls/ca.pem"
        let identity = try authority.identity(name)
        let result = try Self.verify(identity, in: scratch, caFile: caFile, extra: ["-verify_hostname", "localhost"])
        guard let expected = Self.verdicts[name] else { Issue.record("no verdict for \(name)"); return }
        if let expected {
            #expect(!result.ok, "\(result.output)")
            #expect(result.output.contains(expected), "\(result.output)")
        } else {
            #expect(result.ok, "\(result.output)")
        }
        let chainLength = identity.chain.count
        switch name {
        case .selfSigned, .untrustedRoot, .incompleteChain: #expect(chainLength == 0)
        default: #expect(chainLength == 1)
        }
    }

    /// The details `openssl verify` does not judge, read back with `openssl x509`.
    @Test func certificateDetails() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let authority = try CertificateAuthority(directory: scratch.path + "/tls")
        let caFile = scratch.path + "/tls/ca.pem"
        func x509(_ name: TLSCertificateName, _ options: [String]) throws -> String {
            let file = try scratch.write(try authority.identity(name).certificatePEM, "\(name.rawValue).pem")
            let result = try Self.openssl(["x509", "-in", file, "-noout"] + options)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout
        }

        // valid: both loopback addresses. (OpenSSL does not match `*.localhost`: it wants two labels after a
        // wildcard; the name is there for clients that do.)
        let valid = try authority.identity(.valid)
        for check in [["-verify_ip", "127.0.0.1"], ["-verify_ip", "::1"]] {
            let result = try Self.verify(valid, in: scratch, caFile: caFile, extra: check)
            #expect(result.ok, "\(check): \(result.output)")
        }
        let validText = try x509(.valid, ["-text"])
        #expect(validText.contains("DNS:localhost, DNS:*.localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1"))
        #expect(validText.contains("CA:FALSE") && validText.contains("TLS Web Server Authentication"))
        #expect(validText.contains("X509v3 Subject Key Identifier"))
        #expect(validText.contains("X509v3 Authority Key Identifier"))
        #expect(validText.contains("Issuer: O = Faultline, CN = Faultline Intermediate CA"))

        // wrong-host names only wrong-host.invalid.
        #expect(try x509(.wrongHost, ["-ext", "subjectAltName"]).contains("DNS:wrong-host.invalid\n"))

        // too-long-validity: 826 days between notBefore and notAfter.
        let dates = try x509(.tooLongValidity, ["-startdate", "-enddate"])
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
        var parsed: [String: Date] = [:]
        for line in dates.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            let text = parts[1].split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            parsed[parts[0]] = formatter.date(from: text)
        }
        let start = try #require(parsed["notBefore"])
        let end = try #require(parsed["notAfter"])
        #expect(end.timeIntervalSince(start) == 826 * 86400)

        // weak-key: RSA 1024, which OpenSSL refuses at security level 2.
        #expect(try x509(.weakKey, ["-text"]).contains("Public-Key: (1024 bit)"))
        let strict = try Self.verify(
            try authority.identity(.weakKey), in: scratch, caFile: caFile, extra: ["-auth_level", "2"])
        #expect(!strict.ok && strict.output.contains("EE certificate key too weak"), "\(strict.output)")
        #expect(try x509(.weakKey, ["-text"]).contains("Key Encipherment"))

        // cn-only: CN=localhost and no subjectAltName at all.
        let cnOnly = try x509(.cnOnly, ["-text"])
        #expect(!cnOnly.contains("Subject Alternative Name"))
        #expect(cnOnly.contains("Subject: O = Faultline, CN = localhost"))

        // rotated: valid's subject and issuer, another key.
        #expect(try x509(.rotated, ["-subject", "-issuer"]) == x509(.valid, ["-subject", "-issuer"]))
        #expect(try authority.identity(.rotated).spkiSHA256Base64 != valid.spkiSHA256Base64)

        // The root: a CA for ten years; never the untrusted one.
        let root = try Self.openssl(["x509", "-in", caFile, "-noout", "-text"])
        #expect(root.stdout.contains("Subject: O = Faultline, CN = Faultline Local CA"))
        #expect(root.stdout.contains("CA:TRUE") && root.stdout.contains("Certificate Sign, CRL Sign"))
        #expect(try x509(.untrustedRoot, ["-issuer"]).contains("Faultline Untrusted CA"))
    }

    @Test func clientCertificatesVerifyAgainstTheClientCAOnly() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let authority = try CertificateAuthority(directory: scratch.path + "/tls")
        let issued = try authority.issueClientCertificate(commonName: "alice")
        let certificate = try scratch.write(issued.certificatePEM, "alice.pem")
        let accepted = try Self.openssl(
            ["verify", "-CAfile", scratch.path + "/tls/client-ca.pem", "-purpose", "sslclient", certificate])
        #expect(accepted.status == 0, "\(accepted.stdout)\(accepted.stderr)")
        let asServer = try Self.openssl(
            ["verify", "-CAfile", scratch.path + "/tls/client-ca.pem", "-purpose", "sslserver", certificate])
        #expect(asServer.status != 0)
        let otherCA = try Self.openssl(
            ["verify", "-CAfile", scratch.path + "/tls/ca.pem", "-purpose", "sslclient", certificate])
        #expect(otherCA.status != 0)
        let subject = try Self.openssl(["x509", "-in", certificate, "-noout", "-subject"])
        #expect(subject.stdout.contains("CN = alice"))
        // The key is the certificate's.
        let key = try scratch.write(issued.keyPEM, "alice-key.pem")
        #expect(throws: Never.self) {
            try CertificateAuthority.loadIdentity(certificateFile: certificate, keyFile: key)
        }
    }

    @Test func bringYourOwnCertificateAndKey() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let authority = try CertificateAuthority(directory: scratch.path + "/tls")
        let valid = try authority.identity(.valid)
        let certificate = try scratch.write(valid.certificatePEM + valid.chainPEM, "server.pem")
        let loaded = try CertificateAuthority.loadIdentity(
            certificateFile: certificate, keyFile: scratch.path + "/tls/keys/valid-key.pem")
        #expect(loaded.spkiSHA256Base64 == valid.spkiSHA256Base64)
        #expect(loaded.certificatePEM == valid.certificatePEM)
        #expect(loaded.chainPEM == valid.chainPEM && loaded.chain.count == 1)

        let wrongKey = scratch.path + "/tls/keys/rotated-key.pem"
        #expect {
            try CertificateAuthority.loadIdentity(certificateFile: certificate, keyFile: wrongKey)
        } throws: { error in
            let message = (error as? TLSSetupError)?.message ?? ""
            return message.contains("does not belong") && message.contains(wrongKey) && message.contains(certificate)
        }
        let rsaKey = scratch.path + "/tls/keys/weak-key-key.pem"
        #expect(throws: TLSSetupError.self) {
            try CertificateAuthority.loadIdentity(certificateFile: certificate, keyFile: rsaKey)
        }
        let missing = scratch.path + "/nothing.pem"
        #expect {
            try CertificateAuthority.loadIdentity(certificateFile: missing, keyFile: wrongKey)
        } throws: { error in
            ((error as? TLSSetupError)?.message ?? "").contains(missing)
        }
        let notPEM = try scratch.write("hello\n", "not.pem")
        #expect {
            try CertificateAuthority.loadIdentity(certificateFile: notPEM, keyFile: wrongKey)
        } throws: { error in
            ((error as? TLSSetupError)?.message ?? "").contains("\(notPEM) holds no PEM certificate")
        }
    }

    /// A setup error carries OpenSSL's whole lines (OpenSSLErrorQueue's `.full`), and leaves the queue empty.
    @Test func setupErrorsDrainOpenSSLsWholeLines() {
        do {
            _ = try PrivateKey(pem: Array("not a key\n".utf8), source: "junk.pem")
            Issue.record("junk was read as a key")
        } catch {
            #expect(error.message.hasPrefix(
                "junk.pem holds no readable PEM private key (an encrypted key is not supported): error:"))
        }
        #expect(OpenSSLErrorQueue.drain(.reason).isEmpty && OpenSSLErrorQueue.drain(.full).isEmpty)
        #expect(OpenSSLErrorQueue.drainLine(.reason) == "unknown error")
    }

    @Test func defaultDirectoryIsInTheUserCache() {
        let directory = CertificateAuthority.defaultDirectory()
        #expect(directory.hasSuffix("/faultline/tls"))
        #if os(macOS)
        #expect(directory == NSHomeDirectory() + "/Library/Caches/faultline/tls")
        #else
        if let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            #expect(directory == xdg + "/faultline/tls")
        } else if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
            #expect(directory == home + "/.cache/faultline/tls")
        }
        #endif
    }
}
