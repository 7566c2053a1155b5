#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed, named, with its errno.
struct SyscallError: Error, CustomStringConvertible {
    let call: StaticString
    let errno: Int32
    var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// What a non-blocking call did: its result, or nothing because it would have blocked.
enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

/// Every system call on a descriptor goes through here (swift-nio's `syscall(blocking:where:)` style): `EINTR`
/// is retried, `EAGAIN`/`EWOULDBLOCK` becomes `.wouldBlock` for the non-blocking calls that may return it, and
/// any other failure throws an error naming the call.
@inline(__always)
func syscall<T: FixedWidthInteger>(
    _ call: StaticString, blocking: Bool = false, _ body: () -> T
) throws(SyscallError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        let error = errno
        if error == EINTR { continue }
        if !blocking && (error == EAGAIN || error == EWOULDBLOCK) { return .wouldBlock }
        throw SyscallError(call: call, errno: error)
    }
}
