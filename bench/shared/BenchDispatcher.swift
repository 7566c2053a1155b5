import FaultlineCore

#if canImport(Glibc)
import Glibc
#endif

/// What the hot-path benchmarks share (bench/hotpath, bench/hotpath-h2; scripts/hotpath.sh compiles this file into
/// each): loading the scenario without Foundation, and what the server's Dispatcher does for a codec minus the
/// sockets — decide the request, journal it, and record how its exchange ended.
final class BenchDispatcher {
    let engine: Engine
    // As in the server's core: loop-confined state, no run-time exclusivity checks.
    @exclusivity(unchecked) var journal = Journal(capacity: 10_000, maxBodyBytes: 65_536)
    @exclusivity(unchecked) var completed = 0

    init(scenarioPath path: String) throws {
        let scenario = try ScenarioLoader.load(bytes: try Self.readAll(path), file: path, directory: nil)
        engine = Engine(scenarios: [scenario])
    }

    func dispatch(_ request: HTTPRequest, _ context: RequestContext) -> Exchange {
        let decision = engine.decide(
            request, requestID: journal.nextSequence, connectionRequestIndex: context.indexOnConnection,
            client: "127.0.0.1",
            now: EngineInstant(monotonicMilliseconds: context.arrival.monotonicNanos / 1_000_000, wallSeconds: 0),
            attempt: Retries.Attempt(connection: 1, arrivedAtNanos: context.arrival.monotonicNanos))
        var entry = JournalEntry(
            receivedAtWall: context.arrival.wall, receivedAtMonotonicNanos: context.arrival.monotonicNanos,
            connectionID: 1, indexOnConnection: context.indexOnConnection, clientAddress: "127.0.0.1:40000",
            head: request.head, body: request.body, bodySize: request.body.count)
        entry.record(decision)
        return Exchange(sequence: journal.record(consume entry), script: decision.script)
    }

    func finished(_ exchange: Exchange, _ outcome: ExchangeOutcome) {
        guard let sequence = exchange.sequence else { return }
        completed += 1
        let bytes = exchange.bytesWritten
        journal.update(sequence) {
            $0.outcome = outcome
            $0.bytesWritten = bytes
        }
    }

    static func readAll(_ path: String) throws -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw BenchError.unreadable(path) }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    enum BenchError: Error { case unreadable(String) }
}
