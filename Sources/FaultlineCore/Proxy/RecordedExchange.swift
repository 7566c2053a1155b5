/// One request `faultline record` forwarded and the upstream's answer (end-to-end fields only), with how long
/// the upstream took: the input of `RecordingWriter`.
package struct RecordedExchange: Sendable, Equatable {
    package var method: String
    package var target: String
    package var requestHeaders: [(name: String, value: String)]
    package var requestBody: [UInt8]
    package var status: Int
    package var responseHeaders: [(name: String, value: String)]
    package var responseBody: [UInt8]
    package var milliseconds: Double

    package init(
        method: String, target: String, requestHeaders: [(name: String, value: String)] = [], requestBody: [UInt8] = [],
        status: Int, responseHeaders: [(name: String, value: String)] = [], responseBody: [UInt8] = [],
        milliseconds: Double = 0
    ) {
        self.method = method
        self.target = target
        self.requestHeaders = requestHeaders
        self.requestBody = requestBody
        self.status = status
        self.responseHeaders = responseHeaders
        self.responseBody = responseBody
        self.milliseconds = milliseconds
    }

    package static func == (lhs: RecordedExchange, rhs: RecordedExchange) -> Bool {
        lhs.method == rhs.method && lhs.target == rhs.target && lhs.requestBody == rhs.requestBody
            && lhs.status == rhs.status && lhs.responseBody == rhs.responseBody && lhs.milliseconds == rhs.milliseconds
            && lhs.requestHeaders.map(\.name) == rhs.requestHeaders.map(\.name)
            && lhs.requestHeaders.map(\.value) == rhs.requestHeaders.map(\.value)
            && lhs.responseHeaders.map(\.name) == rhs.responseHeaders.map(\.name)
            && lhs.responseHeaders.map(\.value) == rhs.responseHeaders.map(\.value)
    }
}
