#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The rules about WebSocket clients (ARCHITECTURE §4c, §8), judged from the upgrade entries and their `websocket`
/// records.
enum WebSocketVerdicts {
    /// Connection attempts: requests to WebSocket routes, oldest first.
    private static func attempts(_ input: VerdictInput) -> [JournalEntry] {
        input.entries.filter { entry in entry.route?.routeID.map(input.webSocketRoutes.contains) ?? false }
    }

    /// Whether an attempt ended in a way that makes a client reconnect: refused, or a session the client did not
    /// close itself.
    private static func failed(_ attempt: JournalEntry) -> Bool {
        guard attempt.status == 101, let session = attempt.websocket else { return true }
        guard let end = session.end else { return false }  // still open
        return !(end.by == .client && end.clean)
    }

    /// When an attempt was over: its session's end, or its response's.
    private static func over(_ attempt: JournalEntry) -> UInt64 {
        attempt.websocket?.end?.atMonotonicNanos ?? attempt.finishedAtMonotonicNanos ?? attempt.receivedAtMonotonicNanos
    }

    /// The waits before reconnects grow: in each run of failed attempts, the wait before reconnect k (from the
    /// failure to the next attempt) is a point (k, wait); a log-linear fit across every point, as the `backoff`
    /// rule fits its envelopes, must grow at least ×1.15 per reconnect. At least 5 waits over 3 reconnect indices
    /// are needed, else inconclusive. With `jitter`, the waits must scatter around the fit: the standard deviation of
    /// their log residuals at least `minimumScatter` (plain doubling scatters only by scheduling noise, ~0.01).
    static func reconnectBackoff(_ input: VerdictInput, jitter: Bool) -> Verdict {
        let all = attempts(input)
        var points: [(index: Int, wait: Double)] = []
        var evidence: [Int] = []
        var index = 0
        for (attempt, next) in zip(all, all.dropFirst()) {
            guard failed(attempt) else {
                index = 0
                continue
            }
            // An upgrade that came before this attempt was over is another client's, not its reconnect (the wait
            // would be negative). Several clients reconnecting at once are not told apart.
            guard next.receivedAtMonotonicNanos >= over(attempt) else { continue }
            index += 1
            points.append((index, Double(next.receivedAtMonotonicNanos &- over(attempt)) / 1_000_000))
            evidence += [attempt.sequence, next.sequence]
        }
        let indices = Set(points.map(\.index))
        let rule = "reconnectBackoff"
        guard points.count >= 5, indices.count >= 3 else {
            return .inconclusive(rule: rule, explanation: "\(points.count) reconnect(s) after a drop or a refusal over "
                + "\(indices.count) retry index(es): at least 5 over 3 are needed to judge", evidence: Array(Set(evidence)).sorted())
        }
        let floor = Verdicts.BackoffRule.floorMilliseconds
        let xs = points.map { Double($0.index) }, ys = points.map { log(max(floor, $0.wait)) }
        let fit = Verdicts.fitLine(xs, ys, weights: Array(repeating: 1, count: xs.count))
        let growth = exp(fit.slope)
        let waits = points.prefix(8).map { "\(Int($0.wait.rounded())) ms" }.joined(separator: ", ")
        let summary = "waits before reconnects \(waits)\(points.count > 8 ? ", …" : "") grow ×\(decimalText(growth, places: 2)) per reconnect"
        guard growth >= Verdicts.BackoffRule.minimumGrowth else {
            return Verdict(rule: rule, passed: false,
                           explanation: "the reconnects do not back off: \(summary), at least ×\(decimalText(Verdicts.BackoffRule.minimumGrowth, places: 2)) expected",
                           evidence: evidence)
        }
        let scatter = (fit.residuals.map { $0 * $0 }.reduce(0, +) / Double(fit.residuals.count)).squareRoot()
        if jitter && scatter < minimumScatter {
            return Verdict(rule: rule, passed: false,
                           explanation: "no jitter: \(summary), but every wait sits on that curve (log scatter "
                            + "\(decimalText(scatter, places: 3)), at least \(minimumScatter) expected): clients dropped together "
                            + "would come back together", evidence: evidence)
        }
        return Verdict(rule: rule, passed: true,
                       explanation: summary + (jitter ? ", with jitter (log scatter \(decimalText(scatter, places: 2)))" : ""),
                       evidence: [])
    }

    /// With jitter, the least standard deviation of the waits' log residuals around the growth fit.
    static let minimumScatter = 0.05

    /// Every session after the first starts with client messages matching `messages`, in order.
    static func resubscribes(_ input: VerdictInput, _ messages: [BodyMatcher]) -> Verdict {
        let sessions = attempts(input).filter { $0.websocket != nil }
        let rule = "resubscribes"
        guard sessions.count >= 2 else {
            return .inconclusive(rule: rule, explanation: "\(sessions.count) session(s): no reconnect to judge", evidence: [])
        }
        for session in sessions.dropFirst() {
            let sent = session.websocket!.frames.filter { $0.direction == .fromClient && ["text", "binary"].contains($0.opcode) }
            for (index, matcher) in messages.enumerated() {
                guard index < sent.count else {
                    return Verdict(rule: rule, passed: false,
                                   explanation: "session #\(session.sequence) sent \(sent.count) message(s) before it ended; "
                                    + "its subscription has \(messages.count)", evidence: [session.sequence])
                }
                if let miss = RouteMatcher.check(matcher, Array((sent[index].text ?? "").utf8)) {
                    return Verdict(rule: rule, passed: false,
                                   explanation: "session #\(session.sequence)'s message \(index + 1) \(miss): the client did "
                                    + "not resubscribe first", evidence: [session.sequence])
                }
            }
        }
        return Verdict(rule: rule, passed: true,
                       explanation: "\(sessions.count - 1) reconnected session(s), each resubscribed first",
                       evidence: sessions.map(\.sequence))
    }

    /// In every session, the client's pings come at most `limit` ms apart (from the start to the end), or — when
    /// the server went silent — the client ended the session within `limit` ms of the silence.
    static func heartbeat(_ input: VerdictInput, _ limit: Int) -> Verdict {
        let rule = "heartbeat"
        let sessions = attempts(input).filter { $0.websocket?.end != nil }
        var judged: [Int] = []
        for entry in sessions {
            let session = entry.websocket!
            let start = entry.receivedAtMonotonicNanos
            let end = session.end!.atMonotonicNanos
            if let silence = session.faultStarted, ["silence", "truncated-frame", "close-keep-open"].contains(silence.name) {
                judged.append(entry.sequence)
                let noticed = Double(end &- silence.atMonotonicNanos) / 1_000_000
                if noticed > Double(limit) || session.end!.by != .client {
                    return Verdict(rule: rule, passed: false,
                                   explanation: "session #\(entry.sequence): the server went silent (\(silence.name)) and the client "
                                    + (session.end!.by == .client ? "ended it \(Int(noticed)) ms later" : "never noticed")
                                    + "; within \(limit) ms expected", evidence: [entry.sequence])
                }
                continue
            }
            guard Double(end &- start) / 1_000_000 > Double(limit), session.frames.count < WebSocketRecord.maxFrames else { continue }
            judged.append(entry.sequence)
            let pings = session.clientFrames("ping").map(\.atMonotonicNanos)
            let marks = [start] + pings + [end]
            if let gap = zip(marks, marks.dropFirst()).map({ Double($1 &- $0) / 1_000_000 }).max(), gap > Double(limit) {
                return Verdict(rule: rule, passed: false,
                               explanation: "session #\(entry.sequence): \(Int(gap)) ms without a ping from the client "
                                + "(\(pings.count) ping(s) in all); at most \(limit) ms expected", evidence: [entry.sequence])
            }
        }
        guard !judged.isEmpty else {
            return .inconclusive(rule: rule, explanation: "no session lasted over \(limit) ms or went silent", evidence: [])
        }
        return Verdict(rule: rule, passed: true,
                       explanation: "\(judged.count) session(s): pings at most \(limit) ms apart, or a silent server noticed in time",
                       evidence: judged)
    }
}
