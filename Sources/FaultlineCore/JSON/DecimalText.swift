/// A number as text with a fixed count of decimals, as C's `%.Nf` writes it ("1.50", "-0.07", "12.000"), for the
/// verdicts' sentences. Written here because `String(format:)` is Foundation's, not FoundationEssentials', and the
/// server links no Foundation (ARCHITECTURE §1). Rounds half away from zero on the scaled value; NaN and the
/// infinities are written as `%f` writes them ("nan", "inf", "-inf").
package func decimalText(_ value: Double, places: Int) -> String {
    precondition((0...9).contains(places), "decimalText: 0 to 9 places")
    if value.isNaN { return "nan" }
    if value.isInfinite { return value < 0 ? "-inf" : "inf" }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let scaled = (value.magnitude * scale).rounded(.toNearestOrAwayFromZero)
    // Past 2^63 an Int cannot hold the scaled value; such numbers never appear in a sentence, but stay correct.
    guard scaled < 9.2e18 else { return (value < 0 ? "-" : "") + "\(value.magnitude)" }
    let units = UInt64(scaled)
    let divisor = UInt64(scale)
    let whole = units / divisor
    let sign = value < 0 && units > 0 ? "-" : ""
    guard places > 0 else { return sign + "\(whole)" }
    let fraction = String(units % divisor)
    return sign + "\(whole)." + String(repeating: "0", count: places - fraction.count) + fraction
}
