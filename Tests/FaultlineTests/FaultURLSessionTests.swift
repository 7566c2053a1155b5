import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every named fault against Foundation's URLSession (on Linux: FoundationNetworking over libcurl), in
/// process: the `URLError` each one produces, or the unusable data of a "successful" response, and the
/// journal entry. The codes are what was observed (docs/fault-observations.md); on Linux most transfer errors
/// come through as libcurl's message under `URLError.Code.unknown` (-1). One server per test, seed 7, so
/// the seeded faults write the same bytes every run.
@Suite struct FaultURLSessionTests {
    static let body = #"{"id":42,"name":"widget","tags":["a","b"]}"#   // 42 bytes
    static let date = 37            // Date: Tue, 01 Dec 2026 19:46:35 GMT and CRLF
    static let headKeepAlive = 71 + date  // status line, Date, Content-Type: application/json, Content-Length: 42
    static let headClose = 90 + date      // the same plus Connection: close

    /// GET /<fault> answers 200 + `body` with that fault.
    static func scenario(_ fault: String) -> String {
        #"""
        { "name": "faults", "seed": 7, "routes": [ { "id": "\#(fault)", "match": { "method": "GET", "path": "/\#(fault)" },
          "responses": [ { "status": 200, "json": { "id": 42, "name": "widget", "tags": ["a", "b"] }, "fault": "\#(fault)" } ] } ] }
        """#
    }

    struct Observation {
        /// The response and its data, or the error URLSession threw.
        var result: Result<(Data, HTTPURLResponse), any Error>
        /// The fault's only journal entry, once its outcome is no longer pending.
        var entry: JournalEntry
        var urlError: URLError? {
            if case .failure(let error) = result { return error as? URLError }
            return nil
        }
        /// libcurl's error text, which FoundationNetworking passes on as the localized description.
        var message: String? { urlError?.userInfo[NSLocalizedDescriptionKey] as? String }
        var response: (data: Data, http: HTTPURLResponse)? { try? result.get() }
        var durationMs: Double {
            Double((entry.finishedAtMonotonicNanos ?? 0) &- entry.receivedAtMonotonicNanos) / 1_000_000
        }
    }

    /// FoundationNetworking arms its timer with `Int(timeoutInterval) * 1000` ms: a sub-second timeout
    /// truncates to 0 and fails at once with `.timedOut`. So the never-finishing faults use 1 s.
    static let shortTimeout: TimeInterval = 1

    /// Starts a server for `fault`, GETs /<fault> with a fresh ephemeral session, and waits (long-poll, with a
    /// deadline) until the journal entry has settled — before the session is invalidated, so a hang must be
    /// released by URLSession's own close.
    static func observe(_ fault: String, timeout: TimeInterval = 5) async throws -> Observation {
        let server = try TestSupport.server([scenario(fault)])
        defer { Task { await server.stop() } }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let result: Result<(Data, HTTPURLResponse), any Error>
        do {
            let (data, response) = try await session.data(from: server.baseURL.appendingPathComponent(fault))
            result = .success((data, try #require(response as? HTTPURLResponse)))
        } catch {
            result = .failure(error)
        }
        let entry = try await settledEntry(server, route: fault)
        return Observation(result: result, entry: entry)
    }

    /// The route's single journal entry once it is no longer pending (GET /__faultline/requests/wait).
    static func settledEntry(_ server: FaultlineServer, route: String) async throws -> JournalEntry {
        let admin = URLSession(configuration: .ephemeral)
        defer { admin.invalidateAndCancel() }
        let wait = URL(string: "\(server.baseURL.absoluteString)/__faultline/requests/wait?count=1&route=\(route)&completed=true&timeoutMs=3000")!
        let (data, _) = try await admin.data(from: wait)
        let answer = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(answer["satisfied"] as? Bool == true, "journal entry for \(route) not settled: \(answer)")
        let entries = await server.requests(JournalFilter(route: route))
        #expect(entries.count == 1, "URLSession sent \(entries.count) requests for \(route)")
        return try #require(entries.first)
    }

    static func expectJournal(
        _ observation: Observation, fault: String, status: Int?, outcome: ExchangeOutcome, bytesWritten: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let entry = observation.entry
        #expect(entry.fault == fault, sourceLocation: sourceLocation)
        #expect(entry.status == status, sourceLocation: sourceLocation)
        #expect(entry.outcome == outcome, sourceLocation: sourceLocation)
        #expect(entry.bytesWritten == bytesWritten, sourceLocation: sourceLocation)
    }

    static func expectError(
        _ observation: Observation, _ code: URLError.Code, _ message: String?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(observation.urlError?.code == code, "\(observation.result)", sourceLocation: sourceLocation)
        if let message {
            #expect(observation.message == message, sourceLocation: sourceLocation)
        }
    }

    static func parsesAsJSON(_ data: Data) -> Bool {
        (try? JSONSerialization.jsonObject(with: data)) != nil
    }

    // MARK: - The connection breaks before a response

    @Test func resetIsNetworkConnectionLost() async throws {
        let seen = try await Self.observe("reset")
        Self.expectError(seen, .networkConnectionLost, "Recv failure: Connection reset by peer")
        #expect(seen.urlError?.errorCode == -1005)
        Self.expectJournal(seen, fault: "reset", status: nil, outcome: .resetSent, bytesWritten: 0)
    }

    @Test func emptyReplyIsBadServerResponse() async throws {
        let seen = try await Self.observe("empty-reply")
        Self.expectError(seen, .badServerResponse, "Empty reply from server")
        Self.expectJournal(seen, fault: "empty-reply", status: nil, outcome: .closedByFault, bytesWritten: 0)
    }

    @Test func halfCloseIsBadServerResponse() async throws {
        let seen = try await Self.observe("half-close")
        Self.expectError(seen, .badServerResponse, "Empty reply from server")
        Self.expectJournal(seen, fault: "half-close", status: nil, outcome: .halfClosed, bytesWritten: 0)
    }

    @Test func garbageIsUnsupportedURL() async throws {
        // libcurl's CURLE_UNSUPPORTED_PROTOCOL (HTTP/0.9 refused) maps to -1002.
        let seen = try await Self.observe("garbage")
        Self.expectError(seen, .unsupportedURL, "Received HTTP/0.9 when not allowed")
        Self.expectJournal(seen, fault: "garbage", status: nil, outcome: .closedByFault, bytesWritten: 454)
    }

    @Test func hangTimesOutAndTheClientsCloseReleasesIt() async throws {
        let seen = try await Self.observe("hang", timeout: Self.shortTimeout)
        Self.expectError(seen, .timedOut, nil)
        Self.expectJournal(seen, fault: "hang", status: nil, outcome: .hangReleased, bytesWritten: 0)
        #expect(seen.durationMs >= 950 && seen.durationMs < 2000, "released after \(seen.durationMs) ms")
    }

    // MARK: - A status line, then a broken body

    @Test func closeAfterHeadersIsAnUnknownError() async throws {
        let seen = try await Self.observe("close-after-headers")
        Self.expectError(seen, .unknown, "transfer closed with 42 bytes remaining to read")
        Self.expectJournal(seen, fault: "close-after-headers", status: 200, outcome: .closedByFault,
                           bytesWritten: Self.headKeepAlive)
    }

    @Test func truncateBodyIsAnUnknownError() async throws {
        let seen = try await Self.observe("truncate-body")
        Self.expectError(seen, .unknown, "transfer closed with 21 bytes remaining to read")
        Self.expectJournal(seen, fault: "truncate-body", status: 200, outcome: .closedByFault,
                           bytesWritten: Self.headClose + 21)
    }

    @Test func malformedChunkIsAnUnknownError() async throws {
        let seen = try await Self.observe("malformed-chunk")
        Self.expectError(seen, .unknown, "Illegal or missing hexadecimal sequence in chunked-encoding")
        Self.expectJournal(
            seen, fault: "malformed-chunk", status: 200, outcome: .closedByFault, bytesWritten: 146 + Self.date)
    }

    @Test func stallAfterHeadersTimesOutAndIsReleased() async throws {
        let seen = try await Self.observe("stall-after-headers", timeout: Self.shortTimeout)
        Self.expectError(seen, .timedOut, nil)
        Self.expectJournal(seen, fault: "stall-after-headers", status: 200, outcome: .hangReleased,
                           bytesWritten: Self.headKeepAlive)
        #expect(seen.durationMs >= 950 && seen.durationMs < 2000, "released after \(seen.durationMs) ms")
    }

    @Test func badGzipIsAnUnknownError() async throws {
        // URLSession asks for gzip itself (Accept-Encoding), so it decodes, and fails.
        let seen = try await Self.observe("bad-gzip")
        Self.expectError(seen, .unknown, "Error while processing content unencoding: incorrect header check")
        #expect(seen.entry.head?.headers["accept-encoding"]?.contains("gzip") == true)
        Self.expectJournal(seen, fault: "bad-gzip", status: 200, outcome: .completed, bytesWritten: 159 + Self.date)
    }

    // MARK: - A successful response with unusable data

    @Test func overlongBodySucceedsWithTheDeclaredBytes() async throws {
        let seen = try await Self.observe("overlong-body")
        let response = try #require(seen.response, "\(seen.result)")
        #expect(response.http.statusCode == 200)
        #expect(String(decoding: response.data, as: UTF8.self) == Self.body, "the excess is dropped")
        Self.expectJournal(seen, fault: "overlong-body", status: 200, outcome: .closedByFault,
                           bytesWritten: Self.headClose + 42 + 38)
    }

    @Test func corruptJSONSucceedsButDoesNotParse() async throws {
        let seen = try await Self.observe("corrupt-json")
        let response = try #require(seen.response, "\(seen.result)")
        #expect(response.http.statusCode == 200 && response.http.mimeType == "application/json")
        #expect(response.data.count == 44 && response.data.contains(0x01))
        #expect(!Self.parsesAsJSON(response.data))
        Self.expectJournal(seen, fault: "corrupt-json", status: 200, outcome: .completed,
                           bytesWritten: Self.headKeepAlive + 44)
    }

    @Test func truncatedJSONSucceedsButDoesNotParse() async throws {
        let seen = try await Self.observe("truncated-json")
        let response = try #require(seen.response, "\(seen.result)")
        #expect(response.http.statusCode == 200)
        #expect(response.data.count == 20 && Self.body.utf8.starts(with: response.data))
        #expect(!Self.parsesAsJSON(response.data))
        Self.expectJournal(seen, fault: "truncated-json", status: 200, outcome: .completed,
                           bytesWritten: Self.headKeepAlive + 20)
    }

    @Test func wrongContentTypeSucceedsAndStillParses() async throws {
        let seen = try await Self.observe("wrong-content-type")
        let response = try #require(seen.response, "\(seen.result)")
        #expect(response.http.statusCode == 200)
        #expect(response.http.mimeType == "text/html" && response.http.textEncodingName == "utf-8")
        #expect(String(decoding: response.data, as: UTF8.self) == Self.body && Self.parsesAsJSON(response.data))
        Self.expectJournal(
            seen, fault: "wrong-content-type", status: 200, outcome: .completed, bytesWritten: 121 + Self.date)
    }

    @Test func htmlErrorPageIsA502ThatDoesNotParse() async throws {
        let seen = try await Self.observe("html-error-page")
        let response = try #require(seen.response, "\(seen.result)")
        #expect(response.http.statusCode == 502 && response.http.mimeType == "text/html")
        #expect(String(decoding: response.data, as: UTF8.self).hasPrefix("<html>"))
        #expect(!Self.parsesAsJSON(response.data))
        #expect(seen.entry.fault == "html-error-page" && seen.entry.outcome == .completed)
        #expect(seen.entry.bytesWritten == 226 + Self.date)
        #expect(seen.entry.status == 502)
    }
}
