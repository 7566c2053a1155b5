/// libFuzzer's entry point for the `scenario` fuzzer: one input is a scenario file's bytes, run through the
/// JSON parser and the scenario loader (see `ScenarioFuzzCheck`, compiled in from
/// Tests/FaultlineCoreTests/FuzzChecks). A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzScenario(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = ScenarioFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("scenario: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
