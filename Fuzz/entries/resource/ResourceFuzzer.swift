/// libFuzzer's entry point for the `resource` fuzzer: one input is a request to a resource (a `METHOD PATH` line,
/// conditional and range fields with any values, a body), decided twice by one engine (see `ResourceFuzzCheck`,
/// compiled in from Tests/FaultlineCoreTests/FuzzChecks). A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResource(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = ResourceFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("resource: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
