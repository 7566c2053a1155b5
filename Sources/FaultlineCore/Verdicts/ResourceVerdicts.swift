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
        // instance → the answers the client could have kept, oldest first; a GET is judged against one only if it
        // arrived after that answer was out (`Retries.follows`): a burst of cold GETs has nothing to revalidate.
        var cached: [String: [JournalEntry]] = [:]
        var judged: [Int] = []
        var blind: [(sequence: Int, earlier: Int)] = []
        for (entry, record) in resourceEntries(entries) where entry.method == "GET" && record.range == nil {
            let key = instance(record)
            if let earlier = cached[key]?.last(where: { Retries.follows(Retries.Attempt(entry), Retries.Answer($0)) }) {
                judged.append(entry.sequence)
                if !record.carried.contains("If-None-Match") && !record.carried.contains("If-Modified-Since") {
                    blind.append((entry.sequence, earlier.sequence))
                }
            }
            let kept = entry.outcome == .completed && [200, 304].contains(entry.status ?? 0)
            if kept, !record.noStore, record.etag != nil || record.lastModified != nil {
                cached[key, default: []].append(entry)
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
    /// 0 < S ≤ N and carry If-Range with the validator the cut response carried: its ETag if that was strong (RFC
    /// 9110 §13.1.5 forbids a weak one in If-Range), else its exact Last-Modified date. Anything else is a client that
    /// restarts from zero whenever the server rightly answers 200 — even a tag the server never sent. The answer is
    /// then the 206, unless the resource changed meanwhile (then 200 with the whole new version is right, and the
    /// client still did right).
    static func resumes(_ entries: [JournalEntry]) -> Verdict {
        let all = resourceEntries(entries).filter { $0.entry.method == "GET" }
        var judged: [Int] = []
        var notes: [String] = []
        var failures: [(sequences: [Int], why: String)] = []
        // Each cut download is resumed by the first later GET of the instance that arrived after it was cut
        // (`Retries.follows`) and resumes no other: a burst of downloads cut together is resumed one by one.
        var claimed = Set<Int>()
        for (index, (entry, record)) in all.enumerated() {
            guard let cut = record.cutAt, cut > 0 else { continue }
            guard let next = all[(index + 1)...].first(where: {
                instance($0.record) == instance(record) && !claimed.contains($0.entry.sequence)
                    && Retries.follows(Retries.Attempt($0.entry), Retries.Answer(entry))
            }) else {
                failures.append(([entry.sequence], "the download cut by #\(entry.sequence) after \(cut) bytes was never asked for again"))
                continue
            }
            claimed.insert(next.entry.sequence)
            judged += [entry.sequence, next.entry.sequence]
            let again = next.record
            let pair = [entry.sequence, next.entry.sequence]
            guard let start = again.rangeStart, start > 0, start <= cut else {
                if let range = again.range {
                    failures.append((pair, "#\(next.entry.sequence) asked for \(range) after #\(entry.sequence) was cut at \(cut)"))
                } else {
                    failures.append((pair, "#\(next.entry.sequence) restarted from 0 after #\(entry.sequence) was cut at \(cut) bytes"))
                }
                continue
            }
            let expected = Validator(record)
            guard let condition = next.entry.head?.headers["if-range"]?.trimmingASCIIWhitespace else {
                failures.append((pair, "#\(next.entry.sequence) resumed at \(start) without If-Range (\(expected.description) "
                                 + "expected): had the resource changed, it would have spliced two versions"))
                continue
            }
            guard expected.accepts(condition) else {
                failures.append((pair, "#\(next.entry.sequence) resumed at \(start) with If-Range: \(condition), but "
                                 + "\(expected.description) was expected: \(expected.why(condition)), so the server sends the "
                                 + "whole body again"))
                continue
            }
            if next.entry.status != 206 {
                let why = again.version != record.version
                    ? "the resource had changed (version \(record.version) → \(again.version)), so the whole new version was right"
                    : "the server answered \(next.entry.status.map(String.init) ?? "nothing")"
                notes.append("#\(next.entry.sequence): \(why)")
            }
        }
        if judged.isEmpty && failures.isEmpty {
            return .inconclusive(rule: "resumesDownloads", explanation: "no download was cut", evidence: [])
        }
        guard let first = failures.first else {
            return Verdict(rule: "resumesDownloads", passed: true,
                           explanation: "\(judged.count / 2) cut download(s), each resumed with Range and the cut response's "
                            + "validator in If-Range" + (notes.isEmpty ? "" : " (\(notes.joined(separator: "; ")))"),
                           evidence: judged)
        }
        return Verdict(
            rule: "resumesDownloads", passed: false,
            explanation: first.why + (failures.count > 1 ? " (and \(failures.count - 1) more)" : ""),
            evidence: failures.flatMap(\.sequences))
    }

    /// What a resume's If-Range may carry: the cut response's strong ETag, or its exact Last-Modified date (the
    /// server takes either; RFC 9110 §13.1.5 prefers the tag when there is one).
    private struct Validator {
        var strongTag: String?
        var weakTag: String?
        var date: String?

        init(_ record: ResourceRecord) {
            if let tag = record.etag { if tag.hasPrefix("W/") { weakTag = tag } else { strongTag = tag } }
            date = record.lastModified
        }

        var description: String {
            switch (strongTag, date) {
            case (let tag?, let date?): return "the ETag \(tag) the cut response carried (or its Last-Modified, \(date))"
            case (let tag?, nil): return "the ETag \(tag) the cut response carried"
            case (nil, let date?): return "the cut response's Last-Modified, \(date)"
                + (weakTag.map { " (its ETag \($0) is weak)" } ?? "")
            case (nil, nil): return "nothing usable (the cut response had no strong validator)"
            }
        }

        func accepts(_ condition: String) -> Bool {
            if let strongTag, condition == strongTag { return true }
            if let date, let sent = HTTPDate.parse(date), let given = HTTPDate.parse(condition) { return sent == given }
            return false
        }

        /// Why `condition` does not do.
        func why(_ condition: String) -> String {
            if condition.hasPrefix("W/") { return "a weak entity tag is never a match in If-Range (RFC 9110 §13.1.5)" }
            if condition.hasPrefix("\"") { return "the server never sent that tag for this response" }
            if HTTPDate.parse(condition) != nil { return "that date is not the Last-Modified the server sent" }
            return "it is neither an entity tag nor an HTTP-date"
        }
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
