/// libFuzzer's entry point for the `websocket` fuzzer: one input is a control byte and the bytes a client sends
/// after the upgrade, fed to a `WebSocketSession` playing a script (see `WebSocketFuzzCheck`, compiled in from
/// Tests/FaultlineCoreTests/FuzzChecks). A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = WebSocketFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("websocket: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
