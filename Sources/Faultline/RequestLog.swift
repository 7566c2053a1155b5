#if canImport(Glibc)
import Glibc
#endif
import FaultlineCore

/// How the server logs each finished request on stderr.
public enum RequestLogFormat: String, Sendable, CaseIterable {
    /// `16:02:11.104 #3 GET /v1/products/42 → 503 product[0] 0.2 ms completed`, coloured on a terminal.
    case text
    /// The journal entry's JSON, one per line.
    case json
}

/// Writes one line per request once its exchange has ended (or at once for a request that could not be
/// answered). Loop thread only; stderr is written unbuffered, a line at a time.
final class RequestLog {
    private let format: RequestLogFormat
    private let colour: Bool

    init(format: RequestLogFormat) {
        self.format = format
        // Colour only for a person watching a terminal (and never when NO_COLOR is set).
        colour = format == .text && isatty(STDERR_FILENO) == 1 && getenv("NO_COLOR") == nil
    }

    func finished(_ entry: JournalEntry) {
        var line: String
        switch format {
        case .json:
            var bytes: [UInt8] = []
            entry.json().serialize(into: &bytes)
            line = String(decoding: bytes, as: UTF8.self)
        case .text:
            line = text(entry)
        }
        line += "\n"
        // write(2) on fd 2: one call per line, so lines from a busy server never interleave mid-line.
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written <= 0 { break }
            offset += written
        }
    }

    private func text(_ entry: JournalEntry) -> String {
        let time = JournalEntry.iso8601(entry.receivedAtWall).dropFirst(11).dropLast()
        let what = entry.head.map { "\($0.method) \($0.target)" } ?? entry.requestLine
        var status = entry.status.map(String.init) ?? "-"
        if colour, let code = entry.status {
            let tint = code >= 500 ? "31" : code >= 400 ? "33" : "32"
            status = "\u{1B}[\(tint)m\(status)\u{1B}[0m"
        }
        var parts = ["\(time) #\(entry.sequence) \(what) → \(status)"]
        if let route = entry.route { parts.append(entry.step.map { "\(route)[\($0)]" } ?? route) }
        if entry.unmatched != nil { parts.append("unmatched") }
        if let fault = entry.fault { parts.append("fault=\(fault)") }
        if let finished = entry.finishedAtMonotonicNanos {
            let ms = Double(finished &- entry.receivedAtMonotonicNanos) / 1_000_000
            parts.append(ms < 10 ? "\((ms * 10).rounded() / 10) ms" : "\(Int(ms)) ms")
        }
        parts.append(entry.outcome.rawValue)
        if let malformed = entry.malformed { parts.append("(\(malformed))") }
        return parts.joined(separator: " ")
    }
}
