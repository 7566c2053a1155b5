/// Where rendered bytes go: an array (tests, tools) or a connection's reusable `OutputBuffer`.
package protocol ByteSink: ~Copyable {
    mutating func append(bytes: [UInt8])
    mutating func append(raw: UnsafeRawBufferPointer)
}

extension Array: ByteSink where Element == UInt8 {
    package mutating func append(bytes: [UInt8]) { append(contentsOf: bytes) }
    package mutating func append(raw: UnsafeRawBufferPointer) { append(contentsOf: raw) }
}

/// A growable byte buffer that is emptied by resetting a count: no reference counting and no per-use
/// allocation, for the bytes a connection renders between two writes. Not copyable: one owner frees it.
package struct OutputBuffer: ByteSink, ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    package private(set) var count = 0

    /// 512 bytes to start: a small response's head and body fit, and a larger one grows the buffer once, to keep.
    /// Every connection has one, so its first size is paid by every pending exchange: at 4 KiB, 10,000 concurrent
    /// delayed responses held 40 MB of them (`scripts/bench_timing.py`: peak RSS 103 MB).
    package init(capacity: Int = 512) {
        self.capacity = max(capacity, 64)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    package var isEmpty: Bool { count == 0 }

    package mutating func append(bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(raw: $0) }
    }

    package mutating func append(raw source: UnsafeRawBufferPointer) {
        let needed = count + source.count
        if needed > capacity {
            var grown = capacity * 2
            while grown < needed { grown *= 2 }
            let bigger = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
            bigger.copyMemory(from: base, byteCount: count)
            base.deallocate()
            base = bigger
            capacity = grown
        }
        if let from = source.baseAddress { (base + count).copyMemory(from: from, byteCount: source.count) }
        count = needed
    }

    /// The bytes appended since the last `reset`.
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        body(UnsafeRawBufferPointer(start: base, count: count))
    }

    package mutating func reset() { count = 0 }
}
