import Faultline
import FaultlineCore

/// The one line `faultline serve` (and `record`) prints on stderr when it stops, unless `--quiet`:
///
///     faultline: served 12 requests (10 completed, 1 reset-sent, 1 rejected); verdicts: 1 of 4 failed (honorsRetryAfter)
///
/// Requests are counted by their journal outcome (`response.outcome`), every one ever journaled, evicted ones too;
/// the verdicts are `GET /__faultline/report`'s at that moment.
package enum ServeSummary {
    package static func line(_ summary: StopSummary, verdicts: Bool = true) -> String {
        let count = summary.requests
        var text = "faultline: served \(count) request\(count == 1 ? "" : "s")"
        if !summary.outcomes.isEmpty {
            text += " (" + summary.outcomes.map { "\($0.count) \($0.outcome.rawValue)" }.joined(separator: ", ") + ")"
        }
        if verdicts { text += "; verdicts: " + verdictText(summary.report) }
        return text
    }

    /// `none declared`, `1 passed`, `all 3 passed`, `all 3 passed (1 inconclusive)` (an inconclusive rule passes, as `verify`
    /// counts it), `1 of 4 failed (honorsRetryAfter)`, `1 of 4 failed (honorsRetryAfter), 1 inconclusive`. Rules are
    /// named `scenario/rule` when more than one scenario was judged.
    static func verdictText(_ report: Report) -> String {
        let judged = report.verdicts.count
        guard judged > 0 else { return "none declared" }
        let failed = report.failed
        let inconclusive = report.inconclusive.count
        guard !failed.isEmpty else {
            let passed = judged == 1 ? "1 passed" : "all \(judged) passed"
            return passed + (inconclusive > 0 ? " (\(inconclusive) inconclusive)" : "")
        }
        let qualified = Set(report.verdicts.map(\.scenario)).count > 1
        let names = failed.map { qualified ? "\($0.scenario)/\($0.rule)" : $0.rule }
        return "\(failed.count) of \(judged) failed (\(names.joined(separator: ", ")))"
            + (inconclusive > 0 ? ", \(inconclusive) inconclusive" : "")
    }
}
