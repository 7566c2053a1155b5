import FaultlineCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the server could not start or do what was asked.
public enum ServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A libevent call failed; names the call.
    case libevent(String)
    /// A system call failed; names the call and errno.
    case system(call: String, errno: Int32)
    /// The address to listen on could not be used.
    case cannotListen(host: String, port: Int, reason: String)
    /// The scenario files the server was to serve did not load: every problem, with file and JSON path.
    case scenarios(ScenarioLoadError)
    /// TLS could not be set up: the state folder, a certificate or key, OpenSSL. The message names the file.
    case tls(String)

    public var description: String {
        switch self {
        case .libevent(let call): return "libevent: \(call) failed"
        case .system(let call, let code): return "\(call): \(String(cString: strerror(code)))"
        case .cannotListen(let host, let port, let reason): return "cannot listen on \(host):\(port): \(reason)"
        case .scenarios(let error): return "the scenario files did not load: \(error)"
        case .tls(let message): return "TLS: \(message)"
        }
    }
}
