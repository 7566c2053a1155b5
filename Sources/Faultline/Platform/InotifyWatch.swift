#if os(Linux)
import CLibevent
import Glibc

/// The Linux fast path of `ScenarioWatcher`: inotify on the watched folders, read from the loop like any socket.
/// A write counts when the writer closes the file (`IN_CLOSE_WRITE`), never half-way through.
final class InotifyWatch {
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)
    private let fd: Int32
    private var event: OpaquePointer?
    private var interests: [Int32: ScenarioWatcher.Interest] = [:]
    private let changed: () -> Void

    init(loop: EventLoop, folders: [(String, ScenarioWatcher.Interest)], changed: @escaping () -> Void)
        throws(ServerError) {
        self.changed = changed
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw .system(call: "inotify_init1", errno: errno) }
        for (folder, interest) in folders {
            let descriptor = inotify_add_watch(fd, folder, Self.mask)
            guard descriptor >= 0 else {
                let code = errno
                Posix.close(fd)
                throw .system(call: "inotify_add_watch \(folder)", errno: code)
            }
            // The same folder under two names ("scenarios", "./scenarios") has one watch: merge the interests.
            interests[descriptor, default: ScenarioWatcher.Interest()].allScenarioFiles =
                interests[descriptor]?.allScenarioFiles == true || interest.allScenarioFiles
            interests[descriptor, default: ScenarioWatcher.Interest()].names.formUnion(interest.names)
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, context in
            Unmanaged<InotifyWatch>.fromOpaque(context!).takeUnretainedValue().readEvents()
        }, context)
        event_add(event, nil)
    }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var relevant = false
        while true {
            let count = buffer.withUnsafeMutableBytes { Posix.read(fd, $0.baseAddress!, $0.count) }
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
        if relevant { changed() }
    }

    func stop() {
        if let event {
            event_del(event)
            event_free(event)
            self.event = nil
            Posix.close(fd)
        }
    }

    deinit { stop() }
}
#endif
