"""Journal exports: `serve --journal F` (NDJSON written as exchanges end), `GET /__faultline/requests.har` and
`faultline export`. The HAR is validated against a JSON Schema written from the HAR 1.2 spec
(har-1.2.schema.json) and must give back the request bodies that were sent."""

import base64
import json
import socket
from pathlib import Path

import jsonschema
import pytest
import requests

SCHEMA = json.loads((Path(__file__).with_name("har-1.2.schema.json")).read_text())

EXPORTS = {
    "name": "exports",
    "routes": [
        {"id": "echo", "match": {"method": "POST", "path": "/echo"}, "responses": [{"status": 201, "text": "ok"}]},
        {"id": "upload", "match": {"method": "PUT", "path": "/upload"}, "responses": [{"status": 204}]},
        {"id": "boom", "match": {"method": "GET", "path": "/boom"}, "responses": [{"fault": "reset"}]},
        {"id": "hang", "match": {"method": "GET", "path": "/hang"}, "responses": [{"fault": "hang"}]},
    ],
}

TEXT_BODY = '{"name": "Zoë", "qty": 2}'
BINARY_BODY = bytes([0x00, 0xFF, 0xFE, 0x80, 0x41, 0x0A, 0xC3, 0x28]) * 4


def validate_har(document):
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    errors = sorted(jsonschema.Draft7Validator(SCHEMA).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def post_data_bytes(entry):
    post = entry["request"]["postData"]
    if post.get("encoding") == "base64":
        return base64.b64decode(post["text"])
    return post["text"].encode("utf-8")


def send_requests(server, raw_connect):
    """A text body, a binary body, a malformed request and a fault; returns when all four are journaled."""
    assert requests.post(f"{server.url}/echo?lang=de&x=a%20b", data=TEXT_BODY.encode(),
                         headers={"Content-Type": "application/json"}, timeout=5).status_code == 201
    assert requests.put(f"{server.url}/upload", data=BINARY_BODY,
                        headers={"Content-Type": "application/octet-stream"}, timeout=5).status_code == 204
    bad = raw_connect(server.port)
    bad.send("GARBAGE\r\n\r\n")
    data, closed = bad.read_until_close()
    assert data.startswith(b"HTTP/1.1 400 ") and closed
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{server.url}/boom", timeout=5)
    return server.wait_for(4, completed=True)


def test_har_endpoint_and_export_validate_and_round_trip_bodies(start_faultline, write_scenario, raw_connect,
                                                                run_cli, tmp_path):
    server = start_faultline(write_scenario(EXPORTS))
    send_requests(server, raw_connect)

    response = server.admin("GET", "requests.har")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    har = response.json()
    validate_har(har)
    log = har["log"]
    assert log["version"] == "1.2" and log["creator"]["name"] == "Faultline"
    entries = log["entries"]
    assert [e["_sequence"] for e in entries] == [1, 2, 3, 4]
    echo, upload, malformed, boom = entries

    assert echo["request"]["method"] == "POST"
    assert echo["request"]["url"] == f"http://127.0.0.1:{server.port}/echo?lang=de&x=a%20b"
    assert echo["request"]["queryString"] == [{"name": "lang", "value": "de"}, {"name": "x", "value": "a b"}]
    assert {"name": "Content-Type", "value": "application/json"} in echo["request"]["headers"]
    assert echo["request"]["postData"]["mimeType"] == "application/json"
    assert "encoding" not in echo["request"]["postData"]
    assert post_data_bytes(echo) == TEXT_BODY.encode()
    assert echo["request"]["bodySize"] == len(TEXT_BODY.encode())
    assert echo["response"]["status"] == 201 and echo["response"]["statusText"] == "Created"
    assert echo["_route"] == "echo" and echo["_outcome"] == "completed"

    assert upload["request"]["postData"]["encoding"] == "base64"
    assert post_data_bytes(upload) == BINARY_BODY

    assert malformed["_malformed"] is True
    assert malformed["request"]["url"] == "http://invalid/"
    assert malformed["_requestLine"].startswith("GARBAGE")
    assert malformed["response"]["status"] == 400

    assert boom["_fault"] == "reset" and boom["_outcome"] == "reset-sent"
    assert boom["response"]["status"] == 0, "nothing was sent"

    # Filters work as on /requests.
    only_upload = server.admin_json("GET", "requests.har", params={"route": "upload"})
    assert [e["_sequence"] for e in only_upload["log"]["entries"]] == [2]

    # `faultline export` to a file: the same document; NDJSON to stdout: the entries of /requests, one a line.
    har_file = tmp_path / "out.har"
    exported = run_cli("export", "--url", server.url, "--output", har_file)
    assert exported.returncode == 0, exported.stderr
    from_cli = json.loads(har_file.read_text(encoding="utf-8"))
    validate_har(from_cli)
    assert from_cli == har
    assert [post_data_bytes(e) for e in from_cli["log"]["entries"][:2]] == [TEXT_BODY.encode(), BINARY_BODY]

    ndjson = run_cli("export", "--url", server.url, "--format", "ndjson")
    assert ndjson.returncode == 0, ndjson.stderr
    lines = ndjson.stdout.splitlines()
    assert [json.loads(line) for line in lines] == server.journal()


def test_journal_file_has_one_line_per_request_with_final_outcomes(start_faultline, write_scenario, raw_connect,
                                                                   tmp_path):
    journal_file = tmp_path / "journal.ndjson"
    server = start_faultline(write_scenario(EXPORTS), args=["--journal", journal_file])
    assert journal_file.exists(), "opened at start"
    journaled = send_requests(server, raw_connect)

    # A hang is still pending when the server stops: it is written as the server cuts it off.
    hanging = raw_connect(server.port)
    hanging.send(f"GET /hang HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n")
    pending, = server.wait_for(1, route="hang")
    assert pending["response"]["outcome"] == "pending"
    # The four finished exchanges are already in the file while the server runs.
    written = journal_file.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["sequence"] for line in written] == [1, 2, 3, 4]

    assert server.stop() == 0
    lines = journal_file.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    assert len(entries) == 5
    assert [e["sequence"] for e in entries] == [1, 2, 3, 4, 5]
    assert entries[:4] == journaled, "each line is the entry as /requests gives it"
    assert [e["response"]["outcome"] for e in entries] == [
        "completed", "completed", "completed", "reset-sent", "cancelled"]
    assert entries[1]["bodyEncoding"] == "base64"
    assert base64.b64decode(entries[1]["body"]) == BINARY_BODY
    assert entries[2]["malformed"] is True


def test_journal_file_appends_and_survives_a_cleared_journal(start_faultline, write_scenario, raw_connect, tmp_path):
    journal_file = tmp_path / "journal.ndjson"
    journal_file.write_text('{"earlier": true}\n')
    server = start_faultline(write_scenario(EXPORTS), args=["--journal", journal_file])
    hanging = raw_connect(server.port)
    hanging.send(f"GET /hang HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n")
    server.wait_for(1, route="hang")
    # Forgetting the journal's entries does not lose the pending one from the file.
    server.admin_json("DELETE", "requests")
    hanging.close()
    # Shut down through the admin API this time.
    assert server.admin("POST", "shutdown").status_code == 202
    assert server.wait_exit() == 0
    first, second = journal_file.read_text(encoding="utf-8").splitlines()
    assert json.loads(first) == {"earlier": True}
    assert json.loads(second)["response"]["outcome"] in ("hang-released", "cancelled")


def test_journal_file_that_cannot_be_opened_exits_2(run_cli, write_scenario, tmp_path):
    result = run_cli("serve", write_scenario(EXPORTS), "--port", "0",
                     "--journal", tmp_path / "missing" / "journal.ndjson")
    assert result.returncode == 2
    assert "journal.ndjson" in result.stderr
    assert result.stdout == ""


def test_export_exit_codes(run_cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    unreachable = run_cli("export", "--url", f"http://127.0.0.1:{closed_port}")
    assert unreachable.returncode == 2, unreachable.stderr
    assert "cannot reach" in unreachable.stderr
    for args in (["export"], ["export", "--url", "http://x", "--format", "xml"], ["export", "--bogus"]):
        result = run_cli(*args)
        assert result.returncode == 64, (args, result.stderr)
