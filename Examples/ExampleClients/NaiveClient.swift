import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client Faultline exists to catch: it retries everything at once, POSTs included and without a key,
/// ignores `Retry-After`, retries 4xx, and every request that sees a 401 refreshes the token itself.
public final class NaiveClient: Sendable {
    let baseURL: URL
    let session: URLSession
    let tokenPath: String
    let token: TokenBox

    public init(baseURL: URL, tokenPath: String = "/oauth/token", initialToken: String? = nil) {
        self.baseURL = baseURL
        self.tokenPath = tokenPath
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 2
        session = URLSession(configuration: configuration)
        token = TokenBox(initialToken)
    }

    /// Tries up to `attempts` times, whatever happened, with no pause. Returns the last status (0: no answer).
    @discardableResult
    public func send(_ method: String, _ path: String, json: [String: Any]? = nil, attempts: Int = 4) async -> Int {
        var status = 0
        for _ in 0..<attempts {
            var request = URLRequest(url: baseURL.appendingPathComponent(path))
            request.httpMethod = method
            if let json { request.httpBody = try? JSONSerialization.data(withJSONObject: json) }
            if let current = token.value { request.setValue("Bearer \(current)", forHTTPHeaderField: "Authorization") }
            guard let (_, response) = try? await session.data(for: request) else { continue }
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if status == 401 { await refresh() }
            if (200..<300).contains(status) { return status }
        }
        return status
    }

    private func refresh() async {
        if let fresh = try? await CarefulClient.fetchToken(session: session, url: baseURL.appendingPathComponent(tokenPath)) {
            token.value = fresh
        }
    }
}

/// A token shared without coordination, as naive clients do.
final class TokenBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: String?

    init(_ value: String?) { stored = value }

    var value: String? {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}
