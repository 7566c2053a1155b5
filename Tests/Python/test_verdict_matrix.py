"""The verdict matrix (issue #25, "Prove it on a matrix, not on examples").

Every request-level rule is judged on a careful and a naive client — two small httpx programs per rule, the naive
one making the mistake the rule is about — over HTTP/1.1 and h2c (prior knowledge), sequential (the client's logical
requests one after another: one, or as many as the rule needs) and concurrent (a burst of identical requests at
once: asyncio.gather on one h2 connection, or one HTTP/1.1 connection each), and every cell names the outcome the
report must give: pass, fail or inconclusive. For each rule the situation it judges is also left out (the server
never fails, nothing is cut, the token never expires): with either client on either protocol that must be
inconclusive. The WebSocket rules run over HTTP/1.1 only (an h2 upgrade attempt is refused with HTTP_1_1_REQUIRED).
Real clients play the careful or naive part as well (curl, Go's net/http, node's fetch, urllib3's Retry, websockets'
reconnect loop), each doing what it was measured doing. A false pass, a false failure and a vacuous pass all fail
the cell.

A burst overlaps at the server: its first answers are held OVERLAP_MS, and the cell checks that every request of
the burst arrived before the first of them was answered — else the server would rightly see retries where the client
sent none, and the cell would prove nothing.

Waits: a careful client waits out a 1 s Retry-After; a naive one meets Retry-After: 60, so that its immediate retry is
early however slow the machine (see test_verdicts.py). Nothing sleeps for the server: each cell waits on the journal
until every request it holds is complete. Cells run WORKERS at a time, each on its own server, all measured once per
module (the `measured` fixture); each test asserts its own cell. A cell whose verdict the server gets wrong today is
`xfail(strict=True)` with what the server says, and README.md's "The verdict matrix" tables, which show both, are
rendered from the same data and must match (test_the_readme_tables_are_this_matrix). The cells of the two rules
judged as statistics of waits (backoff, reconnectBackoff) are measured after the others, TIMING_WORKERS at a time:
scheduling stalls from this process's own threads are what those statistics would otherwise read.
"""

import asyncio
import json
import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import h2.errors
import h2.events
import httpx
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.client import backoff as ws_backoff
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidStatus

from conftest import CLIENTS_DIR, REPO_ROOT, FaultlineProcess, build_go_client, faultline_binary
from example_clients import CarefulClient

TIMEOUT_S = 10
BURST = 4  # identical requests in a concurrent burst
OVERLAP_MS = 300  # how long a burst's first answers are held, so that the burst overlaps at the server
MARGIN_S = 0.01  # a careful client waits Retry-After and this
# A careful client sends a refused stream again after this pause (Go and curl do at once). When a burst reaches the
# server spread over more than this (load did spread one over 95 ms), the first refusal's retry is answered before the
# last refusal, and the server pairs a later retry with that finished chain (the "staggered" cells show it on purpose):
# the matrix's own cells leave this margin. maxAttempts' careful client pauses as long for the same reason.
REFUSED_PAUSE_S = 0.1
# A naive client sends a failed request again after this pause, not at once: over HTTP/2 a retry that reaches the
# server within 1 ms of the answer on the same connection cannot be told from a stream sent alongside it
# (Retries.multiplexedGraceNanos), and the verdict is then inconclusive, as it should be. CI saw a naive h2c client
# retry 0.7–0.9 ms after some answers. 5 ms keeps it naive (no backoff, no limit, Retry-After ignored) and judgeable.
NAIVE_PAUSE_S = 0.005
WORKERS = 4  # threads measuring cells at once
TIMING_WORKERS = 2  # then the cells whose verdict is a statistic of waits, with less of this process's own load
TIMING_RULES = ("backoff", "reconnectBackoff")
README = REPO_ROOT / "docs" / "verdicts.md"   # the manual's verdicts page holds the tables

PROTOCOLS = {"http1": "HTTP/1.1", "h2c": "h2c", "h2": "h2 (TLS)"}
OUTCOMES = ("pass", "fail", "inconclusive")


@dataclass(frozen=True)
class Cell:
    rule: str
    client: str  # "careful" or "naive", or a real client (REAL)
    protocol: str  # "http1", "h2c", or "h2" (over TLS, for Go)
    pattern: str  # "sequential", "concurrent", or "never" (the situation the rule judges does not arise)
    expected: str
    wrong: str = ""  # what the server says today when that is not `expected` (the cell is xfail)
    program: str = ""  # a real client's program (REAL) or an extra cell's variant (EXTRA)
    note: str = ""  # what the client does, for the README's second table

    @property
    def id(self):
        return "-".join(part for part in (self.rule, self.client, self.program, self.protocol, self.pattern) if part)


# -- the clients' tools ---------------------------------------------------------------------------------------


class Run:
    """One client program's world: an httpx client over the cell's protocol, state its logical requests share (a
    cache, a token, a lock) and a random stream seeded by the cell."""

    def __init__(self, rule, cell, server):
        self.rule, self.cell, self.server = rule, cell, server
        self.random = random.Random(cell.id)
        self.state = {}

    async def __aenter__(self):
        options = {"http1": False, "http2": True} if self.cell.protocol == "h2c" else {}
        self.http = httpx.AsyncClient(base_url=self.server.url, timeout=TIMEOUT_S, **options)
        return self

    async def __aexit__(self, *exc):
        await self.http.aclose()

    async def send(self, method, path, **kw):
        """(response, None), or (None, error) when the exchange failed."""
        try:
            return await self.http.request(method, path, **kw), None
        except httpx.HTTPError as error:
            return None, error

    @property
    def ws(self):
        return f"ws://127.0.0.1:{self.server.port}"


def refused_stream(error):
    """Whether an httpx error is the server's RST_STREAM REFUSED_STREAM (httpcore raises with h2's event)."""
    for link in (error, error.__cause__, error.__context__):
        for arg in getattr(link, "args", ()):
            if isinstance(arg, h2.events.StreamReset) and arg.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                return True
    return False


def retryable(response):
    """A careful client's view: no answer (the exchange failed), a 5xx, or one of the 4xx that may change."""
    return response is None or response.status_code >= 500 or response.status_code in (408, 409, 425, 429)


async def download(run, path, headers=None):
    """GET `path` as a stream: (response or None, the bytes received, the error that cut it or None)."""
    response, body = None, b""
    try:
        async with run.http.stream("GET", path, headers=headers) as response:
            async for chunk in response.aiter_raw():
                body += chunk
        return response, body, None
    except httpx.HTTPError as error:
        return response, body, error


async def fixed_pause(attempts, pause, attempt, done):
    """A retry loop without backoff: up to `attempts` calls of `attempt`, `pause` seconds after each failed one, until
    `done(answer)`. (Not a schedule from the first attempt's start: after an answer held 300 ms, that would wait 0,
    then 100 ms, then 200 ms — growing waits.)"""
    for number in range(attempts):
        if done(await attempt()) or number == attempts - 1:
            return
        await asyncio.sleep(pause)


async def ws_session(url, first_message=None):
    """One WebSocket session read to its end: "closed" (a clean close), "dropped", or the refusal's response."""
    try:
        async with ws_connect(url, open_timeout=TIMEOUT_S, ping_interval=None) as ws:
            if first_message is not None:
                await ws.send(first_message)
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), TIMEOUT_S)
            except ConnectionClosedOK:
                return "closed"
            except ConnectionClosedError:
                return "dropped"
    except InvalidStatus as refused:
        return refused.response


# -- scenario pieces --------------------------------------------------------------------------------------------


def route(route_id, method, path, *responses, **fields):
    return {"id": route_id, "match": {"method": method, "path": path}, "responses": list(responses), **fields}


OK = {"status": 200, "json": {"ok": True}}
CREATED = {"status": 201, "json": {"id": "o-{{resource.id}}"}}
BUSY = {"status": 503, "json": {"error": "busy"}}
ORDER = {"sku": "w-1", "quantity": 2}
REFUSED = {"status": 200, "json": {"ok": True}, "fault": {"type": "rst-stream", "code": "REFUSED_STREAM"}}


class Rule:
    """A rule's cells: its scenario (without the situation when the cell's pattern is "never"), and its careful and
    naive programs, each one logical request (`index` counts them)."""

    name = ""
    burst = BURST  # identical requests in a concurrent cell
    sequential = 1  # logical requests in a sequential (or never) cell
    overlap_route = None  # the route whose first `burst` requests must overlap in a concurrent cell
    websocket = False

    def __init__(self, expect=None):
        self.expect = expect or {self.name: True}

    def first(self, cell, step):
        """The step the first `burst` requests (or the one sequential request) meet: held OVERLAP_MS when the cell
        is concurrent, so that the burst overlaps at the server."""
        step = dict(step, times=self.burst if cell.pattern == "concurrent" else 1)
        if cell.pattern == "concurrent":
            step["delayMs"] = OVERLAP_MS
        return step

    def script(self, cell, failing, then):
        return [then] if cell.pattern == "never" else [self.first(cell, failing), then]

    def scenario(self, cell):
        raise NotImplementedError

    async def before(self, run):
        pass

    async def careful(self, run, index):
        raise NotImplementedError

    async def naive(self, run, index):
        raise NotImplementedError


class HonorsRetryAfter(Rule):
    name = "honorsRetryAfter"
    overlap_route = "item"

    def scenario(self, cell):
        busy = dict(BUSY, headers={"Retry-After": "1" if cell.client == "careful" else "60"})
        return {"routes": [route("item", "GET", "/items/1", *self.script(cell, busy, OK))]}

    async def careful(self, run, index):
        for _ in range(3):  # waits what Retry-After asks
            response, _ = await run.send("GET", "/items/1")
            if response is None or response.status_code not in (429, 503):
                return
            await asyncio.sleep(float(response.headers["Retry-After"]) + MARGIN_S)

    async def naive(self, run, index):
        for _ in range(4):  # ignores it
            response, _ = await run.send("GET", "/items/1")
            if response is not None and response.status_code < 500:
                return
            await asyncio.sleep(NAIVE_PAUSE_S)


class MaxAttempts(Rule):
    name = "maxAttempts"
    overlap_route = "item"

    def __init__(self):
        super().__init__({"maxAttempts": 3})

    def scenario(self, cell):
        then = OK if cell.pattern == "never" else BUSY
        return {"routes": [route("item", "GET", "/items/1", *self.script(cell, BUSY, then))]}

    async def careful(self, run, index):
        for attempt in range(3):  # three attempts, backing off (see REFUSED_PAUSE_S)
            response, _ = await run.send("GET", "/items/1")
            if not retryable(response) or attempt == 2:
                return
            await asyncio.sleep(REFUSED_PAUSE_S * 2 ** attempt)

    async def naive(self, run, index):
        for _ in range(5):
            response, _ = await run.send("GET", "/items/1")
            if response is not None and response.status_code < 500:
                return
            await asyncio.sleep(NAIVE_PAUSE_S)


class NoRetryOn4xx(Rule):
    name = "noRetryOn4xx"
    overlap_route = "coupon"

    def scenario(self, cell):
        missing = {"status": 404, "json": {"error": "no such coupon"}}
        then = OK if cell.pattern == "never" else missing
        return {"routes": [route("coupon", "GET", "/coupons/SAVE10", *self.script(cell, missing, then))]}

    async def careful(self, run, index):
        for attempt in range(3):  # retries what may change: a 404 will not
            response, _ = await run.send("GET", "/coupons/SAVE10")
            if not retryable(response):
                return
            await asyncio.sleep(0.02 * 2 ** attempt)

    async def naive(self, run, index):
        for _ in range(4):  # retries anything that is not a 2xx
            response, _ = await run.send("GET", "/coupons/SAVE10")
            if response is not None and response.status_code < 300:
                return
            await asyncio.sleep(NAIVE_PAUSE_S)


class RetriesOnlyReplayable(Rule):
    name = "retriesOnlyReplayable"
    overlap_route = "orders"

    def scenario(self, cell):
        return {"routes": [route("orders", "POST", "/orders", *self.script(cell, BUSY, CREATED))]}

    async def careful(self, run, index):
        key = f'"{uuid.uuid4()}"'  # one key per logical POST, the same on every retry
        for attempt in range(3):
            response, _ = await run.send("POST", "/orders", json=ORDER, headers={"Idempotency-Key": key})
            if not retryable(response):
                return
            await asyncio.sleep(0.02 * 2 ** attempt)

    async def naive(self, run, index):
        for _ in range(4):  # a keyless POST, sent again after any failure
            response, _ = await run.send("POST", "/orders", json=ORDER)
            if response is not None and response.status_code < 300:
                return
            await asyncio.sleep(NAIVE_PAUSE_S)


class RetriesOnlyUnprocessed(Rule):
    """Keyless POSTs. Over h2 the first attempts are refused (REFUSED_STREAM: safe to send again), the next ones
    answered 503 (processed or not, nobody knows); over HTTP/1.1 only the 503."""

    name = "retriesOnlyUnprocessed"
    overlap_route = "orders"

    def scenario(self, cell):
        if cell.pattern == "never":
            steps = [CREATED]
        elif cell.protocol == "http1":
            steps = [self.first(cell, BUSY), CREATED]
        else:
            busy = dict(BUSY, times=self.burst if cell.pattern == "concurrent" else 1)
            steps = [self.first(cell, REFUSED), busy, CREATED]
        return {"routes": [route("orders", "POST", "/orders", *steps)]}

    async def careful(self, run, index):
        for _ in range(3):  # sends a keyless POST again only when the server said it did not process it
            response, error = await run.send("POST", "/orders", json=ORDER)
            if response is not None or not refused_stream(error):
                return
            await asyncio.sleep(REFUSED_PAUSE_S)

    async def naive(self, run, index):
        for _ in range(4):
            response, _ = await run.send("POST", "/orders", json=ORDER)
            if response is not None and response.status_code < 300:
                return
            await asyncio.sleep(NAIVE_PAUSE_S)


class RetriesRefusedStreams(Rule):
    """Over h2 the first attempts are refused (REFUSED_STREAM); over HTTP/1.1, which has no such answer, their
    connection is reset (a failure the rule does not judge)."""

    name = "retriesRefusedStreams"
    overlap_route = "item"

    def scenario(self, cell):
        failing = REFUSED if cell.protocol != "http1" else dict(OK, fault="reset")
        return {"routes": [route("item", "GET", "/items/1", *self.script(cell, failing, OK))]}

    async def careful(self, run, index):
        for attempt in range(3):
            response, error = await run.send("GET", "/items/1")
            if not retryable(response):
                return
            await asyncio.sleep(REFUSED_PAUSE_S if error is not None and refused_stream(error) else 0.02 * 2 ** attempt)

    async def naive(self, run, index):
        await run.send("GET", "/items/1")  # an error goes to the caller


class NoDuplicateSideEffects(Rule):
    """An order committed and then reset (the client cannot know it was created). Never: every order is refused 503,
    so nothing is ever created."""

    name = "noDuplicateSideEffects"
    overlap_route = "orders"

    def scenario(self, cell):
        committed = dict(CREATED, fault="commit-then-reset")
        steps = [BUSY] if cell.pattern == "never" else [self.first(cell, committed), CREATED]
        return {"routes": [route("orders", "POST", "/orders", *steps,
                                 idempotency={"header": "Idempotency-Key", "required": False})]}

    async def careful(self, run, index):
        await RetriesOnlyReplayable.careful(self, run, index)

    async def naive(self, run, index):
        await RetriesOnlyReplayable.naive(self, run, index)


JITTER = [0.2 + 1.6 * k / 5 for k in range(6)]  # 0.2, 0.52, …, 1.8


class Backoff(Rule):
    """Sequential: six reports in turn (six logical requests); concurrent: six identical requests at once. The
    report always answers 503. The careful client backs off 100 ms × 2^n with ±80 % jitter; the naive one pauses a
    fixed 200 ms after each failure. An "immediate" naive retry would be
    waits of 0 plus this machine's scheduling noise, and a loaded machine delays a few of them by 20–60 ms, which
    the rule, whose floor is 20 ms, can read as growth (seen: ×1.18 from noise alone); a fixed 200 ms is as naive and
    stands well above that noise."""

    name = "backoff"
    burst = 6
    sequential = 6  # the rule judges a retry index once five logical requests got that far
    overlap_route = "report"

    def __init__(self):
        super().__init__({"backoff": {"jitter": True}})

    def scenario(self, cell):
        then = OK if cell.pattern == "never" else BUSY
        return {"routes": [route("report", "GET", "/reports/{id}", *self.script(cell, BUSY, then))]}

    @staticmethod
    def path(run, index):
        return "/reports/1" if run.cell.pattern == "concurrent" else f"/reports/{index}"

    async def careful(self, run, index):
        # Exponential backoff with ±80 % jitter: 100 ms × 2^n × a factor in [0.2, 1.8]. The factors are six evenly
        # spread over that range, dealt in another order for each retry, not random draws: the rule judges six
        # logical requests here, and six unlucky draws (a seed tried gave second waits mostly low) make the envelope
        # grow barely ×1.2, which load then pushes under ×1.15. Spread evenly, each retry's envelope is twice the
        # last.
        for attempt in range(3):
            response, _ = await run.send("GET", self.path(run, index))
            if not retryable(response) or attempt == 2:
                return
            await asyncio.sleep(0.1 * 2 ** attempt * JITTER[(index + 2 * attempt) % len(JITTER)])

    async def naive(self, run, index):
        await fixed_pause(4, 0.2, lambda: run.send("GET", self.path(run, index)),
                          lambda answer: not retryable(answer[0]))


class Refresh(Rule):
    """A bearer-token API whose token has expired (POST /__faultline/auth/expire; never: it does not expire); the
    token endpoint takes 200 ms. Sequential: three requests in turn; concurrent: a burst of four."""

    sequential = 3
    expire_after_uses = None  # EXTRA: a token that expires after each use

    def scenario(self, cell):
        auth = {"tokenPath": "/oauth/token", "initialToken": "token-1", "protect": ["/api/"], "expireAfterMs": 600000,
                "refresh": [{"status": 200, "delayMs": 200}]}
        if cell.program == "every-use":
            auth["expireAfterUses"] = 1
        return {"auth": auth, "routes": [route("me", "GET", "/api/me", OK)]}

    async def before(self, run):
        if run.cell.pattern != "never" and run.cell.program != "every-use":
            run.server.admin_json("POST", "auth/expire")

    async def refresh(self, run):
        response = await run.http.post("/oauth/token", data={"grant_type": "client_credentials"})
        assert response.status_code == 200, response.text
        run.state["token"] = response.json()["access_token"]

    async def call(self, run):
        token = run.state.get("token", "token-1")
        response = await run.http.get("/api/me", headers={"Authorization": f"Bearer {token}"})
        return token, response

    async def careful(self, run, index):
        token, response = await self.call(run)
        if response.status_code == 401:
            lock = run.state.setdefault("lock", asyncio.Lock())
            async with lock:  # single flight: one refresh, and none if another already replaced the token
                if run.state.get("token", "token-1") == token:
                    await self.refresh(run)
            _, response = await self.call(run)
        assert response.status_code == 200, response.text

    async def naive(self, run, index):
        _, response = await self.call(run)
        if response.status_code == 401:
            await self.refresh(run)  # every 401 refreshes, uncoordinated
            # In a burst, another request's refresh may have replaced this one's token already: 401 again.
            _, response = await self.call(run)
        assert response.status_code in (200, 401), response.text


class SingleFlightRefresh(Refresh):
    name = "singleFlightRefresh"


class MaxRefreshes(Refresh):
    name = "maxRefreshes"

    def __init__(self):
        super().__init__({"maxRefreshes": 1})


BLOB_SIZE, CUT_AT = 4000, 1000


class ResumesDownloads(Rule):
    name = "resumesDownloads"
    overlap_route = "download"

    def scenario(self, cell):
        cut = {"resource": "blob", "fault": {"type": "truncate-body", "bytes": CUT_AT}}
        return {"resources": [{"id": "blob", "path": "/blob", "generated": {"size": BLOB_SIZE}}],
                "routes": [route("download", "GET", "/downloads/blob", *self.script(cell, cut, {"resource": "blob"}))]}

    async def careful(self, run, index):
        response, body, error = await download(run, "/downloads/blob")
        for _ in range(3):  # resumes from what it has, with the cut response's ETag in If-Range
            if error is None:
                break
            headers = {"Range": f"bytes={len(body)}-", "If-Range": response.headers["ETag"]}
            response, rest, error = await download(run, "/downloads/blob", headers)
            body = body + rest if response is not None and response.status_code == 206 else rest
        assert error is None and len(body) == BLOB_SIZE, (error, len(body))

    async def naive(self, run, index):
        for _ in range(3):  # starts again from byte 0
            _, body, error = await download(run, "/downloads/blob")
            if error is None:
                break
        assert error is None and len(body) == BLOB_SIZE, (error, len(body))


class RevalidatesWithValidators(Rule):
    """Each logical request fetches the catalogue twice (cold, then warm). Never: the catalogue is `no-store`."""

    name = "revalidatesWithValidators"
    overlap_route = "catalogue"

    def scenario(self, cell):
        catalogue = {"id": "catalogue", "path": "/data/catalogue", "json": {"items": ["A-1", "B-2"]},
                     "cacheControl": "no-store" if cell.pattern == "never" else "no-cache"}
        step = {"resource": "catalogue"}
        return {"resources": [catalogue],
                "routes": [route("catalogue", "GET", "/catalogue", self.first(cell, step), step)]}

    async def careful(self, run, index):
        cache = run.state.setdefault("cache", {})
        for _ in range(2):
            headers = {"If-None-Match": cache["etag"]} if "etag" in cache else {}
            response = await run.http.get("/catalogue", headers=headers)
            if response.status_code == 200 and "no-store" not in response.headers.get("Cache-Control", ""):
                cache["etag"] = response.headers["ETag"]
            assert response.status_code in (200, 304), response

    async def naive(self, run, index):
        for _ in range(2):  # no cache: every use fetches the whole catalogue
            assert (await run.http.get("/catalogue")).status_code == 200


class ConditionalWrites(Rule):
    """Each logical request reads a note and saves it. Never: the app reads and has nothing to save."""

    name = "conditionalWrites"

    def scenario(self, cell):
        note = {"id": "note", "path": "/notes/{id}", "json": {"title": "groceries"}, "methods": ["PUT"]}
        return {"resources": [note], "routes": []}

    async def careful(self, run, index):
        read = await run.http.get("/notes/1")
        if run.cell.pattern != "never":
            saved = await run.http.put("/notes/1", json={"title": "groceries", "done": True},
                                       headers={"If-Match": read.headers["ETag"]})
            assert saved.status_code in (200, 204, 412), saved  # 412: another save of the burst came first

    async def naive(self, run, index):
        await run.http.get("/notes/1")
        if run.cell.pattern != "never":
            assert (await run.http.put("/notes/1", json={"title": "groceries", "done": True})).status_code in (200, 204)


SESSION_CLOSED = {"websocket": {"script": [{"close": {"code": 1000}}]}}


class HonorsRetryAfterOnUpgrade(Rule):
    name = "honorsRetryAfterOnUpgrade"
    overlap_route = "live"
    websocket = True

    def scenario(self, cell):
        refused = dict(BUSY, headers={"Retry-After": "1" if cell.client == "careful" else "60"})
        return {"routes": [route("live", "GET", "/live", *self.script(cell, refused, SESSION_CLOSED))]}

    async def careful(self, run, index):
        for _ in range(3):
            refused = await ws_session(run.ws + "/live")
            if isinstance(refused, str):
                return
            await asyncio.sleep(float(refused.headers["Retry-After"]) + MARGIN_S)

    async def naive(self, run, index):
        for _ in range(4):
            if isinstance(await ws_session(run.ws + "/live"), str):
                return


class ReconnectBackoff(Rule):
    """Every session is dropped (no close frame) after the server has read the client's first message and said
    hello; a burst's first sessions are held OVERLAP_MS before the 101. Never: the server closes each session cleanly
    (1000), so there is nothing to reconnect after. The careful client backs off 50 ms × 2^n with jitter; the naive
    one pauses a fixed 200 ms before each reconnect (as with backoff: an immediate reconnect is waits of scheduling
    noise; in a burst, 40 ms more for each client)."""

    name = "reconnectBackoff"
    websocket = True
    overlap_route = "live"

    def __init__(self):
        super().__init__({"reconnectBackoff": {"jitter": True}})

    def scenario(self, cell):
        end = {"close": {"code": 1000}} if cell.pattern == "never" else {"fault": "drop"}
        session = {"websocket": {"script": [{"receive": "any", "timeoutMs": 5000}, {"text": "hello"}, end]}}
        return {"routes": [route("live", "GET", "/live", *self.script(cell, session, session))]}

    async def careful(self, run, index):
        for attempt in range(6):  # exponential backoff with jitter: 50 ms × 2^n × U(0.6, 1.4)
            if await ws_session(run.ws + "/live", "subscribe") != "dropped" or attempt == 5:
                return
            await asyncio.sleep(0.05 * 2 ** attempt * run.random.uniform(0.6, 1.4))

    async def naive(self, run, index):
        # A fixed pause, each client of a burst its own (200, 240, … ms): in lockstep, four clients reconnect within a
        # millisecond of each other, and which of those upgrades the server reads as a wait from another's session
        # end is a coin toss (the verdict then flips between fail and a false pass; see WRONG).
        await fixed_pause(8, 0.2 + 0.04 * index, lambda: ws_session(run.ws + "/live", "subscribe"),
                          lambda ended: ended != "dropped")


RULES = {rule.name: rule for rule in [
    HonorsRetryAfter(), MaxAttempts(), NoRetryOn4xx(), RetriesOnlyReplayable(), RetriesOnlyUnprocessed(),
    RetriesRefusedStreams(), NoDuplicateSideEffects(), Backoff(), SingleFlightRefresh(), MaxRefreshes(),
    ResumesDownloads(), RevalidatesWithValidators(), ConditionalWrites(), HonorsRetryAfterOnUpgrade(),
    ReconnectBackoff()]}


# -- real clients -----------------------------------------------------------------------------------------------


def curl(server, path, *args, h2c=False):
    # The body goes to a file of the cell's: with --retry, curl truncates its output before each retry (/dev/null
    # cannot be truncated: exit 23).
    command = ["curl", "-sS", "-o", str(Path(server.folder) / "curl.out"), "--max-time", "20",
               *(["--http2-prior-knowledge"] if h2c else []), *args, f"{server.url}{path}"]
    return subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)


def go(tools, cell, server, path, *flags):
    tls = cell.protocol == "h2"
    base = f"https://localhost:{server.tls_port}" if tls else server.url
    done = subprocess.run([str(tools["go"]()), "-timeout", "5s", *(["-cacert", str(server.ca)] if tls else []), *flags,
                           base + path],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def node_fetch(server, *paths, method="GET", body=None):
    extra = ["--method", method] + (["--body", body] if body is not None else [])
    done = subprocess.run(["node", str(CLIENTS_DIR / "fetchclient.mjs"), "--timeout", "5000", *extra,
                           *[f"{server.url}{path}" for path in paths]],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def real_curl_retry_after(cell, server, tools):
    assert curl(server, "/items/1", "--retry", "2").returncode == 0


def real_curl_retry_4xx(cell, server, tools):
    assert curl(server, "/coupons/SAVE10", "--retry", "3").returncode == 0


def real_curl_retry_all_errors(cell, server, tools):
    done = curl(server, "/coupons/SAVE10", "--fail", "--retry", "1", "--retry-all-errors", "--retry-delay", "1")
    assert done.returncode == 22, done.stderr


def real_curl_max_attempts(cell, server, tools):
    # Without --fail, the last 503 is a transfer like any other: exit 0.
    assert curl(server, "/items/1", "--retry", "2", "--retry-delay", "1").returncode == 0


def real_curl_refused(cell, server, tools):
    assert curl(server, "/items/1", h2c=True).returncode == 0


def real_curl_resume(cell, server, tools):
    target = Path(server.folder) / "blob"
    cut = subprocess.run(["curl", "-sS", "-o", str(target), f"{server.url}/downloads/blob"], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert cut.returncode == 18 and target.stat().st_size == CUT_AT, cut.stderr  # a partial file
    resumed = subprocess.run(["curl", "-sS", "-C", "-", "-o", str(target), f"{server.url}/downloads/blob"],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert resumed.returncode == 0 and target.stat().st_size == BLOB_SIZE, resumed.stderr


def real_curl_etag(cell, server, tools):
    etag = Path(server.folder) / "etag.txt"
    assert curl(server, "/catalogue", "--etag-save", str(etag)).returncode == 0
    assert curl(server, "/catalogue", "--etag-compare", str(etag), "--etag-save", str(etag)).returncode == 0


def real_go_refused(cell, server, tools):
    (result,) = go(tools, cell, server, "/items/1")
    assert result["status"] == 200 and len(result["conns"]) == 2, result  # sent again, on a new connection


def real_go_goaway(cell, server, tools):
    (result,) = go(tools, cell, server, "/orders", "-method", "POST", "-body", json.dumps(ORDER))
    assert result["status"] == 201 and len(result["conns"]) == 2, result


def real_go_503(cell, server, tools):
    (result,) = go(tools, cell, server, "/items/1")
    assert result["status"] == 503, result  # net/http does not retry an answer


def real_node_revalidate(cell, server, tools):
    assert [r["status"] for r in node_fetch(server, "/catalogue", "/catalogue")] == [200, 200]


def real_node_post(cell, server, tools):
    (result,) = node_fetch(server, "/orders", method="POST", body=json.dumps(ORDER))
    assert result["status"] == 503, result


def real_urllib3(cell, server, tools):
    client = CarefulClient(server.url, total=2, backoff_factor=0.02, backoff_jitter=0.02)
    if cell.rule == "honorsRetryAfter":
        assert client.get("/items/1").status_code == 200
    elif cell.rule == "maxAttempts":
        assert client.get("/items/1").status_code == 503
    elif cell.rule == "noRetryOn4xx":
        assert client.get("/coupons/SAVE10").status_code == 404
    elif cell.rule == "noDuplicateSideEffects":
        assert CarefulClient(server.url).post("/orders", json=ORDER).status_code == 201
    else:
        raise AssertionError(cell)


def real_urllib3_backoff(cell, server, tools):
    # urllib3 2: no wait before the first retry, then backoff_factor·2^(n−1) + U(0, jitter) (test_verdicts.py
    # measured these settings). Twelve logical requests at once, each on its own connection: the first retry's waits
    # are all about 0, so only the later ones show jitter, and with six logical requests four of six second waits
    # once fell within 6 % of their median (urllib3 draws from the global `random`, which this test does not seed).
    client = CarefulClient(server.url, total=3, backoff_factor=0.1, backoff_jitter=0.4)
    with ThreadPoolExecutor(12) as pool:
        assert [r.status_code for r in pool.map(lambda i: client.get(f"/reports/{i}"), range(12))] == [503] * 12


def staggered(cell, server, tools):
    """A burst of four on one warmed h2 connection: the first is answered after STAGGER_MS, the others after
    STAGGER_HOLD_MS. The careful client retries what it should (a refused stream; a 503, never the 404) after a short
    pause. Every retry comes after the first answer, so the first chain is waiting for one too — and it finished
    first."""
    asyncio.run(drive(RULES[cell.rule], cell, server))
    entries = server.wait_for(server.count(), completed="true")
    # The 404 is not sent again; each refused request is, once; maxAttempts' four are each tried three times.
    sent = {"noRetryOn4xx": 7, "maxAttempts": 12}.get(cell.rule, 8)
    arrived = max(e["receivedAtMonotonicMs"] for e in entries[:4])
    ends = [e["receivedAtMonotonicMs"] + e["response"]["durationMs"] for e in entries[:4]]
    # The early request's retries (those that arrived before the others were answered) all ended before those
    # answers: the pattern that makes the first chain, done, the one waiting longest when the others are retried.
    # Under load a slow pause could push its last retry past them and the pairing would come out right by chance.
    early = [e for e in entries[4:] if e["receivedAtMonotonicMs"] < min(ends[1:])]
    assert len(entries) == sent and arrived < ends[0] < min(ends[1:]) - STAGGER_HOLD_MS / 2 \
        and all(e["receivedAtMonotonicMs"] + e["response"]["durationMs"] < min(ends[1:]) for e in early), \
        "setup: not the staggered burst (all arrived, then one answer and its retries, then the others) and the " \
        "others' retries\n" + journal_lines(entries)


STAGGER_MS = 50  # the staggered burst's first answer: after the whole burst arrived, long before the others
# The others' answers: long after the first one's retries (two 100 ms pauses for maxAttempts), with room for load.
STAGGER_HOLD_MS = 1000


def staggered_scenario(cell):
    """The rule's route with its burst staggered: one answer after STAGGER_MS, three after STAGGER_HOLD_MS."""
    first, held = {"times": 1, "delayMs": STAGGER_MS}, {"times": 3, "delayMs": STAGGER_HOLD_MS}
    if cell.rule == "retriesRefusedStreams":
        return {"routes": [route("item", "GET", "/items/1", dict(REFUSED, **first), dict(REFUSED, **held), OK)]}
    if cell.rule == "retriesOnlyUnprocessed":
        return {"routes": [route("orders", "POST", "/orders", dict(REFUSED, **first), dict(REFUSED, **held),
                                 dict(BUSY, times=4), CREATED)]}
    if cell.rule == "maxAttempts":
        return {"routes": [route("item", "GET", "/items/1", dict(BUSY, **first), dict(BUSY, **held), BUSY)]}
    missing = {"status": 404, "json": {"error": "no such coupon"}}
    return {"routes": [route("coupon", "GET", "/coupons/SAVE10", dict(missing, **first), dict(BUSY, **held), missing)]}


def real_websockets_reconnect(cell, server, tools):
    async def loop():
        sessions = 0
        async for ws in ws_connect(f"ws://127.0.0.1:{server.port}/live", open_timeout=TIMEOUT_S, ping_interval=None):
            try:
                await ws.send("subscribe")
                while True:
                    await asyncio.wait_for(ws.recv(), TIMEOUT_S)
            except ConnectionClosedError:
                sessions += 1
                if sessions == 15:  # 14 reconnects: enough that a few delayed by load do not read as growth
                    return
                continue  # the documented reconnect loop: websockets opens the next session at once

    asyncio.run(loop())


def real_websockets_refused(cell, server, tools):
    async def loop():
        # websockets retries a 503 upgrade after its own delays (here 0.1 s at most for the first), whatever the
        # answer's Retry-After says.
        delays = partial(ws_backoff, initial_delay=0.1, min_delay=0.1, max_delay=1.0, factor=2.0)
        async for ws in ws_connect(f"ws://127.0.0.1:{server.port}/live", open_timeout=TIMEOUT_S, ping_interval=None,
                                   reconnect_delays=delays):
            with pytest.raises(ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), TIMEOUT_S)
            return

    asyncio.run(loop())


# -- the matrix ------------------------------------------------------------------------------------------------

# Per rule: the careful client's outcomes and the naive one's, each over HTTP/1.1 sequential, HTTP/1.1 concurrent,
# h2c sequential, h2c concurrent ("-": not run, WebSocket has no h2 here); then the outcome with the situation left
# out (both clients, both protocols).
MATRIX = {
    "honorsRetryAfter": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "maxAttempts": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "noRetryOn4xx": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "retriesOnlyReplayable": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "retriesOnlyUnprocessed": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "retriesRefusedStreams": ("inconclusive inconclusive pass pass", "inconclusive inconclusive fail fail",
                              "inconclusive"),
    "noDuplicateSideEffects": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "backoff": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "singleFlightRefresh": ("inconclusive pass inconclusive pass", "inconclusive fail inconclusive fail",
                            "inconclusive"),
    "maxRefreshes": ("pass pass pass pass", "pass fail pass fail", "inconclusive"),
    "resumesDownloads": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "revalidatesWithValidators": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "conditionalWrites": ("pass pass pass pass", "fail fail fail fail", "inconclusive"),
    "honorsRetryAfterOnUpgrade": ("pass pass - -", "fail fail - -", "inconclusive"),
    "reconnectBackoff": ("pass pass - -", "fail fail - -", "inconclusive"),
}
COLUMNS = [(protocol, pattern) for protocol in ("http1", "h2c") for pattern in ("sequential", "concurrent")]

# Cells whose verdict the server gets wrong today: the test id, what the server says and why (xfail strict).
# README.md, "The verdict matrix", has the evidence.
PAIRING = ("identical requests cannot be told apart: Retries.chains pairs a retry with the chain that finished first, "
           "so when one of a burst is answered early and retried, the rest's retries join its chain")
WRONG = {
    "reconnectBackoff-careful-http1-concurrent": (
        "fail", "the rule takes consecutive upgrades of every client as one reconnect loop: four clients reconnecting "
                "together look like one that does not back off (the UInt64 wrap of a negative wait is fixed)"),
    "maxAttempts-careful-staggered-h2c-concurrent": ("fail", PAIRING),
    "retriesOnlyUnprocessed-careful-staggered-h2c-concurrent": ("fail", PAIRING),
}

# Cells beyond the matrix: real clients (program: a function of REAL) and extra situations.
EXTRA = [
    Cell("honorsRetryAfter", "careful", "http1", "sequential", "pass", program="curl",
         note="`curl --retry 2` waits the 503's `Retry-After: 1`"),
    Cell("honorsRetryAfter", "careful", "http1", "sequential", "pass", program="urllib3",
         note="urllib3 `Retry(respect_retry_after_header=True)` waits it"),
    Cell("honorsRetryAfter", "naive", "http1", "sequential", "inconclusive", program="go",
         note="Go's net/http does not retry an answered request: no request followed the Retry-After"),
    Cell("maxAttempts", "careful", "http1", "sequential", "pass", program="curl",
         note="`curl --retry 2` makes 3 attempts at an endless 503 (limit 3)"),
    Cell("maxAttempts", "careful", "http1", "sequential", "pass", program="urllib3",
         note="urllib3 `Retry(total=2)` makes 3 attempts (limit 3)"),
    Cell("maxAttempts", "careful", "h2c", "concurrent", "pass", program="staggered",
         note="a burst of four GETs, one answered 503 after 50 ms, three after 1 s; each tried three times in all"),
    Cell("noRetryOn4xx", "careful", "http1", "sequential", "pass", program="curl",
         note="`curl --retry 3` does not retry a 404"),
    Cell("noRetryOn4xx", "naive", "http1", "sequential", "fail", program="curl-all-errors",
         note="`curl --fail --retry 1 --retry-all-errors` sends the 404 again"),
    Cell("noRetryOn4xx", "careful", "http1", "sequential", "pass", program="urllib3",
         note="urllib3 `Retry(status_forcelist=429, 5xx)` returns the 404"),
    Cell("retriesOnlyReplayable", "careful", "http1", "sequential", "pass", program="node-fetch",
         note="node's fetch (undici) does not send a failed keyless POST again"),
    Cell("retriesRefusedStreams", "careful", "h2c", "sequential", "pass", program="curl",
         note="curl (nghttp2) sends a REFUSED_STREAM GET again by itself"),
    Cell("retriesRefusedStreams", "careful", "h2", "sequential", "pass", program="go",
         note="Go's net/http sends a REFUSED_STREAM GET again on a new connection"),
    Cell("retriesRefusedStreams", "careful", "h2", "sequential", "pass", program="go-goaway",
         note="Go's net/http sends a POST above a GOAWAY's last stream id again"),
    Cell("noRetryOn4xx", "careful", "h2c", "concurrent", "pass", program="staggered",
         note="a burst of four GETs, one answered 404 after 50 ms, three 503 after 1 s; only the 503s are retried"),
    Cell("retriesRefusedStreams", "careful", "h2c", "concurrent", "pass", program="staggered",
         note="a burst of four GETs, one refused after 50 ms and three after 1 s; each sent again"),
    Cell("retriesOnlyUnprocessed", "careful", "h2c", "concurrent", "pass", program="staggered",
         note="the same with keyless POSTs; each sent again once after REFUSED_STREAM, never after the 503 that "
              "follows"),
    Cell("noDuplicateSideEffects", "careful", "http1", "sequential", "pass", program="urllib3",
         note="requests + urllib3 `Retry`, one `Idempotency-Key` for all attempts, through commit-then-reset"),
    Cell("noDuplicateSideEffects", "careful", "http1", "sequential", "pass", program="quiet",
         note="the server never fails: one POST, one side effect (a double tap needs no failure, so the rule "
              "judges it)"),
    Cell("backoff", "careful", "http1", "concurrent", "pass", program="urllib3",
         note="urllib3 `Retry(backoff_factor=0.1, backoff_jitter=0.4)`, twelve logical requests at once"),
    Cell("singleFlightRefresh", "naive", "http1", "sequential", "inconclusive", program="every-use",
         note="a token that expires after each use, three requests in turn: two 401s one after another, two "
              "refreshes, never two at once"),
    Cell("singleFlightRefresh", "careful", "http1", "sequential", "inconclusive", program="every-use",
         note="the same with the careful client"),
    Cell("resumesDownloads", "naive", "http1", "sequential", "fail", program="curl",
         note="`curl -C -` resumes with Range but no If-Range"),
    Cell("revalidatesWithValidators", "careful", "http1", "sequential", "pass", program="curl",
         note="`curl --etag-save` then `--etag-compare` sends If-None-Match"),
    Cell("revalidatesWithValidators", "naive", "http1", "sequential", "fail", program="node-fetch",
         note="node's fetch (undici) has no HTTP cache: the second fetch is blind"),
    Cell("honorsRetryAfterOnUpgrade", "naive", "http1", "sequential", "fail", program="websockets",
         note="websockets' `async for ... in connect()` retries a 503 upgrade on its own delays, not "
              "`Retry-After: 60`"),
    Cell("reconnectBackoff", "naive", "http1", "sequential", "fail", program="websockets",
         note="websockets' `async for ... in connect()` reconnects at once after a dropped session (it resets its "
              "backoff once a connection opened)"),
]

REAL = {
    ("honorsRetryAfter", "curl"): real_curl_retry_after, ("honorsRetryAfter", "urllib3"): real_urllib3,
    ("honorsRetryAfter", "go"): real_go_503, ("maxAttempts", "curl"): real_curl_max_attempts,
    ("maxAttempts", "urllib3"): real_urllib3, ("noRetryOn4xx", "curl"): real_curl_retry_4xx,
    ("noRetryOn4xx", "curl-all-errors"): real_curl_retry_all_errors, ("noRetryOn4xx", "urllib3"): real_urllib3,
    ("retriesOnlyReplayable", "node-fetch"): real_node_post, ("retriesRefusedStreams", "curl"): real_curl_refused,
    ("retriesRefusedStreams", "go"): real_go_refused, ("retriesRefusedStreams", "go-goaway"): real_go_goaway,
    ("noDuplicateSideEffects", "urllib3"): real_urllib3, ("backoff", "urllib3"): real_urllib3_backoff,
    ("resumesDownloads", "curl"): real_curl_resume, ("revalidatesWithValidators", "curl"): real_curl_etag,
    ("revalidatesWithValidators", "node-fetch"): real_node_revalidate,
    ("honorsRetryAfterOnUpgrade", "websockets"): real_websockets_refused,
    ("reconnectBackoff", "websockets"): real_websockets_reconnect,
    ("retriesRefusedStreams", "staggered"): staggered, ("retriesOnlyUnprocessed", "staggered"): staggered,
    ("noRetryOn4xx", "staggered"): staggered, ("maxAttempts", "staggered"): staggered,
}


def extra_scenario(cell):
    """The scenario an extra cell meets: its rule's, with the real client's situation."""
    rule = RULES[cell.rule]
    if cell.program == "staggered":
        return staggered_scenario(cell)
    if cell.program == "quiet":
        return {"routes": [route("orders", "POST", "/orders", CREATED,
                                 idempotency={"header": "Idempotency-Key", "required": False})]}
    if cell.program == "go-goaway":
        goaway = dict(CREATED, fault={"type": "goaway", "lastStreamId": "previous"})
        return {"routes": [route("orders", "POST", "/orders", goaway, CREATED)]}
    if cell.rule == "honorsRetryAfter" and cell.program == "go":
        return rule.scenario(Cell(cell.rule, "naive", "http1", "sequential", ""))
    if cell.rule == "honorsRetryAfterOnUpgrade":
        return rule.scenario(Cell(cell.rule, "naive", "http1", "sequential", ""))
    return rule.scenario(cell)


def matrix_cells():
    cells = []
    for name, (careful, naive, never) in MATRIX.items():
        for client, row in (("careful", careful), ("naive", naive)):
            for (protocol, pattern), expected in zip(COLUMNS, row.split()):
                if expected != "-":
                    cells.append(Cell(name, client, protocol, pattern, expected))
            for protocol in ("http1",) if RULES[name].websocket else ("http1", "h2c"):
                cells.append(Cell(name, client, protocol, "never", never))
    return cells


CELLS = [cell for cell in matrix_cells() + EXTRA]
CELLS = [Cell(**{**cell.__dict__, "wrong": WRONG.get(cell.id, ("",))[0]}) for cell in CELLS]
assert len({cell.id for cell in CELLS}) == len(CELLS), "every cell has its own id"
assert set(WRONG) <= {cell.id for cell in CELLS}, set(WRONG) - {cell.id for cell in CELLS}


# -- measuring a cell -------------------------------------------------------------------------------------------


@dataclass
class Measured:
    verdict: dict = None
    journal: list = None
    error: str = ""
    seconds: float = 0.0


def journal_lines(entries):
    """The journal as the evidence a reader needs: sequence, protocol, connection and stream, request, key, answer,
    and times (ms from the first arrival)."""
    if not entries:
        return "(empty journal)"
    start = entries[0]["receivedAtMonotonicMs"]
    lines = []
    for entry in entries:
        response = entry["response"] or {}
        key = next((value for name, value in entry["headers"] if name.lower() == "idempotency-key"), None)
        where = f"{entry['protocol']} conn {entry['connection']['id']}"
        where += f" stream {entry['stream']}" if entry["stream"] else ""
        answer = f"{response.get('status')} {response.get('outcome')}"
        answer += f" ({response['fault']})" if response.get("fault") else ""
        request = f"{entry['method']} {entry['target']}" + (f" key {key}" if key else "")
        at = f"at {entry['receivedAtMonotonicMs'] - start:.1f} ms for {response.get('durationMs')} ms"
        lines.append(f"#{entry['sequence']} {where} {request} -> {answer} {at}")
    return "\n".join(lines)


def check_overlap(rule, cell, entries):
    """A concurrent cell's burst overlapped at the server: each of its requests arrived before the first was
    answered."""
    burst = [entry for entry in entries if entry["route"] == rule.overlap_route][:rule.burst]
    assert len(burst) == rule.burst, f"the burst reached the server {len(burst)} times, not {rule.burst}"
    arrived = max(entry["receivedAtMonotonicMs"] for entry in burst)
    answered = min(entry["receivedAtMonotonicMs"] + entry["response"]["durationMs"] for entry in burst)
    assert arrived < answered, f"setup: the burst did not overlap (last arrival {arrived}, first answer {answered})"


async def drive(rule, cell, server):
    async with Run(rule, cell, server) as run:
        await rule.before(run)
        program = getattr(rule, cell.client)
        if cell.pattern == "concurrent" and cell.protocol == "h2c":
            # The connection is open (its SETTINGS exchanged) before the burst, as an app's usually is, so that the
            # burst's HEADERS go out together; the admin API is not journaled.
            assert (await run.http.get("/__faultline/health")).status_code == 200
        if cell.pattern == "concurrent":
            await asyncio.gather(*[program(run, index) for index in range(rule.burst)])
        else:
            for index in range(rule.sequential):
                await program(run, index)


def measure(cell, folder, tools):
    started = time.monotonic()
    result = Measured()
    rule = RULES[cell.rule]
    place = folder / cell.id
    place.mkdir()
    scenario = extra_scenario(cell) if cell.program else rule.scenario(cell)
    document = {"name": "matrix", **scenario, "expect": rule.expect}
    (place / "scenario.json").write_text(json.dumps(document, indent=1))
    tls = ["--tls-port", "0", "--tls-dir", str(place / "tls")] if cell.protocol == "h2" else []
    server = FaultlineProcess([faultline_binary(), "serve", str(place / "scenario.json"), "--port", "0", *tls],
                              place / "stderr")
    server.folder, server.ca = place, place / "tls" / "ca.pem"
    try:
        server.wait_listening()
        server.admin_json("GET", "health")  # the SIGTERM handler is in place (conftest's start_faultline)
        if cell.program:
            REAL.get((cell.rule, cell.program), lambda c, s, t: asyncio.run(drive(rule, c, s)))(cell, server, tools)
        else:
            asyncio.run(drive(rule, cell, server))
        # Every request the client sent has arrived (it waited for each answer); wait until each is complete.
        server.wait_for(server.count(), timeout_ms=10000, completed="true")
        result.journal = server.journal()
        if cell.pattern == "concurrent" and rule.overlap_route and not cell.program:
            check_overlap(rule, cell, result.journal)
        (result.verdict,) = [v for v in server.admin_json("GET", "report")["verdicts"] if v["rule"] == cell.rule]
    except BaseException as error:  # a setup or client failure is reported by the cell's test, not as a verdict
        result.error = f"{type(error).__name__}: {error}"
        if result.journal is None and server.url:
            try:
                result.journal = server.journal()
            except Exception:
                pass
    finally:
        code = server.stop()
        if code != 0 and not result.error:
            result.error = f"faultline exited {code}:\n{server.stderr()}"
        result.seconds = time.monotonic() - started
    return result


def cost(cell):
    """A guess at a cell's seconds, to start the slow ones first."""
    if cell.program in ("curl", "curl-all-errors", "urllib3", "go") \
            and cell.rule in ("maxAttempts", "honorsRetryAfter", "noRetryOn4xx"):
        return 2.0
    if cell.client == "careful" and cell.pattern != "never" \
            and cell.rule in ("honorsRetryAfter", "honorsRetryAfterOnUpgrade", "backoff", "reconnectBackoff"):
        return 1.5
    return 0.5 if cell.pattern == "concurrent" else 0.2


@pytest.fixture(scope="module")
def measured(request, tmp_path_factory):
    """Every selected cell of this module, measured on WORKERS threads the first time a test asks; Go's client is
    built on a thread of its own meanwhile (build_go_client), for the Go cells."""
    selected = [item.callspec.params["cell"] for item in request.session.items
                if getattr(getattr(item, "module", None), "__name__", None) == __name__
                and "cell" in getattr(getattr(item, "callspec", None), "params", {})]
    folder = tmp_path_factory.mktemp("matrix")
    build = {}
    if any(cell.program.startswith("go") for cell in selected):
        thread = threading.Thread(target=lambda: build.setdefault("go", _try(build_go_client, folder / "go")),
                                  daemon=True)
        thread.start()

        def go_binary():
            thread.join(timeout=300)
            value = build.get("go")
            if isinstance(value, BaseException) or value is None:
                raise RuntimeError(f"the Go client did not build: {value}")
            return value
    else:
        go_binary = None
    tools = {"go": go_binary}
    started = time.monotonic()
    results = {}
    # Six threads of one process measuring at once stalled a client's event loop by up to 280 ms (the GIL, and a
    # shared 2-core machine): a fixed 200 ms pause became 480 ms, and the waits a statistic judges grew. The
    # timing rules' cells run apart, two at a time.
    for workers, cells in ((WORKERS, [c for c in selected if c.rule not in TIMING_RULES]),
                           (TIMING_WORKERS, [c for c in selected if c.rule in TIMING_RULES])):
        with ThreadPoolExecutor(workers) as pool:
            futures = {cell.id: pool.submit(measure, cell, folder, tools)
                       for cell in sorted(cells, key=cost, reverse=True)}
            results.update({name: future.result() for name, future in futures.items()})
    slowest = sorted(results.items(), key=lambda item: -item[1].seconds)[:5]
    sys.stderr.write(f"\nverdict matrix: {len(results)} cells in {time.monotonic() - started:.1f} s; "
                     "slowest: " + ", ".join(f"{name} {result.seconds:.1f} s" for name, result in slowest) + "\n")
    return results


def _try(function, *args):
    try:
        return function(*args)
    except BaseException as error:
        return error


def describe(cell, result):
    verdict = json.dumps(result.verdict, indent=1) if result.verdict else "(no verdict)"
    return (f"{cell.id}: expected {cell.expected}, the report says {(result.verdict or {}).get('outcome')}\n"
            f"verdict: {verdict}\njournal:\n{journal_lines(result.journal)}")


def param(cell):
    marks = []
    if cell.wrong:
        marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                       reason=f"the server says {cell.wrong}: {WRONG[cell.id][1]}"))
    return pytest.param(cell, id=cell.id, marks=marks)


@pytest.mark.parametrize("cell", [param(cell) for cell in CELLS])
def test_cell(cell, measured):
    result = measured[cell.id]
    if result.error:
        # Not a verdict: the client or the setup failed. A RuntimeError, so that an xfail cell does not hide it.
        raise RuntimeError(f"{cell.id} ({result.seconds:.1f} s): {result.error}\n"
                           f"journal:\n{journal_lines(result.journal)}")
    outcome = result.verdict["outcome"]
    assert outcome in OUTCOMES and result.verdict["passed"] == (outcome != "fail"), result.verdict
    if cell.wrong and outcome not in (cell.expected, cell.wrong):
        raise RuntimeError(f"the server's verdict changed from {cell.wrong} to {outcome}: " + describe(cell, result))
    assert outcome == cell.expected, describe(cell, result)


# -- the README's tables ----------------------------------------------------------------------------------------


CLIENT_NAMES = {"curl": "curl", "curl-all-errors": "curl", "go": "Go net/http", "go-goaway": "Go net/http",
                "urllib3": "requests + urllib3", "node-fetch": "node fetch", "websockets": "websockets"}


def shown(cell):
    return f"{cell.expected} (today: **{cell.wrong}**)" if cell.wrong else cell.expected


def readme_tables():
    """The two tables README.md's "The verdict matrix" shows, rendered from CELLS."""
    by_id = {cell.id: cell for cell in CELLS}
    head = ["rule"] + [f"{client} {PROTOCOLS[protocol]} {'burst' if pattern == 'concurrent' else 'one by one'}"
                       for client in ("careful", "naive") for protocol, pattern in COLUMNS] + ["situation never met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in MATRIX:
        row = [f"`{name}`"]
        for client in ("careful", "naive"):
            for protocol, pattern in COLUMNS:
                cell = by_id.get(Cell(name, client, protocol, pattern, "").id)
                row.append(shown(cell) if cell else "—")
        never = [cell for cell in CELLS if cell.rule == name and cell.pattern == "never"]
        if len({shown(cell) for cell in never}) == 1:
            row.append(shown(never[0]))
        else:
            row.append("<br>".join(f"{cell.client} {PROTOCOLS[cell.protocol]}: {shown(cell)}" for cell in never))
        lines.append("| " + " | ".join(row) + " |")
    extra = ["| rule | client | protocol | what it does | verdict |", "|---|---|---|---|---|"]
    order = list(MATRIX)
    for cell in sorted((cell for cell in CELLS if cell.program), key=lambda cell: order.index(cell.rule)):
        if cell.program:
            who = CLIENT_NAMES.get(cell.program, cell.client)
            extra.append(f"| `{cell.rule}` | {who} | {PROTOCOLS[cell.protocol]} | {cell.note} | {shown(cell)} |")
    return lines, extra


def test_the_readme_tables_are_this_matrix():
    text = README.read_text()
    heading = "## The verdict matrix"
    assert heading in text, f"docs/verdicts.md has no {heading!r} section"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    tables, current = [], []
    for line in section.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    matrix, extra = readme_tables()
    rendered = "\n".join(matrix) + "\n\n" + "\n".join(extra)
    assert tables == [matrix, extra], \
        "docs/verdicts.md's verdict matrix differs from the test's; it should read:\n\n" + rendered
