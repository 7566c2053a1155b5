"""`faultline verify --junit` and `--html`, `faultline export --format html`: the files CI keeps from a run.

The JUnit file is read as CI systems read it (ElementTree) and validated against a JUnit XML schema written for
these tests (junit.xsd: the common core of the Ant, Jenkins and GitLab readers). The HTML report's embedded data
must be the API's own answers: the same journal and the same verdicts.
"""

import json
import re
import socket
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import requests
import xmlschema

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).resolve().parent / "junit.xsd"))
TIMEOUT_S = 10
COUPON = "/coupons/SAVE&10'x"   # & and ' go into the evidence lines as they are, so the XML must escape them

# A passing rule (one order, one idempotency key: one side effect), a rule the naive client fails (it sends a
# 404 again) and one whose situation never happens (no POST fails): pass, fail, inconclusive.
CHECKOUT = {
    "name": "checkout",
    "expect": {"noDuplicateSideEffects": True, "noRetryOn4xx": True, "retriesOnlyReplayable": True},
    "routes": [
        {"id": "create-order", "match": {"method": "POST", "path": "/orders"},
         "idempotency": {"header": "Idempotency-Key", "required": False},
         "responses": [{"status": 201, "json": {"id": "o-{{resource.id}}"}}]},
        {"id": "coupon", "match": {"method": "GET", "path": "/coupons/{code}"},
         "responses": [{"status": 404, "json": {"error": "no such coupon"}}]},
    ],
}
# A second scenario with a rule, so that --scenario has something to leave out.
SEARCH = {
    "name": "search",
    "expect": {"noRetryOn4xx": True},
    "routes": [{"id": "search", "match": {"path": "/search"}, "responses": [{"json": {"hits": []}}]}],
}
NO_EXPECT = {"name": "plain", "routes": [{"id": "r", "match": {"path": "/r"}, "responses": [{"text": "ok"}]}]}


def shop(url, retries_404):
    session = requests.Session()
    assert session.post(f"{url}/orders", json={"sku": "w-1"}, headers={"Idempotency-Key": "k-1"},
                        timeout=TIMEOUT_S).status_code == 201
    for _ in range(2 if retries_404 else 1):
        assert session.get(url + COUPON, timeout=TIMEOUT_S).status_code == 404


def serve(start_faultline, write_scenario, *scenarios):
    return start_faultline(*[write_scenario(scenario) for scenario in scenarios])


def read_junit(path):
    """The document, validated against junit.xsd, with its counts checked against its testcases."""
    SCHEMA.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("name") == "faultline"
    suites = root.findall("testsuite")
    for element in [root, *suites]:
        cases = element.iter("testcase")
        outcomes = [outcome(case) for case in cases]
        assert int(element.get("tests")) == len(outcomes), element.attrib
        assert int(element.get("failures")) == outcomes.count("failure")
        assert int(element.get("skipped")) == outcomes.count("skipped")
        assert int(element.get("errors")) == outcomes.count("error") == 0
    return root


def outcome(case):
    children = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
    assert len(children) <= 1
    return children[0] if children else "pass"


def cases_by_name(root):
    return {case.get("name"): case for case in root.iter("testcase")}


def verify(run_cli, server, *args):
    return run_cli("verify", "--url", server.url, *args)


def test_junit_has_a_testcase_per_verdict_with_evidence(start_faultline, write_scenario, run_cli, tmp_path):
    server = serve(start_faultline, write_scenario, CHECKOUT)
    shop(server.url, retries_404=True)
    report = server.admin_json("GET", "report")
    journal = {entry["sequence"]: entry for entry in server.journal()}
    out = tmp_path / "out.xml"

    plain = verify(run_cli, server)
    result = verify(run_cli, server, "--junit", out)
    assert result.returncode == plain.returncode == 1, result
    assert result.stdout == plain.stdout and result.stderr == "", "--junit changes nothing verify prints"

    root = read_junit(out)
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("3", "1", "1", "0")
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "checkout" and suite.get("hostname") == "127.0.0.1"
    version = re.fullmatch(r"faultline (\S+)\n", run_cli("--version").stdout).group(1)
    assert {p.get("name"): p.get("value") for p in suite.find("properties")} == {
        "faultline.server": server.url, "faultline.version": version}
    cases = cases_by_name(root)
    assert list(cases) == [verdict["rule"] for verdict in report["verdicts"]]
    assert all(case.get("classname") == "faultline.checkout" and case.get("time") == "0" for case in cases.values())
    verdicts = {verdict["rule"]: verdict for verdict in report["verdicts"]}

    assert outcome(cases["noDuplicateSideEffects"]) == "pass"
    assert verdicts["noDuplicateSideEffects"]["outcome"] == "pass"

    skipped = cases["retriesOnlyReplayable"].find("skipped")
    assert verdicts["retriesOnlyReplayable"]["outcome"] == "inconclusive"
    assert skipped.get("message") == verdicts["retriesOnlyReplayable"]["explanation"]

    failure = cases["noRetryOn4xx"].find("failure")
    verdict = verdicts["noRetryOn4xx"]
    assert verdict["outcome"] == "fail" and len(verdict["evidence"]) == 2
    assert failure.get("type") == "verdict" and failure.get("message") == verdict["explanation"]
    lines = failure.text.split("\n")
    assert len(lines) == len(verdict["evidence"])
    for line, sequence in zip(lines, verdict["evidence"]):
        entry = journal[sequence]
        assert re.fullmatch(rf"#{sequence} GET {re.escape(COUPON)} → 404 · completed · \d+\.\d ms · "
                            rf"connection {entry['connection']['id']}", line), line
    # The suite's time is the span of all its verdicts' evidence: from the first entry's arrival to the last one's end.
    evidence = [journal[sequence] for verdict in report["verdicts"] for sequence in verdict["evidence"]]
    assert len(evidence) > 2, "the passing verdict has evidence too"
    start = min(entry["receivedAtMonotonicMs"] for entry in evidence)
    end = max(entry["receivedAtMonotonicMs"] + entry["response"]["durationMs"] for entry in evidence)
    assert abs(float(suite.get("time")) * 1000 - (end - start)) <= 1
    assert root.get("time") == suite.get("time")
    assert '&amp;10\'x' in out.read_text(), "& escaped in text, the apostrophe left as it is"


def test_strict_turns_skipped_into_failures(start_faultline, write_scenario, run_cli, tmp_path):
    server = serve(start_faultline, write_scenario, CHECKOUT)
    shop(server.url, retries_404=False)
    lenient, strict = tmp_path / "lenient.xml", tmp_path / "strict.xml"
    assert verify(run_cli, server, "--junit", lenient).returncode == 0
    result = verify(run_cli, server, "--strict", "--junit", strict)
    assert result.returncode == 1, result
    lenient_root, strict_root = read_junit(lenient), read_junit(strict)
    assert (lenient_root.get("failures"), lenient_root.get("skipped")) == ("0", "1")
    assert (strict_root.get("failures"), strict_root.get("skipped")) == ("1", "0")
    skipped = cases_by_name(lenient_root)["retriesOnlyReplayable"].find("skipped")
    failure = cases_by_name(strict_root)["retriesOnlyReplayable"].find("failure")
    assert failure.get("type") == "inconclusive" and failure.get("message") == skipped.get("message")
    assert [outcome(case) for case in strict_root.iter("testcase")] == ["pass", "failure", "pass"]


def test_no_verdict_is_one_skipped_testcase(start_faultline, write_scenario, run_cli, tmp_path):
    server = serve(start_faultline, write_scenario, NO_EXPECT)
    out = tmp_path / "none.xml"
    result = verify(run_cli, server, "--junit", out)
    assert result.returncode == 0, result
    root = read_junit(out)
    [suite] = root.findall("testsuite")
    [case] = suite.findall("testcase")
    assert (suite.get("name"), case.get("classname"), case.get("name")) == ("faultline", "faultline", "verdicts")
    assert case.find("skipped").get("message") == 'no rule was judged: no loaded scenario has an "expect" section'
    assert verify(run_cli, server, "--strict", "--junit", out).returncode == 1
    assert read_junit(out).find("testsuite/testcase/failure").get("type") == "inconclusive"


def test_an_unreachable_server_writes_nothing(run_cli, tmp_path):
    with socket.socket() as probe:   # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    junit, html = tmp_path / "out.xml", tmp_path / "run.html"
    result = run_cli("verify", "--url", f"http://127.0.0.1:{port}", "--junit", junit, "--html", html)
    assert result.returncode == 2 and "verify: cannot reach" in result.stderr, result
    assert not junit.exists() and not html.exists()
    result = run_cli("export", "--url", f"http://127.0.0.1:{port}", "--format", "html", "-o", html)
    assert result.returncode == 2 and "export: cannot reach" in result.stderr, result
    assert not html.exists()


class DataElement(HTMLParser):
    """The text of `<script id="faultline-data">`, the self-contained report's embedded data."""

    def __init__(self):
        super().__init__()
        self.inside = False
        self.text = None

    def handle_starttag(self, tag, attrs):
        if tag == "script" and dict(attrs).get("id") == "faultline-data":
            self.inside, self.text = True, ""

    def handle_endtag(self, tag):
        self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.text += data


def embedded(path):
    page = Path(path).read_text()
    assert page.startswith("<!doctype html>") and 'id="faultline-data"' in page
    parser = DataElement()
    parser.feed(page)
    assert parser.text, "no data element"
    return json.loads(parser.text)


def test_html_report_embeds_the_api_answers(start_faultline, write_scenario, run_cli, tmp_path):
    server = serve(start_faultline, write_scenario, CHECKOUT, SEARCH)
    shop(server.url, retries_404=True)
    requests.get(f"{server.url}/search", timeout=TIMEOUT_S)
    verified, exported = tmp_path / "verify.html", tmp_path / "export.html"

    result = verify(run_cli, server, "--html", verified)
    assert result.returncode == 1, "a failed verdict keeps its exit code, and the report is written all the same"
    assert run_cli("export", "--url", server.url, "--format", "html", "-o", exported).returncode == 0
    stdout = run_cli("export", "--url", server.url, "--format", "html")
    assert stdout.returncode == 0 and stdout.stdout.startswith("<!doctype html>")

    sequences = [entry["sequence"] for entry in server.journal()]
    report = server.admin_json("GET", "report")
    for path in (verified, exported):
        data = embedded(path)
        assert list(data) == ["generatedAt", "server", "health", "requests", "report", "state", "scenarios", "network",
                              "resources"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", data["generatedAt"])
        assert data["server"] == server.url and data["health"]["status"] == "ok"
        assert [entry["sequence"] for entry in data["requests"]["requests"]] == sequences
        assert data["report"]["verdicts"] == report["verdicts"]
        assert data["scenarios"] == server.admin_json("GET", "scenarios")
        assert data["network"] == server.admin_json("GET", "network")
        assert data["resources"] == server.admin_json("GET", "resources")

    # With --scenario the embedded report is that scenario's, as verify judged it.
    one = tmp_path / "search.html"
    assert verify(run_cli, server, "--scenario", "search", "--html", one, "--junit", tmp_path / "s.xml").returncode == 0
    assert embedded(one)["report"] == server.admin_json("GET", "report", params={"scenario": "search"})
    assert {verdict["scenario"] for verdict in embedded(one)["report"]["verdicts"]} == {"search"}
    assert [suite.get("name") for suite in read_junit(tmp_path / "s.xml").findall("testsuite")] == ["search"]


@pytest.mark.parametrize("change", [
    ('<skipped message="no POST', '<failure message="x" type="verdict"/><skipped message="no POST'),  # two outcomes
    (' type="verdict"', ""),                                     # a failure without its type
    (' time="0"/>', ' time="soon"/>'),                           # a time that is not seconds
    (' skipped="1"', ' skipped="-1"'),                           # a negative count
    ("<properties>", "<properties><property name=\"a\"/>"),      # a property without a value
    ("</testsuite>", "<testcase name=\"late\" classname=\"c\" time=\"0\"/><properties/></testsuite>"),  # out of order
])
def test_the_schema_has_teeth(change, start_faultline, write_scenario, run_cli, tmp_path):
    """The schema rejects what JUnit readers choke on, so that passing it means something."""
    server = serve(start_faultline, write_scenario, CHECKOUT)
    shop(server.url, retries_404=True)
    out = tmp_path / "out.xml"
    verify(run_cli, server, "--junit", out)
    text = out.read_text()
    SCHEMA.validate(text)
    old, new = change
    assert old in text
    assert not SCHEMA.is_valid(text.replace(old, new, 1))
