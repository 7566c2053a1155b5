#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLibevent

/// How other threads wake the loop: a descriptor the loop reads, one another thread writes. Linux fast path: an
/// eventfd (one descriptor, a counter). Portable path: a non-blocking pipe (`FAULTLINE_PORTABLE=1` forces it).
struct WakeChannel {
    /// What the loop watches for reading.
    let readFD: Int32
    /// What `signal()` writes to; the same as `readFD` for an eventfd.
    let writeFD: Int32
    let usesEventFD: Bool

    init() throws(ServerError) {
        #if os(Linux)
        if Platform.linuxFastPaths {
            let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
            guard fd >= 0 else { throw .system(call: "eventfd", errno: errno) }
            readFD = fd
            writeFD = fd
            usesEventFD = true
            return
        }
        #endif
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .system(call: "pipe", errno: errno) }
        Posix.makeNonBlocking(fds[0])
        Posix.makeNonBlocking(fds[1])
        readFD = fds[0]
        writeFD = fds[1]
        usesEventFD = false
    }

    /// Wakes the loop. Safe from any thread. A full pipe already holds a wake-up, so a failed write loses nothing.
    func signal() {
        var one: UInt64 = 1
        _ = Posix.write(writeFD, &one, usesEventFD ? 8 : 1)
    }

    /// Consumes the pending wake-ups; on the loop thread.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while buffer.withUnsafeMutableBytes({ Posix.read(readFD, $0.baseAddress!, usesEventFD ? 8 : $0.count) }) > 0 {
            if usesEventFD { return }
        }
    }

    func close() {
        Posix.close(readFD)
        if writeFD != readFD { Posix.close(writeFD) }
    }
}
