/// HTTP dates (RFC 9110 §5.6.7). `format` writes the preferred IMF-fixdate, e.g.
/// `Sun, 06 Nov 1994 08:49:37 GMT`; `parse` also reads the two obsolete forms a recipient must accept,
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and ANSI C asctime (`Sun Nov  6 08:49:37 1994`).
///
/// Pure integer calendar arithmetic (proleptic Gregorian, UTC, no leap seconds), so no Foundation and no
/// dependence on the host's time zone or locale.
package enum HTTPDate {
    /// The IMF-fixdate (RFC 9110 §5.6.7) for `unixSeconds`, truncated to the whole second it falls in.
    /// A non-finite value formats as the Unix epoch.
    package static func format(unixSeconds: Double) -> String {
        // Clamp to years 0001–9999, the range IMF-fixdate's 4DIGIT year can express.
        let lowest = -62_135_596_800.0  // 0001-01-01T00:00:00Z
        let highest = 253_402_300_799.0  // 9999-12-31T23:59:59Z
        let seconds = unixSeconds.isFinite ? Int64(min(max(unixSeconds, lowest), highest).rounded(.down)) : 0
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int(floorModulo(days + 4, 7))  // 1970-01-01 was a Thursday; 0 is Sunday.

        // Written as its 29 bytes: a resource answer formats Last-Modified (and Expires) on every request, and
        // building it from a dozen small strings cost ~2,700 instructions (`make hotpath`).
        return String(unsafeUninitializedCapacity: 29) { out in
            func put(_ index: Int, _ name: StaticString) {
                name.withUTF8Buffer { for offset in 0 ..< 3 { out[index + offset] = $0[offset] } }
            }
            func digits(_ index: Int, _ value: Int, _ count: Int) {
                var rest = value
                for offset in (0 ..< count).reversed() {
                    out[index + offset] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
            }
            put(0, dayNameBytes[weekday])
            out[3] = UInt8(ascii: ","); out[4] = space
            digits(5, day, 2)
            out[7] = space
            put(8, monthNameBytes[month - 1])
            out[11] = space
            digits(12, year, 4)
            out[16] = space
            digits(17, secondOfDay / 3600, 2)
            out[19] = UInt8(ascii: ":")
            digits(20, secondOfDay / 60 % 60, 2)
            out[22] = UInt8(ascii: ":")
            digits(23, secondOfDay % 60, 2)
            out[25] = space
            out[26] = UInt8(ascii: "G"); out[27] = UInt8(ascii: "M"); out[28] = UInt8(ascii: "T")
            return 29
        }
    }

    /// The Unix time of an HTTP-date in any of the three forms of RFC 9110 §5.6.7, or nil when `text` is none of
    /// them (surrounding spaces and tabs are ignored). Day and month names are case-sensitive, as the grammar
    /// says. The day name is not checked against the date. An RFC 850 two-digit year is read as 1970–2069
    /// (the POSIX `%y` pivot) rather than by §5.6.7's "more than 50 years in the future" rule, which would need a
    /// clock; the form is obsolete and no current client sends it.
    package static func parse(_ text: String) -> Double? {
        var bytes = Array(text.utf8)[...]
        while let first = bytes.first, first == space || first == tab { bytes.removeFirst() }
        while let last = bytes.last, last == space || last == tab { bytes.removeLast() }
        guard let date = parseIMFFixdate(bytes) ?? parseRFC850(bytes) ?? parseAsctime(bytes) else { return nil }
        return Double(date)
    }

    // MARK: - The three forms

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func parseIMFFixdate(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var c = Cursor(bytes: bytes)
        guard c.name(in: shortDayNames) != nil, c.literal(","), c.literal(" "),
              let day = c.digits(2), c.literal(" "),
              let month = c.name(in: monthNames), c.literal(" "),
              let year = c.digits(4), c.literal(" "),
              let time = c.timeOfDay(), c.literal(" GMT"), c.atEnd
        else { return nil }
        return unixSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    private static func parseRFC850(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var c = Cursor(bytes: bytes)
        guard c.name(in: longDayNames) != nil, c.literal(","), c.literal(" "),
              let day = c.digits(2), c.literal("-"),
              let month = c.name(in: monthNames), c.literal("-"),
              let shortYear = c.digits(2), c.literal(" "),
              let time = c.timeOfDay(), c.literal(" GMT"), c.atEnd
        else { return nil }
        let year = shortYear < 70 ? 2000 + shortYear : 1900 + shortYear
        return unixSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994` (the day of the month is space-padded, or two digits).
    private static func parseAsctime(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var c = Cursor(bytes: bytes)
        guard c.name(in: shortDayNames) != nil, c.literal(" "),
              let month = c.name(in: monthNames), c.literal(" ")
        else { return nil }
        let day: Int
        if c.literal(" "), let oneDigit = c.digits(1) {
            day = oneDigit
        } else if let twoDigit = c.digits(2) {
            day = twoDigit
        } else {
            return nil
        }
        guard c.literal(" "), let time = c.timeOfDay(), c.literal(" "), let year = c.digits(4), c.atEnd else {
            return nil
        }
        return unixSeconds(year: year, month: month + 1, day: day, time: time)
    }

    /// Seconds since the epoch, or nil when the day does not exist in that month (e.g. 30 Feb) or the time of day
    /// is out of range. Second 60 (a leap second, RFC 9110 §5.6.7) is accepted and lands on the next minute.
    private static func unixSeconds(year: Int, month: Int, day: Int, time: (Int, Int, Int)) -> Int64? {
        let (hour, minute, second) = time
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = self.days(fromCivilYear: Int64(year), month: Int64(month), day: Int64(day))
        return days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    // MARK: - Calendar

    private static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    private static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Days since 1970-01-01 for a proleptic Gregorian date, and back: Howard Hinnant's era-based algorithms
    // ("chrono-Compatible Low-Level Date Algorithms"), exact for every year.
    private static func days(fromCivilYear year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (also used for the journal's ISO 8601 times).
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = floorDivide(shifted, 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
    }

    private static func floorModulo(_ a: Int64, _ b: Int64) -> Int64 {
        a - floorDivide(a, b) * b
    }

    // MARK: - Text

    /// The names as static bytes for `format`, which copies them; as strings for the parser.
    private static let dayNameBytes: [StaticString] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let monthNameBytes: [StaticString] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    private static let shortDayNames = dayNameBytes.map(\.description)
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = monthNameBytes.map(\.description)
    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")

    /// Reads one date form left to right; every method consumes input only when it matches.
    private struct Cursor {
        let bytes: ArraySlice<UInt8>
        var index: Int

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            self.index = bytes.startIndex
        }

        var atEnd: Bool { index == bytes.endIndex }

        mutating func literal(_ text: String) -> Bool {
            let expected = Array(text.utf8)
            guard bytes.endIndex - index >= expected.count,
                  bytes[index..<index + expected.count].elementsEqual(expected)
            else { return false }
            index += expected.count
            return true
        }

        /// The position in `names` of the name at the cursor. The longest match wins so that "Sun" does not
        /// stop a "Sunday" short (the lists never mix lengths, but the rule costs nothing).
        mutating func name(in names: [String]) -> Int? {
            var best: (position: Int, length: Int)?
            for (position, name) in names.enumerated() {
                let utf8 = Array(name.utf8)
                guard bytes.endIndex - index >= utf8.count,
                      bytes[index..<index + utf8.count].elementsEqual(utf8),
                      utf8.count > (best?.length ?? 0)
                else { continue }
                best = (position, utf8.count)
            }
            guard let best else { return nil }
            index += best.length
            return best.position
        }

        /// Exactly `count` ASCII digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.endIndex - index >= count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        /// `hour ":" minute ":" second`, two digits each.
        mutating func timeOfDay() -> (Int, Int, Int)? {
            let start = index
            guard let hour = digits(2), literal(":"), let minute = digits(2), literal(":"), let second = digits(2)
            else {
                index = start
                return nil
            }
            return (hour, minute, second)
        }
    }
}
