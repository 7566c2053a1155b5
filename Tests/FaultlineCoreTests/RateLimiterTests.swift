import Testing
@testable import FaultlineCore

/// 784111777 is RFC 9110's example date, Sun, 06 Nov 1994 08:49:37 GMT.
private let exampleWall = 784_111_777.0

/// The headers of a decision, as plain pairs that `#expect` can compare and print.
private func headerPairs(_ decision: RateLimitDecision) -> [String] {
    switch decision {
    case .allowed(let headers), .limited(_, _, let headers):
        return headers.map { "\($0.name): \($0.value)" }
    }
}

private func isAllowed(_ decision: RateLimitDecision) -> Bool {
    if case .allowed = decision { return true }
    return false
}

/// `(status, retryAfterMilliseconds, Retry-After value)` of a limited decision, or nil when it was allowed.
private func limitedParts(_ decision: RateLimitDecision) -> (status: Int, wait: Int, retryAfter: String?)? {
    guard case .limited(let status, let wait, let headers) = decision else { return nil }
    return (status, wait, headers.first(where: { $0.name == "Retry-After" })?.value)
}

/// A limiter with one rule, and a shorthand for checking a global-key request at a monotonic time.
private struct OneRule {
    var limiter: RateLimiter

    init(_ rule: RateLimitRule) {
        limiter = RateLimiter(rules: [rule])
    }

    mutating func at(_ milliseconds: UInt64, key: String = "", wall: Double = exampleWall) -> RateLimitDecision {
        limiter.check(ruleIndex: 0, bucketKey: key, nowMilliseconds: milliseconds, wallSeconds: wall)
    }
}

@Suite("Rate limiter")
struct RateLimiterTests {
    @Test("a fixed window allows `limit` requests, then answers 429 with Retry-After")
    func fixedWindowCounting() {
        var subject = OneRule(RateLimitRule(id: "w", limit: 3, windowMilliseconds: 1000, rateLimitHeaders: true))
        let remaining = [0, 100, 200].map { time -> [String] in headerPairs(subject.at(UInt64(time))) }
        #expect(remaining == [
            [#"RateLimit-Policy: "w";q=3;w=1"#, #"RateLimit: "w";r=2;t=1"#],
            [#"RateLimit-Policy: "w";q=3;w=1"#, #"RateLimit: "w";r=1;t=1"#],
            [#"RateLimit-Policy: "w";q=3;w=1"#, #"RateLimit: "w";r=0;t=1"#],
        ])
        let fourth = subject.at(300)
        #expect(limitedParts(fourth)?.status == 429)
        #expect(limitedParts(fourth)?.wait == 1000)
        #expect(limitedParts(fourth)?.retryAfter == "1")
    }

    @Test("a limited request does not consume quota and the window rolls over at its end")
    func windowRollOver() {
        var subject = OneRule(RateLimitRule(id: "w", limit: 2, windowMilliseconds: 1000))
        #expect(isAllowed(subject.at(5000)))
        #expect(isAllowed(subject.at(5100)))
        #expect(!isAllowed(subject.at(5500)))
        #expect(!isAllowed(subject.at(5999)))
        // The two limited requests took nothing: the next window allows two again.
        #expect(isAllowed(subject.at(6000)))
        #expect(isAllowed(subject.at(6001)))
        #expect(!isAllowed(subject.at(6002)))
    }

    @Test("windows stay aligned to the bucket's first request, even after idle windows")
    func windowsAlignToFirstRequest() {
        var subject = OneRule(RateLimitRule(id: "w", limit: 1, windowMilliseconds: 10_000))
        #expect(isAllowed(subject.at(0)))
        // 25 000 falls in the window [20 000, 30 000), not one that starts at 25 000.
        #expect(isAllowed(subject.at(25_000)))
        let limited = subject.at(26_000)
        #expect(limitedParts(limited)?.retryAfter == "4")
        #expect(limitedParts(limited)?.wait == 4000)
    }

    @Test("delay-seconds round the time left up, and never say 0",
          arguments: [(1, "1"), (999, "1"), (1000, "1"), (1001, "2"), (1500, "2"), (4999, "5")])
    func retryAfterRounding(millisecondsLeft: Int, expected: String) {
        var subject = OneRule(RateLimitRule(id: "w", limit: 1, windowMilliseconds: 5000))
        #expect(isAllowed(subject.at(0)))
        let limited = subject.at(UInt64(5000 - millisecondsLeft))
        #expect(limitedParts(limited)?.retryAfter == expected)
        #expect(limitedParts(limited)?.wait == Int(expected).map { $0 * 1000 })
    }

    @Test("an HTTP-date Retry-After names the next whole second after the wait and parses back exactly",
          arguments: [(exampleWall, "Sun, 06 Nov 1994 08:49:39 GMT", 2000),
                      (exampleWall + 0.25, "Sun, 06 Nov 1994 08:49:39 GMT", 1750),
                      (exampleWall + 0.5, "Sun, 06 Nov 1994 08:49:39 GMT", 1500),
                      (exampleWall + 0.75, "Sun, 06 Nov 1994 08:49:40 GMT", 2250)])
    func httpDateRetryAfter(wall: Double, expectedDate: String, expectedWait: Int) {
        var subject = OneRule(
            RateLimitRule(id: "d", limit: 1, windowMilliseconds: 5000, retryAfter: .httpDate))
        #expect(isAllowed(subject.at(0, wall: wall - 3.5)))
        // 1500 ms left in the window.
        let limited = subject.at(3500, wall: wall)
        #expect(limitedParts(limited)?.retryAfter == expectedDate)
        #expect(limitedParts(limited)?.wait == expectedWait)
        #expect(HTTPDate.parse(expectedDate).map { ($0 - wall) * 1000 } == Double(expectedWait))
        let header = limitedParts(limited)?.retryAfter ?? ""
        #expect(RetryAfterTracker.waitMilliseconds(retryAfter: header, wallSeconds: wall) == expectedWait)
    }

    @Test("a token bucket refills continuously, in fractions of a token, and limited requests take nothing")
    func tokenBucketRefill() {
        // 4 tokens per second: one token every 250 ms.
        var subject = OneRule(
            RateLimitRule(id: "t", limit: 4, windowMilliseconds: 1000, algorithm: .tokenBucket, rateLimitHeaders: true))
        #expect(headerPairs(subject.at(0)) == [#"RateLimit-Policy: "t";q=4;w=1"#, #"RateLimit: "t";r=3;t=1"#])
        for _ in 0..<3 { #expect(isAllowed(subject.at(0))) }
        // 100 ms in: 0.4 of a token; the next one is 150 ms away, which rounds up to one second.
        let early = subject.at(100)
        #expect(limitedParts(early)?.retryAfter == "1")
        #expect(limitedParts(early)?.wait == 1000)
        #expect(!isAllowed(subject.at(249)))
        #expect(isAllowed(subject.at(250)))
        // 375 ms later: 1.5 tokens; one is spent, half a token carries over…
        #expect(isAllowed(subject.at(625)))
        #expect(!isAllowed(subject.at(625)))
        // …so 125 ms later there is a whole token again.
        #expect(!isAllowed(subject.at(749)))
        #expect(isAllowed(subject.at(750)))
    }

    @Test("token-bucket Retry-After is the time until one token, rounded up to seconds")
    func tokenBucketRetryAfter() {
        // 1 token per 2.5 s.
        var subject = OneRule(RateLimitRule(id: "t", limit: 2, windowMilliseconds: 5000, algorithm: .tokenBucket))
        #expect(isAllowed(subject.at(0)))
        #expect(isAllowed(subject.at(0)))
        #expect(limitedParts(subject.at(400))?.retryAfter == "3")  // 2100 ms to go
        #expect(limitedParts(subject.at(1500))?.retryAfter == "1")  // 1000 ms to go
        #expect(limitedParts(subject.at(1501))?.retryAfter == "1")  // 999 ms to go
        #expect(isAllowed(subject.at(2500)))
    }

    @Test("each key has its own bucket")
    func separateBuckets() {
        var subject = OneRule(RateLimitRule(id: "k", limit: 1, windowMilliseconds: 1000, key: .header("X-User")))
        #expect(isAllowed(subject.at(0, key: "alice")))
        #expect(isAllowed(subject.at(0, key: "bob")))
        #expect(!isAllowed(subject.at(1, key: "alice")))
        #expect(!isAllowed(subject.at(1, key: "bob")))
        #expect(isAllowed(subject.at(2, key: "carol")))
        #expect(isAllowed(subject.at(3, key: "")))
    }

    @Test("reset(ruleID:) empties one rule's buckets, or every rule's with nil")
    func resetBuckets() {
        var limiter = RateLimiter(rules: [
            RateLimitRule(id: "a", limit: 1, windowMilliseconds: 60_000),
            RateLimitRule(id: "b", limit: 1, windowMilliseconds: 60_000, algorithm: .tokenBucket),
        ])
        func check(_ rule: Int, _ time: UInt64) -> Bool {
            isAllowed(limiter.check(ruleIndex: rule, bucketKey: "", nowMilliseconds: time, wallSeconds: exampleWall))
        }
        #expect(check(0, 0) && check(1, 0))
        #expect(!check(0, 1) && !check(1, 1))
        limiter.reset(ruleID: "nope")
        #expect(!check(0, 2) && !check(1, 2))
        limiter.reset(ruleID: "a")
        #expect(check(0, 3))
        #expect(!check(1, 3))
        limiter.reset(ruleID: nil)
        #expect(check(1, 4))
        #expect(limiter.stateJSON(nowMilliseconds: 4).serialized().contains(#""requests":1,"limited":0"#))
    }

    @Test("RateLimit-Policy and RateLimit read exactly as the draft writes them")
    func rateLimitFieldsText() {
        var subject = OneRule(RateLimitRule(id: "search", limit: 2, windowMilliseconds: 60_000, rateLimitHeaders: true))
        #expect(subject.at(0) == .allowed(headers: [
            (name: "RateLimit-Policy", value: #""search";q=2;w=60"#),
            (name: "RateLimit", value: #""search";r=1;t=60"#),
        ]))
        #expect(subject.at(1) == .allowed(headers: [
            (name: "RateLimit-Policy", value: #""search";q=2;w=60"#),
            (name: "RateLimit", value: #""search";r=0;t=60"#),
        ]))
        #expect(subject.at(30_000) == .limited(status: 429, retryAfterMilliseconds: 30_000, headers: [
            (name: "Retry-After", value: "30"),
            (name: "RateLimit-Policy", value: #""search";q=2;w=60"#),
            (name: "RateLimit", value: #""search";r=0;t=30"#),
        ]))
    }

    @Test("the policy id is an sf-string and a sub-second window still says w=1")
    func rateLimitFieldsQuoting() {
        var quoted = OneRule(RateLimitRule(id: #"a"b\c"#, limit: 5, windowMilliseconds: 1500, rateLimitHeaders: true))
        #expect(headerPairs(quoted.at(0)) == [
            #"RateLimit-Policy: "a\"b\\c";q=5;w=2"#, #"RateLimit: "a\"b\\c";r=4;t=2"#,
        ])
        var short = OneRule(RateLimitRule(id: "s", limit: 5, windowMilliseconds: 200, rateLimitHeaders: true))
        #expect(headerPairs(short.at(0)) == [#"RateLimit-Policy: "s";q=5;w=1"#, #"RateLimit: "s";r=4;t=1"#])
    }

    @Test("without rateLimitHeaders only Retry-After is sent, with the rule's status")
    func plainLimitedResponse() {
        var subject = OneRule(RateLimitRule(id: "p", limit: 1, windowMilliseconds: 2000, status: 503))
        #expect(subject.at(0) == .allowed(headers: []))
        #expect(subject.at(500) == .limited(status: 503, retryAfterMilliseconds: 2000, headers: [
            (name: "Retry-After", value: "2"),
        ]))
    }

    @Test("decisions compare header names and values")
    func decisionEquality() {
        #expect(RateLimitDecision.allowed(headers: [("A", "1")]) != .allowed(headers: [("A", "2")]))
        #expect(RateLimitDecision.allowed(headers: [("A", "1")]) != .allowed(headers: [("B", "1")]))
        #expect(RateLimitDecision.allowed(headers: []) != .limited(status: 429, retryAfterMilliseconds: 0, headers: []))
        #expect(RateLimitDecision.limited(status: 429, retryAfterMilliseconds: 1000, headers: [])
            != .limited(status: 429, retryAfterMilliseconds: 2000, headers: []))
        #expect(RateLimitDecision.allowed(headers: [("A", "1")]) == .allowed(headers: [("A", "1")]))
    }

    @Test("stateJSON lists each rule's settings and buckets as of now")
    func stateShape() {
        var limiter = RateLimiter(rules: [
            RateLimitRule(id: "fw", limit: 2, windowMilliseconds: 1000, key: .clientAddress),
            RateLimitRule(id: "tb", limit: 4, windowMilliseconds: 1000, algorithm: .tokenBucket,
                          key: .header("Authorization"), retryAfter: .httpDate, rateLimitHeaders: true, status: 503),
        ])
        for time: UInt64 in [0, 10, 20] {
            _ = limiter.check(ruleIndex: 0, bucketKey: "10.0.0.2", nowMilliseconds: time, wallSeconds: exampleWall)
        }
        _ = limiter.check(ruleIndex: 0, bucketKey: "10.0.0.1", nowMilliseconds: 30, wallSeconds: exampleWall)
        _ = limiter.check(ruleIndex: 1, bucketKey: "Bearer x", nowMilliseconds: 0, wallSeconds: exampleWall)
        let expected = #"[{"id":"fw","algorithm":"fixed-window","limit":2,"windowMs":1000,"key":"client-address","#
            + #""retryAfter":"seconds","rateLimitHeaders":false,"status":429,"buckets":["#
            + #"{"key":"10.0.0.2","remaining":0,"resetMs":900,"requests":3,"limited":1},"#
            + #"{"key":"10.0.0.1","remaining":1,"resetMs":930,"requests":1,"limited":0}]},"#
            + #"{"id":"tb","algorithm":"token-bucket","limit":4,"windowMs":1000,"key":"header:Authorization","#
            + #""retryAfter":"http-date","rateLimitHeaders":true,"status":503,"buckets":["#
            + #"{"key":"Bearer x","remaining":3,"resetMs":150,"requests":1,"limited":0}]}]"#
        #expect(limiter.stateJSON(nowMilliseconds: 100).serialized() == expected)
        // Past its window the fixed bucket reads full again, with the reset of the aligned window it is in.
        let later = limiter.stateJSON(nowMilliseconds: 2500).serialized()
        #expect(later.contains(#"{"key":"10.0.0.2","remaining":2,"resetMs":500,"requests":3,"limited":1}"#))
        #expect(later.contains(#"{"key":"Bearer x","remaining":4,"resetMs":0,"requests":1,"limited":0}"#))
    }
}

@Suite("HTTP dates")
struct HTTPDateTests {
    @Test("format writes IMF-fixdate", arguments: [
        (784_111_777.0, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (784_111_777.999, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (0.0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (-1.0, "Wed, 31 Dec 1969 23:59:59 GMT"),
        (951_782_400.0, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (4_107_542_400.0, "Mon, 01 Mar 2100 00:00:00 GMT"),
        (-2_208_988_800.0, "Mon, 01 Jan 1900 00:00:00 GMT"),
        (253_402_300_799.0, "Fri, 31 Dec 9999 23:59:59 GMT"),
    ])
    func format(seconds: Double, expected: String) {
        #expect(HTTPDate.format(unixSeconds: seconds) == expected)
    }

    @Test("format and parse round-trip", arguments: [
        0.0, 1.0, 59.0, 86_399.0, 86_400.0, 784_111_777.0, 951_782_399.0, 951_868_800.0, 1_700_000_000.0,
        2_147_483_648.0, 4_102_444_800.0, -86_401.0,
    ])
    func roundTrip(seconds: Double) {
        #expect(HTTPDate.parse(HTTPDate.format(unixSeconds: seconds)) == seconds)
    }

    @Test("parse reads the three forms of RFC 9110 §5.6.7", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "  Sun, 06 Nov 1994 08:49:37 GMT\t",
    ])
    func parseForms(text: String) {
        #expect(HTTPDate.parse(text) == 784_111_777)
    }

    @Test("parse reads a two-digit asctime day and RFC 850 years on both sides of 2000")
    func parseVariants() {
        #expect(HTTPDate.parse("Wed Nov 16 08:49:37 1994") == 784_975_777)
        #expect(HTTPDate.parse("Thursday, 01-Jan-70 00:00:00 GMT") == 0)
        #expect(HTTPDate.parse("Saturday, 01-Jan-00 00:00:00 GMT") == 946_684_800)
    }

    @Test("parse rejects what is not an HTTP-date", arguments: [
        "", "garbage", "784111777",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 00:00:00 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 1994 GMT",
    ])
    func parseRejects(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }
}

@Suite("Retry-After compliance")
struct RetryAfterTrackerTests {
    static let bucket = RetryAfterKey.rateLimit(id: "k", bucket: "")

    /// Milliseconds as the tracker's nanoseconds.
    static func ms(_ milliseconds: UInt64) -> UInt64 { milliseconds * 1_000_000 }

    /// An advertisement decided at `at` ms and delivered (its exchange finished) at `delivered` ms.
    static func advertise(
        _ tracker: inout RetryAfterTracker, key: RetryAfterKey = bucket, logical: String? = nil, sequence: Int,
        status: Int = 429, retryAfter: String = "1", wait: Int = 1000, at: UInt64, delivered: UInt64? = nil
    ) {
        tracker.advertised(key: key, logical: logical, sequence: sequence, status: status, retryAfter: retryAfter,
                           waitMilliseconds: wait, nowNanos: ms(at))
        if let delivered { tracker.delivered(key: key, sequence: sequence, atNanos: ms(delivered), seen: true) }
    }

    @Test("a retry before the advertised time is early by the difference")
    func earlyRetry() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 1, retryAfter: "2", wait: 2000, at: 10_000, delivered: 10_000)
        let observation = tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(11_500))
        var expected = RetryAfterTracker.Observation(
            key: Self.bucket, advertisedSequence: 1, retrySequence: 2, advertisedWaitMilliseconds: 2000,
            actualWaitMilliseconds: 1500, earlyByMilliseconds: 500)
        // The window a retry would be early in: from the head (10 s) to the earliest honoured moment (12 s).
        expected.windowStartNanos = Self.ms(10_000)
        expected.windowEndNanos = Self.ms(12_000)
        #expect(observation == expected)
        #expect(observation?.honoured == false)
        #expect(tracker.pending.isEmpty)
    }

    @Test("a retry at or after the advertised time is honoured", arguments: [(12_000, 2000), (15_250, 5250)])
    func honouredRetry(arrival: UInt64, actualWait: Int) {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 4, status: 503, retryAfter: "2", wait: 2000, at: 10_000, delivered: 10_000)
        let observation = tracker.arrived(key: Self.bucket, sequence: 9, nowNanos: Self.ms(arrival))
        #expect(observation?.earlyByMilliseconds == 0)
        #expect(observation?.actualWaitMilliseconds == actualWait)
        #expect(observation?.honoured == true)
        #expect(tracker.observations.map(\.retrySequence) == [9])
    }

    @Test("delay-seconds count from when the head could go out: a delayed 503's wait starts after its delay")
    func delayedAnswer() {
        var tracker = RetryAfterTracker()
        // Decided at 0, written after a 2 s delay: a retry at 2.5 s is 500 ms early, not 1.5 s late.
        tracker.advertised(key: Self.bucket, sequence: 1, status: 503, retryAfter: "1", waitMilliseconds: 1000,
                           nowNanos: 0, headDelayMilliseconds: 2000)
        tracker.delivered(key: Self.bucket, sequence: 1, atNanos: Self.ms(2003), seen: true)
        let observation = tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(2500))
        #expect(observation?.earlyByMilliseconds == 500 && observation?.actualWaitMilliseconds == 500)
    }

    @Test("a late record of the answer's end does not make a client that waited from the head early")
    func lateDelivery() {
        var tracker = RetryAfterTracker()
        // The client read the head at once and waited 1 s; the loop recorded the exchange's end 3 ms later.
        Self.advertise(&tracker, sequence: 1, at: 0, delivered: 3)
        #expect(tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(1000))?.honoured == true)
    }

    @Test("an HTTP-date names a moment: counted from the decision, whenever the answer went out")
    func dateForm() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 1, status: 503, retryAfter: "Sun, 06 Nov 1994 08:49:39 GMT", wait: 2000, at: 0,
                       delivered: 500)
        #expect(tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(1900))?.earlyByMilliseconds == 100)
    }

    @Test("a fraction of a millisecond early is early, never rounded to honoured")
    func subMillisecond() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 1, at: 0, delivered: 0)
        let observation = tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(1000) - 300)
        #expect(observation?.honoured == false && observation?.earlyByMilliseconds == 1)
    }

    @Test("only the next request with the same key is judged, and only once")
    func judgedOnce() {
        var tracker = RetryAfterTracker()
        #expect(tracker.arrived(key: Self.bucket, sequence: 1, nowNanos: 0) == nil)
        Self.advertise(&tracker, sequence: 2, at: 0, delivered: 0)
        // The limited request itself is not its own retry.
        #expect(tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: 0) == nil)
        #expect(tracker.arrived(key: .rateLimit(id: "other", bucket: ""), sequence: 3, nowNanos: Self.ms(100)) == nil)
        #expect(tracker.pending.map(\.sequence) == [2])
        #expect(tracker.arrived(key: Self.bucket, sequence: 4, nowNanos: Self.ms(200))?.earlyByMilliseconds == 800)
        #expect(tracker.arrived(key: Self.bucket, sequence: 5, nowNanos: Self.ms(300)) == nil)
        #expect(tracker.observations.count == 1)
    }

    @Test("a request that arrived while the answer was still going out follows nothing, and uses nothing up")
    func concurrentRequestsAreNotRetries() {
        var tracker = RetryAfterTracker()
        // Three requests at once (HTTP/2 streams 3, 5, 7; or three pooled connections): each is limited as it is
        // decided, before any answer is out.
        Self.advertise(&tracker, sequence: 1, at: 1000)
        #expect(tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(1000)) == nil)
        Self.advertise(&tracker, sequence: 2, at: 1000)
        #expect(tracker.arrived(key: Self.bucket, sequence: 3, nowNanos: Self.ms(1000)) == nil)
        Self.advertise(&tracker, sequence: 3, at: 1000)
        for sequence in 1...3 { tracker.delivered(key: Self.bucket, sequence: sequence, atNanos: Self.ms(1001), seen: true) }
        // Even a request that arrived a nanosecond before the answers' end is concurrent.
        #expect(tracker.arrived(key: Self.bucket, sequence: 4, nowNanos: Self.ms(1001) - 1) == nil)
        // The real retries, 1.06 s later, are each judged against an advertisement of its own.
        for sequence in 5...7 {
            #expect(tracker.arrived(key: Self.bucket, sequence: sequence, nowNanos: Self.ms(2061))?.honoured == true)
        }
        #expect(tracker.retries == 3 && tracker.early == 0 && tracker.pending.isEmpty)
    }

    @Test("an early real retry after concurrent requests is still seen")
    func earlyRetryAfterABurst() {
        var tracker = RetryAfterTracker()
        for sequence in 1...3 { Self.advertise(&tracker, sequence: sequence, at: 0) }
        for sequence in 1...3 { tracker.delivered(key: Self.bucket, sequence: sequence, atNanos: Self.ms(2), seen: true) }
        #expect(tracker.arrived(key: Self.bucket, sequence: 4, nowNanos: Self.ms(1100))?.honoured == true)
        let early = tracker.arrived(key: Self.bucket, sequence: 5, nowNanos: Self.ms(3))
        #expect(early?.honoured == false && early?.advertisedSequence == 2)
    }

    @Test("a route's advertisement is followed only by the same logical request")
    func logicalRequests() {
        var tracker = RetryAfterTracker()
        let route = RetryAfterKey.route(id: "items", partition: "")
        Self.advertise(&tracker, key: route, logical: "GET /items/1", sequence: 1, status: 503, at: 0, delivered: 0)
        #expect(tracker.arrived(key: route, logical: "GET /items/2", sequence: 2, nowNanos: Self.ms(10)) == nil)
        #expect(tracker.arrived(key: route, logical: "GET /items/1", sequence: 3, nowNanos: Self.ms(20))?.earlyByMilliseconds == 980)
    }

    @Test("an answer that never went out asks nothing of the client")
    func undelivered() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 1, at: 0)
        tracker.delivered(key: Self.bucket, sequence: 1, atNanos: Self.ms(5), seen: false)
        #expect(tracker.pending.isEmpty && tracker.deliveredCount == 0)
        #expect(tracker.arrived(key: Self.bucket, sequence: 2, nowNanos: Self.ms(10)) == nil)
    }

    @Test("advertisements pending for one key are followed in the order they were delivered")
    func queueing() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, sequence: 1, at: 0, delivered: 0)
        Self.advertise(&tracker, key: .rateLimit(id: "j", bucket: ""), sequence: 2, at: 0, delivered: 0)
        Self.advertise(&tracker, sequence: 3, status: 503, retryAfter: "5", wait: 5000, at: 2000, delivered: 2000)
        #expect(tracker.pending.map(\.sequence) == [1, 2, 3])
        // The first retry with "k" answers #1 (long passed), the second answers #3 (early by 3 s).
        let first = tracker.arrived(key: Self.bucket, sequence: 4, nowNanos: Self.ms(4000))
        #expect(first?.advertisedSequence == 1 && first?.earlyByMilliseconds == 0)
        let second = tracker.arrived(key: Self.bucket, sequence: 5, nowNanos: Self.ms(4000))
        #expect(second?.advertisedSequence == 3)
        #expect(second?.earlyByMilliseconds == 3000)
        #expect(second?.actualWaitMilliseconds == 2000)
        #expect(tracker.pending.map(\.sequence) == [2])
    }

    @Test("stateJSON reports counts, observations and pending advertisements; reset clears them")
    func stateAndReset() {
        var tracker = RetryAfterTracker()
        Self.advertise(&tracker, key: .rateLimit(id: "a", bucket: ""), sequence: 1, at: 100, delivered: 100)
        tracker.arrived(key: .rateLimit(id: "a", bucket: ""), sequence: 2, nowNanos: Self.ms(600))
        Self.advertise(&tracker, key: .route(id: "b", partition: "p"), sequence: 3, status: 503, retryAfter: "2", wait: 2000,
                       at: 700)
        let expected = #"{"retries":1,"honoured":0,"early":1,"observations":[{"key":"rate-limit a []","advertisedSequence":1,"#
            + #""retrySequence":2,"advertisedWaitMs":1000,"actualWaitMs":500,"earlyByMs":500,"honoured":false,"#
            + #""windowStartMs":100,"windowEndMs":1100}],"#
            + #""pending":[{"key":"route b [p]","sequence":3,"status":503,"retryAfter":"2","sentAtMs":700,"#
            + #""deliveredAtMs":null,"earliestRetryMs":2700,"windowStartMs":700,"windowEndMs":2700}]}"#
        #expect(tracker.stateJSON().serialized() == expected)
        tracker.reset()
        #expect(tracker.observations.isEmpty)
        #expect(tracker.pending.isEmpty)
        #expect(tracker.arrived(key: .route(id: "b", partition: "p"), sequence: 4, nowNanos: Self.ms(800)) == nil)
    }

    @Test("only the newest observations are kept, so memory stays bounded; the counts stay exact")
    func boundedObservations() {
        var tracker = RetryAfterTracker(observationCapacity: 3)
        // Each request the retry of the one before, 1 ms after its answer: 9 advertisements, 8 early retries.
        for sequence in 1...9 {
            let at = UInt64(sequence) * 2
            tracker.arrived(key: Self.bucket, sequence: sequence, nowNanos: Self.ms(at))
            Self.advertise(&tracker, sequence: sequence, status: 503, at: at, delivered: at + 1)
        }
        #expect(tracker.retries == 8 && tracker.early == 8)
        #expect(tracker.observations.map(\.retrySequence) == [7, 8, 9])
        let state = tracker.stateJSON().serialized()
        #expect(state.hasPrefix(
            #"{"retries":8,"honoured":0,"early":8,"observations":[{"key":"rate-limit k []","advertisedSequence":6,"#))
        tracker.reset()
        #expect(tracker.retries == 0 && tracker.observations.isEmpty)
    }

    @Test("pending advertisements are bounded: a client that never retries, or a key per request")
    func boundedPending() {
        var tracker = RetryAfterTracker(observationCapacity: 3)
        for sequence in 1...7 {
            Self.advertise(&tracker, key: .rateLimit(id: "k\(sequence)", bucket: ""), sequence: sequence, at: 0, delivered: 0)
        }
        // 6 pending reached twice the capacity: the newest 3 were kept, then one more came.
        #expect(tracker.pending.map(\.sequence) == [4, 5, 6, 7])
        #expect(tracker.arrived(key: .rateLimit(id: "k2", bucket: ""), sequence: 8, nowNanos: Self.ms(2000)) == nil, "k2 was dropped")
        #expect(tracker.arrived(key: .rateLimit(id: "k5", bucket: ""), sequence: 9, nowNanos: Self.ms(2000))?.honoured == true)
        #expect(tracker.pending.map(\.sequence) == [4, 6, 7])
    }

    @Test("waitMilliseconds reads delay-seconds", arguments: [("120", 120_000), (" 3 ", 3000), ("0", 0),
                                                              ("007", 7000)])
    func waitFromSeconds(text: String, expected: Int) {
        #expect(RetryAfterTracker.waitMilliseconds(retryAfter: text, wallSeconds: exampleWall) == expected)
    }

    @Test("waitMilliseconds reads HTTP-dates in every form, relative to the wall clock", arguments: [
        ("Sun, 06 Nov 1994 08:49:39 GMT", exampleWall, 2000),
        ("Sun, 06 Nov 1994 08:49:39 GMT", exampleWall + 0.25, 1750),
        ("Sunday, 06-Nov-94 08:49:47 GMT", exampleWall, 10_000),
        ("Sun Nov  6 08:50:37 1994", exampleWall, 60_000),
        ("Sun, 06 Nov 1994 08:49:30 GMT", exampleWall, 0),
    ])
    func waitFromDate(text: String, wall: Double, expected: Int) {
        #expect(RetryAfterTracker.waitMilliseconds(retryAfter: text, wallSeconds: wall) == expected)
    }

    @Test("waitMilliseconds rejects anything else", arguments: [
        "", " ", "-1", "+5", "1.5", "1e3", "abc", "5 s", "Sun, 06 Nov 1994 08:49:39", "Sun, 06 Nov 1994 08:49:39 PST",
    ])
    func waitRejects(text: String) {
        #expect(RetryAfterTracker.waitMilliseconds(retryAfter: text, wallSeconds: exampleWall) == nil)
    }

    @Test("a huge delay-seconds saturates rather than overflowing")
    func hugeDelay() {
        let wait = RetryAfterTracker.waitMilliseconds(retryAfter: String(repeating: "9", count: 40), wallSeconds: 0)
        #expect(wait.map { $0 > 1_000_000_000_000_000 } == true)
    }
}
