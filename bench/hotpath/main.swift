import FaultlineCore

/// The CPU work of one keep-alive request without sockets: parse wrk's request, journal it, decide it against
/// the benchmark's stub (bench/plain-json.json) and complete it, as the Dispatcher and the HTTP/1.1 codec do. Run N times by
/// `scripts/hotpath.sh`, which counts instructions with callgrind: a figure that does not depend on a noisy
/// machine, for telling whether a change to the request path made it cheaper.
@main
struct HotPath {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 3, let requests = Int(arguments[2]) else {
            print("usage: hotpath SCENARIO.json REQUESTS")
            return
        }
        let path = arguments[1]
        let bytes = try readAll(path)
        let scenario = try ScenarioLoader.load(bytes: bytes, file: path, directory: nil)
        let engine = Engine(scenarios: [scenario])
        var journal = Journal(capacity: 10_000, maxBodyBytes: 65_536)
        var parser = HTTPRequestParser()
        let request = Array("GET /item HTTP/1.1\r\nHost: 127.0.0.1:18081\r\n\r\n".utf8)
        var written = 0
        var output: [UInt8] = []
        output.reserveCapacity(4096)
        for index in 0..<requests {
            parser.append(request)
            while let event = parser.next() {
                guard case .request(let request) = event else { continue }
                var entry = JournalEntry(
                    receivedAtWall: 0, receivedAtMonotonicNanos: UInt64(index), connectionID: 1, indexOnConnection: index,
                    clientAddress: "127.0.0.1:40000", head: request.head, body: request.body, bodySize: request.body.count)
                let decision = engine.decide(
                    request, requestID: journal.nextSequence, connectionRequestIndex: index, client: "127.0.0.1",
                    now: EngineInstant(monotonicMilliseconds: UInt64(index), wallSeconds: 0), connection: 1)
                entry.scenario = decision.scenario
                entry.scenarioVersion = decision.scenarioVersion
                entry.route = decision.route
                entry.step = decision.step
                entry.status = decision.script.status
                entry.notes = decision.notes
                let sequence = journal.record(consume entry)
                // What the HTTP/1.1 codec does with the script: render its steps into one reused output buffer.
                var renderer = HTTP1Renderer()
                for step in decision.script.steps { renderer.render(step, into: &output) }
                written += output.count
                output.removeAll(keepingCapacity: true)
                journal.update(sequence) {
                    $0.outcome = .completed
                    $0.bytesWritten = written
                }
            }
        }
        guard journal.totalRecorded == requests else { fatalError("journaled \(journal.totalRecorded) of \(requests)") }
        print("\(requests) requests, \(written) response bytes")
    }

    static func readAll(_ path: String) throws -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw HotPathError.unreadable(path) }
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

    enum HotPathError: Error { case unreadable(String) }
}

#if canImport(Glibc)
import Glibc
#endif
