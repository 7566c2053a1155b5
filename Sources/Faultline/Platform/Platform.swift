#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Platform-specific code lives in one small file per concern (ARCHITECTURE §1, docs/PORTABILITY.md): the loop's
/// wake-up (`WakeChannel`), the scenario watcher (`ScenarioWatcher`), socket options (`SocketOptions`). Each has a
/// portable path that every platform can run and, where Linux has a faster or more precise call, a Linux fast
/// path. `FAULTLINE_PORTABLE=1` in the environment forces the portable path of every concern, so the tests on
/// Linux prove the code a Mac runs.
enum Platform {
    /// Whether the portable paths are forced (`FAULTLINE_PORTABLE=1`). Read once.
    static let forcePortable: Bool = {
        guard let value = getenv("FAULTLINE_PORTABLE") else { return false }
        return String(cString: value) == "1"
    }()

    /// Whether the Linux fast paths may be used: on Linux, unless the portable paths are forced.
    static var linuxFastPaths: Bool {
        #if os(Linux)
        return !forcePortable
        #else
        return false
        #endif
    }

    /// The current user's cache folder: `~/Library/Caches` on macOS; elsewhere `$XDG_CACHE_HOME` when it is an
    /// absolute path (XDG Base Directory Specification: a relative one is to be ignored), else `~/.cache`. The home
    /// folder is `$HOME`, or the password database's entry when `HOME` is unset.
    static func userCacheDirectory() -> String {
        #if os(macOS)
        return homeDirectory() + "/Library/Caches"
        #else
        if let value = getenv("XDG_CACHE_HOME"), case let path = String(cString: value), path.hasPrefix("/") {
            return path
        }
        return homeDirectory() + "/.cache"
        #endif
    }

    /// `$HOME`, else the home folder in the password database, else `/tmp` (a user with neither has nowhere better).
    private static func homeDirectory() -> String {
        if let value = getenv("HOME"), value.pointee != 0 { return String(cString: value) }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { return String(cString: directory) }
        return "/tmp"
    }
}

/// POSIX calls by a name that no type's method shadows (a class with a `close()` method cannot call the C
/// `close` unqualified), spelled for the platform's C module.
enum Posix {
    @discardableResult
    static func close(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
        return Glibc.close(fd)
        #else
        return Darwin.close(fd)
        #endif
    }

    static func write(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        return Glibc.write(fd, bytes, count)
        #else
        return Darwin.write(fd, bytes, count)
        #endif
    }

    static func read(_ fd: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        return Glibc.read(fd, bytes, count)
        #else
        return Darwin.read(fd, bytes, count)
        #endif
    }

    /// The soft limit on open descriptors (RLIMIT_NOFILE); nil when there is none or it cannot be read.
    static func descriptorLimit() -> Int? {
        var limit = rlimit()
        #if canImport(Glibc)
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        #else
        guard getrlimit(RLIMIT_NOFILE, &limit) == 0 else { return nil }
        #endif
        // RLIM_INFINITY is all ones on Linux, 2^63 − 1 on Darwin: either way, no Int below it.
        return limit.rlim_cur >= rlim_t(Int.max) ? nil : Int(limit.rlim_cur)
    }

    /// Non-blocking and close-on-exec, the way every descriptor of the server's own is opened.
    static func makeNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
}
