import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking TCP client for tests that need byte-exact control: pipelining, malformed requests,
/// half-close. Every read has a deadline; nothing sleeps.
final class RawClient {
    private(set) var fd: Int32

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init(port: Int, host: String = "127.0.0.1") throws {
        #if os(Linux)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        #if !os(Linux)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            // A class whose initializer throws after its properties are set still runs `deinit`: without this, the
            // descriptor number would be closed twice, the second time under whoever got it next (another test's
            // file: "Bad file descriptor" far from here).
            fd = -1
            throw Failure(description: "connect to \(host):\(port): errno \(error)")
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { systemSend(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            offset += n
        }
    }

    /// Shuts down our sending side (FIN), keeping the socket open for reading.
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// What reading saw: the bytes, and how the stream ended if it did.
    struct ReadResult {
        var bytes: [UInt8]
        /// True when the server closed (FIN) within the deadline.
        var closed: Bool
        /// The errno when reading failed (ECONNRESET for an RST).
        var error: Int32?
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    /// Reads until the server closes, an error, or `seconds` pass.
    func readUntilClose(seconds: Double = 5) -> ReadResult {
        read(seconds: seconds) { _ in false }
    }

    /// Reads until `done(bytesSoFar)` holds, the server closes, or `seconds` pass.
    func read(seconds: Double = 5, until done: ([UInt8]) -> Bool) -> ReadResult {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !done(bytes) {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return ReadResult(bytes: bytes, closed: false, error: nil) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(max(1, remaining * 1000)))
            if ready <= 0 { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return ReadResult(bytes: bytes, closed: true, error: nil) }
            if n < 0 { return ReadResult(bytes: bytes, closed: false, error: errno) }
            bytes += buffer[0..<n]
        }
        return ReadResult(bytes: bytes, closed: false, error: nil)
    }

    /// Reads until `count` complete responses (Content-Length framed) have arrived.
    func readResponses(_ count: Int, seconds: Double = 5) -> [RawResponse] {
        let result = read(seconds: seconds) { RawResponse.parseAll($0).count >= count }
        return RawResponse.parseAll(result.bytes)
    }
}

/// A response parsed from raw bytes (Content-Length framing only), for assertions.
struct RawResponse {
    var status: Int
    var headers: [(String, String)]
    var body: String

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    static func parseAll(_ bytes: [UInt8]) -> [RawResponse] {
        var responses: [RawResponse] = []
        var rest = bytes[...]
        while let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: rest[rest.startIndex..<end.lowerBound], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { break }
            let headers = lines.compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
            let bodyStart = end.upperBound
            let bodyless = status < 200 || status == 204 || status == 304
            let bodyLength = bodyless ? 0 : length
            guard rest.distance(from: bodyStart, to: rest.endIndex) >= bodyLength else { break }
            let bodyEnd = rest.index(bodyStart, offsetBy: bodyLength)
            responses.append(RawResponse(status: status, headers: headers, body: String(decoding: rest[bodyStart..<bodyEnd], as: UTF8.self)))
            rest = rest[bodyEnd...]
        }
        return responses
    }
}

/// `send(2)` without SIGPIPE, by a name that `RawClient.send` does not shadow.
private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    #if os(Linux)
    return Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL))
    #else
    return Darwin.send(fd, bytes, count, 0)
    #endif
}

/// A loopback port held bound but not listening, for as long as this lives: a connect to it is refused, and no
/// parallel test's server can be given it meanwhile (a stopped server's port can be).
final class HeldPort {
    let fd: Int32
    let port: Int

    init() throws {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RawClient.Failure(description: "socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let error = errno
            close(fd)
            throw RawClient.Failure(description: "bind: \(error)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
