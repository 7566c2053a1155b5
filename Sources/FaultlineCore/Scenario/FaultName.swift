/// The named faults a scenario step may ask for (ARCHITECTURE §5). Each is built into protocol-neutral script
/// steps by `ResponsePlanner`; the loader rejects any other name. Each trait below is an exhaustive switch, so a
/// new fault that forgets one does not compile.
package enum FaultName: String, Sendable, CaseIterable {
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
    /// Over TLS: the body without Content-Length (it ends with the connection), then TCP's FIN without TLS's
    /// close_notify — the truncation a TLS client detects only by the missing close_notify. `bytes` cuts the
    /// body short. Over plain HTTP it is a close-delimited body and a FIN, which a client cannot tell from a
    /// complete one.
    case noCloseNotify = "no-close-notify"
    /// HTTP/2: RST_STREAM with a code (`REFUSED_STREAM`, `CANCEL`, …) before the head, after it, or mid-body.
    /// The connection and its other streams go on. `REFUSED_STREAM` tells the client the request was not
    /// processed (RFC 9113 §8.7): the journal says `not-processed`, and the route's effects do not happen.
    case rstStream = "rst-stream"
    /// HTTP/2: GOAWAY naming a last stream id (a number, `current` or `previous`) and an error code, optionally
    /// after a graceful shutdown notice. Streams above the last id are not processed; the connection closes once
    /// the others are done.
    case goaway
    /// HTTP/2: bytes written straight to the connection, framed by no codec (`base64`, or a `preset`: a bad
    /// HPACK block, a CONTINUATION flood, a frame on stream 0 that must not be there). The client's reaction is
    /// the test; the stream then hangs until the client closes.
    case rawFrames = "raw-frames"
}

extension FaultName {
    /// The protocols whose codec can render this fault's steps. The faults that break HTTP/1.1's own framing
    /// (`raw` steps) exist only there; the rest are heads, bodies and aborts, which HTTP/2 renders as frames.
    package var protocols: Set<ExchangeProtocol> {
        switch self {
        case .overlongBody, .malformedChunk, .garbage, .noCloseNotify:
            return [.http1]
        case .rstStream, .goaway, .rawFrames:
            return [.http2]
        case .reset, .emptyReply, .halfClose, .closeAfterHeaders, .truncateBody, .hang, .stallAfterHeaders,
             .corruptJSON, .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip, .commitThenReset,
             .commitThenHang:
            return [.http1, .http2]
        }
    }

    /// `commit-then-reset` / `commit-then-hang`: the route's work is committed (and an idempotent answer stored)
    /// before the connection breaks — the unknown outcome.
    var commits: Bool {
        switch self {
        case .commitThenReset, .commitThenHang:
            return true
        case .reset, .emptyReply, .halfClose, .closeAfterHeaders, .truncateBody, .overlongBody, .malformedChunk,
             .garbage, .hang, .stallAfterHeaders, .corruptJSON, .truncatedJSON, .wrongContentType, .htmlErrorPage,
             .badGzip, .noCloseNotify, .rstStream, .goaway, .rawFrames:
            return false
        }
    }

    /// Faults that rewrite the body's bytes, and so work on a copy of it: the loader refuses them on a large
    /// generated resource body (ARCHITECTURE §4b), which every other fault sends as slices.
    var rewritesBody: Bool {
        switch self {
        case .corruptJSON, .truncatedJSON, .malformedChunk:
            return true
        case .reset, .emptyReply, .halfClose, .closeAfterHeaders, .truncateBody, .overlongBody, .garbage, .hang,
             .stallAfterHeaders, .wrongContentType, .htmlErrorPage, .badGzip, .commitThenReset, .commitThenHang,
             .noCloseNotify, .rstStream, .goaway, .rawFrames:
            return false
        }
    }

    /// Faults that break a body need one to break.
    var needsBody: Bool {
        switch self {
        case .truncateBody, .overlongBody, .malformedChunk, .corruptJSON, .truncatedJSON, .closeAfterHeaders,
             .stallAfterHeaders, .noCloseNotify:
            return true
        case .reset, .emptyReply, .halfClose, .garbage, .hang, .wrongContentType, .htmlErrorPage, .badGzip,
             .commitThenReset, .commitThenHang, .rstStream, .goaway, .rawFrames:
            return false
        }
    }

    /// Faults after which the connection is still usable for the next request.
    var keepsConnection: Bool {
        switch self {
        case .corruptJSON, .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip, .rstStream, .goaway:
            // HTTP/2's stream faults leave the connection (GOAWAY closes it itself once its streams are done).
            return true
        case .rawFrames:
            return false
        case .reset, .emptyReply, .halfClose, .closeAfterHeaders, .truncateBody, .overlongBody, .malformedChunk,
             .garbage, .hang, .stallAfterHeaders, .commitThenReset, .commitThenHang, .noCloseNotify:
            return false
        }
    }

    /// Whether the fault sends a response head (the journal's status is the status sent); `after` is the
    /// half-close's prefix.
    func sendsHead(_ after: HalfCloseAfter) -> Bool {
        switch self {
        case .reset, .emptyReply, .garbage, .hang, .commitThenReset, .commitThenHang, .rawFrames:
            return false
        case .rstStream:
            return after != .nothing
        case .goaway:
            return true
        case .halfClose:
            return after != .nothing
        case .closeAfterHeaders, .truncateBody, .overlongBody, .malformedChunk, .stallAfterHeaders, .corruptJSON,
             .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip, .noCloseNotify:
            return true
        }
    }

    /// Whether the fault sends something of the response it breaks. A `proxy` step's fault acts on the
    /// upstream's response, so one that sends none of it (its request would be forwarded for nothing) is refused
    /// there: `commit-then-reset` and `commit-then-hang` say "forward, then break the connection" (ARCHITECTURE §4d).
    package var usesResponse: Bool {
        switch self {
        case .reset, .emptyReply, .garbage, .hang, .rawFrames:
            return false
        case .halfClose, .closeAfterHeaders, .truncateBody, .overlongBody, .malformedChunk, .stallAfterHeaders,
             .corruptJSON, .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip, .commitThenReset,
             .commitThenHang, .noCloseNotify, .rstStream, .goaway:
            return true
        }
    }

    /// How the fault breaks a response of which it sends only the head and a prefix of the body — all it needs of
    /// the body is that prefix, so a proxied body can be cut as it streams, with the same bytes as the whole path
    /// (ARCHITECTURE §4d) —; nil for a fault that sends no head, rewrites or re-frames the body, sends all of it, or
    /// (`half-close`) is played on a body read whole. `after` is `rst-stream`'s point, `code` its error code. The
    /// one definition `ResponsePlanner.faultSteps` slices by and `ProxyPlan.streamOpening` counts by.
    package func bodyCut(after: HalfCloseAfter, code: HTTP2ErrorCode?) -> BodyCut? {
        switch self {
        case .truncateBody:
            return BodyCut(point: .afterPrefix, headCloses: true, ending: .abortExchange)
        case .closeAfterHeaders:
            return BodyCut(point: .afterHead, headCloses: false, ending: .abortExchange)
        case .stallAfterHeaders:
            return BodyCut(point: .afterHead, headCloses: false, ending: .hang)
        case .rstStream:
            let reset = ScriptStep.http2(.resetStream(code: (code ?? .internalError).rawValue))
            switch after {
            case .nothing: return nil
            case .headers: return BodyCut(point: .afterHead, headCloses: false, ending: reset)
            case .body: return BodyCut(point: .afterPrefix, headCloses: false, ending: reset)
            }
        case .reset, .emptyReply, .halfClose, .overlongBody, .malformedChunk, .garbage, .hang, .corruptJSON,
             .truncatedJSON, .wrongContentType, .htmlErrorPage, .badGzip, .commitThenReset, .commitThenHang,
             .noCloseNotify, .goaway, .rawFrames:
            return nil
        }
    }

    /// The parameters a scenario may give the fault besides its `type` (`ScenarioLoader.faultSpec` refuses others).
    var parameters: [String] {
        switch self {
        case .halfClose: return ["after", "bytes"]
        case .truncateBody, .overlongBody, .garbage, .noCloseNotify: return ["bytes"]
        case .malformedChunk: return ["variant"]
        case .rstStream: return ["code", "after", "bytes"]
        case .goaway: return ["code", "lastStreamId", "graceful"]
        case .rawFrames: return ["base64", "preset"]
        case .reset, .emptyReply, .closeAfterHeaders, .hang, .stallAfterHeaders, .corruptJSON, .truncatedJSON,
             .wrongContentType, .htmlErrorPage, .badGzip, .commitThenReset, .commitThenHang:
            return []
        }
    }
}

/// How a fault that sends the head and a prefix of the body breaks the response (`FaultName.bodyCut`): the head,
/// the body up to `point`, then `ending`.
package struct BodyCut: Sendable, Equatable {
    /// Where the body stops.
    package enum Point: Sendable, Equatable {
        /// Right after the head: no body byte goes out.
        case afterHead
        /// After `FaultSpec.cutPrefix(ofBodyLength:)` bytes of it.
        case afterPrefix
    }

    package var point: Point
    /// The head says `Connection: close` (HTTP/1.1): the cut body will not be followed by another response.
    package var headCloses: Bool
    /// What breaks the response after the prefix: `abortExchange`, `hang`, an HTTP/2 RST_STREAM.
    package var ending: ScriptStep
}

extension FaultSpec {
    /// `name.bodyCut` with this fault's parameters.
    package var bodyCut: BodyCut? { name.bodyCut(after: after, code: code) }

    /// The body bytes sent before `cut`, of a body of `length`.
    package func sentBeforeCut(_ cut: BodyCut, ofBodyLength length: Int) -> Int {
        switch cut.point {
        case .afterHead: return 0
        case .afterPrefix: return cutPrefix(ofBodyLength: length)
        }
    }
}
