import Faultline
import FaultlineCore
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Resources (ARCHITECTURE §4b) against Foundation's URLSession, in process: a cut download and its resume, and
/// URLCache revalidation. On Linux this is FoundationNetworking over libcurl; what it does differs from Apple's
/// stack in ways the assertions name (README "Resources × clients").
@Suite struct ResourceURLSessionTests {
    static let size = 1 << 20
    static let scenario = #"""
        { "name": "resources", "seed": 3,
          "resources": [
            { "id": "blob", "path": "/blob", "generated": { "size": 1048576 } },
            { "id": "doc", "path": "/doc", "json": { "v": 1 }, "cacheControl": "max-age=0, must-revalidate" }
          ],
          "routes": [
            { "id": "flaky", "match": { "path": "/flaky/blob" },
              "responses": [ { "resource": "blob", "fault": { "type": "truncate-body", "bytes": 300000 } }, { "resource": "blob" } ] }
          ] }
        """#

    static func entries(_ server: FaultlineServer, _ count: Int) async throws -> [JournalEntry] {
        try await server.waitForRequests(count: count, matching: JournalFilter(completed: true), timeout: .seconds(5))
    }

    @Test func aCutDownloadTaskFailsAndAnAppLevelResumeWithIfRangeCompletesIt() async throws {
        let server = try TestSupport.server([Self.scenario])
        defer { Task { await server.stop() } }
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let url = server.baseURL.appendingPathComponent("flaky/blob")
        var resumeData: Data?
        do {
            _ = try await session.download(from: url)
            Issue.record("a download cut after 300000 of \(Self.size) bytes must fail")
        } catch let error as URLError {
            // Apple's key (NSURLSessionDownloadTaskResumeData); FoundationNetworking does not even declare it.
            resumeData = error.userInfo["NSURLSessionDownloadTaskResumeData"] as? Data
        }
        #if canImport(FoundationNetworking)
        // FoundationNetworking produces no resume data: a Linux client can only resume by hand, as below.
        #expect(resumeData == nil)
        #endif
        let whole = try await session.data(from: server.baseURL.appendingPathComponent("blob")).0
        #expect(whole.count == Self.size)
        let cut = try #require(await server.requests(JournalFilter(route: "flaky")).first)
        #expect(cut.outcome == .closedByFault && cut.resource?.cutAt == 300_000)

        // What an app does without resume data: ask for the rest, guarded by the validator it saw.
        var request = URLRequest(url: url)
        request.setValue("bytes=300000-", forHTTPHeaderField: "Range")
        request.setValue(try #require(cut.resource?.etag), forHTTPHeaderField: "If-Range")
        let (rest, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 206)
        #expect(http.value(forHTTPHeaderField: "Content-Range") == "bytes 300000-1048575/1048576")
        #expect(rest == whole.suffix(from: 300_000))
        let resumed = try #require(await server.requests(JournalFilter(route: "flaky")).last)
        #expect(resumed.resource?.carried == ["If-Range", "Range"] && resumed.resource?.decision == .partial)
    }

    /// `max-age=0, must-revalidate` with an ETag and Last-Modified: Apple's URLCache revalidates (If-None-Match,
    /// a 304 that reaches the app as the cached 200). FoundationNetworking's URLCache stores the response but sends
    /// the second request without validators, so the server answers 200 again and `revalidatesWithValidators`
    /// fails with both requests as evidence: the verdict catches a cache that never revalidates.
    @Test(arguments: [URLRequest.CachePolicy.useProtocolCachePolicy, .reloadRevalidatingCacheData])
    func urlCacheRevalidationIsJudged(policy: URLRequest.CachePolicy) async throws {
        let withExpect = Self.scenario.replacingOccurrences(
            of: #""name": "resources","#, with: #""name": "resources", "expect": {"revalidatesWithValidators": true},"#)
        let server = try TestSupport.server([withExpect])
        defer { Task { await server.stop() } }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: nil)
        configuration.requestCachePolicy = policy
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = server.baseURL.appendingPathComponent("doc")
        let first = try await session.data(from: url)
        let second = try await session.data(from: url)
        #expect(first.0 == second.0 && String(decoding: second.0, as: UTF8.self) == #"{"v":1}"#)
        #expect((second.1 as? HTTPURLResponse)?.statusCode == 200)
        let journal = try await Self.entries(server, 2)
        let verdict = try #require(await server.report().verdicts.first { $0.rule == "revalidatesWithValidators" })
        #if canImport(FoundationNetworking)
        #expect(journal.map { $0.resource?.carried ?? ["?"] } == [[], []], "FoundationNetworking sends no validators")
        #expect(journal.map(\.status) == [200, 200])
        #expect(verdict.outcome == .fail && verdict.evidence == journal.map(\.sequence))
        #else
        #expect(journal.last?.resource?.carried.contains("If-None-Match") == true)
        #expect(journal.last?.status == 304 && verdict.outcome == .pass)
        #endif

        // Changed behind the client's back (an admin call): whatever the cache does, the app must see version 2.
        await server.changeResource("doc", body: Array(#"{"v":2}"#.utf8))
        let third = try await session.data(from: url)
        #expect(String(decoding: third.0, as: UTF8.self) == #"{"v":2}"#)
    }
}
