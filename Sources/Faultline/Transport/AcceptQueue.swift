#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `blackhole` listener (ARCHITECTURE §3b): the closest a process gets to a dropped-packet network without
/// packet filters. The listening socket's backlog drops to 0 and the server connects to itself until its accept
/// queue is full (Linux keeps one connection then; BSD stacks a few); from then on the kernel drops every SYN
/// (Linux counts them in `ListenOverflows`), so a client's connect times out just as behind a firewall. Coming back
/// up, the queue is drained: the fillers are closed, a client that was queued is served, and the backlog is
/// restored. Portable: the same calls on Linux and the BSDs; only how many fillers it takes differs.
struct AcceptQueue {
    /// Our own connections that fill the queue (their local ends).
    private var fillers: [Int32] = []
    private var fillerPorts: Set<UInt16> = []

    /// At most this many fillers: a stack that queues more than this is not filled (the state change says so).
    static let maxFillers = 64
    static let normalBacklog: Int32 = 1024

    /// Fills the accept queue of `listener` (bound to `host`, port `port`). Returns false when the queue would
    /// not fill.
    mutating func fill(listener: Int32, host: String, port: Int) -> Bool {
        _ = listen(listener, 0)
        let loopback = host.contains(":") ? (host == "::" ? "::1" : host) : (host == "0.0.0.0" ? "127.0.0.1" : host)
        for _ in 0..<Self.maxFillers {
            guard let fd = Self.connectNonBlocking(loopback, port) else { return false }
            var probe = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&probe, 1, 0)
            if ready == 1 && probe.revents & Int16(POLLOUT) != 0 && probe.revents & Int16(POLLERR | POLLHUP) == 0 {
                // Connected: it sits in the queue. One more.
                fillers.append(fd)
                if let local = Self.localPort(fd) { fillerPorts.insert(local) }
                continue
            }
            // Its SYN was dropped: the queue is full. This one is not needed.
            Posix.close(fd)
            return true
        }
        return false
    }

    /// Empties the queue: returns the descriptors of queued clients (not ours), closes the fillers and restores
    /// the backlog. The listener is non-blocking, so `accept` returns once the queue is empty.
    mutating func drain(listener: Int32) -> [(fd: Int32, address: sockaddr_storage)] {
        var clients: [(fd: Int32, address: sockaddr_storage)] = []
        while true {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
            }
            guard fd >= 0 else { break }
            if let port = Self.port(address), fillerPorts.contains(port), Self.isLoopback(address) {
                Posix.close(fd)
            } else {
                Posix.makeNonBlocking(fd)
                clients.append((fd, address))
            }
        }
        for fd in fillers { Posix.close(fd) }
        fillers = []
        fillerPorts = []
        _ = SocketOptions.resumeListening(listener)
        return clients
    }

    private static func connectNonBlocking(_ host: String, _ port: Int) -> Int32? {
        let v6 = host.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, SocketOptions.streamType, 0)
        guard fd >= 0 else { return nil }
        Posix.makeNonBlocking(fd)
        var result: Int32
        if v6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            _ = inet_pton(AF_INET6, host, &address.sin6_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            _ = inet_pton(AF_INET, host, &address.sin_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        if result != 0 && errno != EINPROGRESS {
            Posix.close(fd)
            return nil
        }
        return fd
    }

    private static func localPort(_ fd: Int32) -> UInt16? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return result == 0 ? port(address) : nil
    }

    private static func port(_ address: sockaddr_storage) -> UInt16? {
        var address = address
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) } }
        case AF_INET6:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) } }
        default:
            return nil
        }
    }

    private static func isLoopback(_ address: sockaddr_storage) -> Bool {
        var address = address
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127 }
            }
        case AF_INET6:
            return true
        default:
            return false
        }
    }
}
