import Faultline
import FaultlineCore
import Foundation
import Testing

/// Stopping an in-process server closes every connection at once. (libevent frees a bufferevent in a finalizer
/// the loop runs later; when the loop has just stopped it never does, and a kept-alive client hung on its next
/// request until its own timeout — 60 s for URLSession.)
@Suite struct ServerStopTests {
    @Test func stopClosesAKeptAliveConnectionAtOnce() async throws {
        let server = try FaultlineServer(configuration: .init())
        let client = try RawClient(port: server.port)
        try client.send("GET /__faultline/health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponses(1).first?.status == 200)
        await server.stop()
        let result = client.readUntilClose(seconds: 2)
        #expect(result.closed, "the connection is still open after stop()")
    }
}
