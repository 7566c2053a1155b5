#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FaultlineCore

/// How the server logs each finished request on stderr. In the library, not the CLI, although `serve
/// --log-format` names it: `FaultlineServer.Configuration.requestLog` takes it.
public enum RequestLogFormat: String, Sendable, CaseIterable {
    /// `16:02:11.104 #3 GET /v1/products/42 → 503 product[0] 0.2 ms completed`, coloured on a terminal; a resource's
    /// request adds its decision (`→ 304 resource:doc not-modified`), a proxied one the upstream's answer
    /// (`proxy=200 reused 1.2ms`, or the failure: `proxy=timeout`).
    case text
    /// The journal entry's JSON, one per line.
    case json
}

/// Writes one line per request once its exchange has ended (or at once for a request that could not be
/// answered). Loop thread only.
///
/// Nothing of it runs in front of a ready request (issue 30): `finished` only keeps the entry (a copy of the journal's,
/// so the line says what was true when the exchange ended); the lines are formatted and written as housekeeping
/// (`LoopPriority.housekeeping`), when the loop has nothing more urgent, in slices of `slice` lines, one write(2) a
/// slice. Like the close queue they stand aside while a scripted delay falls due (`DeadlineYield`): 10,000 delayed
/// responses falling due together are all sent before their lines are formatted, which cost about a fifth of the
/// server's user time per response in that burst. Every line is written, in order: within ~100 ms under load (the
/// backstop, then a slice every 5 ms while the loop stays busy), within 250 ms while delays keep falling due; and
/// past `backlogLimit` waiting entries (a load that never lets housekeeping run) each new entry formats the two
/// oldest lines, as every line used to be formatted, so memory stays bounded.
final class RequestLog {
    private let format: RequestLogFormat
    private let colour: Bool
    /// Formatted lines not written yet.
    private var pending: [UInt8] = []
    /// Ended exchanges whose lines are not formatted yet, oldest first from `entriesStart`.
    private var entries: [JournalEntry] = []
    private var entriesStart = 0
    private var flushTask: TurnEndAction?
    private var yield: DeadlineYield?
    /// Lines formatted per housekeeping slice (about 0.1 ms of work each).
    static let slice = 128
    /// Entries waiting for their lines past which each new one formats two (more than a burst of 10,000 delayed
    /// responses, which is sent first).
    static let backlogLimit = 16_384

    init(format: RequestLogFormat, loop: EventLoop, deadlines: StepDeadlines) {
        self.format = format
        // Colour only for a person watching a terminal (and never when NO_COLOR is set).
        colour = format == .text && isatty(STDERR_FILENO) == 1 && getenv("NO_COLOR") == nil
        // Under a load that never lets the loop go quiet, a slice runs at least every 100 ms, then every 5 ms.
        flushTask = TurnEndAction(loop: loop, maxWaitMilliseconds: 100, starvedIntervalMilliseconds: 5) {
            [unowned self] in writeSlice()
        }
        yield = DeadlineYield(loop: loop, deadlines: deadlines, maxWaitMilliseconds: 250) {
            [unowned self] in flushTask?.schedule()
        }
    }

    deinit { flush() }

    /// Writes every line still waiting and frees the loop events; lines logged afterwards are written at once.
    /// Called when the server stops, on the loop thread, while the event base still exists.
    func close() {
        flush()
        yield?.cancel()
        yield = nil
        flushTask?.close()
    }

    /// Formats and writes every line still waiting (at shutdown, and once the loop events are closed).
    func flush() {
        formatEntries(upTo: entries.count)
        writePending()
    }

    func finished(_ entry: JournalEntry) {
        guard let flushTask, flushTask.isOpen else {
            entries.append(entry)
            flush()
            return
        }
        if entriesStart == entries.count { yield?.queueStarted() }
        entries.append(entry)
        if entries.count - entriesStart > Self.backlogLimit {
            // Housekeeping does not keep up (a load that never lets the loop go quiet): each new entry formats the
            // two oldest lines, so the backlog shrinks without one long stall.
            formatEntries(upTo: entriesStart + 2)
            if pending.count >= 16 * 1024 { writePending() }
        }
        flushTask.schedule()
    }

    /// One slice of lines, unless a scripted delay is about to fall due; the next slice on a later turn.
    private func writeSlice() {
        guard entriesStart < entries.count else { return }
        if let yield, !yield.mayRun() { return }
        formatEntries(upTo: min(entriesStart + Self.slice, entries.count))
        writePending()
        if entriesStart < entries.count { flushTask?.schedule() }
    }

    private func formatEntries(upTo end: Int) {
        while entriesStart < end {
            let entry = entries[entriesStart]
            entriesStart += 1
            switch format {
            case .json:
                entry.json().serialize(into: &pending)
            case .text:
                text(entry, into: &pending)
            }
            pending.append(0x0A)
        }
        // The formatted entries go now (the journal may have evicted them: their storage is freed here), and the
        // array is compacted once at least half of it is done, so a log that never quite empties stays bounded.
        if entriesStart == entries.count {
            entries.removeAll(keepingCapacity: entries.capacity <= 4 * Self.slice)
            entriesStart = 0
        } else if entriesStart >= entries.count / 2 {
            entries.removeFirst(entriesStart)
            entriesStart = 0
        }
    }

    private func writePending() {
        var offset = 0
        while offset < pending.count {
            let written = pending.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written <= 0 { break }
            offset += written
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Built byte by byte: this runs for every request, and string interpolation made it cost 40 % of the
    /// server's throughput.
    private func text(_ entry: JournalEntry, into line: inout [UInt8]) {
        let millis = Int64((entry.receivedAtWall * 1000).rounded(.down)) % 86_400_000
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                line.append(UInt8(48 + rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(millis / 3_600_000, 2); line.append(0x3A)
        digits(millis / 60_000 % 60, 2); line.append(0x3A)
        digits(millis / 1000 % 60, 2); line.append(0x2E)
        digits(millis % 1000, 3)
        line += " #".utf8
        line += String(entry.sequence).utf8
        line.append(0x20)
        if let head = entry.head {
            line += head.method.utf8
            line.append(0x20)
            line += head.target.utf8
        } else {
            line += entry.requestLine.utf8
        }
        line += " → ".utf8
        if let code = entry.status {
            if colour { line += (code >= 500 ? "\u{1B}[31m" : code >= 400 ? "\u{1B}[33m" : "\u{1B}[32m").utf8 }
            line += String(code).utf8
            if colour { line += "\u{1B}[0m".utf8 }
        } else {
            line.append(0x2D)
        }
        if let route = entry.route {
            line.append(0x20)
            line += route.description.utf8
            if let step = entry.step {
                line.append(0x5B)
                line += String(step).utf8
                line.append(0x5D)
            }
        }
        if entry.unmatched != nil { line += " unmatched".utf8 }
        if let resource = entry.resource {
            // What the resource decided: `partial`, `not-modified`, `precondition-failed`, …
            line.append(0x20)
            line += resource.decision.rawValue.utf8
        }
        if let proxy = entry.proxy {
            // Forwarded: `proxy=502 reused 1.2ms`, or the failure (`proxy=timeout`).
            line += " proxy=".utf8
            if let failure = proxy.failure {
                line += failure.utf8
            } else {
                line += (proxy.upstreamStatus.map { String($0) } ?? "-").utf8
                if proxy.reused { line += " reused".utf8 }
                if let total = proxy.totalMilliseconds {
                    line.append(0x20)
                    line += String(Int(total * 10) / 10).utf8
                    line.append(0x2E)
                    line += String(Int(total * 10) % 10).utf8
                    line += "ms".utf8
                }
            }
        }
        if let fault = entry.fault {
            line += " fault=".utf8
            line += fault.utf8
        }
        if let finished = entry.finishedAtMonotonicNanos {
            let tenths = Int64(finished &- entry.receivedAtMonotonicNanos) / 100_000
            line.append(0x20)
            if tenths < 100 {
                line += String(tenths / 10).utf8
                line.append(0x2E)
                line += String(tenths % 10).utf8
            } else {
                line += String(tenths / 10).utf8
            }
            line += " ms".utf8
        }
        line.append(0x20)
        line += entry.outcome.rawValue.utf8
        if let malformed = entry.malformed {
            line += " (".utf8
            line += malformed.utf8
            line.append(0x29)
        }
    }
}
