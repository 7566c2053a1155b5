/// A response kept for replay: exactly what was sent the first time — status, header fields in their order and
/// spelling, and body — so a retry gets the same response back (draft-ietf-httpapi-idempotency-key-header §2.6,
/// "Retry").
package struct StoredResponse: Sendable, Equatable {
    package var status: Int
    /// Header fields in the order they were sent; names keep their spelling.
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    /// A stored response with the given status, header fields (in order) and body.
    package init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Equal when status, body and every header field (name and value, exact spelling, same order) are equal: a
    /// replay must be byte-for-byte what was sent, so `Content-Type` and `content-type` differ here.
    package static func == (lhs: StoredResponse, rhs: StoredResponse) -> Bool {
        lhs.status == rhs.status
            && lhs.body == rhs.body
            && lhs.headers.count == rhs.headers.count
            && zip(lhs.headers, rhs.headers).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// Idempotency-key records for the engine, following draft-ietf-httpapi-idempotency-key-header (§2 and its
/// subsections): the first request with a key runs and its response is stored; a retry with the same key and the
/// same payload fingerprint gets the stored response again (§2.6), a retry while the first is still running gets 409
/// and a reused key with a different payload gets 422 (§2.7). Completed records expire (§2.3). It also counts side
/// effects per key, so a test can prove "four attempts, one order".
///
/// Pure state with an injected clock (`nowMilliseconds`); the server keeps one store and calls it from the loop
/// thread, one step per request.
package struct IdempotencyStore: Sendable {
    /// What to do with a request carrying an idempotency key.
    package enum Admission: Sendable, Equatable {
        /// First use of the key (or the first since it expired or was abandoned): run the route, then call
        /// `complete(…)`, or `abandon(…)` if nothing was produced (draft §2.6, "First time request").
        case fresh
        /// Same key and payload, and the first attempt finished: send this stored response again, with
        /// `Idempotent-Replayed: true` (draft §2.6, "Retry" — errors are replayed too).
        case replay(StoredResponse)
        /// Same key and payload while the first attempt is still in flight: 409 Conflict (draft §2.7;
        /// RFC 9110 §15.5.10).
        case inFlight
        /// Same key, different payload: 422 Unprocessable Content (draft §2.7; RFC 9110 §15.5.21).
        case mismatch
    }

    /// Where a record is in its life.
    private enum Phase: Sendable {
        /// The first attempt is running; the record never expires in this phase.
        case inFlight
        /// The first attempt produced `response` at `completedAt`; the record is dropped at `expiresAt`.
        case completed(response: StoredResponse, expiresAt: UInt64)
    }

    /// A key is only meaningful within its scope (the route), so records are looked up by both.
    private struct RecordID: Hashable, Sendable, Comparable {
        var scope: String
        var key: String

        static func < (lhs: RecordID, rhs: RecordID) -> Bool {
            (lhs.scope, lhs.key) < (rhs.scope, rhs.key)
        }
    }

    /// One key's record: the first attempt's payload fingerprint and outcome, and what later attempts ran into.
    private struct Record: Sendable {
        var fingerprint: String
        var createdAt: UInt64
        var phase: Phase
        var replays = 0
        var conflicts = 0
        var mismatches = 0
    }

    private let expiryMilliseconds: UInt64
    private var records: [RecordID: Record] = [:]
    private var keyedSideEffects: [RecordID: Int] = [:]
    /// Keys in the order their first side effect was counted, for pruning `keyedSideEffects`.
    private var sideEffectOrder: [RecordID] = []
    private var keylessSideEffects = 0
    /// Every side effect since the start (or the last reset), pruned keys included.
    package private(set) var totalSideEffects = 0
    /// Bounded memory: at most about this many completed records (and this many keys with a single side effect)
    /// are kept; beyond it, expired records go first, then the oldest completed ones, whose keys then count as
    /// fresh. In-flight records are never dropped. Keys seen more than once keep their counts: they are evidence.
    package let capacity: Int

    /// A store whose completed records are kept for `expiryMilliseconds` after completion, then forgotten so the
    /// key is fresh again (draft §2.3). Negative values count as zero.
    package init(expiryMilliseconds: Int = 24 * 3_600_000, capacity: Int = 10_000) {
        self.expiryMilliseconds = UInt64(max(0, expiryMilliseconds))
        self.capacity = max(capacity, 1)
    }

    /// Decides what a request with `key` on route `scope` gets, and records the attempt (draft §2.6, §2.7).
    ///
    /// The payload check comes first: a different fingerprint is `.mismatch` even while the first attempt is in
    /// flight, because the draft asks the client to correct such a request rather than just wait and retry it.
    package mutating func admit(scope: String, key: String, fingerprint: String,
                               nowMilliseconds: UInt64) -> Admission {
        let id = RecordID(scope: scope, key: key)
        guard var record = records[id], !isExpired(record, at: nowMilliseconds) else {
            if records.count >= 2 * capacity { prune(nowMilliseconds: nowMilliseconds) }
            records[id] = Record(fingerprint: fingerprint, createdAt: nowMilliseconds, phase: .inFlight)
            return .fresh
        }
        let admission: Admission
        if record.fingerprint != fingerprint {
            record.mismatches += 1
            admission = .mismatch
        } else {
            switch record.phase {
            case .inFlight:
                record.conflicts += 1
                admission = .inFlight
            case .completed(let response, _):
                record.replays += 1
                admission = .replay(response)
            }
        }
        records[id] = record
        return admission
    }

    /// The first attempt under `key` produced `response`, which is kept for replay until the expiry runs out —
    /// errors included: a stored 500 is replayed as a 500 (draft §2.6, "success or an error").
    ///
    /// Does nothing unless the record is in flight: after `reset()` or `abandon(…)` there is nothing to complete,
    /// and a record that already completed keeps its first response.
    package mutating func complete(scope: String, key: String, response: StoredResponse, nowMilliseconds: UInt64) {
        let id = RecordID(scope: scope, key: key)
        guard var record = records[id], case .inFlight = record.phase else { return }
        let (sum, overflow) = nowMilliseconds.addingReportingOverflow(expiryMilliseconds)
        record.phase = .completed(response: response, expiresAt: overflow ? UInt64.max : sum)
        records[id] = record
    }

    /// The first attempt ended without a response worth storing (the connection broke before anything was
    /// committed); the key is fresh again. Only an in-flight record is dropped — a completed one stays.
    package mutating func abandon(scope: String, key: String) {
        let id = RecordID(scope: scope, key: key)
        guard let record = records[id], case .inFlight = record.phase else { return }
        records[id] = nil
    }

    /// One side effect (a resource created) was applied under `key` on route `scope`, or with no key at all when
    /// `key` is nil. Counts survive expiry and `abandon(…)`: they are what a test checks for duplicates.
    package mutating func recordSideEffect(scope: String, key: String?) {
        totalSideEffects += 1
        guard let key else {
            keylessSideEffects += 1
            return
        }
        let id = RecordID(scope: scope, key: key)
        if keyedSideEffects[id] == nil { sideEffectOrder.append(id) }
        keyedSideEffects[id, default: 0] += 1
        if sideEffectOrder.count >= 2 * capacity {
            // Forget the oldest single-effect keys; duplicated keys stay.
            let cut = sideEffectOrder.count - capacity
            for old in sideEffectOrder[..<cut] where keyedSideEffects[old] == 1 { keyedSideEffects[old] = nil }
            sideEffectOrder = sideEffectOrder[..<cut].filter { keyedSideEffects[$0] != nil } + sideEffectOrder[cut...]
        }
    }

    /// Drops expired records, then the oldest completed ones, down to `capacity` (amortized: runs every
    /// `capacity` insertions at most).
    private mutating func prune(nowMilliseconds: UInt64) {
        records = records.filter { !isExpired($0.value, at: nowMilliseconds) }
        guard records.count > capacity else { return }
        let completed = records.filter { if case .completed = $0.value.phase { true } else { false } }
            .sorted { $0.value.createdAt < $1.value.createdAt }
        for (id, _) in completed.prefix(records.count - capacity) { records[id] = nil }
    }

    /// Side effects applied under `key` on route `scope`.
    package func sideEffects(scope: String, key: String) -> Int {
        keyedSideEffects[RecordID(scope: scope, key: key)] ?? 0
    }


    /// Forgets every record and side-effect count (a scenario reset).
    package mutating func reset() {
        records = [:]
        keyedSideEffects = [:]
        sideEffectOrder = []
        keylessSideEffects = 0
        totalSideEffects = 0
    }

    /// The store for `GET /__faultline/state`:
    ///
    /// ```
    /// {"expiryMs":…,
    ///  "records":[{"scope":…,"key":…,"state":"in-flight"|"completed","fingerprint":…,"status":…|null,
    ///              "createdMs":…,"expiresMs":…|null,"replays":…,"conflicts":…,"mismatches":…}],
    ///  "sideEffects":{"total":…,"keyless":…,"perKey":[{"scope":…,"key":…,"count":…}]}}
    /// ```
    ///
    /// `createdMs` and `expiresMs` are signed offsets from `nowMilliseconds` (created is zero or negative, expires
    /// positive); an in-flight record has no status and no expiry. Expired records are left out. Records are
    /// ordered by creation time, then scope and key; side-effect counts by scope and key.
    package func stateJSON(nowMilliseconds: UInt64) -> JSONValue {
        let live = records.filter { !isExpired($0.value, at: nowMilliseconds) }
            .sorted { ($0.value.createdAt, $0.key) < ($1.value.createdAt, $1.key) }
        let recordValues: [JSONValue] = live.map { id, record in
            var status = JSONValue.null
            var expires = JSONValue.null
            var state = "in-flight"
            if case .completed(let response, let expiresAt) = record.phase {
                state = "completed"
                status = .int(response.status)
                expires = Self.offset(expiresAt, from: nowMilliseconds)
            }
            return .object([
                ("scope", .string(id.scope)),
                ("key", .string(id.key)),
                ("state", .string(state)),
                ("fingerprint", .string(record.fingerprint)),
                ("status", status),
                ("createdMs", Self.offset(record.createdAt, from: nowMilliseconds)),
                ("expiresMs", expires),
                ("replays", .int(record.replays)),
                ("conflicts", .int(record.conflicts)),
                ("mismatches", .int(record.mismatches)),
            ])
        }
        let perKey: [JSONValue] = keyedSideEffects.sorted { $0.key < $1.key }.map { id, count in
            .object([("scope", .string(id.scope)), ("key", .string(id.key)), ("count", .int(count))])
        }
        return .object([
            ("expiryMs", .number(String(expiryMilliseconds))),
            ("records", .array(recordValues)),
            ("sideEffects", .object([
                ("total", .int(totalSideEffects)),
                ("keyless", .int(keylessSideEffects)),
                ("perKey", .array(perKey)),
            ])),
        ])
    }

    private func isExpired(_ record: Record, at now: UInt64) -> Bool {
        guard case .completed(_, let expiresAt) = record.phase else { return false }
        return now >= expiresAt
    }

    /// `time - now` as a JSON number, written from the unsigned difference so neither order can overflow.
    private static func offset(_ time: UInt64, from now: UInt64) -> JSONValue {
        .number(time >= now ? String(time - now) : "-" + String(now - time))
    }
}

// MARK: - Field parsing and fingerprints

extension IdempotencyStore {
    /// The key carried by an `Idempotency-Key` field value, or nil when it is invalid or empty.
    ///
    /// The draft makes the field an Item whose value is an sf-string (draft §2.1; RFC 9651 §3.3.3, formerly
    /// RFC 8941): `"…"` holding printable ASCII (0x20–0x7E), where `\"` and `\\` are the only escapes and anything
    /// else after a backslash is an error (RFC 9651 §4.2.5). Many Stripe-style clients send the key bare, so an
    /// unquoted run of visible ASCII (0x21–0x7E) without `"` or `,` is accepted too. Spaces and tabs around the
    /// value are ignored (RFC 9110 §5.5 OWS). Anything after the closing quote — parameters included — is rejected:
    /// the draft defines none, and a stray character more likely means a broken client than an extension.
    package static func parseKey(_ fieldValue: String) -> String? {
        var bytes = Substring(fieldValue).utf8[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        guard let first = bytes.first else { return nil }
        let key: [UInt8]
        if first == UInt8(ascii: "\"") {
            guard let unquoted = parseSFString(bytes.dropFirst()) else { return nil }
            key = unquoted
        } else {
            let isBareKeyByte: (UInt8) -> Bool = {
                (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: ",")
            }
            guard bytes.allSatisfy(isBareKeyByte) else { return nil }
            key = Array(bytes)
        }
        return key.isEmpty ? nil : String(decoding: key, as: UTF8.self)
    }

    /// The characters of an sf-string after its opening quote, unescaped; nil when it is unterminated, has a bad
    /// escape or a character outside 0x20–0x7E, or is followed by anything (RFC 9651 §4.2.5).
    private static func parseSFString(_ rest: Substring.UTF8View.SubSequence) -> [UInt8]? {
        var output: [UInt8] = []
        var iterator = rest.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "\\"):
                guard let escaped = iterator.next(),
                      escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else { return nil }
                output.append(escaped)
            case UInt8(ascii: "\""):
                return iterator.next() == nil ? output : nil
            case 0x20...0x7E:
                output.append(byte)
            default:
                return nil
            }
        }
        return nil  // no closing quote
    }

    /// The payload fingerprint of a request (draft §2.4, "checksum of the entire request payload", widened to the
    /// method and target so the same key on another method or URL also counts as a different payload).
    ///
    /// Lowercase hex of SHA-256 (FIPS 180-4) over the method's UTF-8, the target's UTF-8 (path and query as sent)
    /// and the body, each preceded by its length as a 64-bit big-endian integer — the length prefixes keep
    /// `("POST", "/ab")` and `("POS", "T/ab")` apart. Stable across runs and builds, 64 characters.
    package static func fingerprint(method: String, target: String, body: [UInt8]) -> String {
        var message: [UInt8] = []
        message.reserveCapacity(24 + method.utf8.count + target.utf8.count + body.count)
        for part in [Array(method.utf8), Array(target.utf8), body] {
            let length = UInt64(part.count)
            for shift in stride(from: 56, through: 0, by: -8) {
                message.append(UInt8(truncatingIfNeeded: length >> UInt64(shift)))
            }
            message.append(contentsOf: part)
        }
        return sha256(message).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 0x10 ? "0" + hex : hex
        }.joined()
    }

    /// The SHA-256 digest of `message` (FIPS 180-4 §6.2). Internal so tests can check it against the standard's
    /// vectors; written here because FaultlineCore takes no outside packages and Foundation on Linux has no hash.
    static func sha256(_ message: [UInt8]) -> [UInt8] {
        var hash: [UInt32] = [
            0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
        ]
        // Padding (FIPS 180-4 §5.1.1): a 1 bit, zeros to 56 mod 64 bytes, then the bit length, big-endian.
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bitLength = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }

        var schedule = [UInt32](repeating: 0, count: 64)
        for blockStart in stride(from: 0, to: padded.count, by: 64) {
            for index in 0..<16 {
                let offset = blockStart + index * 4
                schedule[index] = UInt32(padded[offset]) << 24 | UInt32(padded[offset + 1]) << 16
                    | UInt32(padded[offset + 2]) << 8 | UInt32(padded[offset + 3])
            }
            for index in 16..<64 {
                let w15 = schedule[index - 15]
                let w2 = schedule[index - 2]
                let sigma0 = rotateRight(w15, 7) ^ rotateRight(w15, 18) ^ (w15 >> 3)
                let sigma1 = rotateRight(w2, 17) ^ rotateRight(w2, 19) ^ (w2 >> 10)
                schedule[index] = schedule[index - 16] &+ sigma0 &+ schedule[index - 7] &+ sigma1
            }
            var (a, b, c, d, e, f, g, h) = (hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7])
            for index in 0..<64 {
                let sum1 = rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25)
                let choice = (e & f) ^ (~e & g)
                let temp1 = h &+ sum1 &+ choice &+ sha256RoundConstants[index] &+ schedule[index]
                let sum0 = rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let temp2 = sum0 &+ majority
                (h, g, f, e, d, c, b, a) = (g, f, e, d &+ temp1, c, b, a, temp1 &+ temp2)
            }
            for (index, value) in [a, b, c, d, e, f, g, h].enumerated() { hash[index] &+= value }
        }
        return hash.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    private static func rotateRight(_ value: UInt32, _ count: UInt32) -> UInt32 {
        (value >> count) | (value << (32 - count))
    }
}

/// The 64 round constants of SHA-256 (FIPS 180-4 §4.2.2).
private let sha256RoundConstants: [UInt32] = [
    0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
    0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
    0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
    0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
    0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
    0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
    0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
    0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
]
