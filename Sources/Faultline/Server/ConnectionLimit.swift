/// How many client connections the stub ports hold at once (`serve --max-connections`, ARCHITECTURE §3).
///
/// A client that opens connections without end (a leak in the code under test, a load test pointed at the stub)
/// must not take the server down, and every test sharing it, by exhausting its descriptors. So:
/// - up to `limit` connections open on the plain and TLS ports: served as always;
/// - the next `overflow`: accepted, and each request on them gets 503 with `Retry-After` and a close (over HTTP/2, a
///   503 per stream), journaled under the route `connection-limit`; admin API calls on them are served, so a test
///   can still ask what happened;
/// - past those: closed as soon as accepted, journaled as a connection entry that says why;
/// - when accept fails because the process is out of descriptors (EMFILE, ENFILE: the limit was set above what
///   RLIMIT_NOFILE allows, or upstream connections and files used the rest), the server closes a spare descriptor
///   kept for this, accepts the waiting connection, journals it and closes it, and opens the spare again
///   (`ServerCore.acceptFailed`), so that the backlog does not fill with clients waiting for an answer that never
///   comes.
/// The admin-only port (`--admin-port`) does not count and is never refused. The default limit leaves `reserve`
/// descriptors below RLIMIT_NOFILE for the rest: listeners, the journal file, upstream connections, the admin port.
package struct ConnectionLimit: Equatable {
    /// Client connections served normally.
    let limit: Int
    /// Connections accepted past `limit` to be told so with a 503.
    static let overflow = 32
    /// Descriptors the default limit leaves below RLIMIT_NOFILE.
    static let reserve = 64

    enum Admission: Equatable {
        /// Served as always.
        case within
        /// Accepted past the limit: its requests get 503 and a close.
        case pastLimit
        /// Closed at once.
        case refused
    }

    init(configured: Int?, descriptorLimit: Int?) {
        limit = configured ?? Self.defaultLimit(descriptorLimit: descriptorLimit)
    }

    /// The limit when none is configured: RLIMIT_NOFILE less `reserve` and `overflow`, at least 16; 1,000,000 when
    /// the descriptor limit is unknown or unlimited.
    static func defaultLimit(descriptorLimit: Int?) -> Int {
        guard let descriptorLimit, descriptorLimit < 1_000_000 + reserve + overflow else { return 1_000_000 }
        return max(16, descriptorLimit - reserve - overflow)
    }

    /// What becomes of a new connection when `open` stub connections are open already.
    func admit(open: Int) -> Admission {
        if open < limit { return .within }
        return open < limit + Self.overflow ? .pastLimit : .refused
    }

    /// When the configured limit leaves too few descriptors below this process's RLIMIT_NOFILE: the warning
    /// `serve` prints.
    package static func warning(configured: Int?) -> String? {
        warning(configured: configured, descriptorLimit: Posix.descriptorLimit())
    }

    static func warning(configured: Int?, descriptorLimit: Int?) -> String? {
        guard let configured, let descriptorLimit, configured + overflow + reserve > descriptorLimit else { return nil }
        return "--max-connections \(configured) leaves fewer than \(reserve) of the \(descriptorLimit) descriptors "
            + "this process may open (ulimit -n) for the rest; when they run out, new connections are closed at "
            + "once (journaled), and the admin API may go unanswered until some close"
    }
}
