/// The header rules of a forwarding proxy (RFC 9110 §7.6): hop-by-hop fields are not forwarded either way
/// (§7.6.1: `Connection`, the fields it names, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`,
/// `Proxy-*`), `Via` gains our hop (§7.6.3), `X-Forwarded-For` the client's address. Pure.
package enum ProxyHeaders {
    /// Our `Via` hop.
    package static let via = "1.1 faultline"

    /// What a field name is to the proxy. Read once a field from the name's bytes — its length and first letter
    /// reject most names before any comparison — instead of one case-insensitive comparison a rule: this runs for
    /// every field of every proxied message, both ways.
    enum FieldKind {
        /// Hop-by-hop in itself (RFC 9110 §7.6.1): `Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
        /// `Upgrade`, `Trailer`, `Proxy-*`.
        case hopByHop
        case host, contentLength, expect, via, xForwardedFor, date
        /// Anything else: end-to-end unless the message's `Connection` fields name it.
        case other
    }

    static func kind(_ name: String) -> FieldKind {
        var name = name
        return name.withUTF8 { kind($0) }
    }

    static func kind(_ bytes: UnsafeBufferPointer<UInt8>) -> FieldKind {
        guard let first = bytes.first.map({ $0 | 0x20 }) else { return .other }
        switch (bytes.count, first) {
        case (10, UInt8(ascii: "c")): return HTTPHeaders.token(bytes, is: "connection") ? .hopByHop : .other
        case (10, UInt8(ascii: "k")): return HTTPHeaders.token(bytes, is: "keep-alive") ? .hopByHop : .other
        case (2, UInt8(ascii: "t")): return HTTPHeaders.token(bytes, is: "te") ? .hopByHop : .other
        case (17, UInt8(ascii: "t")): return HTTPHeaders.token(bytes, is: "transfer-encoding") ? .hopByHop : .other
        case (7, UInt8(ascii: "u")): return HTTPHeaders.token(bytes, is: "upgrade") ? .hopByHop : .other
        case (7, UInt8(ascii: "t")): return HTTPHeaders.token(bytes, is: "trailer") ? .hopByHop : .other
        case (4, UInt8(ascii: "h")): return HTTPHeaders.token(bytes, is: "host") ? .host : .other
        case (14, UInt8(ascii: "c")): return HTTPHeaders.token(bytes, is: "content-length") ? .contentLength : .other
        case (6, UInt8(ascii: "e")): return HTTPHeaders.token(bytes, is: "expect") ? .expect : .other
        case (3, UInt8(ascii: "v")): return HTTPHeaders.token(bytes, is: "via") ? .via : .other
        case (15, UInt8(ascii: "x")): return HTTPHeaders.token(bytes, is: "x-forwarded-for") ? .xForwardedFor : .other
        case (4, UInt8(ascii: "d")): return HTTPHeaders.token(bytes, is: "date") ? .date : .other
        case (6..., UInt8(ascii: "p")):
            return HTTPHeaders.token(UnsafeBufferPointer(rebasing: bytes[0..<6]), is: "proxy-") ? .hopByHop : .other
        default: return .other
        }
    }

    /// Whether a field of kind `kind` named `name` is not forwarded: hop-by-hop in itself, or named by the
    /// message's `Connection` fields (`listed`, lower-cased).
    private static func dropped(_ kind: FieldKind, _ name: String, listed: Set<String>) -> Bool {
        kind == .hopByHop || (!listed.isEmpty && listed.contains(name.lowercased()))
    }

    /// The field names a message's `Connection` fields list (lower-cased), other than the `close` and
    /// `keep-alive` options, which name no field.
    package static func connectionOptions(_ headers: HTTPHeaders) -> Set<String> {
        var names: Set<String> = []
        headers.forEachConnectionToken { insertOption($0, into: &names) }
        return names
    }

    /// `connectionOptions`, read from an upstream's fields as bytes.
    static func connectionOptions(_ fields: UpstreamFields) -> Set<String> {
        var names: Set<String> = []
        fields.forEach { name, value in
            guard HTTPHeaders.token(name, is: "connection") else { return }
            HTTPHeaders.forEachToken(in: value) { insertOption($0, into: &names) }
        }
        return names
    }

    private static func insertOption(_ token: UnsafeBufferPointer<UInt8>, into names: inout Set<String>) {
        if !HTTPHeaders.token(token, is: "close") && !HTTPHeaders.token(token, is: "keep-alive") {
            names.insert(String(decoding: token, as: UTF8.self).lowercased())
        }
    }

    /// The request as the upstream receives it: `method target HTTP/1.1`, the client's end-to-end fields, `Host`
    /// as configured, `Via`, `X-Forwarded-For`, `X-Forwarded-Proto`, and `Content-Length` for the body (which the
    /// server has read whole). HTTP/2's pseudo-header fields become the request line and `Host`.
    package static func upstreamRequest(
        _ request: HTTPRequest, upstream: UpstreamURL, host: HostRewrite, client: String, clientTLS: Bool
    ) -> [UInt8] {
        let headers = request.headers
        let listed = connectionOptions(headers)
        var clientHost = headers["host"] ?? headers[":authority"]
        var out: [UInt8] = []
        out.reserveCapacity(256 + headers.count * 32 + request.body.count)
        out.appendUTF8(request.method)
        out.append(0x20)
        let target = request.target
        if target == "*" {
            out.append(UInt8(ascii: "*"))
        } else {
            out.appendUTF8(upstream.basePath)
            if target.utf8.first != UInt8(ascii: "/") { out.append(UInt8(ascii: "/")) }
            out.appendUTF8(target)
        }
        out.appendLiteral(" HTTP/1.1\r\n")
        let hostValue: String
        switch host {
        case .upstream: hostValue = upstream.authority
        case .client: hostValue = clientHost ?? upstream.authority
        case .value(let text): hostValue = text
        }
        append("Host", hostValue, to: &out)
        var forwardedFor: String?
        var via: String?
        for field in headers {
            let name = field.name
            if name.utf8.first == UInt8(ascii: ":") { continue }
            let kind = kind(name)
            if kind == .host || kind == .contentLength || kind == .expect || dropped(kind, name, listed: listed) {
                continue
            }
            switch kind {
            case .xForwardedFor: forwardedFor = forwardedFor.map { $0 + ", " + field.value } ?? field.value
            case .via: via = via.map { $0 + ", " + field.value } ?? field.value
            default: append(name, field.value, to: &out)
            }
        }
        append("Via", via.map { $0 + ", " + Self.via } ?? Self.via, to: &out)
        append("X-Forwarded-For", forwardedFor.map { $0 + ", " + client } ?? client, to: &out)
        append("X-Forwarded-Proto", clientTLS ? "https" : "http", to: &out)
        if let original = clientHost, host != .client { append("X-Forwarded-Host", original, to: &out) }
        clientHost = nil
        // The body was read whole (chunked or not): Content-Length frames it. A bodyless GET sends none.
        if !request.body.isEmpty || request.method == "POST" || request.method == "PUT" || request.method == "PATCH" {
            out.appendLiteral("Content-Length: ")
            out.appendDecimal(request.body.count)
            out.appendCRLF()
        }
        out.appendCRLF()
        out.append(contentsOf: request.body)
        return out
    }

    private static func append(_ name: String, _ value: String, to out: inout [UInt8]) {
        out.appendUTF8(name)
        out.append(UInt8(ascii: ":"))
        out.append(0x20)
        out.appendUTF8(value)
        out.append(0x0D)
        out.append(0x0A)
    }

    /// The head a plainly forwarded response gets (no step headers, nothing added): `clientResponse`'s fields,
    /// then `Content-Length: bodyLength` and `Connection: close` when `close`, chosen and serialized in one pass —
    /// the same head `ResponseHead(status:headers:bodyLength:close:)` makes of them, for less (every proxied
    /// request builds one). Not for a HEAD's or a bodyless status's response (their length fields are kept).
    /// A parsed response's end-to-end fields are copied through from its bytes (`UpstreamFields`); the head's
    /// fields as strings are made only if read (an HTTP/2 client's codec reads them).
    package static func clientHead(_ response: UpstreamResponse, bodyLength: Int, close: Bool) -> ResponseHead {
        var out: [UInt8] = []
        HTTPResponse.appendStatusLine(response.status, to: &out)
        let statusLineLength = out.count
        var hasDate = false
        if let fields = response.fields {
            out.reserveCapacity(out.count + fields.bytes.count + 80)
            let listed = connectionOptions(fields)
            var via: String?
            fields.forEach { name, value in
                let kind = kind(name)
                if kind == .hopByHop || kind == .contentLength
                    || (!listed.isEmpty && listed.contains(String(decoding: name, as: UTF8.self).lowercased())) {
                    return
                }
                if kind == .via {
                    let hop = String(decoding: value, as: UTF8.self)
                    via = via.map { $0 + ", " + hop } ?? hop
                    return
                }
                if kind == .date { hasDate = true }
                out.append(contentsOf: name)
                out.append(UInt8(ascii: ":"))
                out.append(0x20)
                out.append(contentsOf: value)
                out.append(0x0D)
                out.append(0x0A)
            }
            append("Via", via.map { $0 + ", " + Self.via } ?? Self.via, to: &out)
        } else {
            out.reserveCapacity(160 + response.headers.fields.count * 40)
            forEachClientField(response, keepLength: false) { name, value, kind in
                if kind == .date { hasDate = true }
                append(name, value, to: &out)
            }
        }
        out.appendLiteral("Content-Length: ")
        out.appendDecimal(bodyLength)
        out.appendCRLF()
        if close { out.appendLiteral("Connection: close\r\n") }
        out.appendCRLF()
        // The upstream's Date is kept; an answer without one gets ours (RFC 9110 §6.6.1: a recipient with a clock
        // that forwards a response without Date must add one).
        return ResponseHead(
            status: response.status, headers: { clientResponse(response, keepLength: false) }, http1: out,
            statusLineLength: statusLineLength, contentLength: bodyLength, chunked: false, addsDate: !hasDate)
    }

    /// The upstream's fields as the client receives them: end-to-end fields only, `Via` with our hop. The
    /// framing fields go too — the body was read whole and our codec frames it again (`Content-Length` for
    /// HTTP/1.1, DATA frames for HTTP/2) — except where the length describes a body that is not sent (a HEAD's,
    /// a 304's), which is kept as the upstream gave it.
    package static func clientResponse(_ response: UpstreamResponse, requestMethod: String) -> HTTPHeaders {
        clientResponse(response, keepLength: requestMethod == "HEAD" || response.status == 304)
    }

    private static func clientResponse(_ response: UpstreamResponse, keepLength: Bool) -> HTTPHeaders {
        var headers = HTTPHeaders()
        forEachClientField(response, keepLength: keepLength) { name, value, _ in headers.append(name: name, value: value) }
        return headers
    }

    /// The rule both heads follow, field by field in order: the upstream's end-to-end fields (`Content-Length`
    /// only when `keepLength`), then `Via` with its hops joined and ours last.
    private static func forEachClientField(
        _ response: UpstreamResponse, keepLength: Bool,
        _ body: (_ name: String, _ value: String, _ kind: FieldKind) -> Void
    ) {
        // Read once: a parsed response's fields become strings each time they are asked for.
        let headers = response.headers
        let listed = connectionOptions(headers)
        var via: String?
        for field in headers {
            let name = field.name
            let kind = kind(name)
            if dropped(kind, name, listed: listed) || (!keepLength && kind == .contentLength) { continue }
            if kind == .via {
                via = via.map { $0 + ", " + field.value } ?? field.value
                continue
            }
            body(name, field.value, kind)
        }
        body("Via", via.map { $0 + ", " + Self.via } ?? Self.via, .via)
    }
}
