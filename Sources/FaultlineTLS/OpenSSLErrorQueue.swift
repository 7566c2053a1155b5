import COpenSSL

/// OpenSSL's per-thread error queue, read in one place. A failing OpenSSL call queues one or more errors; whoever
/// reports the failure drains the queue, so that a later failure does not report these again.
package enum OpenSSLErrorQueue {
    /// How each queued error is written.
    package enum Format {
        /// The reason alone (`certificate verify failed`): what the journal and the server's notes show per
        /// connection, short and stable across OpenSSL builds, so tests and users can match on it.
        case reason
        /// OpenSSL's whole line (`error:0A000086:SSL routines::certificate verify failed`), with the library and
        /// the code: for a setup error a person reads once and may need to look up.
        case full
    }

    /// Every queued error of this thread, oldest first, written in `format`; the queue is left empty.
    package static func drain(_ format: Format) -> [String] {
        var errors: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            switch format {
            case .reason:
                if let reason = ERR_reason_error_string(code) {
                    errors.append(String(cString: reason))
                } else {
                    errors.append("error \(code)")
                }
            case .full:
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                errors.append(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            }
        }
        return errors
    }

    /// The queued errors in `format` as one line (`a; b`), or `unknown error` when nothing was queued; the queue
    /// is left empty.
    package static func drainLine(_ format: Format) -> String {
        let errors = drain(format)
        return errors.isEmpty ? "unknown error" : errors.joined(separator: "; ")
    }
}
