"""Typed answers of the admin API: journal entries, verdicts, reports."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple


def _tenths(milliseconds: float) -> str:
    # As the CLI prints it (JUnitReport.tenths): one decimal, rounded.
    tenths = int(round(milliseconds * 10))
    return f"{tenths // 10}.{tenths % 10}"


@dataclass(frozen=True)
class Entry:
    """One journal entry (GET /__faultline/requests): a request as the server saw it, and what it did about it.

    ``raw`` is the whole JSON object, for every field not lifted out here (receivedAt, tls, http2, websocket, …).
    """

    sequence: int
    kind: str
    method: Optional[str]
    path: Optional[str]
    target: Optional[str]
    status: Optional[int]
    fault: Optional[str]
    outcome: Optional[str]
    duration_ms: Optional[float]
    scenario: Optional[str]
    route: Optional[str]
    step: Optional[int]
    matched: Optional[bool]
    headers: List[Tuple[str, str]]
    body: str
    body_encoding: Optional[str]
    connection: Optional[int]
    stream: Optional[int]
    protocol: Optional[str]
    notes: List[Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, raw: Dict[str, Any]) -> "Entry":
        response = raw.get("response") or {}
        connection = raw.get("connection")
        return cls(
            sequence=raw.get("sequence", 0),
            kind=raw.get("kind", "request"),
            method=raw.get("method"),
            path=raw.get("path"),
            target=raw.get("target"),
            status=response.get("status"),
            fault=response.get("fault"),
            outcome=response.get("outcome"),
            duration_ms=response.get("durationMs"),
            scenario=raw.get("scenario"),
            route=raw.get("route"),
            step=raw.get("step"),
            matched=raw.get("matched"),
            headers=[(str(name), str(value)) for name, value in raw.get("headers") or []],
            body=raw.get("body") or "",
            body_encoding=raw.get("bodyEncoding"),
            connection=connection.get("id") if isinstance(connection, dict) else None,
            stream=raw.get("stream"),
            protocol=raw.get("protocol"),
            notes=list(raw.get("notes") or []),
            raw=raw,
        )

    def header(self, name: str) -> Optional[str]:
        """The first request header of that name (case-insensitive), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def body_bytes(self) -> bytes:
        """The request body (its first 64 KiB) as bytes, decoding base64 when the server stored it so."""
        if self.body_encoding == "base64":
            return base64.b64decode(self.body)
        return self.body.encode("utf-8")

    def json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.body_bytes())

    def short(self) -> str:
        """The entry in one line, as `faultline verify --junit` writes evidence:
        ``#12 GET /v1/orders → 503 fault reset · reset · 3.1 ms · connection 4 stream 1``."""
        line = f"#{self.sequence} "
        if self.method is not None and self.target is not None:
            line += f"{self.method} {self.target}"
        else:
            line += self.raw.get("requestLine") or self.kind or "?"
        line += " → " + ("-" if self.status is None else str(self.status))
        if self.fault:
            line += f" fault {self.fault}"
        if self.outcome:
            line += f" · {self.outcome}"
        if isinstance(self.duration_ms, (int, float)):
            line += f" · {_tenths(self.duration_ms)} ms"
        if self.connection is not None:
            line += f" · connection {self.connection}"
            if self.stream is not None:
                line += f" stream {self.stream}"
        return line

    def __str__(self) -> str:
        return self.short()


@dataclass(frozen=True)
class Verdict:
    """One `expect` rule judged (GET /__faultline/report): ``outcome`` is "pass", "fail" or "inconclusive";
    ``passed`` is False exactly when it failed; ``evidence`` holds journal sequence numbers."""

    scenario: str
    rule: str
    outcome: str
    passed: bool
    explanation: str
    evidence: List[int]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, raw: Dict[str, Any]) -> "Verdict":
        return cls(scenario=raw.get("scenario", ""), rule=raw.get("rule", ""), outcome=raw.get("outcome", ""),
                   passed=bool(raw.get("passed")), explanation=raw.get("explanation", ""),
                   evidence=list(raw.get("evidence") or []), raw=raw)

    @property
    def sentence(self) -> str:
        """``scenario/rule: explanation``, as `faultline verify` prints it."""
        return f"{self.scenario}/{self.rule}: {self.explanation}"


@dataclass(frozen=True)
class Report:
    """The verdicts of every loaded scenario's `expect` rules (GET /__faultline/report). ``passed`` means no
    verdict failed (inconclusive ones do not fail it); ``outcome`` is "fail", else "inconclusive", else "pass"."""

    outcome: str
    passed: bool
    verdicts: List[Verdict]
    judged: int
    requests: int
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, raw: Dict[str, Any]) -> "Report":
        return cls(outcome=raw.get("outcome", ""), passed=bool(raw.get("passed")),
                   verdicts=[Verdict.from_json(v) for v in raw.get("verdicts") or []],
                   judged=raw.get("judged", 0), requests=raw.get("requests", 0), raw=raw)

    @property
    def failing(self) -> List[Verdict]:
        """The verdicts that failed."""
        return [v for v in self.verdicts if v.outcome == "fail"]

    @property
    def inconclusive(self) -> List[Verdict]:
        """The verdicts whose situation never happened, so they judged nothing (the JSON's `inconclusive` is
        their count: ``len(report.inconclusive)``)."""
        return [v for v in self.verdicts if v.outcome == "inconclusive"]
