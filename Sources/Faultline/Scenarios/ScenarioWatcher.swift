#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `serve --watch`: notices when a scenario file is saved, renamed or removed, and reloads once the burst of
/// changes has settled. Two ways to notice, one per platform concern (docs/PORTABILITY.md): inotify on Linux
/// (`InotifyWatch`, read from the loop like any socket) and, everywhere, polling the watched folders
/// (`PollingWatch`; `FAULTLINE_PORTABLE=1` forces it, and the reload tests run with both).
///
/// Folders are watched rather than files, because editors save by writing a new file and renaming it over the
/// old one. For a scenario folder every `*.json` in it counts (as `ScenarioLoader` reads them: not hidden, not
/// `*.schema.json`); for a file given by name, only that name in its folder. A burst of events (save, rename, a
/// backup file removed) becomes one reload `settleMilliseconds` after the last of them — at most
/// `maxDelayMilliseconds` after the first.
final class ScenarioWatcher {
    static let settleMilliseconds = 50
    static let maxDelayMilliseconds = 500
    /// How often the portable watcher looks.
    static let pollMilliseconds = 200

    /// What a watched folder cares about: every scenario file, or only the named ones.
    struct Interest {
        var allScenarioFiles = false
        var names: Set<String> = []

        func covers(_ name: String) -> Bool {
            if names.contains(name) { return true }
            return allScenarioFiles && name.hasSuffix(".json") && !name.hasPrefix(".") && !name.hasSuffix(".schema.json")
        }
    }

    private let loop: EventLoop
    private let reload: () -> Void
    private var settleTimer: LoopTimer?
    private var firstPendingAt: UInt64?
    private var stopSource: (() -> Void)?
    /// Which way it watches, for the log and the tests: "inotify" or "polling".
    private(set) var mechanism = "polling"

    /// Starts watching; `reload` runs on the loop thread once a burst of changes has settled.
    init(loop: EventLoop, paths: [String], reload: @escaping () -> Void) throws(ServerError) {
        self.loop = loop
        self.reload = reload
        // A folder named twice (a folder and a file in it) has one interest: merged.
        var folders: [String: Interest] = [:]
        var order: [String] = []
        for path in paths {
            var status = stat()
            let isFolder = stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
            let (folder, name) = isFolder ? (path, "") : Self.split(path)
            if folders[folder] == nil { order.append(folder) }
            if isFolder {
                folders[folder, default: Interest()].allScenarioFiles = true
            } else {
                folders[folder, default: Interest()].names.insert(name)
            }
        }
        let watched = order.map { ($0, folders[$0]!) }
        #if os(Linux)
        if Platform.linuxFastPaths {
            let watch = try InotifyWatch(loop: loop, folders: watched) { [unowned self] in scheduleReload() }
            stopSource = { watch.stop() }
            mechanism = "inotify"
            return
        }
        #endif
        let watch = PollingWatch(loop: loop, folders: watched, intervalMilliseconds: Self.pollMilliseconds) {
            [unowned self] in scheduleReload()
        }
        stopSource = { watch.stop() }
    }

    /// The folder and file name of `path` (`.` for a bare name).
    static func split(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let folder = String(path[..<slash])
        return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
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
        stopSource?()
        stopSource = nil
    }

    deinit { stop() }
}

/// The portable watcher: every `intervalMilliseconds`, the watched folders are listed and each file of interest
/// stat'ed; a file that appeared, went, or changed size, inode or modification time is a change.
final class PollingWatch {
    private struct Signature: Equatable {
        var size: Int64
        var inode: UInt64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int
    }

    private let loop: EventLoop
    private let folders: [(String, ScenarioWatcher.Interest)]
    private let interval: Int
    private let changed: () -> Void
    private var last: [String: Signature] = [:]
    private var timer: LoopTimer?

    init(loop: EventLoop, folders: [(String, ScenarioWatcher.Interest)], intervalMilliseconds: Int,
         changed: @escaping () -> Void) {
        self.loop = loop
        self.folders = folders
        interval = intervalMilliseconds
        self.changed = changed
        last = snapshot()
        arm()
    }

    private func arm() {
        timer = LoopTimer(loop: loop, milliseconds: interval) { [unowned self] in
            let now = snapshot()
            if now != last {
                last = now
                changed()
            }
            arm()
        }
    }

    private func snapshot() -> [String: Signature] {
        var files: [String: Signature] = [:]
        for (folder, interest) in folders {
            guard let directory = opendir(folder) else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
                }
                guard interest.covers(name) else { continue }
                let path = folder + "/" + name
                var status = stat()
                guard stat(path, &status) == 0 else { continue }
                #if os(Linux)
                let modified = status.st_mtim
                #else
                let modified = status.st_mtimespec
                #endif
                files[path] = Signature(
                    size: Int64(status.st_size), inode: UInt64(status.st_ino), modifiedSeconds: Int(modified.tv_sec),
                    modifiedNanoseconds: Int(modified.tv_nsec))
            }
        }
        return files
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }
}
