import FaultlineCore

/// What `faultline record` saw: every proxied exchange that got a response, in order, until it is written as
/// a scenario (`RecordingWriter`). Bounded: past `maxExchanges` exchanges or `maxBytes` of bodies, further
/// exchanges are counted, not kept. Loop thread only.
final class ProxyRecording {
    static let maxExchanges = 10_000
    static let maxBytes = 256 * 1024 * 1024

    @exclusivity(unchecked) private(set) var exchanges: [RecordedExchange] = []
    @exclusivity(unchecked) private(set) var dropped = 0
    @exclusivity(unchecked) private var bytes = 0

    /// How many more body bytes may be kept: a streamed body larger than this is passed on, not recorded.
    var remainingBytes: Int { max(Self.maxBytes - bytes, 0) }

    /// An exchange that could not be kept (a streamed body over `remainingBytes`): counted.
    func drop() { dropped += 1 }

    func record(_ request: HTTPRequest, _ response: UpstreamResponse, milliseconds: Double) {
        let size = request.body.count + response.body.count
        guard exchanges.count < Self.maxExchanges, bytes + size <= Self.maxBytes else {
            dropped += 1
            return
        }
        bytes += size
        exchanges.append(RecordedExchange(
            method: request.method, target: request.target,
            requestHeaders: request.headers.fields.filter { !$0.name.hasPrefix(":") }, requestBody: request.body,
            status: response.status,
            responseHeaders: ProxyHeaders.clientResponse(response, requestMethod: request.method).fields
                .filter { !$0.name.caseInsensitiveEquals("via") || $0.value != ProxyHeaders.via },
            responseBody: response.body, milliseconds: milliseconds))
    }
}
