import FaultlineTLS
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The folder where the certificate authority keeps its keys and certificates. It must belong to the current user
/// and be writable by nobody else: anyone who can replace `ca-key.pem` can mint certificates that every client
/// trusting the exported CA accepts.
struct CAStateFolder: Sendable {
    /// The folder's path, as given.
    let path: String

    /// Uses the folder at `path`, creating it and any missing parents with mode 0700. Throws, naming the folder,
    /// when it is not a folder, belongs to another user, or is writable by its group or by others.
    init(path: String) throws(TLSSetupError) {
        self.path = path
        try Self.makeFolders(path)
        try Self.checkPrivate(path)
        try Self.makeFolders(path + "/keys")
        try Self.checkPrivate(path + "/keys")
    }

    /// Runs `body` holding an exclusive `flock` on `<folder>/lock`, so that processes starting at the same time
    /// on a fresh folder create the authority once and the others then read it. The lock is released when the
    /// descriptor closes, also if the process dies.
    func withLock<T>(_ body: () throws(TLSSetupError) -> T) throws(TLSSetupError) -> T {
        let lockPath = path + "/lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system("open", lockPath, errno) }
        defer { Posix.close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .system("flock", lockPath, errno) }
        }
        return try body()
    }

    /// The contents of the file `name` in the folder, or nil when there is no such file.
    func read(_ name: String) throws(TLSSetupError) -> [UInt8]? {
        try Self.readFile(path + "/" + name)
    }

    /// Writes `text` to the file `name` in the folder, whole or not at all (see `writeFile`).
    func write(_ text: String, to name: String, mode: mode_t) throws(TLSSetupError) {
        try Self.writeFile(Array(text.utf8), to: path + "/" + name, mode: mode)
    }

    /// The contents of the file at `path`, or nil when there is no such file.
    static func readFile(_ path: String) throws(TLSSetupError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw .system("open", path, errno)
        }
        defer { Posix.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Posix.read(fd, $0.baseAddress!, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system("read", path, errno)
            }
            bytes += chunk[0..<count]
        }
    }

    /// Writes `bytes` to a new file beside `path`, created with `mode` (O_CREAT|O_EXCL, so a private key is never
    /// readable by others, not even for a moment), flushes it to disk, and renames it over `path`: a reader sees
    /// the old file or the whole new one, never part of it.
    static func writeFile(_ bytes: [UInt8], to path: String, mode: mode_t) throws(TLSSetupError) {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) + "/" } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = folder + ".\(name).tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .system("open", temporary, errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Posix.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                Posix.close(fd)
                throw .system("write", temporary, code)
            }
            written += count
        }
        guard fsync(fd) == 0 else {
            let code = errno
            Posix.close(fd)
            throw .system("fsync", temporary, code)
        }
        guard Posix.close(fd) == 0 else { throw .system("close", temporary, errno) }
        guard rename(temporary, path) == 0 else { throw .system("rename", path, errno) }
        renamed = true
    }

    /// `mkdir -p` with mode 0700 for every folder it creates.
    private static func makeFolders(_ path: String) throws(TLSSetupError) {
        guard !path.isEmpty else { throw TLSSetupError("the TLS state folder path is empty") }
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw .system("mkdir", prefix, errno) }
        }
    }

    /// Refuses a folder that another user owns or that its group or others may write to.
    private static func checkPrivate(_ path: String) throws(TLSSetupError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .system("stat", path, errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw TLSSetupError("the TLS state folder \(path) is not a folder")
        }
        guard info.st_uid == geteuid() else {
            throw TLSSetupError(
                "the TLS state folder \(path) belongs to user id \(info.st_uid), not to you (\(geteuid())); "
                    + "it holds the CA's private keys, so faultline uses only a folder of your own")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o022 == 0 else {
            throw TLSSetupError(
                "the TLS state folder \(path) has mode \(String(mode, radix: 8)), writable by "
                    + (mode & 0o022 == 0o022 ? "its group and others" : mode & 0o020 != 0 ? "its group" : "others")
                    + "; it holds the CA's private keys: run chmod 700 \(path)")
        }
    }
}
