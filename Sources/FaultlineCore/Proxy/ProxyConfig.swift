/// Where a proxy forwards to: `http://` or `https://`, a host, a port and a base path that is put in front of
/// every forwarded target (`https://staging.example.test/api` sends `/v1/x` as `/api/v1/x`).
public struct UpstreamURL: Sendable, Equatable, Hashable, CustomStringConvertible {
    public let secure: Bool
    /// A name or a literal address; IPv6 without brackets.
    public let host: String
    public let port: Int
    /// Empty, or a path starting with `/` and not ending with one.
    public let basePath: String
    /// `host[:port]` as a `Host` field carries it (RFC 9110 §7.2), brackets around IPv6; made once, here, since
    /// every forwarded request sends it.
    public let authority: String
    /// `scheme://host[:port]`: what the journal names.
    public let origin: String

    public init(secure: Bool, host: String, port: Int, basePath: String = "") {
        self.secure = secure
        self.host = host
        self.port = port
        self.basePath = basePath
        let shownHost = host.utf8.contains(UInt8(ascii: ":")) ? "[" + host + "]" : host
        authority = port == (secure ? 443 : 80) ? shownHost : shownHost + ":" + String(port)
        origin = (secure ? "https://" : "http://") + authority
    }

    /// `scheme://host:port` (the port only when it is not the scheme's default) and the base path.
    public var description: String { origin + basePath }

    /// Parses `http://host[:port][/base]` or `https://…`; the reason when it is not one.
    package static func parse(_ text: String) -> Result<UpstreamURL, UpstreamURLError> {
        let secure: Bool
        var rest: Substring
        if text.lowercased().hasPrefix("http://") {
            secure = false
            rest = text.dropFirst(7)
        } else if text.lowercased().hasPrefix("https://") {
            secure = true
            rest = text.dropFirst(8)
        } else {
            return .failure(UpstreamURLError("\(text) is not an http:// or https:// URL"))
        }
        if let mark = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            return .failure(UpstreamURLError("an upstream URL takes no \(rest[mark] == "?" ? "query" : "fragment")"))
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        var basePath = String(rest[slash...])
        while basePath.hasSuffix("/") { basePath.removeLast() }
        if authority.contains("@") { return .failure(UpstreamURLError("an upstream URL takes no user information")) }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                return .failure(UpstreamURLError("\(text): an IPv6 address needs its closing ]"))
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty {
                return .failure(UpstreamURLError("\(text): unexpected \(after) after the address"))
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { return .failure(UpstreamURLError("\(text) names no host")) }
        var port = secure ? 443 : 80
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                return .failure(UpstreamURLError("\(text): the port must be 1–65535"))
            }
            port = number
        }
        return .success(UpstreamURL(secure: secure, host: String(host), port: port, basePath: basePath))
    }
}

/// Why an upstream URL was refused.
package struct UpstreamURLError: Error, Sendable, Equatable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// What the proxy does with a request no route took (`"unmatched"`).
public enum UnmatchedRequests: String, Sendable, Equatable {
    /// Forward it to the upstream, untouched by faults.
    case forward
    /// Answer 404 naming the nearest route, as without a proxy.
    case notFound = "404"
}

/// What `Host` the upstream receives (`"host"`).
public enum HostRewrite: Sendable, Equatable {
    /// The upstream's own authority (the default: virtual hosts and TLS name checks expect it).
    case upstream
    /// The client's `Host` (or HTTP/2 `:authority`) as it came.
    case client
    /// This value.
    case value(String)
}

/// `"proxy": {"upstream": …}` on a scenario, a route, or `serve --proxy URL` (ARCHITECTURE §4d). At route level
/// every key is optional and overrides the scenario's (then the command line's).
public struct ProxyConfig: Sendable, Equatable {
    public var upstream: UpstreamURL?
    public var host: HostRewrite?
    /// Scenario level only: what happens to requests no route takes (default `forward`).
    public var unmatched: UnmatchedRequests?
    /// A PEM file of CA certificates to trust for an `https` upstream instead of the system's.
    public var caFile: String?
    /// Verify the upstream's certificate and host name (default true).
    public var verify: Bool?
    public var connectTimeoutMilliseconds: Int?
    /// From the request sent to the response complete; once a body streams, the longest silence between two reads.
    public var responseTimeoutMilliseconds: Int?
    /// A body read whole (for a fault that needs all of it, a drip, idempotency) that is larger is answered with 502
    /// naming the limit; a streamed body has none.
    public var maxResponseBytes: Int?

    public static let defaultConnectTimeoutMilliseconds = 5_000
    public static let defaultResponseTimeoutMilliseconds = 30_000
    public static let defaultMaxResponseBytes = 64 * 1024 * 1024

    public init(
        upstream: UpstreamURL? = nil, host: HostRewrite? = nil, unmatched: UnmatchedRequests? = nil,
        caFile: String? = nil, verify: Bool? = nil
    ) {
        self.upstream = upstream
        self.host = host
        self.unmatched = unmatched
        self.caFile = caFile
        self.verify = verify
    }

    /// This configuration's keys over `base`'s: a route's over its scenario's, a scenario's over the command line's.
    package func merged(over base: ProxyConfig?) -> ProxyConfig {
        guard let base else { return self }
        var merged = base
        if let upstream { merged.upstream = upstream }
        if let host { merged.host = host }
        if let unmatched { merged.unmatched = unmatched }
        if let caFile { merged.caFile = caFile }
        if let verify { merged.verify = verify }
        if let connectTimeoutMilliseconds { merged.connectTimeoutMilliseconds = connectTimeoutMilliseconds }
        if let responseTimeoutMilliseconds { merged.responseTimeoutMilliseconds = responseTimeoutMilliseconds }
        if let maxResponseBytes { merged.maxResponseBytes = maxResponseBytes }
        return merged
    }

    package var connectTimeout: Int { connectTimeoutMilliseconds ?? Self.defaultConnectTimeoutMilliseconds }
    package var responseTimeout: Int { responseTimeoutMilliseconds ?? Self.defaultResponseTimeoutMilliseconds }
    package var responseLimit: Int { maxResponseBytes ?? Self.defaultMaxResponseBytes }
}
