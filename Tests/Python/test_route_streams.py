"""Seeded choices per route and per `sequenceBy` partition, against a live `faultline serve` with concurrent
real clients (requests sessions in threads): a route's (and partition's) chaos sequence is the same whatever
the other clients did and however the threads interleaved."""

import random
import threading

import requests

TIMEOUT_S = 10
CLIENTS = ["alpha", "bravo", "charlie", "delta"]
PER_CLIENT = 24

SCENARIO = {
    "name": "streams",
    "seed": 2024,
    "routes": [
        {"id": "cases", "match": {"method": "GET", "path": "/cases"}, "sequenceBy": "header:X-Client",
         "chaos": {"rate": 0.5, "faults": ["status:503", "status:500", "status:502"]},
         "responses": [{"status": 200, "text": "ok"}]},
        {"id": "solo", "match": {"method": "GET", "path": "/solo"},
         "chaos": {"rate": 0.4, "faults": ["status:503", "status:429"]},
         "responses": [{"status": 200, "text": "solo"}, {"status": 201, "text": "solo"}], "afterLast": "cycle"},
        {"id": "noise", "match": {"method": "GET", "path": "/noise"},
         "chaos": {"rate": 0.5, "faults": ["status:500"]},
         "responses": [{"status": 200, "delay": {"uniform": [0, 3]}}]},
    ],
}


def client_run(url, name, jitter):
    """One client's statuses for its own partition, in order; `jitter` interleaves noise requests."""
    statuses = []
    with requests.Session() as session:
        for _ in range(PER_CLIENT):
            for _ in range(jitter.randint(0, 2)):
                session.get(f"{url}/noise", timeout=TIMEOUT_S)
            statuses.append(session.get(f"{url}/cases", headers={"X-Client": name}, timeout=TIMEOUT_S).status_code)
    return statuses


def concurrent_run(server, jitter_seed):
    """Every client in its own thread, plus a sequential client of /solo; returns per-partition statuses."""
    results = {}
    jitter = random.Random(jitter_seed)
    seeds = {name: jitter.random() for name in CLIENTS + ["solo"]}

    def run(name):
        results[name] = client_run(server.url, name, random.Random(seeds[name]))

    def solo():
        own = random.Random(seeds["solo"])
        statuses = []
        with requests.Session() as session:
            for _ in range(PER_CLIENT):
                if own.random() < 0.5:
                    session.get(f"{server.url}/noise", timeout=TIMEOUT_S)
                statuses.append(session.get(f"{server.url}/solo", timeout=TIMEOUT_S).status_code)
        results["solo"] = statuses

    order = CLIENTS[:]
    jitter.shuffle(order)
    threads = [threading.Thread(target=run, args=(name,)) for name in order] + [threading.Thread(target=solo)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a client thread did not finish"
    return results


def test_concurrent_clients_get_the_same_per_partition_chaos(start_faultline, write_scenario):
    server = start_faultline(write_scenario(SCENARIO))

    # One client at a time, nothing else: the reference sequences.
    alone = {}
    with requests.Session() as session:
        for name in CLIENTS:
            alone[name] = [session.get(f"{server.url}/cases", headers={"X-Client": name}, timeout=TIMEOUT_S).status_code
                           for _ in range(PER_CLIENT)]
        alone["solo"] = [session.get(f"{server.url}/solo", timeout=TIMEOUT_S).status_code for _ in range(PER_CLIENT)]
    # A real mix of outcomes, and partitions that are not copies of one another.
    assert all({200} < set(statuses) for statuses in alone.values()), alone
    assert len({tuple(statuses) for statuses in alone.values()}) == len(alone), alone

    for jitter_seed in (1, 2, 3):
        server.admin_json("POST", "scenarios/reset", params={"journal": "true"})
        mixed = concurrent_run(server, jitter_seed)
        assert mixed == alone, f"interleaving {jitter_seed} changed a partition's sequence"

    # The journal agrees: each partition's entries, in order, carry the same chaos flags and statuses.
    entries = server.journal(route="cases")
    assert len(entries) == len(CLIENTS) * PER_CLIENT
    for name in CLIENTS:
        mine = [e for e in entries if ["X-Client", name] in e["headers"]]
        assert [e["response"]["status"] for e in mine] == alone[name]
        assert [e["response"]["chaos"] for e in mine] == [status != 200 for status in alone[name]]
    assert server.count(route="noise") > 0
