import Testing
@testable import FaultlineCore

/// Lowercase hex of `bytes`, for comparing digests with published vectors.
private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { $0 < 0x10 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

private let created = StoredResponse(
    status: 201,
    headers: [(name: "Content-Type", value: "application/json"), (name: "Location", value: "/v1/orders/1")],
    body: Array(#"{"id":1}"#.utf8)
)

@Suite("Idempotency-Key field parsing")
struct IdempotencyKeyParsingTests {
    @Test("sf-strings and bare keys give the key", arguments: [
        (#""abc""#, "abc"),
        ("abc", "abc"),
        (#"  "a\"b"  "#, #"a"b"#),
        (#""a\\b""#, #"a\b"#),
        ("\t\"with space\"\t", "with space"),
        (#""8e03978e-40d5-43e8-bc93-6894a57f9324""#, "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        (#"a\b;c"#, #"a\b;c"#),
    ])
    func accepted(fieldValue: String, key: String) {
        #expect(IdempotencyStore.parseKey(fieldValue) == key)
    }

    @Test("invalid or empty values give nil", arguments: [
        #""""#,            // empty sf-string
        #""abc"#,          // unterminated
        #""a"b""#,         // text after the closing quote
        #""abc";p=1"#,     // parameters are not accepted
        #""a\nb""#,        // only \" and \\ are escapes
        #""abc\"#,         // backslash at the end
        #""\""#,           // escaped quote, then no closing quote
        "\"caf\u{E9}\"",   // non-ASCII inside quotes
        "caf\u{E9}",       // non-ASCII bare
        "\"tab\there\"",   // control character inside quotes
        "a b",             // bare keys have no spaces
        "a,b",             // nor commas (a list is not one key)
        #"a"b"#,           // nor quotes
        "",
        "   ",
    ])
    func rejected(fieldValue: String) {
        #expect(IdempotencyStore.parseKey(fieldValue) == nil)
    }
}

@Suite("Idempotency payload fingerprints")
struct IdempotencyFingerprintTests {
    @Test("SHA-256 matches FIPS 180-4 vectors and padding boundaries", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (String(repeating: "x", count: 55), "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"),
        (String(repeating: "x", count: 56), "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"),
        (String(repeating: "x", count: 63), "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"),
        (String(repeating: "x", count: 64), "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"),
        (String(repeating: "x", count: 65), "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"),
        (String(repeating: "x", count: 119), "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"),
        (String(repeating: "x", count: 120), "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"),
    ])
    func sha256Vectors(message: String, digest: String) {
        #expect(hex(IdempotencyStore.sha256(Array(message.utf8))) == digest)
    }

    @Test("the fingerprint is SHA-256 of the length-prefixed method, target and body")
    func documentedEncoding() {
        // Computed outside Swift: printf '\0…\x04POST\0…\x0a/v1/orders\0…\x02{}' | sha256sum
        let fingerprint = IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders", body: Array("{}".utf8))
        #expect(fingerprint == "6143a95c3829eae61c918c36c82d98c8677a6f25369754ba7c016ca46bf144f3")
    }

    @Test("the fingerprint is stable and differs when the method, target or body differs")
    func sensitivity() {
        let body = Array(#"{"sku":"A1","qty":1}"#.utf8)
        let base = IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders", body: body)
        #expect(base == IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders", body: body))
        let variants = [
            IdempotencyStore.fingerprint(method: "PUT", target: "/v1/orders", body: body),
            IdempotencyStore.fingerprint(method: "post", target: "/v1/orders", body: body),
            IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders?dry=1", body: body),
            IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders", body: Array(#"{"qty":2}"#.utf8)),
            IdempotencyStore.fingerprint(method: "POST", target: "/v1/orders", body: []),
        ]
        #expect(Set(variants + [base]).count == variants.count + 1)
    }

    @Test("length prefixes keep field boundaries apart")
    func boundaries() {
        let a = IdempotencyStore.fingerprint(method: "POST", target: "/ab", body: [])
        let b = IdempotencyStore.fingerprint(method: "POS", target: "T/ab", body: [])
        let c = IdempotencyStore.fingerprint(method: "POST", target: "/a", body: Array("b".utf8))
        #expect(Set([a, b, c]).count == 3)
    }
}

@Suite("Idempotency store")
struct IdempotencyStoreTests {
    @Test("first use is fresh; after completion the same payload replays the stored response and is counted")
    func replay() {
        var store = IdempotencyStore()
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0) == .fresh)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 10)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 20) == .replay(created))
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 30) == .replay(created))
        #expect(recordsWithoutTimes(store, now: 30) == .array([recordSummary(replays: 2)]))
    }

    @Test("memory is bounded: old completed records and single side effects go; in-flight ones and duplicates stay")
    func bounded() {
        var store = IdempotencyStore(capacity: 2)
        let response = StoredResponse(status: 201, headers: [], body: [])
        #expect(store.admit(scope: "r", key: "busy", fingerprint: "f", nowMilliseconds: 0) == .fresh)
        store.recordSideEffect(scope: "r", key: "dup")
        store.recordSideEffect(scope: "r", key: "dup")
        for index in 1...4 {
            #expect(store.admit(scope: "r", key: "k\(index)", fingerprint: "f", nowMilliseconds: UInt64(index)) == .fresh)
            store.complete(scope: "r", key: "k\(index)", response: response, nowMilliseconds: UInt64(index))
            store.recordSideEffect(scope: "r", key: "k\(index)")
        }
        // The 5th record made 4 + 1 reach twice the capacity: the oldest completed records went first.
        #expect(store.admit(scope: "r", key: "k5", fingerprint: "f", nowMilliseconds: 5) == .fresh)
        #expect(store.admit(scope: "r", key: "busy", fingerprint: "f", nowMilliseconds: 5) == .inFlight)
        #expect(store.admit(scope: "r", key: "k4", fingerprint: "f", nowMilliseconds: 5) == .replay(response))
        #expect(store.admit(scope: "r", key: "k1", fingerprint: "f", nowMilliseconds: 5) == .fresh, "k1 was dropped")
        #expect(store.sideEffects(scope: "r", key: "dup") == 2, "a duplicated key keeps its count")
        #expect(store.sideEffects(scope: "r", key: "k1") == 0 && store.sideEffects(scope: "r", key: "k4") == 1)
        #expect(store.totalSideEffects == 6, "the total stays exact")
    }

    @Test("an error response is stored and replayed as it was")
    func errorsReplay() {
        var store = IdempotencyStore()
        let failure = StoredResponse(status: 500, headers: [(name: "Content-Length", value: "0")], body: [])
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.complete(scope: "orders", key: "k", response: failure, nowMilliseconds: 1)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 2) == .replay(failure))
    }

    @Test("a different payload is a mismatch, counted, and leaves the stored response in place")
    func mismatchAfterCompletion() {
        var store = IdempotencyStore()
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 1)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "other", nowMilliseconds: 2) == .mismatch)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 3) == .replay(created))
        #expect(recordsWithoutTimes(store, now: 3) == .array([recordSummary(replays: 1, mismatches: 1)]))
    }

    @Test("while in flight the same payload is a conflict and a different payload a mismatch")
    func inFlight() {
        var store = IdempotencyStore()
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 1) == .inFlight)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 2) == .inFlight)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "g", nowMilliseconds: 3) == .mismatch)
        let summary = recordSummary(state: "in-flight", status: nil, conflicts: 2, mismatches: 1)
        #expect(recordsWithoutTimes(store, now: 3) == .array([summary]))
    }

    @Test("a completed record expires at completion time plus the expiry; then the key is fresh")
    func expiry() {
        var store = IdempotencyStore(expiryMilliseconds: 500)
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 1_000)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 1_499) == .replay(created))
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "g", nowMilliseconds: 1_500) == .fresh)
        // The new first attempt is in flight under the new payload.
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "g", nowMilliseconds: 1_501) == .inFlight)
    }

    @Test("an in-flight record never expires")
    func inFlightDoesNotExpire() {
        var store = IdempotencyStore(expiryMilliseconds: 10)
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 10_000_000) == .inFlight)
    }

    @Test("abandoning an in-flight attempt makes the key fresh; abandoning a completed one does nothing")
    func abandon() {
        var store = IdempotencyStore()
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.abandon(scope: "orders", key: "k")
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "g", nowMilliseconds: 1) == .fresh)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 2)
        store.abandon(scope: "orders", key: "k")
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "g", nowMilliseconds: 3) == .replay(created))
    }

    @Test("complete only finishes an in-flight record, and the first response stays")
    func completeRules() {
        var store = IdempotencyStore()
        store.complete(scope: "orders", key: "never-admitted", response: created, nowMilliseconds: 0)
        #expect(store.admit(scope: "orders", key: "never-admitted", fingerprint: "f", nowMilliseconds: 1) == .fresh)

        let second = StoredResponse(status: 200, headers: [], body: [])
        store.complete(scope: "orders", key: "never-admitted", response: created, nowMilliseconds: 2)
        store.complete(scope: "orders", key: "never-admitted", response: second, nowMilliseconds: 3)
        #expect(store.admit(scope: "orders", key: "never-admitted", fingerprint: "f", nowMilliseconds: 4)
            == .replay(created))
    }

    @Test("scopes are independent: the same key on another route is another record")
    func scopes() {
        var store = IdempotencyStore()
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0) == .fresh)
        #expect(store.admit(scope: "refunds", key: "k", fingerprint: "f", nowMilliseconds: 0) == .fresh)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 1)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 2) == .replay(created))
        #expect(store.admit(scope: "refunds", key: "k", fingerprint: "f", nowMilliseconds: 2) == .inFlight)
        store.abandon(scope: "refunds", key: "k")
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 3) == .replay(created))
    }

    @Test("side effects count per scope and key; keyless ones only in the total")
    func sideEffects() {
        var store = IdempotencyStore(expiryMilliseconds: 1)
        store.recordSideEffect(scope: "orders", key: "k")
        store.recordSideEffect(scope: "orders", key: "k")
        store.recordSideEffect(scope: "refunds", key: "k")
        store.recordSideEffect(scope: "orders", key: nil)
        #expect(store.sideEffects(scope: "orders", key: "k") == 2)
        #expect(store.sideEffects(scope: "refunds", key: "k") == 1)
        #expect(store.sideEffects(scope: "orders", key: "other") == 0)
        #expect(store.totalSideEffects == 4)

        // Counts outlive the record they were applied under.
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 0)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 5) == .fresh)
        store.abandon(scope: "orders", key: "k")
        #expect(store.sideEffects(scope: "orders", key: "k") == 2)
        #expect(store.totalSideEffects == 4)
    }

    @Test("reset forgets records and side effects")
    func reset() {
        var store = IdempotencyStore()
        _ = store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 0)
        store.complete(scope: "orders", key: "k", response: created, nowMilliseconds: 1)
        store.recordSideEffect(scope: "orders", key: "k")
        store.recordSideEffect(scope: "orders", key: nil)
        store.reset()
        #expect(store.sideEffects(scope: "orders", key: "k") == 0)
        #expect(store.totalSideEffects == 0)
        #expect(store.admit(scope: "orders", key: "k", fingerprint: "f", nowMilliseconds: 2) == .fresh)
    }

    @Test("stateJSON lists live records in creation order with relative times, and side-effect counts")
    func stateJSON() {
        var store = IdempotencyStore(expiryMilliseconds: 60_000)
        _ = store.admit(scope: "create-order", key: "k1", fingerprint: "f1", nowMilliseconds: 1_000)
        store.complete(scope: "create-order", key: "k1", response: created, nowMilliseconds: 1_200)
        _ = store.admit(scope: "create-order", key: "k2", fingerprint: "f3", nowMilliseconds: 1_500)
        _ = store.admit(scope: "create-order", key: "k2", fingerprint: "f3", nowMilliseconds: 1_600)
        _ = store.admit(scope: "create-order", key: "k1", fingerprint: "f1", nowMilliseconds: 2_000)
        _ = store.admit(scope: "create-order", key: "k1", fingerprint: "f2", nowMilliseconds: 2_000)
        store.recordSideEffect(scope: "create-order", key: "k1")
        store.recordSideEffect(scope: "create-order", key: nil)
        store.recordSideEffect(scope: "create-order", key: nil)

        let expected = #"{"expiryMs":60000,"records":["#
            + #"{"scope":"create-order","key":"k1","state":"completed","fingerprint":"f1","status":201,"#
            + #""createdMs":-1000,"expiresMs":59200,"replays":1,"conflicts":0,"mismatches":1},"#
            + #"{"scope":"create-order","key":"k2","state":"in-flight","fingerprint":"f3","status":null,"#
            + #""createdMs":-500,"expiresMs":null,"replays":0,"conflicts":1,"mismatches":0}],"#
            + #""sideEffects":{"total":3,"keyless":2,"perKey":[{"scope":"create-order","key":"k1","count":1}]}}"#
        #expect(store.stateJSON(nowMilliseconds: 2_000).serialized() == expected)

        // Once k1 expires it drops out of the records; its side effects stay.
        let later = store.stateJSON(nowMilliseconds: 61_200)
        #expect(later["records"] == .array([
            .object([
                ("scope", .string("create-order")), ("key", .string("k2")), ("state", .string("in-flight")),
                ("fingerprint", .string("f3")), ("status", .null), ("createdMs", .number("-59700")),
                ("expiresMs", .null), ("replays", .int(0)), ("conflicts", .int(1)), ("mismatches", .int(0)),
            ]),
        ]))
        #expect(later["sideEffects"]?["total"] == .int(3))
    }

    @Test("stored responses compare status, body and header fields in order and spelling")
    func storedResponseEquality() {
        var reordered = created
        reordered.headers.reverse()
        var respelled = created
        respelled.headers[0].name = "content-type"
        var otherBody = created
        otherBody.body = Array(#"{"id":2}"#.utf8)
        var otherStatus = created
        otherStatus.status = 200
        let copy = StoredResponse(status: created.status, headers: created.headers, body: created.body)
        #expect(copy == created)
        for variant in [reordered, respelled, otherBody, otherStatus] {
            #expect(variant != created)
        }
    }
}

/// `stateJSON`'s records with `createdMs` and `expiresMs` removed, for tests about counters and states only.
private func recordsWithoutTimes(_ store: IdempotencyStore, now: UInt64) -> JSONValue? {
    guard case .array(let records)? = store.stateJSON(nowMilliseconds: now)["records"] else { return nil }
    return .array(records.map { record in
        guard case .object(let members) = record else { return record }
        return .object(members.filter { $0.key != "createdMs" && $0.key != "expiresMs" })
    })
}

/// A record for key "k" on scope "orders" with fingerprint "f", as `recordsWithoutTimes` shows it.
private func recordSummary(state: String = "completed", status: Int? = 201, replays: Int = 0, conflicts: Int = 0,
                           mismatches: Int = 0) -> JSONValue {
    .object([
        ("scope", .string("orders")), ("key", .string("k")), ("state", .string(state)),
        ("fingerprint", .string("f")), ("status", status.map { .int($0) } ?? .null),
        ("replays", .int(replays)), ("conflicts", .int(conflicts)), ("mismatches", .int(mismatches)),
    ])
}
