import FaultlineTLS
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension CertificateAuthority {
    /// Writes `text` to `path` whole or not at all, the file created with `mode` from its first byte
    /// (`CAStateFolder.writeFile`: O_CREAT|O_EXCL on a temporary name, fsync, rename). In the library, not the
    /// CLI, because it is the state folder's own writer, internal to this module; `faultline ca`
    /// (`Sources/FaultlineCLI/CACommand.swift`) writes its exports and client keys through it.
    package static func writeFile(_ text: String, to path: String, mode: mode_t) throws(TLSSetupError) {
        try CAStateFolder.writeFile(Array(text.utf8), to: path, mode: mode)
    }
}
