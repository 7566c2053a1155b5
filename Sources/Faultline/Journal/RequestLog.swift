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
/// answered). Loop thread only. Lines are collected during a loop turn and written together at its end (or every
/// 16 KiB): one write(2) per turn instead of one per request, whole lines only, never later than the turn.
final class RequestLog {
    private let format: RequestLogFormat
    private let colour: Bool
    private var pending: [UInt8] = []
    private var flushTask: TurnEndAction?

    init(format: RequestLogFormat, loop: EventLoop) {
        self.format = format
        // Colour only for a person watching a terminal (and never when NO_COLOR is set).
        colour = format == .text && isatty(STDERR_FILENO) == 1 && getenv("NO_COLOR") == nil
        // Under a load that never lets the loop go quiet, lines are written at least every 100 ms.
        flushTask = TurnEndAction(loop: loop, maxWaitMilliseconds: 100) { [unowned self] in flush() }
    }

    deinit { flush() }

    /// Flushes and frees the loop event; lines logged afterwards are written at once. Called when the server
    /// stops, on the loop thread, while the event base still exists.
    func close() {
        flush()
        flushTask?.close()
    }

    /// Writes what is pending now (also at shutdown).
    func flush() {
        var offset = 0
        while offset < pending.count {
            let written = pending.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written <= 0 { break }
            offset += written
        }
        pending.removeAll(keepingCapacity: true)
    }

    func finished(_ entry: JournalEntry) {
        flushTask?.schedule()
        switch format {
        case .json:
            entry.json().serialize(into: &pending)
        case .text:
            text(entry, into: &pending)
        }
        pending.append(0x0A)
        if pending.count >= 16 * 1024 || flushTask?.isOpen != true { flush() }
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
