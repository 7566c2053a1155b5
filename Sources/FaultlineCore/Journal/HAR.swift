/// The journal as an HTTP Archive (HAR 1.2, http://www.softwareishard.com/blog/har-12-spec/), which browser
/// devtools, Charles, Proxyman and HAR viewers open (ARCHITECTURE §7).
///
/// HAR describes what a client saw; Faultline's journal is the server's view, so a few fields are
/// approximations, each said in a `comment`: the journal keeps no response headers or body, so
/// `response.headers` is empty and `content.size` is the bytes written on the wire. Whatever HAR has no field
/// for (sequence, route, fault, outcome, connection, policy notes) goes into custom fields, which HAR 1.2 lets
/// a tool add when their names start with an underscore.
package enum HAR {
    /// The HAR document for `entries`, in their order (the journal's: oldest first, which HAR prefers).
    package static func document(_ entries: [JournalEntry], creatorVersion: String) -> JSONValue {
        .object([
            ("log", .object([
                ("version", .string("1.2")),
                ("creator", .object([("name", .string("Faultline")), ("version", .string(creatorVersion))])),
                ("pages", .array([])),
                ("entries", .array(entries.filter { !$0.isNetworkChange }.map(entry))),
            ])),
        ])
    }

    /// One journal entry as a HAR `entry`.
    package static func entry(_ entry: JournalEntry) -> JSONValue {
        // The server measures only from the request's arrival to the exchange's end; HAR asks for
        // send + wait + receive (non-negative) and `time` as their sum, so the whole duration is `wait`.
        // A pending exchange has no duration yet: 0, and `_outcome` says "pending".
        let durationMs = entry.finishedAtMonotonicNanos.map {
            (Double($0 &- entry.receivedAtMonotonicNanos) / 1_000_000 * 1000).rounded() / 1000
        } ?? 0
        var members: [(key: String, value: JSONValue)] = [
            ("startedDateTime", .string(JournalEntry.iso8601(entry.receivedAtWall))),
            ("time", .double(durationMs)),
            ("request", request(entry)),
            ("response", response(entry)),
            ("cache", .object([])),
            ("timings", .object([
                ("blocked", .int(-1)),
                ("dns", .int(-1)),
                ("connect", .int(-1)),
                ("send", .int(0)),
                ("wait", .double(durationMs)),
                ("receive", .int(0)),
                ("ssl", .int(-1)),
            ])),
            ("connection", .string(String(entry.connectionID))),
            ("_sequence", .int(entry.sequence)),
            ("_scenario", entry.scenario.map(JSONValue.string) ?? .null),
            ("_scenarioVersion", entry.scenarioVersion.map(JSONValue.int) ?? .null),
            ("_route", entry.route.map { .string($0.description) } ?? .null),
            ("_answeredBy", entry.answeredBy.map { .string($0.description) } ?? .null),
            ("_step", entry.step.map(JSONValue.int) ?? .null),
            ("_fault", entry.fault.map(JSONValue.string) ?? .null),
            ("_chaos", .bool(entry.chaos)),
            ("_outcome", .string(entry.outcome.rawValue)),
            ("_connection", .object([
                ("id", .int(entry.connectionID)),
                ("requestIndex", .int(entry.indexOnConnection)),
                ("reused", .bool(entry.connectionReused)),
                ("client", .string(entry.clientAddress)),
            ])),
            ("_notes", .array(entry.notes.map { .string($0.description) })),
            ("_malformed", .bool(entry.malformed != nil)),
        ]
        if let malformed = entry.malformed { members.append(("_error", .string(malformed))) }
        if entry.head == nil { members.append(("_requestLine", .string(entry.requestLine))) }
        // What an HTTP/2 client sent to end the stream or the connection: no HAR field says it (its view is the
        // client's, which knows what it sent), so custom fields, the journal's records as they are.
        if let goaway = entry.clientGoaway { members.append(("_clientGoaway", goaway.json())) }
        if let reset = entry.clientReset { members.append(("_clientReset", reset.json())) }
        if let session = entry.websocket {
            // Chrome's and Firefox's field for a WebSocket's messages: type send/receive (the client's view), time in
            // epoch seconds, opcode, data (the text kept, or the size of a binary frame).
            let opcodes = ["continuation": 0, "text": 1, "binary": 2, "close": 8, "ping": 9, "pong": 10]
            members.append(("_webSocketMessages", .array(session.frames.map { frame in
                let seconds = entry.receivedAtWall + Double(frame.atMonotonicNanos &- entry.receivedAtMonotonicNanos) / 1e9
                return .object([
                    ("type", .string(frame.direction == .fromClient ? "send" : "receive")),
                    ("time", .double((seconds * 1000).rounded() / 1000)),
                    ("opcode", .int(opcodes[frame.opcode] ?? -1)),
                    ("data", .string(frame.text ?? "(\(frame.size) bytes)")),
                ])
            })))
        }
        return .object(members)
    }

    private static func request(_ entry: JournalEntry) -> JSONValue {
        guard let head = entry.head else {
            // A request whose line could not be parsed has no method or target. HAR requires an absolute URL,
            // so it gets a placeholder; the bytes that were read are in the entry's `_requestLine`.
            return .object([
                ("method", .string("")),
                ("url", .string("http://invalid/")),
                ("httpVersion", .string("")),
                ("cookies", .array([])),
                ("headers", .array([])),
                ("queryString", .array([])),
                ("headersSize", .int(-1)),
                ("bodySize", .int(entry.bodySize)),
                ("comment", .string("malformed request without a parsable request line; see _requestLine")),
            ])
        }
        var members: [(key: String, value: JSONValue)] = [
            ("method", .string(head.method)),
            ("url", .string(url(head))),
            ("httpVersion", .string(head.version.description)),
            ("cookies", .array([])),
            ("headers", .array(head.headers.fields.map(nameValue))),
            ("queryString", .array(PercentDecoding.queryParameters(head.query).map(nameValue))),
        ]
        if entry.bodySize > 0 || !entry.body.isEmpty {
            members.append(("postData", postData(entry, contentType: head.headers["Content-Type"])))
        }
        members.append(("headersSize", .int(-1)))
        members.append(("bodySize", .int(entry.bodySize)))
        return .object(members)
    }

    /// The request body: UTF-8 text as is, anything else base64 with `encoding` (the field HAR 1.2 defines for
    /// `content`, used here as tools that read HAR accept it on `postData` too).
    private static func postData(_ entry: JournalEntry, contentType: String?) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        if let text = String(validating: entry.body, as: UTF8.self) {
            members.append(("mimeType", .string(contentType ?? "")))
            members.append(("text", .string(text)))
        } else {
            members.append(("mimeType", .string(contentType ?? "application/octet-stream")))
            members.append(("text", .string(Base64.encode(entry.body))))
            members.append(("encoding", .string("base64")))
        }
        if entry.body.count < entry.bodySize {
            members.append(("comment", .string("the journal kept the first \(entry.body.count) of \(entry.bodySize) bytes")))
        }
        return .object(members)
    }

    private static func response(_ entry: JournalEntry) -> JSONValue {
        // The journal's status is the status line sent; none when not a byte went out (HAR: status 0).
        let status = entry.status ?? 0
        return .object([
            ("status", .int(status)),
            ("statusText", .string(status == 0 ? "" : HTTPStatus.reasonPhrase(status))),
            ("httpVersion", .string(
                status == 0 ? "" : entry.exchangeProtocol == .http2 ? HTTPVersion.http2.description
                    : HTTPVersion.http1_1.description)),
            ("cookies", .array([])),
            ("headers", .array([])),
            ("content", .object([
                ("size", .int(entry.bytesWritten)),
                ("mimeType", .string("")),
            ])),
            ("redirectURL", .string("")),
            ("headersSize", .int(-1)),
            ("bodySize", .int(-1)),
            ("comment", .string(
                "Faultline's journal keeps no response headers or body: headers is empty, and content.size is "
                    + "the bytes written on the wire (status line, headers and body)")),
        ])
    }

    /// `http://HOST/target` from the Host header (RFC 9112 §3.3); 127.0.0.1 when the request had none
    /// (HTTP/1.0). An absolute-form target (RFC 9112 §3.2.2) is already the URL.
    static func url(_ head: HTTPRequestHead) -> String {
        let target = head.target
        if target.lowercased().hasPrefix("http://") || target.lowercased().hasPrefix("https://") { return target }
        // HTTP/2 names the host in `:authority` (RFC 9113 §8.3.1), HTTP/1.1 in Host.
        let host = (head.headers[":authority"] ?? head.headers["Host"]).map { $0.trimmingWhitespace() }
            .flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        // `OPTIONS *` (asterisk-form, RFC 9112 §3.2.4) names the server, not a resource.
        let path = target.hasPrefix("/") ? target : "/"
        let scheme = head.headers[":scheme"] == "https" ? "https" : "http"
        return "\(scheme)://\(host)\(path)"
    }

    private static func nameValue(_ field: (name: String, value: String)) -> JSONValue {
        .object([("name", .string(field.name)), ("value", .string(field.value))])
    }
}
