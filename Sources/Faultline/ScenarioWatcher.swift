import CLibevent

#if canImport(Glibc)
import Glibc
#endif

/// `serve --watch`: inotify on the folders that hold the scenario files, read from the loop like any socket.
///
/// Folders are watched rather than files, because editors save by writing a new file and renaming it over the
/// old one, which would leave a watch on the old file's inode looking at nothing. For a scenario folder every
/// `*.json` in it counts (as `ScenarioLoader` reads them: not hidden, not `*.schema.json`); for a file given by
/// name, only that name in its folder. A write counts when the writer closes the file (`IN_CLOSE_WRITE`), never
/// half-way through, and a burst of events (save, rename, a backup file removed) becomes one reload
/// `settleMilliseconds` after the last of them — at most `maxDelayMilliseconds` after the first.
final class ScenarioWatcher {
    static let settleMilliseconds = 50
    static let maxDelayMilliseconds = 500
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)

    /// What a watched folder cares about: every scenario file, or only the named ones.
    private struct Interest {
        var allScenarioFiles = false
        var names: Set<String> = []

        func covers(_ name: String) -> Bool {
            if names.contains(name) { return true }
            return allScenarioFiles && name.hasSuffix(".json") && !name.hasPrefix(".") && !name.hasSuffix(".schema.json")
        }
    }

    private let loop: EventLoop
    private let fd: Int32
    private var event: OpaquePointer?
    private var interests: [Int32: Interest] = [:]
    private let reload: () -> Void
    private var settleTimer: LoopTimer?
    private var firstPendingAt: UInt64?

    /// Starts watching; `reload` runs on the loop thread once a burst of changes has settled.
    init(loop: EventLoop, paths: [String], reload: @escaping () -> Void) throws(ServerError) {
        self.loop = loop
        self.reload = reload
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw .system(call: "inotify_init1", errno: errno) }
        for path in paths {
            var status = stat()
            let isFolder = stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
            let (folder, name) = isFolder ? (path, "") : Self.split(path)
            let descriptor = inotify_add_watch(fd, folder, Self.mask)
            guard descriptor >= 0 else {
                let code = errno
                close(fd)
                throw .system(call: "inotify_add_watch \(folder)", errno: code)
            }
            // A folder named twice ("scenarios", "./scenarios", a file's parent) has one watch: merge the interests.
            if isFolder {
                interests[descriptor, default: Interest()].allScenarioFiles = true
            } else {
                interests[descriptor, default: Interest()].names.insert(name)
            }
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, context in
            Unmanaged<ScenarioWatcher>.fromOpaque(context!).takeUnretainedValue().readEvents()
        }, context)
        event_add(event, nil)
    }

    /// The folder and file name of `path` (`.` for a bare name).
    static func split(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let folder = String(path[..<slash])
        return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
    }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var relevant = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let (descriptor, mask, nameLength) = buffer.withUnsafeBytes { raw in
                    let header = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (header.wd, header.mask, Int(header.len))
                }
                let nameBytes = buffer[(offset + headerSize)..<min(count, offset + headerSize + nameLength)]
                let name = String(decoding: nameBytes.prefix(while: { $0 != 0 }), as: UTF8.self)
                offset += headerSize + nameLength
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    relevant = true  // events were lost: reload to be sure
                } else if let interest = interests[descriptor], interest.covers(name) {
                    relevant = true
                }
            }
        }
        if relevant { scheduleReload() }
    }

    private func scheduleReload() {
        let now = Clock.monotonicNanos() / 1_000_000
        let first = firstPendingAt ?? now
        firstPendingAt = first
        let delay = max(0, min(Self.settleMilliseconds, Self.maxDelayMilliseconds - Int(now - first)))
        settleTimer?.cancel()
        settleTimer = LoopTimer(loop: loop, milliseconds: delay) { [unowned self] in
            settleTimer = nil
            firstPendingAt = nil
            reload()
        }
    }

    /// Stops watching; loop thread only. Calling it twice is harmless.
    func stop() {
        settleTimer?.cancel()
        settleTimer = nil
        if let event {
            event_del(event)
            event_free(event)
            self.event = nil
            close(fd)
        }
    }

    deinit { stop() }
}
