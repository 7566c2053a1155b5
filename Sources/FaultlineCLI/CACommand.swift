import Faultline
import FaultlineTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The logic of `faultline ca`, apart from the process: the executable prints the outcome and exits with its
/// code; the tests call it directly. Exit codes: 0 success, 1 an output file that cannot be written, 2 the
/// authority's folder cannot be used. The authority itself (`CertificateAuthority`) stays in the library, where
/// `serve --tls-port` uses it; its files are written by `CertificateAuthority.writeFile`, whole or not at all.
package enum CACommand {
    package static func run(_ options: CAOptions) -> CommandOutcome {
        let directory = options.directory ?? CertificateAuthority.defaultDirectory()
        let authority: CertificateAuthority
        do {
            authority = try CertificateAuthority(directory: directory)
        } catch {
            return .failure("ca: \(error.message)", 2)
        }
        switch options.action {
        case .show:
            return CommandOutcome(
                stdout: directory + "/ca.pem\n",
                stderr: "faultline: trust this CA certificate in the client under test (faultline ca --export "
                    + "prints it); it signs the catalogue certificates that faultline serves over HTTPS\n")
        case .exportCA:
            return export(authority.caCertificatePEM, to: options.output)
        case .exportClientCA:
            return export(authority.clientCACertificatePEM, to: options.output)
        case .pins:
            do {
                let pins = try authority.pins()
                return CommandOutcome(stdout: pins.map { "\($0.name.rawValue) sha256/\($0.sha256)\n" }.joined())
            } catch {
                return .failure("ca: \(error.message)", 2)
            }
        case .clientCertificate(let name):
            let folder = options.output ?? "."
            let certificatePath = folder + "/" + name + ".pem"
            let keyPath = folder + "/" + name + "-key.pem"
            if let problem = makeOutputFolder(folder) { return .failure("ca: \(problem)", 1) }
            do {
                let issued = try authority.issueClientCertificate(commonName: name)
                try CertificateAuthority.writeFile(issued.keyPEM, to: keyPath, mode: 0o600)
                try CertificateAuthority.writeFile(issued.certificatePEM, to: certificatePath, mode: 0o644)
            } catch {
                return .failure("ca: \(error.message)", 1)
            }
            return CommandOutcome(
                stderr: "faultline: wrote the client certificate \(certificatePath) and its key \(keyPath) "
                    + "(CN=\(name), signed by the client CA)\n")
        }
    }

    /// The `--out` folder of `--client-cert`: used as it is when it exists; otherwise created with mode 0700
    /// (it will hold a private key), but only its last component: a missing parent is more likely a typo than a
    /// wish for a tree of folders. Nil when the folder is there; otherwise what is wrong.
    private static func makeOutputFolder(_ folder: String) -> String? {
        if mkdir(folder, 0o700) == 0 { return nil }
        let code = errno
        switch code {
        case EEXIST:
            var info = stat()
            guard stat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                return "--out \(folder) is not a folder"
            }
            return nil
        case ENOENT:
            return "cannot create the folder --out \(folder): its parent folder does not exist"
        default:
            return "cannot create the folder --out \(folder): \(String(cString: strerror(code)))"
        }
    }

    /// `pem` on stdout, or written to `output`.
    private static func export(_ pem: String, to output: String?) -> CommandOutcome {
        guard let output else { return CommandOutcome(stdout: pem) }
        do {
            try CertificateAuthority.writeFile(pem, to: output, mode: 0o644)
        } catch {
            return .failure("ca: cannot write \(output): \(error.message)", 1)
        }
        return CommandOutcome(stderr: "faultline: wrote \(output)\n")
    }
}
