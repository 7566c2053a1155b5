/// libFuzzer's entry point for the `websocket-network` fuzzer: one input is a program of client bytes, clock moves,
/// output congestion and drains, and network changes (drops, a FIN, a teardown) played against a `WebSocketSession`
/// (see `WebSocketNetworkFuzzCheck`, compiled in from Tests/FaultlineCoreTests/FuzzChecks). A broken rule is a
/// crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketNetwork(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = WebSocketNetworkFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("websocket-network: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
