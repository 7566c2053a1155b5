@testable import FaultlineCLI
import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `faultline ca`, called directly: its command line and `CACommand.run` over a certificate authority in a scratch
/// folder. The authority itself is tested in FaultlineTests (CertificateAuthorityTests).
@Suite struct CACommandTests {
    /// A fresh folder under the temporary folder, removed by `remove()`.
    struct Scratch {
        let path: String

        init() throws {
            path = FileManager.default.temporaryDirectory
                .appendingPathComponent("faultline-ca-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The permission bits of `path`.
    static func mode(_ path: String) -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0o7777 }
        return info.st_mode & 0o777
    }

    /// `openssl ARGUMENTS`' exit status, its output discarded. Through posix_spawn, not Foundation's Process: the
    /// other test targets run in the same process, and Process.run is not safe from several threads at once on
    /// Linux (FaultlineTests serializes its own launches with a lock this target cannot see).
    static func openssl(_ arguments: [String]) -> Int32 {
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t?
        #else
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = (["openssl"] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        guard posix_spawn(&pid, "/usr/bin/openssl", &actions, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    @Test func caCommandExportsPinsAndIssuesClientCertificates() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path + "/tls"
        let exported = CACommand.run(CAOptions(action: .exportCA, directory: folder))
        #expect(exported.exitCode == 0)
        #expect(exported.stdout == (try String(contentsOfFile: folder + "/ca.pem", encoding: .utf8)))
        let client = CACommand.run(CAOptions(action: .exportClientCA, directory: folder))
        #expect(client.stdout == (try String(contentsOfFile: folder + "/client-ca.pem", encoding: .utf8)))
        let written = CACommand.run(CAOptions(action: .exportCA, directory: folder, output: scratch.path + "/out.pem"))
        #expect(written.exitCode == 0 && written.stdout.isEmpty)
        #expect(try String(contentsOfFile: scratch.path + "/out.pem", encoding: .utf8) == exported.stdout)

        let pins = CACommand.run(CAOptions(action: .pins, directory: folder))
        let lines = pins.stdout.split(separator: "\n")
        #expect(lines.count == TLSCertificateName.allCases.count)
        let authorityPins = try CertificateAuthority(directory: folder).pins()
        #expect(lines.first == "valid sha256/\(authorityPins[0].sha256)")

        let issued = CACommand.run(
            CAOptions(action: .clientCertificate(name: "bob"), directory: folder, output: scratch.path))
        #expect(issued.exitCode == 0, "\(issued.stderr)")
        #expect(issued.stderr.contains(scratch.path + "/bob.pem"))
        #expect(issued.stderr.contains(scratch.path + "/bob-key.pem"))
        #expect(Self.mode(scratch.path + "/bob-key.pem") == 0o600)
        #expect(Self.openssl(["verify", "-CAfile", folder + "/client-ca.pem", "-purpose", "sslclient", scratch.path + "/bob.pem"]) == 0)

        let refused = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: refused, withIntermediateDirectories: false)
        #expect(chmod(refused, 0o777) == 0)
        let failed = CACommand.run(CAOptions(action: .exportCA, directory: refused))
        #expect(failed.exitCode == 2 && failed.stderr.contains(refused) && failed.stdout.isEmpty)
    }

    @Test func caCommandLine() throws {
        #expect(try FaultlineCommandLine.parse(["ca"]) == .ca(CAOptions()))
        #expect(try FaultlineCommandLine.parse(["ca", "--export", "--client", "--tls-dir=/d", "--out", "f"])
            == .ca(CAOptions(action: .exportClientCA, directory: "/d", output: "f")))
        #expect(try FaultlineCommandLine.parse(["ca", "--client-cert", "bob"])
            == .ca(CAOptions(action: .clientCertificate(name: "bob"))))
        #expect(try FaultlineCommandLine.parse(["ca", "--pins"]) == .ca(CAOptions(action: .pins)))
        func error(_ words: [String]) -> String? {
            do { _ = try FaultlineCommandLine.parse(words); return nil } catch { return error.message }
        }
        #expect(error(["ca", "--export", "--pins"]) == "ca: give one of --export, --client-cert and --pins")
        #expect(error(["ca", "--client"]) == "ca: --client goes with --export (it exports the client CA)")
        #expect(error(["ca", "--pins", "--out", "x"]) == "ca: --out goes with --export or --client-cert")
        #expect(error(["ca", "--client-cert", "../x"])
            == "ca: --client-cert NAME must be a plain file name, got \"../x\"")
        for option in FaultlineCommandLine.ca.options {
            #expect(FaultlineCommandLine.usage.contains(option.names.joined(separator: ", ")), "\(option.names)")
        }
        #expect(FaultlineCommandLine.usage.contains(FaultlineCommandLine.ca.synopsis))
    }
}
