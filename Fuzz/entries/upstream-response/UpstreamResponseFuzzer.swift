/// libFuzzer's entry point for the `upstream-response` fuzzer: one input is a control byte and the bytes an upstream
/// sends the proxy, read by `HTTPResponseParser` in pieces and whole (see `UpstreamResponseFuzzCheck`, compiled in
/// from Tests/FaultlineCoreTests/FuzzChecks). A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUpstreamResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = UpstreamResponseFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("upstream-response: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
