import Testing
@testable import FaultlineCore

/// The journal's record of an HTTP/2 client's GOAWAY and RST_STREAM (ARCHITECTURE §4a, §7): its JSON, the bound on
/// the debug data, and the round trip through `JournalEntry(json:)` that `FaultlineRemote` relies on.
@Suite struct HTTP2ClientFramesTests {
    private func entry() -> JournalEntry {
        JournalEntry(
            receivedAtWall: 0, receivedAtMonotonicNanos: 5_000_000, connectionID: 3, indexOnConnection: 0,
            clientAddress: "127.0.0.1:1", head: nil)
    }

    @Test func aGoawayIsJSONWithItsCodeNameAndTextDebugData() throws {
        var entry = entry()
        #expect(entry.clientGoaway == nil && entry.clientReset == nil)
        entry.clientGoaway = HTTP2ClientGoaway(
            errorCode: 9, lastStreamID: 0, debugData: Array("bad hpack".utf8), receivedAtMonotonicNanos: 7_250_000)
        let json = entry.json()
        #expect(json["clientGoaway"] == .object([
            ("code", .string("COMPRESSION_ERROR")),
            ("errorCode", .int(9)),
            ("lastStreamId", .int(0)),
            ("debugData", .string("bad hpack")),
            ("debugDataEncoding", .string("utf8")),
            ("debugDataSize", .int(9)),
            ("receivedAtMonotonicMs", .double(7.25)),
            ("count", .int(1)),
        ]))
        #expect(json["clientReset"] == nil, "absent, not null, when the client sent none")
    }

    @Test func debugDataIsBoundedAndBinaryIsBase64AndUnknownCodesAreHex() {
        let long = HTTP2ClientGoaway(
            errorCode: 0, lastStreamID: 5, debugData: [UInt8](repeating: 0x61, count: 1000),
            receivedAtMonotonicNanos: 0)
        #expect(long.debugData.count == HTTP2ClientGoaway.debugDataLimit && long.debugDataSize == 1000)
        let binary = HTTP2ClientGoaway(
            errorCode: 0x77, lastStreamID: 0, debugData: [0x00, 0xff, 0x62], receivedAtMonotonicNanos: 0)
        let json = binary.json()
        #expect(json["code"] == .string("0x77") && json["errorCode"] == .int(0x77))
        #expect(json["debugData"] == .string("AP9i") && json["debugDataEncoding"] == .string("base64"))
        // A control character is not text either (a NUL-terminated C string, say).
        let terminated = HTTP2ClientGoaway(
            errorCode: 1, lastStreamID: 0, debugData: Array("why\u{0}".utf8), receivedAtMonotonicNanos: 0)
        #expect(terminated.json()["debugDataEncoding"] == .string("base64"))
    }

    @Test func aResetIsJSONAndBothRecordsShareOneBox() {
        var entry = entry()
        entry.clientReset = HTTP2ClientReset(errorCode: 8, receivedAtMonotonicNanos: 6_000_000)
        entry.clientGoaway = HTTP2ClientGoaway(
            errorCode: 0, lastStreamID: 0, debugData: [], receivedAtMonotonicNanos: 0)
        #expect(entry.clientReset?.errorCode == 8, "setting the GOAWAY keeps the reset")
        #expect(entry.json()["clientReset"] == .object([
            ("code", .string("CANCEL")), ("errorCode", .int(8)), ("receivedAtMonotonicMs", .double(6)),
        ]))
        entry.clientGoaway = nil
        entry.clientReset = nil
        #expect(entry.json()["clientGoaway"] == nil && entry.json()["clientReset"] == nil)
    }

    @Test func theRecordsComeBackFromJSON() throws {
        var entry = entry()
        entry.sequence = 4
        var goaway = HTTP2ClientGoaway(
            errorCode: 1, lastStreamID: 0, debugData: [0x00, 0xff], receivedAtMonotonicNanos: 8_000_000)
        goaway.count = 2
        entry.clientGoaway = goaway
        entry.clientReset = HTTP2ClientReset(errorCode: 8, receivedAtMonotonicNanos: 6_000_000)
        let decoded = try #require(JournalEntry(json: entry.json()))
        #expect(decoded.clientGoaway == goaway && decoded.clientReset == entry.clientReset)
    }

    @Test func harCarriesThemAsCustomFields() {
        var entry = entry()
        entry.clientReset = HTTP2ClientReset(errorCode: 8, receivedAtMonotonicNanos: 6_000_000)
        let har = HAR.entry(entry)
        #expect(har["_clientReset"] == entry.clientReset?.json() && har["_clientGoaway"] == nil)
    }
}
