/// The named faults a scenario step may ask for (DESIGN §3). Each is built into wire actions by
/// `ResponsePlanner`; the loader rejects any other name.
public enum FaultName: String, Sendable, CaseIterable {
    case reset
    case emptyReply = "empty-reply"
    case halfClose = "half-close"
    case closeAfterHeaders = "close-after-headers"
    case truncateBody = "truncate-body"
    case overlongBody = "overlong-body"
    case malformedChunk = "malformed-chunk"
    case garbage
    case hang
    case stallAfterHeaders = "stall-after-headers"
    case corruptJSON = "corrupt-json"
    case truncatedJSON = "truncated-json"
    case wrongContentType = "wrong-content-type"
    case htmlErrorPage = "html-error-page"
    case badGzip = "bad-gzip"
    /// Apply the route's side effect (create the resource, store the idempotent response), then reset:
    /// the "unknown outcome" a client must reconcile by retrying with the same key.
    case commitThenReset = "commit-then-reset"
    /// Like `commit-then-reset`, but the connection hangs instead (the client times out).
    case commitThenHang = "commit-then-hang"
}
