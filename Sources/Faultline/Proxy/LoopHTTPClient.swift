import FaultlineCore

/// HTTP GETs from outside the loop, on a private `EventLoop` and the proxy's own upstream client (`UpstreamPool`,
/// ARCHITECTURE §4d): what `faultline verify` and `faultline export` read a running server's admin API with. It
/// replaced URLSession there so that the binary links no FoundationNetworking, hence no libcurl (and no
/// Foundation, hence no ICU): ARCHITECTURE §1.
///
/// HTTP/1.1 over TCP, or over TLS 1.2+ with the certificate checked against the system's CA store (OpenSSL's
/// default paths: the store `update-ca-certificates` writes on Debian) and the URL's host, as URLSession checked
/// it. Connections are kept alive between the GETs of one command. No proxy variables, no redirects, no cookies:
/// the admin API has none of them. The loop thread starts with the client and ends with `close()` (or the process).
package final class LoopHTTPClient: @unchecked Sendable {
    /// What a GET answered.
    package struct Response: Sendable {
        package var status: Int
        package var headers: HTTPHeaders
        package var body: [UInt8]
    }

    /// Why a GET has no answer: refused, reset, timed out, a TLS failure, not HTTP. `description` is a sentence
    /// for the command's message ("connection refused (127.0.0.1:9)").
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package var kind: String
        package var description: String
    }

    /// A URL this client can fetch: `http` or `https`, a host, an optional port, a path with its query.
    package struct Target: Sendable, Equatable {
        package var secure: Bool
        package var host: String
        package var port: Int
        /// The request target, `/…` with the query, as sent on the request line.
        package var path: String

        /// Parses `text`; nil unless it is an absolute http(s) URL with a host. `[::1]` is an IPv6 literal.
        package init?(_ text: String) {
            guard let schemeEnd = text.firstRange(of: "://") else { return nil }
            let scheme = text[..<schemeEnd.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else { return nil }
            secure = scheme == "https"
            let rest = text[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            var authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            var pathPart = String(rest[authorityEnd...])
            if let hash = pathPart.firstIndex(of: "#") { pathPart = String(pathPart[..<hash]) }
            if pathPart.isEmpty || pathPart.first == "?" { pathPart = "/" + pathPart }
            path = pathPart
            var portText: Substring?
            if authority.first == "[" {
                guard let close = authority.firstIndex(of: "]") else { return nil }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.first == ":" else { return nil }
                    portText = after.dropFirst()
                }
            } else if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            guard !host.isEmpty else { return nil }
            if let portText, !portText.isEmpty {
                guard let number = Int(portText), (1...65535).contains(number) else { return nil }
                port = number
            } else {
                port = secure ? 443 : 80
            }
        }

        /// The `Host` field: the host (bracketed when IPv6) and the port unless it is the scheme's default.
        package var authority: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
        }
    }

    private let loop: EventLoop
    /// Made before the loop thread starts and touched only on it afterwards (hence `@unchecked Sendable`: the
    /// closures posted to the loop carry `self` there, as `ServerCore`'s do).
    private let pool: UpstreamPool
    private let limits: UpstreamLimits

    /// A client with its own loop thread. `responseTimeoutMilliseconds` bounds each GET from the request's send
    /// to its last byte; `maxResponseBytes` bounds the body (the answer is refused, not truncated, beyond it).
    package init(connectTimeoutMilliseconds: Int = 10_000, responseTimeoutMilliseconds: Int = 120_000,
                 maxResponseBytes: Int = 1 << 30) throws(ServerError) {
        loop = try EventLoop()
        pool = UpstreamPool(loop: loop, readScratch: ScratchBuffer())
        limits = UpstreamLimits(
            connectTimeout: connectTimeoutMilliseconds, responseTimeout: responseTimeoutMilliseconds,
            maxResponseBytes: maxResponseBytes)
        loop.start()
    }

    /// GETs `target` with `Accept: accept`; the response read whole, or why there is none.
    package func get(_ target: Target, accept: String = "application/json") async -> Result<Response, Failure> {
        let request = Array((
            "GET \(target.path) HTTP/1.1\r\nHost: \(target.authority)\r\nAccept: \(accept)\r\n"
                + "User-Agent: faultline/\(Faultline.version)\r\n\r\n").utf8)
        let key = UpstreamKey(secure: target.secure, host: target.host, port: target.port, caFile: nil, verify: true)
        let limits = limits
        return await withCheckedContinuation { continuation in
            loop.post { [self] in
                let receiver = OneResponse { result in
                    continuation.resume(returning: result.map {
                        Response(status: $0.status, headers: $0.headers, body: $0.body)
                    }.mapError { error in
                        Failure(kind: error.kind.rawValue, description: Self.sentence(error))
                    })
                }
                self.pool.forward(key, request, method: "GET", limits: limits, startedAt: Clock.monotonicNanos(), receiver)
            }
        }
    }

    /// Closes the connections and ends the loop thread; returns once it has ended.
    package func close() async {
        loop.post { [self] in
            pool.stop()
            loop.breakLoop()
        }
        await loop.waitUntilFinished()
    }

    /// The upstream client's reason, worded for a person: its kind when the reason alone does not say it.
    private static func sentence(_ error: UpstreamError) -> String {
        switch error.kind {
        case .timeout, .tooLarge, .badResponse: return "\(error.kind.rawValue): \(error.reason)"
        default: return error.reason
        }
    }
}

/// Hears one response, read whole (never streamed), and hands it on once.
private final class OneResponse: UpstreamReceiver {
    private var done: ((Result<UpstreamResponse, UpstreamError>) -> Void)?

    init(_ done: @escaping (Result<UpstreamResponse, UpstreamError>) -> Void) {
        self.done = done
    }

    var mayStream: Bool { false }
    func shouldStream(_ head: UpstreamResponse) -> Bool { false }
    func upstreamHead(_ response: UpstreamResponse, _ timing: UpstreamTiming, _ connection: UpstreamConnection) {}
    func upstreamBody(_ bytes: [UInt8]) {}

    func upstreamFinished(_ result: Result<UpstreamResponse, UpstreamError>, _ timing: UpstreamTiming) {
        let done = self.done
        self.done = nil
        done?(result)
    }
}
