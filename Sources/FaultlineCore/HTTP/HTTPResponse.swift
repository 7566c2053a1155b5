/// A response to be serialized exactly as given: Faultline adds only what a step leaves out and the framing
/// needs (`Content-Length`, `Connection: close`) and, when the codec writes its head, `Date` (RFC 9110 §6.6.1)
/// unless the fields set one or `date` is false — never anything else.
package struct HTTPResponse: Sendable, Equatable {
    package var status: Int
    package var headers: HTTPHeaders
    package var body: [UInt8]
    /// Whether the head gets the server's `Date` when its fields carry none (`ResponseHead.addsDate`): false for a
    /// step's `"date": false` and the `no-date` resource deviation.
    package var date = true

    package init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response with `Content-Type: application/json`.
    package static func json(_ status: Int, _ value: JSONValue) -> HTTPResponse {
        var body: [UInt8] = []
        value.serialize(into: &body)
        body.append(0x0A)
        return HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    /// The status line and header section, ending with the empty line (RFC 9112 §4, §5).
    /// `Content-Length` is added when absent unless the response is chunked or has no body by definition
    /// (1xx, 204, 304: RFC 9110 §8.6); `Connection: close` is added when `close` is set.
    /// `bodyLength` is the `Content-Length` to announce when it is not the body's own length.
    /// `framed: false` leaves out Content-Length: the body ends when the connection does (RFC 9112 §6.3 item 8).
    package func serializedHead(
        version: HTTPVersion = .http1_1, close: Bool, bodyLength: Int? = nil, framed: Bool = true
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + headers.count * 32)
        Self.appendStatusLine(status, version: version, to: &out)
        var hasLength = false
        var hasConnection = false
        for field in headers {
            if field.name.caseInsensitiveEquals("content-length") || field.name.caseInsensitiveEquals("transfer-encoding") {
                hasLength = true
            }
            if field.name.caseInsensitiveEquals("connection") { hasConnection = true }
            out.appendUTF8(field.name)
            out.append(UInt8(ascii: ":"))
            out.append(0x20)
            out.appendUTF8(field.value)
            out.append(0x0D)
            out.append(0x0A)
        }
        let bodyless = status < 200 || status == 204 || status == 304
        if !hasLength && !bodyless && framed {
            out.appendLiteral("Content-Length: ")
            out.appendDecimal(bodyLength ?? body.count)
            out.appendCRLF()
        }
        if close && !hasConnection {
            out.appendLiteral("Connection: close\r\n")
        }
        out.appendCRLF()
        return out
    }

    /// `HTTP/1.1 200 OK` and CRLF, byte by byte rather than by interpolation: this runs for every response that
    /// is not prepared at load.
    package static func appendStatusLine(_ status: Int, version: HTTPVersion = .http1_1, to out: inout [UInt8]) {
        if version == .http1_1 {
            out.appendLiteral("HTTP/1.1 ")
        } else {
            out.append(contentsOf: version.description.utf8)
            out.append(0x20)
        }
        out.appendDecimal(status)
        out.append(0x20)
        out.appendUTF8(HTTPStatus.reasonPhrase(status))
        out.appendCRLF()
    }

    /// Head and body together.
    package func serialized(version: HTTPVersion = .http1_1, close: Bool) -> [UInt8] {
        var out = serializedHead(version: version, close: close)
        out.append(contentsOf: body)
        return out
    }
}

/// Reason phrases for status lines (RFC 9110 §15). Clients ignore them, but people reading captures do not.
package enum HTTPStatus {
    package static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 416: return "Range Not Satisfiable"
        case 422: return "Unprocessable Content"
        case 425: return "Too Early"
        case 426: return "Upgrade Required"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(status)"
        }
    }
}
