import CNghttp2
import FaultlineCore

/// Header fields for nghttp2, laid out in one buffer with their `nghttp2_nv` entries built once: a response
/// head is rendered into one of these when it is first submitted, and the next stream with the same head reuses it
/// (nghttp2 copies the fields when a frame is submitted).
/// Loop-confined: no run-time exclusivity checks.
final class HTTP2Fields {
    @exclusivity(unchecked) private var bytes: [UInt8] = []
    @exclusivity(unchecked) private var spans: [(name: Range<Int>, value: Range<Int>)] = []
    @exclusivity(unchecked) private var storage: UnsafeMutablePointer<UInt8>?
    @exclusivity(unchecked) private var entries: [nghttp2_nv] = []

    deinit { storage?.deallocate() }

    func append(_ name: String, _ value: String) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        spans.append((nameStart..<valueStart, valueStart..<bytes.count))
        entries = []
    }

    func withNV<T>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
        if entries.isEmpty {
            storage?.deallocate()
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
            buffer.initialize(from: bytes, count: bytes.count)
            storage = buffer
            entries = spans.map { span in
                nghttp2_nv(
                    name: buffer + span.name.lowerBound, value: buffer + span.value.lowerBound,
                    namelen: span.name.count, valuelen: span.value.count,
                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
        }
        return entries.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
    }
}
