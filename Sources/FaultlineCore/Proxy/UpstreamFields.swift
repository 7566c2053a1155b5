/// An upstream response's fields as they arrived (ARCHITECTURE §4d): the header section's bytes and, for each
/// field, where its name and its value (without the whitespace around it) are in them. Strings are made only when
/// asked for (`headers`): a response forwarded as it is has its end-to-end fields copied through byte for byte
/// (`ProxyHeaders.clientHead`) and never needs them — making and freeing a string for each name and value was
/// about a tenth of the proxy's own work a request.
package struct UpstreamFields: Sendable {
    /// The field lines, line ends included, as the upstream sent them.
    package let bytes: [UInt8]
    /// Four offsets into `bytes` a field: its name's start and end, its value's start and end.
    private let offsets: [UInt32]

    package init(bytes: [UInt8], offsets: [UInt32]) {
        precondition(offsets.count % 4 == 0)
        self.bytes = bytes
        self.offsets = offsets
    }

    package var count: Int { offsets.count / 4 }

    /// Calls `body` with each field's name and value, in order.
    package func forEach(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void) {
        bytes.withUnsafeBufferPointer { bytes in
            offsets.withUnsafeBufferPointer { offsets in
                var index = 0
                while index < offsets.count {
                    body(UnsafeBufferPointer(rebasing: bytes[Int(offsets[index])..<Int(offsets[index + 1])]),
                         UnsafeBufferPointer(rebasing: bytes[Int(offsets[index + 2])..<Int(offsets[index + 3])]))
                    index += 4
                }
            }
        }
    }

    /// The fields as strings (invalid UTF-8 repaired, as the parser always did).
    package var headers: HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(count)
        forEach { name, value in
            headers.append(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
        return headers
    }
}
