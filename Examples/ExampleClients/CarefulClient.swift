import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An API client written the way a careful team writes one, to show what Faultline's verdicts expect:
/// typed errors, retries only for replayable requests, `Retry-After` honoured, exponential backoff with
/// jitter, a single-flight token refresh, and idempotency keys that make a POST safe to retry.
public final class CarefulClient: Sendable {
    /// What can go wrong, as a caller needs to tell it apart.
    public enum Failure: Error, Equatable {
        /// The server answered, with a status the caller must handle.
        case status(Int)
        /// The request may or may not have reached the server (reset, timeout); retries ran out.
        case transport(URLError.Code)
        /// The body was not what the API promises.
        case undecodable
        /// The token could not be refreshed.
        case unauthorized
    }

    let baseURL: URL
    let session: URLSession
    let maxAttempts: Int
    let baseDelay: Double
    let tokens: TokenStore
    private let random = RandomSource()

    public init(baseURL: URL, tokenPath: String = "/oauth/token", initialToken: String? = nil, maxAttempts: Int = 4,
                baseDelay: Double = 0.05, requestTimeout: TimeInterval = 2) {
        self.baseURL = baseURL
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = requestTimeout
        session = URLSession(configuration: configuration)
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        tokens = TokenStore(token: initialToken, refresh: { [session] in
            try await Self.fetchToken(session: session, url: baseURL.appendingPathComponent(tokenPath))
        })
    }

    /// GET a JSON object, retrying what is safe to retry.
    public func get(_ path: String) async throws(Failure) -> [String: Any] {
        try await send(method: "GET", path: path, body: nil, idempotencyKey: nil)
    }

    /// POST a JSON object. One idempotency key for every attempt: a retry after a reset cannot create a
    /// second resource.
    public func post(_ path: String, json: [String: Any]) async throws(Failure) -> [String: Any] {
        let body = try? JSONSerialization.data(withJSONObject: json)
        return try await send(method: "POST", path: path, body: body, idempotencyKey: UUID().uuidString)
    }

    private func send(method: String, path: String, body: Data?, idempotencyKey: String?) async throws(Failure)
        -> [String: Any] {
        // A POST is replayable only with its key; without one it is sent once.
        let replayable = method == "GET" || idempotencyKey != nil
        var refreshed = false
        var attempt = 0
        while true {
            attempt += 1
            var request = URLRequest(url: baseURL.appendingPathComponent(path))
            request.httpMethod = method
            request.httpBody = body
            if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
            if let idempotencyKey { request.setValue("\"\(idempotencyKey)\"", forHTTPHeaderField: "Idempotency-Key") }
            let token = await tokens.current()
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            let data: Data
            let response: HTTPURLResponse
            do {
                let (received, answer) = try await session.data(for: request)
                data = received
                response = answer as! HTTPURLResponse
            } catch let error as URLError {
                guard replayable, attempt < maxAttempts else { throw .transport(error.code) }
                await pause(seconds: backoff(attempt))
                continue
            } catch {
                throw .transport(.unknown)
            }
            switch response.statusCode {
            case 200..<300:
                guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                    throw .undecodable
                }
                return object
            case 401 where !refreshed:
                // Every concurrent 401 awaits the same refresh.
                refreshed = true
                do { try await tokens.refresh(after: token) } catch { throw .unauthorized }
                attempt -= 1
            case 429, 503:
                guard replayable, attempt < maxAttempts else { throw .status(response.statusCode) }
                let asked = Self.retryAfter(response.value(forHTTPHeaderField: "Retry-After"))
                await pause(seconds: max(asked ?? 0, backoff(attempt)))
            case 500, 502, 504:
                guard replayable, attempt < maxAttempts else { throw .status(response.statusCode) }
                await pause(seconds: backoff(attempt))
            default:
                // 4xx: sending the same request again would get the same answer.
                throw .status(response.statusCode)
            }
        }
    }

    /// Exponential backoff with equal jitter: uniform in [base·2^(n−1)/2, base·2^(n−1)].
    func backoff(_ attempt: Int) -> Double {
        let ceiling = baseDelay * pow(2, Double(attempt - 1))
        return ceiling / 2 + random.unit() * ceiling / 2
    }

    /// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in seconds from now.
    static func retryAfter(_ value: String?) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Double(value) { return seconds }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) + 0.001 }
    }

    private func pause(seconds: Double) async {
        try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
    }

    static func fetchToken(session: URLSession, url: URL) async throws -> String {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("grant_type=client_credentials".utf8)
        let (data, response) = try await session.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200,
              let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let token = object["access_token"] as? String else { throw URLError(.userAuthenticationRequired) }
        return token
    }
}

/// Single-flight token refresh: whoever sees a 401 first starts the refresh; everyone else awaits that one.
actor TokenStore {
    private var token: String?
    private var inFlight: Task<String, Error>?
    private let fetch: @Sendable () async throws -> String

    init(token: String?, refresh: @escaping @Sendable () async throws -> String) {
        self.token = token
        fetch = refresh
    }

    func current() -> String? { token }

    /// Refreshes unless someone already replaced `stale` (then their token is used).
    func refresh(after stale: String?) async throws {
        if token != stale, token != nil { return }
        if let inFlight {
            // The refresher may not have stored the token yet when we resume: store it ourselves.
            token = try await inFlight.value
            return
        }
        let task = Task { try await fetch() }
        inFlight = task
        defer { inFlight = nil }
        token = try await task.value
    }
}

/// Jitter needs randomness; a lock keeps it usable from concurrent requests.
final class RandomSource: @unchecked Sendable {
    private let lock = NSLock()
    private var generator = SystemRandomNumberGenerator()

    func unit() -> Double {
        lock.lock()
        defer { lock.unlock() }
        return Double.random(in: 0..<1, using: &generator)
    }
}
