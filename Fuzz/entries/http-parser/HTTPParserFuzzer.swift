/// libFuzzer's entry point for the `http-parser` fuzzer: one input is a limits choice, a split seed and a
/// client byte stream (see `HTTPParserFuzzCheck`, compiled in from Tests/FaultlineCoreTests/FuzzChecks).
/// A broken rule is a crash, so libFuzzer saves the input; a trap inside the parser is one already.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPParser(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = HTTPParserFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("http-parser: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
