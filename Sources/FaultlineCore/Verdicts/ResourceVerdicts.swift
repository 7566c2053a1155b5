/// The rules about resources (ARCHITECTURE §4b, §8), judged from the journal's `resource` records.
enum ResourceVerdicts {
    /// The requests to resources, with their records, oldest first.
    private static func resourceEntries(_ entries: [JournalEntry]) -> [(entry: JournalEntry, record: ResourceRecord)] {
        entries.compactMap { entry in entry.resource.map { (entry, $0) } }
    }

    private static func instance(_ record: ResourceRecord) -> String { "\(record.id) \(record.instance)" }

    private static func list(_ sequences: [Int]) -> String { sequences.map { "#\($0)" }.joined(separator: ", ") }

    /// A GET of an instance after a complete 200 or 304 that carried a validator (and no `no-store`) must carry
    /// If-None-Match or If-Modified-Since. Range requests are resumes, not revalidations.
    static func revalidates(_ entries: [JournalEntry]) -> Verdict {
        var cached: [String: Int] = [:]  // instance → the sequence whose answer the client could have kept
        var judged: [Int] = []
        var blind: [(sequence: Int, earlier: Int)] = []
        for (entry, record) in resourceEntries(entries) where entry.method == "GET" && record.range == nil {
            let key = instance(record)
            if let earlier = cached[key] {
                judged.append(entry.sequence)
                if !record.carried.contains("If-None-Match") && !record.carried.contains("If-Modified-Since") {
                    blind.append((entry.sequence, earlier))
                }
            }
            let kept = entry.outcome == .completed && [200, 304].contains(entry.status ?? 0)
            if kept, !record.noStore, record.etag != nil || record.lastModified != nil {
                cached[key] = entry.sequence
            }
        }
        guard !judged.isEmpty else {
            return .inconclusive(rule: "revalidatesWithValidators",
                                 explanation: "no resource was fetched again after a complete answer", evidence: [])
        }
        guard let first = blind.first else {
            return Verdict(rule: "revalidatesWithValidators", passed: true,
                           explanation: "\(judged.count) repeated GET(s), each with If-None-Match or If-Modified-Since",
                           evidence: judged)
        }
        return Verdict(
            rule: "revalidatesWithValidators", passed: false,
            explanation: "request #\(first.sequence) fetched again what #\(first.earlier) had answered with validators, "
                + "without If-None-Match or If-Modified-Since"
                + (blind.count > 1 ? " (and \(blind.count - 1) more: \(list(blind.dropFirst().map(\.sequence))))" : ""),
            evidence: blind.flatMap { [$0.earlier, $0.sequence] })
    }

    /// After a fault cut a GET's body at offset N, the next GET of that instance must ask for `bytes=S-` with
    /// 0 < S ≤ N and carry If-Range.
    static func resumes(_ entries: [JournalEntry]) -> Verdict {
        let all = resourceEntries(entries).filter { $0.entry.method == "GET" }
        var judged: [Int] = []
        var failures: [(sequences: [Int], why: String)] = []
        for (index, (entry, record)) in all.enumerated() {
            guard let cut = record.cutAt, cut > 0 else { continue }
            guard let next = all[(index + 1)...].first(where: { instance($0.record) == instance(record) }) else {
                failures.append(([entry.sequence], "the download cut by #\(entry.sequence) after \(cut) bytes was never asked for again"))
                continue
            }
            judged += [entry.sequence, next.entry.sequence]
            let again = next.record
            if let start = again.rangeStart, start > 0, start <= cut {
                if !again.carried.contains("If-Range") {
                    failures.append(([entry.sequence, next.entry.sequence],
                                     "#\(next.entry.sequence) resumed at \(start) without If-Range: had the resource changed, "
                                     + "it would have spliced two versions"))
                }
            } else if let range = again.range {
                failures.append(([entry.sequence, next.entry.sequence],
                                 "#\(next.entry.sequence) asked for \(range) after #\(entry.sequence) was cut at \(cut)"))
            } else {
                failures.append(([entry.sequence, next.entry.sequence],
                                 "#\(next.entry.sequence) restarted from 0 after #\(entry.sequence) was cut at \(cut) bytes"))
            }
        }
        if judged.isEmpty && failures.isEmpty {
            return .inconclusive(rule: "resumesDownloads", explanation: "no download was cut", evidence: [])
        }
        guard let first = failures.first else {
            return Verdict(rule: "resumesDownloads", passed: true,
                           explanation: "\(judged.count / 2) cut download(s), each resumed with Range and If-Range",
                           evidence: judged)
        }
        return Verdict(
            rule: "resumesDownloads", passed: false,
            explanation: first.why + (failures.count > 1 ? " (and \(failures.count - 1) more)" : ""),
            evidence: failures.flatMap(\.sequences))
    }

    static func conditionalWrites(_ entries: [JournalEntry]) -> Verdict {
        let writes = resourceEntries(entries).filter { ["PUT", "PATCH", "DELETE"].contains($0.entry.method ?? "") }
        guard !writes.isEmpty else {
            return .inconclusive(rule: "conditionalWrites", explanation: "no resource was written", evidence: [])
        }
        let blind = writes.filter { write in
            let carried = write.record.carried
            return !carried.contains("If-Match") && !carried.contains("If-Unmodified-Since")
                && !(write.entry.method == "PUT" && carried.contains("If-None-Match"))
        }
        guard let first = blind.first else {
            return Verdict(rule: "conditionalWrites", passed: true,
                           explanation: "\(writes.count) write(s), each with If-Match or If-Unmodified-Since",
                           evidence: writes.map(\.entry.sequence))
        }
        return Verdict(
            rule: "conditionalWrites", passed: false,
            explanation: "request #\(first.entry.sequence) (\(first.entry.method ?? "") \(first.record.instance)) wrote "
                + "without If-Match or If-Unmodified-Since: it would overwrite a change it never saw"
                + (blind.count > 1 ? " (and \(blind.count - 1) more)" : ""),
            evidence: blind.map(\.entry.sequence))
    }
}
