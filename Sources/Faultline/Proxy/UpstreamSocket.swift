#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

import FaultlineCore

/// Why the upstream gave no usable response: a kind (502 or 504) and the reason in words.
struct UpstreamError: Error, Sendable {
    var kind: UpstreamFailureKind
    var reason: String

    init(_ kind: UpstreamFailureKind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

/// One resolved address of an upstream, as `connect(2)` takes it.
struct UpstreamAddress: Sendable {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    var family: Int32 { Int32(storage.ss_family) }

    /// A literal IPv4 or IPv6 address (no brackets); nil for a name.
    init?(literal host: String, port: Int) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            self.init(copying: v4)
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(port).bigEndian
            self.init(copying: v6)
            return
        }
        return nil
    }

    init<Address>(copying address: Address) {
        withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: Address.self, capacity: 1) { $0.pointee = address }
        }
        length = socklen_t(MemoryLayout<Address>.size)
    }

    init(raw: UnsafePointer<sockaddr>, length: socklen_t) {
        withUnsafeMutablePointer(to: &storage) {
            UnsafeMutableRawPointer($0).copyMemory(from: raw, byteCount: Int(min(length, socklen_t(MemoryLayout<sockaddr_storage>.size))))
        }
        self.length = length
    }
}

/// The socket calls of the proxy's client side whose spelling differs by platform (docs/PORTABILITY.md), and the
/// one blocking call it makes — `getaddrinfo`, run off the loop (`UpstreamResolver`).
enum UpstreamSocket {
    /// A non-blocking, close-on-exec TCP socket, connecting: `.connected` at once (loopback may), `.inProgress`
    /// (wait until writable, then `pendingError`), or the error.
    enum ConnectStart {
        case connected(Int32)
        case inProgress(Int32)
        case failed(String)
    }

    static func connect(_ address: UpstreamAddress) -> ConnectStart {
        #if os(Linux)
        let type = Int32(SOCK_STREAM.rawValue)
        #else
        let type = SOCK_STREAM
        #endif
        let fd = socket(address.family, type, 0)
        guard fd >= 0 else { return .failed("socket: " + String(cString: strerror(errno))) }
        // Portable spelling (SOCK_NONBLOCK and SOCK_CLOEXEC are Linux's): two fcntl calls per connection.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var copy = address
        let result = withUnsafePointer(to: &copy.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc_connect(fd, $0, address.length) }
        }
        if result == 0 { return .connected(fd) }
        let error = errno
        if error == EINPROGRESS || error == EINTR { return .inProgress(fd) }
        Posix.close(fd)
        return .failed(String(cString: strerror(error)))
    }

    /// The outcome of a non-blocking connect once the socket is writable (`SO_ERROR`): nil when connected.
    static func pendingError(_ fd: Int32) -> String? {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return String(cString: strerror(errno)) }
        return error == 0 ? nil : String(cString: strerror(error))
    }

    /// `host`'s addresses (IPv4 first), by `getaddrinfo`. Blocking: called on a thread of its own, never the loop.
    static func resolve(_ host: String, port: Int) -> Result<[UpstreamAddress], UpstreamError> {
        var hints = addrinfo()
        #if os(Linux)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(UpstreamError(.resolve, "cannot resolve \(host): " + String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(first) }
        var addresses: [UpstreamAddress] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            if let address = current.pointee.ai_addr {
                addresses.append(UpstreamAddress(raw: address, length: current.pointee.ai_addrlen))
            }
            node = current.pointee.ai_next
        }
        addresses.sort { $0.family == AF_INET && $1.family != AF_INET }
        return addresses.isEmpty ? .failure(UpstreamError(.resolve, "cannot resolve \(host): no addresses")) : .success(addresses)
    }
}

#if canImport(Glibc)
private let Glibc_connect = Glibc.connect
#elseif canImport(Darwin)
private let Glibc_connect = Darwin.connect
#endif
