/// The `Date` field a server with a clock sends on its responses (RFC 9110 §6.6.1), formatted once per second, as
/// nginx keeps `ngx_cached_http_time`: asked for a time in the second it already holds, it answers the same text,
/// so a response costs a comparison, not a formatting. The engine owns one (`Engine.dates`), which the codecs write
/// heads with and `{{now.httpDate}}` renders from, so every date the server sends has one source. Loop thread only.
package final class HTTPDateCache {
    /// The second of the wall clock the texts are for, [start, end): empty until the first call.
    @exclusivity(unchecked) private var start = Double.infinity
    @exclusivity(unchecked) private var end = -Double.infinity
    @exclusivity(unchecked) private var cachedValue = ""
    @exclusivity(unchecked) private var cachedLine: [UInt8] = []

    package init() {}

    /// `Date: Tue, 14 Nov 2023 22:13:20 GMT` and CRLF for the second `wallSeconds` (Unix time) falls in: the field
    /// line an HTTP/1.1 head carries. The same array for every call within one second.
    package func line(atWall wallSeconds: Double) -> [UInt8] {
        // Two comparisons on the request path (false for NaN, which `advance` formats as the epoch).
        if !(wallSeconds >= start && wallSeconds < end) { advance(to: wallSeconds) }
        return cachedLine
    }

    /// The IMF-fixdate (RFC 9110 §5.6.7) for the second `wallSeconds` falls in.
    package func value(atWall wallSeconds: Double) -> String {
        if !(wallSeconds >= start && wallSeconds < end) { advance(to: wallSeconds) }
        return cachedValue
    }

    /// The field value inside a line `line(atWall:)` gave: what HTTP/2 sends as `date`.
    package static func value(ofLine line: [UInt8]) -> ArraySlice<UInt8> {
        line.count >= prefix.count + 2 ? line[prefix.count..<(line.count - 2)] : []
    }

    private static let prefix = Array("Date: ".utf8)

    private func advance(to wallSeconds: Double) {
        // Clamped as `HTTPDate.format` clamps (years 0001–9999), so the conversion cannot trap.
        let whole = wallSeconds.isFinite
            ? Int64(min(max(wallSeconds, -62_135_596_800), 253_402_300_799).rounded(.down)) : 0
        // A clock outside the years it can format (or NaN) takes this path on every call, but is not formatted again.
        guard Double(whole) != start else { return }
        start = Double(whole)
        end = start + 1
        cachedValue = HTTPDate.format(unixSeconds: Double(whole))
        var line = Self.prefix
        line.reserveCapacity(Self.prefix.count + cachedValue.utf8.count + 2)
        line.append(contentsOf: cachedValue.utf8)
        line.append(0x0D)
        line.append(0x0A)
        cachedLine = line
    }
}
