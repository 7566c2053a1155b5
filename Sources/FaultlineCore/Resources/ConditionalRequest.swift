/// The `Range` field (RFC 9110 §14.1.1): `bytes=` and a list of range specs.
package enum RangeRequest {
    package enum Spec: Sendable, Equatable {
        /// `first-last` (last nil: `first-`).
        case from(Int, last: Int?)
        /// `-suffix`: the last `suffix` bytes.
        case suffix(Int)
    }

    /// The specs, or nil when the field is not a valid byte range set (another unit, bad syntax, last < first):
    /// a server ignores such a field (§14.2).
    package static func parse(_ value: String) -> [Spec]? {
        let trimmed = value.trimmingASCIIWhitespace
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes=" else { return nil }
        var specs: [Spec] = []
        for part in trimmed.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false) {
            let text = String(part).trimmingASCIIWhitespace
            // RFC 9110 §5.6.1: empty list elements are tolerated.
            if text.isEmpty { continue }
            guard let dash = text.firstIndex(of: "-") else { return nil }
            let first = text[..<dash], last = text[text.index(after: dash)...]
            if first.isEmpty {
                guard let suffix = digits(last) else { return nil }
                specs.append(.suffix(suffix))
            } else {
                guard let start = digits(first) else { return nil }
                if last.isEmpty {
                    specs.append(.from(start, last: nil))
                } else {
                    guard let end = digits(last), end >= start else { return nil }
                    specs.append(.from(start, last: end))
                }
            }
        }
        return specs.isEmpty ? nil : specs
    }

    private static func digits(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        // Past Int's range the value is still a valid (huge) position: clamp it.
        return Int(text) ?? Int.max
    }

    /// The ranges of a `length`-byte representation the specs select, in the order asked; unsatisfiable specs
    /// (starting at or past the end, an empty suffix) are left out (§14.1.2).
    package static func resolve(_ specs: [Spec], length: Int) -> [ClosedRange<Int>] {
        specs.compactMap { spec in
            switch spec {
            case .from(let first, let last):
                guard first < length else { return nil }
                return first...min(last ?? (length - 1), length - 1)
            case .suffix(let count):
                guard count > 0, length > 0 else { return nil }
                return max(length - count, 0)...(length - 1)
            }
        }
    }
}

/// Entity tags (RFC 9110 §8.8.3) and the comparisons the conditional fields use (§8.8.3.2).
package enum EntityTag {
    /// The tags of an `If-Match` / `If-None-Match` list, as written (`W/"x"`, `"y"`); `["*"]` for the wildcard;
    /// nil when the field is malformed.
    package static func list(_ value: String) -> [String]? {
        let trimmed = value.trimmingASCIIWhitespace
        if trimmed == "*" { return ["*"] }
        var tags: [String] = []
        var rest = Substring(trimmed)
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            if rest.isEmpty { break }
            let weak = rest.hasPrefix("W/")
            let body = weak ? rest.dropFirst(2) : rest
            guard body.first == "\"", let close = body.dropFirst().firstIndex(of: "\"") else { return nil }
            let end = body.index(after: close)
            tags.append((weak ? "W/" : "") + String(body[..<end]))
            rest = body[end...]
        }
        return tags.isEmpty ? nil : tags
    }

    static func isWeak(_ tag: String) -> Bool { tag.hasPrefix("W/") }
    static func opaque(_ tag: String) -> Substring { isWeak(tag) ? tag.dropFirst(2) : Substring(tag) }

    /// Strong comparison: both strong and the same.
    package static func strongMatch(_ a: String, _ b: String) -> Bool { !isWeak(a) && !isWeak(b) && a == b }

    /// Weak comparison: the same opaque tag, weak or not.
    package static func weakMatch(_ a: String, _ b: String) -> Bool { opaque(a) == opaque(b) }
}

extension String {
    var trimmingASCIIWhitespace: String {
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return start == 0 && end == bytes.count ? self : String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
