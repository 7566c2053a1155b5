import Testing
@testable import FaultlineCore

/// `decimalText` writes what `String(format: "%.Nf")` wrote in the verdicts' sentences (Foundation is not linked).
@Suite struct DecimalTextTests {
    @Test func fixedDecimalsAsPrintfWritesThem() {
        #expect(decimalText(1.5, places: 2) == "1.50")
        #expect(decimalText(2, places: 2) == "2.00")
        #expect(decimalText(1.005_1, places: 2) == "1.01")
        #expect(decimalText(0.049_9, places: 3) == "0.050")
        #expect(decimalText(-0.07, places: 2) == "-0.07")
        #expect(decimalText(-0.001, places: 2) == "0.00")  // no "-0.00": the sign of a value that rounds to zero is dropped
        #expect(decimalText(12_345.678, places: 1) == "12345.7")
        #expect(decimalText(9.999, places: 2) == "10.00")
        #expect(decimalText(3.7, places: 0) == "4")
        #expect(decimalText(.nan, places: 2) == "nan")
        #expect(decimalText(-.infinity, places: 2) == "-inf")
        #expect(decimalText(1e300, places: 2).hasPrefix("1e+300"))
    }
}
