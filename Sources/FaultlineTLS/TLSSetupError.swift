#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the certificate authority or a certificate given on the command line could not be used. The message names
/// the file or folder concerned and, for an OpenSSL failure, every reason OpenSSL queued for it.
package struct TLSSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for a person: the path, the call, and the reason.
    package var message: String

    package var description: String { message }

    package init(_ message: String) {
        self.message = message
    }

    /// `context`, followed by OpenSSL's queued errors for this thread, which are drained so that the next failure
    /// does not report them again.
    package static func openSSL(_ context: String) -> TLSSetupError {
        let errors = OpenSSLErrorQueue.drain(.full)
        return TLSSetupError(errors.isEmpty ? context : "\(context): \(errors.joined(separator: "; "))")
    }

    /// A system call on `path` failed with `code` (an errno value).
    package static func system(_ call: String, _ path: String, _ code: Int32) -> TLSSetupError {
        TLSSetupError("\(call) \(path): \(String(cString: strerror(code)))")
    }
}
