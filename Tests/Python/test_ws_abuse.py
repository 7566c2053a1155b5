"""WebSocket abuse (RFC 6455), frames written by hand (Tests/Python/h2_attacks.py): a flood of one-byte frames on a
session that echoes and on one that says nothing, a fragmented message that never ends, pings sent faster than
they are answered and never read.

Each test runs one attack while a well-behaved HTTP/1.1 client in another process (keep-alive, GET every 10 ms)
measures its latency and the server's RSS is sampled, then asserts the answer RFC 6455 gives (the close code, and
FIN after it), the session's journal entry (frames counted both ways, its `end`), RSS growth under
WS_RSS_BOUND_MB and the good client's p99 under 60 ms with no error, and that the server still serves. Memory is
checked before latency (h2_attacks.assert_unharmed). Every socket has a deadline; the file takes about 20 s on the
debug build.

What these found, and what the server does now: a read's frames were all handled in one loop turn (now 256 frames
or 2 ms a turn, `WebSocketSession.framesPerSlice`); pongs and echoes a client never read queued without bound (now
the session stops reading past 1 MiB unsent, `maxPendingOutput`); a session's end dropped its queued output, close
frame included, while the journal said the closing handshake was clean (now the close waits for the output to
drain, up to `closingMilliseconds`); and each continuation frame copied the message so far (now appended in
place).
"""

import socket

import pytest

import h2_attacks
from h2_attacks import ROUTES, assert_unharmed, measure

# A session holds at most its parser's buffer (64 KiB and one read), one message of maxMessageBytes (1 MiB) and the
# output it queued; 16 MB above idle (~21 MB, debug build) leaves room for the allocator, and is far below what an
# output queue that follows the attack reaches (~25 MB for the ping flood below).
WS_RSS_BOUND_MB = 16

@pytest.fixture
def under_attack(start_faultline, write_scenario):
    """under_attack(attack) -> (result, measured, server): runs attack(port) against a fresh server while the good
    client runs. The caller asserts the answer and the journal first, then assert_unharmed(measured)."""

    def run(attack):
        server = start_faultline(write_scenario(ROUTES), args=["--quiet"])
        measured = measure(attack, server.port, server.port, [server.proc.pid])
        return measured["result"], measured, server

    return run


def still_serves(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert b"still here" in received


def session(server, route):
    """The route's one WebSocket session, once it has ended."""
    (entry,) = server.wait_for(1, route=route, completed="true", timeout_ms=10_000)
    assert entry["protocol"] == "websocket" and entry["response"]["status"] == 101, entry
    return entry


def end_of(entry):
    end = dict(entry["websocket"]["end"])
    end.pop("atMs")
    return end


FLOOD = 100_000


def test_a_flood_of_tiny_frames_on_an_echo_session(under_attack):
    """100,000 one-byte masked text frames as fast as the socket takes them, on a session that echoes every
    message, the echoes read: valid frames, so the session goes on; every one is echoed, in order; the client's
    close 1000 is answered with 1000 and FIN once the server has worked through them."""
    result, measured, server = under_attack(lambda port: h2_attacks.ws_tiny_flood(port, "/echo", FLOOD))
    assert result["sent"] == FLOOD
    texts = [payload for _, opcode, payload in result["frames"] if opcode == 0x1]
    assert len(texts) == FLOOD and set(texts) == {b"x"}, "every frame echoed"
    assert result["close"] == (1000, "") and result["closed"], result["close"]
    entry = session(server, "echo")
    record = entry["websocket"]
    assert (record["framesIn"], record["framesOut"]) == (FLOOD + 1, FLOOD + 1), "every frame journaled both ways"
    assert end_of(entry) == {"by": "client", "code": 1000, "reason": "done", "clean": True, "fault": None}
    assert entry["response"]["outcome"] == "completed"
    still_serves(server)
    assert_unharmed(measured, WS_RSS_BOUND_MB)


def test_a_flood_of_tiny_frames_on_a_session_that_does_not_echo(under_attack):
    """The same 100,000 frames on a session whose script says nothing: nothing comes back but the close."""
    result, measured, server = under_attack(lambda port: h2_attacks.ws_tiny_flood(port, "/quiet", FLOOD))
    assert result["sent"] == FLOOD
    assert [opcode for _, opcode, _ in result["frames"]] == [0x8], "nothing but the close"
    assert result["close"] == (1000, "") and result["closed"], result["close"]
    entry = session(server, "quiet")
    record = entry["websocket"]
    assert (record["framesIn"], record["framesOut"]) == (FLOOD + 1, 1)
    assert len(record["frames"]) == 200, "the journal keeps the first 200 frames; the counts go on"
    assert end_of(entry) == {"by": "client", "code": 1000, "reason": "done", "clean": True, "fault": None}
    still_serves(server)
    assert_unharmed(measured, WS_RSS_BOUND_MB)


@pytest.mark.parametrize("size", [
    pytest.param(4096, id="4KiB-fragments"),
    pytest.param(64, id="64B-fragments"),
])
def test_a_fragmented_message_that_never_ends_is_closed_1009_at_max_message_bytes(under_attack, size):
    """A text frame without FIN, then continuation frames without FIN, each `size` bytes: the message never ends.
    The server holds at most maxMessageBytes (1 MiB, the default) of it: the frame that would take it past is
    refused with 1009 (RFC 6455 §7.4.1, "too big to process"), then FIN; every frame before it is journaled."""
    limit = 1 << 20
    result, measured, server = under_attack(lambda port: h2_attacks.ws_endless_fragments(port, size=size))
    assert [opcode for _, opcode, _ in result["frames"]] == [0x8], result["frames"][:3]
    assert result["close"] == (1009, f"a message over {limit} bytes") and result["closed"], result["close"]
    entry = session(server, "quiet")
    # The frames that fit in 1 MiB were taken (the first and limit/size - 1 continuations); the next one was not.
    assert entry["websocket"]["framesIn"] == limit // size, entry["websocket"]["framesIn"]
    assert end_of(entry) == {"by": "server", "code": 1009, "reason": f"a message over {limit} bytes",
                             "clean": False, "fault": None}
    still_serves(server)
    assert_unharmed(measured, WS_RSS_BOUND_MB)


def test_pings_never_read_hold_bounded_output(under_attack):
    """125-byte pings, 500 a write, up to 32 MiB, the pongs never read. RFC 6455 §5.5.3 lets a server answer only
    the latest of several pings, and a server may simply stop reading while its output is full (as HTTP/1.1 does
    past 4 MiB); either way what it holds must stay bounded. Then the client reads and closes with 1000: the session
    ends cleanly, every pong journaled carrying its ping's payload (what reaches the client: the next test)."""
    result, measured, server = under_attack(h2_attacks.ws_ping_flood)
    print(f"pings sent {result['pings']}, stalled {result['stalled']}, in {result['seconds']:.1f} s")
    pongs = [payload for _, opcode, payload in result["frames"] if opcode == 0xA]
    assert pongs and set(pongs) == {b"p" * 125}
    entry = session(server, "quiet")
    record = entry["websocket"]
    assert record["framesIn"] == result["pings"] + 1, "every ping the client sent, then its close, was read"
    assert 2 <= record["framesOut"] <= record["framesIn"], "at least one pong, never more pongs than pings"
    kept = record["frames"]
    assert {(f["opcode"], f["size"]) for f in kept if f["direction"] == "out"} == {("pong", 125)}
    assert end_of(entry) == {"by": "client", "code": 1000, "reason": "done", "clean": True, "fault": None}
    still_serves(server)
    assert_unharmed(measured, WS_RSS_BOUND_MB)


class LostOutput(AssertionError):
    """The client did not get what the journal says the server sent."""


def test_a_close_after_a_ping_flood_reaches_the_client_after_every_pong(under_attack):
    """The same unread flood, 12 MiB of it (more than the kernel's buffers hold), then the client reads and sends
    its close 1000: the server's echo of it must reach the client after every pong the journal says went out, then
    FIN (RFC 6455 §7.1.1: the server closes TCP once the closing handshake is done, not before its frames are out)."""
    result, measured, server = under_attack(lambda port: h2_attacks.ws_ping_flood(port, total=12 << 20))
    entry = session(server, "quiet")
    record = entry["websocket"]
    assert end_of(entry) == {"by": "client", "code": 1000, "reason": "done", "clean": True, "fault": None}
    assert result["closed"], "the server ended the connection"
    opcodes = [opcode for _, opcode, _ in result["frames"]]
    if opcodes != [0xA] * (record["framesOut"] - 1) + [0x8] or result["close"] != (1000, ""):
        raise LostOutput(f"the journal has {record['framesOut'] - 1} pongs and a close 1000 sent; the client got "
                         f"{opcodes.count(0xA)} pongs and close {result['close']} before the connection ended")
    still_serves(server)
