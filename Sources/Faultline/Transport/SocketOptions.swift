#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket calls whose spelling differs between platforms, in one place (docs/PORTABILITY.md). Each has a
/// portable meaning; the transport never calls the platform spelling itself.
enum SocketOptions {
    /// Send flags that keep a write to a closed peer from raising SIGPIPE (Linux; elsewhere `SO_NOSIGPIPE`
    /// is set once on the socket).
    static var noSignalFlag: Int32 {
        #if os(Linux)
        return Int32(MSG_NOSIGNAL)
        #else
        return 0
        #endif
    }

    /// Per-socket SIGPIPE suppression where the send flag does not exist.
    static func suppressSigpipe(_ fd: Int32) {
        #if !os(Linux)
        var one: Int32 = 1
        _ = try? syscall("setsockopt(SO_NOSIGPIPE)", blocking: true) {
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        #endif
    }

    /// Small writes go out at once: responses are often tiny and drips are deliberately small.
    static func noDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = try? syscall("setsockopt(TCP_NODELAY)", blocking: true) {
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Stops a listening socket listening while it keeps its port, so no other socket can take the port while the
    /// listener refuses (ARCHITECTURE §3b). Linux fast path: `shutdown(SHUT_RD)` returns a listening socket to
    /// CLOSE — its queued connections are reset and new SYNs are answered with RST — and `listen` can be called on it
    /// again later; the kernel lets go of a port the socket got by binding port 0 (it keeps one bound by number), so
    /// the same address is bound again at once. False on the portable path (a Mac's `shutdown` does not stop a
    /// listener) or when a step failed: the caller then closes the socket and binds the port again when it comes
    /// back.
    static func stopListening(_ fd: Int32) -> Bool {
        #if os(Linux)
        guard Platform.linuxFastPaths else { return false }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, shutdown(fd, Int32(SHUT_RD)) == 0 else { return false }
        // Bound again at once; EINVAL says it still is (a port bound by number stays with its socket).
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0 || errno == EINVAL else { return false }
        return true
        #else
        return false
        #endif
    }

    /// Listens again on a socket `stopListening` held (with the accept queue's normal backlog).
    static func resumeListening(_ fd: Int32) -> Bool {
        #if canImport(Glibc)
        return Glibc.listen(fd, AcceptQueue.normalBacklog) == 0
        #else
        return Darwin.listen(fd, AcceptQueue.normalBacklog) == 0
        #endif
    }

    /// Makes `close()` abort the connection with RST (`SO_LINGER {on, 0 s}`, RFC 9293 §3.10.7.1).
    static func abortOnClose(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = try? syscall("setsockopt(SO_LINGER)", blocking: true) {
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        }
    }

    /// Whether the peer answered with RST. Portable path: a pending `ECONNRESET`/`EPIPE` (`SO_ERROR`), or a peek
    /// that fails with `ECONNRESET` (after a FIN alone, a peek reads 0). Linux fast path: TCP already in CLOSE
    /// (`TCP_INFO`), which also holds after the error was consumed. `FAULTLINE_PORTABLE=1` forces the portable
    /// path, and the tests that tell a client that left from one that half-closed run with both.
    static func peerHasReset(_ fd: Int32) -> Bool {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try? syscall("getsockopt(SO_ERROR)", blocking: true) { getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) }
        if error == ECONNRESET || error == EPIPE { return true }
        #if os(Linux)
        if Platform.linuxFastPaths {
            var info = tcp_info()
            var infoLength = socklen_t(MemoryLayout<tcp_info>.size)
            let read = try? syscall("getsockopt(TCP_INFO)", blocking: true) {
                getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &infoLength)
            }
            return read != nil && info.tcpi_state == UInt8(TCP_CLOSE)
        }
        #endif
        var byte: UInt8 = 0
        do {
            _ = try syscall("recv(MSG_PEEK)") { recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) }
            return false
        } catch {
            return error.errno == ECONNRESET || error.errno == EPIPE
        }
    }

    /// Bytes the kernel holds from the peer that nobody has read; true when it cannot tell.
    static func hasUnreadInput(_ fd: Int32) -> Bool {
        var available: Int32 = 0
        let asked = try? syscall("ioctl(FIONREAD)", blocking: true) { ioctl(fd, UInt(FIONREAD), &available) }
        return asked == nil || available > 0
    }
}

extension SocketOptions {
    /// `SOCK_STREAM` as `socket(2)` takes it (an enum on Glibc, an integer on Darwin).
    static var streamType: Int32 {
        #if canImport(Glibc)
        return Int32(SOCK_STREAM.rawValue)
        #else
        return SOCK_STREAM
        #endif
    }
}
