"""Two small Python API clients for Faultline's verdicts (the Python counterparts of
Examples/ExampleClients): a careful one built on requests + urllib3's Retry, and a naive one.

CarefulClient
  - urllib3 `Retry` does the retrying: 429/500/502/503/504 and transport errors, `Retry-After` honoured,
    exponential backoff with jitter (`backoff_factor`, `backoff_jitter`), a bounded number of attempts;
  - only replayable requests are retried: idempotent methods, and POST/PATCH only when they carry an
    `Idempotency-Key` — every POST gets one, the same for all its retries;
  - 4xx other than 429 are returned, not retried;
  - single-flight token refresh: a lock around the refresh; a request whose 401 arrives while another refresh
    is running waits for it and reuses its token instead of refreshing again.

NaiveClient
  - retries everything at once, up to `attempts` times, POSTs included and without a key, 4xx included;
  - ignores `Retry-After`;
  - every 401 refreshes the token itself, uncoordinated.
"""

import threading
import time
import uuid

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
RETRY_STATUSES = (429, 500, 502, 503, 504)


class CarefulClient:
    def __init__(self, base_url, *, token_path=None, access_token=None, refresh_token=None, total=3,
                 backoff_factor=0.05, backoff_jitter=0.05, backoff_max=2.0, timeout=5.0):
        self.base_url = base_url.rstrip("/")
        self.token_path = token_path
        self.timeout = timeout
        self.refresh_calls = 0
        self._token = access_token
        self._refresh_token = refresh_token
        self._refresh_lock = threading.Lock()

        def session(methods):
            retry = Retry(total=total, connect=total, read=total, status=total, other=0, redirect=0,
                          status_forcelist=RETRY_STATUSES, allowed_methods=methods,
                          respect_retry_after_header=True, backoff_factor=backoff_factor,
                          backoff_jitter=backoff_jitter, backoff_max=backoff_max, raise_on_status=False)
            s = requests.Session()
            s.mount("http://", HTTPAdapter(max_retries=retry))
            return s

        # Retry's allowed_methods cannot look at headers, so requests carrying an Idempotency-Key go through a
        # session whose Retry may replay POST and PATCH; everything else through one that replays only
        # idempotent methods. The token endpoint is called through the latter: a refresh is never replayed.
        self._plain = session(IDEMPOTENT_METHODS)
        self._keyed = session(IDEMPOTENT_METHODS | {"POST", "PATCH"})

    @property
    def token(self):
        return self._token

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json=None, idempotency_key=None, **kw):
        # One key per logical POST: every retry of it carries the same key.
        return self.request("POST", path, json=json, idempotency_key=idempotency_key or str(uuid.uuid4()), **kw)

    def request(self, method, path, *, json=None, headers=None, idempotency_key=None):
        headers = dict(headers or {})
        session = self._plain
        if idempotency_key is not None:
            headers["Idempotency-Key"] = f'"{idempotency_key}"'  # an sf-string
            session = self._keyed
        refreshed = False
        while True:
            token = self._token
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            response = session.request(method, self.base_url + path, json=json, headers=headers,
                                       timeout=self.timeout)
            if response.status_code != 401 or self.token_path is None or refreshed:
                return response
            self._refresh(stale=token)
            refreshed = True

    def _refresh(self, stale):
        """Single flight: one refresh at a time, and none when the token already changed since `stale` was read
        (another request refreshed while this one waited for its 401)."""
        with self._refresh_lock:
            if self._token != stale:
                return
            form = {"grant_type": "refresh_token", "refresh_token": self._refresh_token} if self._refresh_token \
                else {"grant_type": "client_credentials"}
            response = self._plain.post(self.base_url + self.token_path, data=form, timeout=self.timeout)
            self.refresh_calls += 1
            response.raise_for_status()
            body = response.json()
            self._token = body["access_token"]
            self._refresh_token = body.get("refresh_token", self._refresh_token)


class NaiveClient:
    def __init__(self, base_url, *, token_path=None, access_token=None, attempts=4, timeout=5.0):
        self.base_url = base_url.rstrip("/")
        self.token_path = token_path
        self.attempts = attempts
        self.timeout = timeout
        self.token = access_token
        self.session = requests.Session()  # no retry adapter: the loop below is all there is

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json=None, **kw):
        return self.request("POST", path, json=json, **kw)

    def request(self, method, path, *, json=None, headers=None):
        """Up to `attempts` tries with no pause, whatever happened; returns the last response (None if none)."""
        last = None
        for _ in range(self.attempts):
            sent = dict(headers or {})
            if self.token is not None:
                sent["Authorization"] = f"Bearer {self.token}"
            try:
                last = self.session.request(method, self.base_url + path, json=json, headers=sent,
                                            timeout=self.timeout)
            except requests.RequestException:
                continue
            if last.status_code == 401 and self.token_path is not None:
                self._refresh()
            if 200 <= last.status_code < 300:
                return last
        return last

    def _refresh(self):
        response = requests.post(self.base_url + self.token_path, data={"grant_type": "client_credentials"},
                                 timeout=self.timeout)
        if response.status_code == 200:
            self.token = response.json()["access_token"]


def fixed_schedule_get(url, delays, *, timeout=5.0, done=lambda response: response.status_code < 500):
    """GET `url` until `done(response)`, waiting delays[i] seconds after the start of attempt i before attempt
    i+1 (deadline-based, so the intervals between requests are the schedule however long each exchange took).
    Returns the responses. A constant schedule is a retry loop without backoff."""
    responses = []
    with requests.Session() as session:
        start = time.monotonic()
        for delay in [*delays, None]:
            responses.append(session.get(url, timeout=timeout))
            if done(responses[-1]) or delay is None:
                break
            start += delay
            time.sleep(max(0.0, start - time.monotonic()))
    return responses
