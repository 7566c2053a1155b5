import FaultlineCore
import FaultlineHTTP2

/// libFuzzer's entry point for the `h2-frames` fuzzer: the server's HTTP/2 codec (`HTTP2Connection`, the
/// FaultlineHTTP2 module, built with coverage by scripts/fuzz.sh) over `FakeHTTP2IO` (the codec tests' fake IO): writes go to memory, timers wait in a
/// list until the fuzzer fires them, and `dispatch` answers each request with an `Exchange` whose script the
/// input chooses (a plain response, a wait then a response, a hang, a body cut by `abortExchange`, RST_STREAM
/// with a code, GOAWAY naming this stream or the one before, gracefully or not, a deferred exchange answered
/// later, as an admin long-poll is, and the connection faults: close, reset, half-close).
///
/// One input: byte 0 chooses the preface (bits 0-1: 3 breaks it) and seeds the piece sizes; the rest is a list of
/// operations, each an opcode byte and its operands:
///   0-2  a frame: type, flags, stream id (small, odd or even), length byte, then that many payload bytes
///   3    a request: HEADERS (HPACK literals without indexing: GET /, scheme, authority, a field), END_STREAM from
///        a bit, on the next client stream id; the following byte chooses its script
///   4    raw bytes: a length byte, then that many bytes
///   5    deliver what was built so far, cut into pieces of random size (1 to 64 bytes, sometimes up to 512)
///   6    fire the earliest pending timer
///   7    drained(); the operand byte sets the transport's pending output (sometimes over the pause threshold)
///   8    answer the oldest deferred exchange (`respond`)
///   9    the transport refuses further writes (the client is gone)
/// At the end: deliver the rest, then peerFinished, peerFailed or teardown (from the last byte); afterwards fire
/// every timer and answer every deferred exchange, which must reach the closed connection's IO no more.
/// A broken rule is a crash, so libFuzzer saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Frames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let violations = HTTP2FramesFuzzCheck.violations(in: Array(UnsafeBufferPointer(start: data, count: size)))
    guard violations.isEmpty else {
        fatalError("h2-frames: broken rules:\n  " + violations.joined(separator: "\n  "))
    }
    return 0
}
