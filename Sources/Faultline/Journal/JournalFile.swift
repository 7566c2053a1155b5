import FaultlineCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `serve --journal F`: every journal entry appended to F as one line of JSON (NDJSON, the entry exactly as
/// `GET /__faultline/requests` shows it) once its exchange has ended, so the file holds final outcomes.
/// Loop thread only.
///
/// It follows entries itself instead of reading them back from the journal, because the journal may forget an
/// entry before its exchange ends (`DELETE /requests`, or eviction once full) and the file must not.
final class JournalFile {
    let path: String
    private var fd: Int32
    /// Entries recorded whose exchange has not ended yet, by sequence number; the same changes the journal
    /// gets are applied here.
    private var pending: [Int: JournalEntry] = [:]
    private var line: [UInt8] = []
    private var failed = false

    /// Opens (creating it if needed) `path` for appending.
    init(path: String) throws(ServerError) {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system(call: "open \(path)", errno: errno) }
    }

    deinit {
        if fd >= 0 { Posix.close(fd) }
    }

    /// A new journal entry (as the journal stored it, sequence assigned and body capped).
    func recorded(_ entry: JournalEntry) {
        if entry.outcome == .pending {
            pending[entry.sequence] = entry
        } else {
            write(entry)
        }
    }

    /// The change `ServerCore.updateEntry` made to the journal's entry; written out once the exchange ended.
    func update(_ sequence: Int, _ change: (inout JournalEntry) -> Void) {
        guard var entry = pending[sequence] else { return }
        change(&entry)
        if entry.outcome == .pending {
            pending[sequence] = entry
        } else {
            pending[sequence] = nil
            write(entry)
        }
    }

    /// Writes what is still pending (as `pending`: the server stops without ending it) and closes the file.
    /// Called after the server has cut its connections, so normally nothing is left.
    func close() {
        guard fd >= 0 else { return }
        for sequence in pending.keys.sorted() { write(pending[sequence]!) }
        pending = [:]
        Posix.close(fd)
        fd = -1
    }

    /// One `write(2)` per line on an `O_APPEND` descriptor: the line reaches the file (the kernel's page cache)
    /// at once, with no user-space buffer to flush, and a regular file's write does not wait on the disk.
    private func write(_ entry: JournalEntry) {
        guard fd >= 0, !failed else { return }
        line.removeAll(keepingCapacity: true)
        entry.json().serialize(into: &line)
        line.append(0x0A)
        var offset = 0
        while offset < line.count {
            let written = line.withUnsafeBytes { Posix.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                // Disk full or the like: say so once and keep serving; the admin API still has the journal.
                failed = true
                let message = "faultline: cannot write journal file \(path): \(String(cString: strerror(code)))\n"
                _ = message.withCString { Posix.write(2, $0, strlen($0)) }
                return
            }
            offset += written
        }
    }
}
