"""HTTPS end to end over loopback: curl, Python requests / httpx / ssl, and Go's net/http against `serve --tls-port`.

Every expectation here was measured (curl 7.88 on OpenSSL 3.0, Python's ssl on OpenSSL 3, Go's crypto/tls): each
catalogue certificate's error per client, each handshake fault, mutual TLS, resumption, pinning, bad input, and
HTTP/1.1 features over TLS. Each test has its own server and its own `--tls-dir` under tmp_path (creating the
authority takes milliseconds). Nothing sleeps: the journal is long-polled or polled with a deadline.

test_certificate_catalogue chooses each catalogue certificate both ways: with `--tls-certificate NAME`, the client
asking for `localhost`, and by server name, the client asking for `NAME.localhost`."""

import base64
import hashlib
import json
import math
import os
import re
import socket
import ssl
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


CERTIFICATES = ["valid", "expired", "not-yet-valid", "wrong-host", "self-signed", "untrusted-root", "incomplete-chain",
                "expired-intermediate", "cn-only", "no-server-auth-eku", "too-long-validity", "weak-key", "rotated"]
ALERTS = ["handshake_failure", "protocol_version", "unrecognized_name", "bad_certificate", "internal_error"]
BODY = "hello over tls"


def scenario(tls=None, fault=None, name="tls"):
    response = {"status": 200, "text": BODY}
    if fault is not None:
        response["fault"] = fault
    document = {"name": name, "routes": [{"id": "hi", "match": {"method": "GET", "path": "/hi"},
                                          "responses": [response]}]}
    if tls is not None:
        document["tls"] = tls
    return document


@pytest.fixture
def https(start_faultline, write_scenario, tmp_path):
    """https(tls=None, fault=None, args=()) -> a server with a TLS port; server.ca is the CA file to trust."""

    def start(tls=None, fault=None, args=(), tls_dir=None):
        path = write_scenario(scenario(tls, fault), name="tls.json")
        folder = tls_dir or tmp_path / "tls"
        server = start_faultline(path, args=["--tls-port", "0", "--tls-dir", folder, *args])
        server.tls_dir = Path(folder)
        server.ca = Path(folder) / "ca.pem"
        return server

    return start


def curl(server, *extra, host="localhost", path="/hi", max_time=5):
    completed = subprocess.run(["curl", "-sS", "--max-time", str(max_time), "--cacert", str(server.ca), *extra,
                                f"https://{host}:{server.tls_port}{path}"],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=max_time + 10)
    return completed.returncode, completed.stdout, completed.stderr


def python_requests(server, host="localhost", **kw):
    kw.setdefault("timeout", 5)
    try:
        response = requests.get(f"https://{host}:{server.tls_port}/hi", verify=str(server.ca), **kw)
        return response, None
    except Exception as error:  # the test compares the type and the message
        return None, error


def python_httpx(server, host="localhost", **kw):
    kw.setdefault("timeout", 5)
    try:
        verify = ssl.create_default_context(cafile=str(server.ca))  # httpx 0.28: verify=<str> is deprecated
        response = httpx.get(f"https://{host}:{server.tls_port}/hi", verify=verify, **kw)
        return response, None
    except Exception as error:
        return None, error


def go(go_client, server, *flags, host="localhost", timeout="5s", env=None):
    """Tests/Python/clients/goclient's JSON line for GET /hi: with -cacert, unless `env` provides the trust."""
    trust = [] if env is not None else ["-cacert", server.ca]
    command = [str(c) for c in [go_client, "-timeout", timeout, *trust, *flags, f"https://{host}:{server.tls_port}/hi"]]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                               env=None if env is None else {**os.environ, **env})
    assert completed.returncode == 0, completed.stderr
    (line,) = completed.stdout.splitlines()
    return json.loads(line)


def s_client(server, server_name, *extra):
    """One handshake by `openssl s_client -servername NAME -showcerts` (stdin empty: it closes right after the
    handshake). Returns its output and the certificates the server sent, leaf first."""
    completed = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{server.tls_port}", "-servername", server_name,
         "-CAfile", str(server.ca), "-showcerts", *extra],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    pems = re.findall(r"-----BEGIN CERTIFICATE-----\n.*?-----END CERTIFICATE-----\n", completed.stdout, re.S)
    return completed, [x509.load_pem_x509_certificate(pem.encode()) for pem in pems]


def new_entries(server, seen, timeout_ms=5000):
    """Waits until the journal holds more than `seen` entries; returns the new ones."""
    server.wait_for(seen + 1, timeout_ms=timeout_ms)
    return server.journal()[seen:]


def poll(condition, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout} s"
        time.sleep(0.02)


def spki_pin(der):
    """`sha256/BASE64` of a certificate's SubjectPublicKeyInfo (HPKP's pin, OkHttp's CertificatePinner)."""
    key = x509.load_der_x509_certificate(der).public_key()
    spki = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256/" + base64.b64encode(hashlib.sha256(spki).digest()).decode()


def client_hello(server_hostname="localhost"):
    """The bytes of a real ClientHello (Python's ssl over memory BIOs)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


# -- 1. clients fetch over HTTPS -------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_every_client_fetches_over_https(https, go_client, host):
    server = https()
    code, out, err = curl(server, host=host)
    assert (code, out) == (0, BODY), err
    response, error = python_requests(server, host=host)
    assert error is None and response.status_code == 200 and response.text == BODY, error
    response, error = python_httpx(server, host=host)
    assert error is None and response.status_code == 200 and response.text == BODY, error
    # Go reads SSL_CERT_FILE on Linux: the exported CA, without -cacert.
    result = go(go_client, server, host=host, env={"SSL_CERT_FILE": str(server.ca)})
    assert result["status"] == 200 and result["bodyLength"] == len(BODY), result
    entries = server.wait_for(4, route="hi")
    for entry in entries:
        tls = entry["tls"]
        assert tls["handshake"] == "completed" and tls["certificate"] == "valid" and tls["version"] == "TLSv1.3"
        # No SNI for an IP literal (RFC 6066 §3).
        assert tls["serverName"] == (host if host == "localhost" else None)
        assert tls["alpn"] == entry["protocol"], entry
    # The server offers h2 first: curl and Go's default transport take it; requests and httpx (without
    # http2=True) offer only http/1.1.
    assert [entry["protocol"] for entry in entries] == ["h2", "http/1.1", "http/1.1", "h2"]
    assert [entry["tls"]["alpnOffered"] for entry in entries][:3] == [["h2", "http/1.1"], ["http/1.1"], ["http/1.1"]]
    assert server.journal()[0]["tls"] is not None
    plain = requests.get(f"{server.url}/hi", timeout=5)
    assert plain.text == BODY and server.journal(route="hi")[-1]["tls"] is None


def test_ipv6_loopback(https, go_client):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("::1 cannot be bound here")
    server = https(args=["--host", "::1"])
    assert server.https_url.startswith("https://[::1]:")
    code, out, err = curl(server, host="[::1]")
    assert (code, out) == (0, BODY), err
    response, error = python_requests(server, host="[::1]")
    assert error is None and response.text == BODY, error
    result = go(go_client, server, host="[::1]")
    assert result["status"] == 200, result


# -- 2. the certificate catalogue ------------------------------------------------------------------------

# curl (exit code, stderr fragment); None: success.
CURL_VERDICT = {
    "valid": None,
    "expired": (60, "SSL certificate problem: certificate has expired"),
    "not-yet-valid": (60, "SSL certificate problem: certificate is not yet valid"),
    "wrong-host": (60, "no alternative certificate subject name matches target host name 'localhost'"),
    "self-signed": (60, "SSL certificate problem: self-signed certificate"),
    "untrusted-root": (60, "SSL certificate problem: unable to get local issuer certificate"),
    "incomplete-chain": (60, "SSL certificate problem: unable to get local issuer certificate"),
    "expired-intermediate": (60, "SSL certificate problem: certificate has expired"),
    "cn-only": None,            # curl falls back to the CN when there is no subjectAltName
    "no-server-auth-eku": (60, "SSL certificate problem: unsuitable certificate purpose"),
    "too-long-validity": None,  # only Apple limits validity
    "weak-key": (60, "SSL certificate problem: EE certificate key too weak"),  # OpenSSL security level 2
    "rotated": None,            # same names and issuer; only a pinned client notices
}
# Python's ssl (requests and httpx): the verify message; None: success.
PYTHON_VERDICT = {
    "valid": None,
    "expired": "certificate has expired",
    "not-yet-valid": "certificate is not yet valid",
    "wrong-host": "Hostname mismatch, certificate is not valid for 'localhost'",
    "self-signed": "self-signed certificate",
    "untrusted-root": "unable to get local issuer certificate",
    "incomplete-chain": "unable to get local issuer certificate",
    "expired-intermediate": "certificate has expired",
    "cn-only": "Hostname mismatch, certificate is not valid for 'localhost'",  # requests (urllib3 2) only
    "no-server-auth-eku": "unsuitable certificate purpose",
    "too-long-validity": None,
    "weak-key": "EE certificate key too weak",
    "rotated": None,
}
# Go: the error fragment; None: success.
GO_VERDICT = {
    "valid": None,
    "expired": "x509: certificate has expired or is not yet valid: current time",
    "not-yet-valid": "x509: certificate has expired or is not yet valid: current time",
    "wrong-host": "x509: certificate is valid for wrong-host.invalid, not localhost",
    "self-signed": "x509: certificate signed by unknown authority",
    "untrusted-root": "x509: certificate signed by unknown authority",
    "incomplete-chain": "x509: certificate signed by unknown authority",
    "expired-intermediate": "x509: certificate has expired or is not yet valid: current time",
    "cn-only": "x509: certificate relies on legacy Common Name field, use SANs instead",
    "no-server-auth-eku": "x509: certificate specifies an incompatible key usage",
    "too-long-validity": None,
    "weak-key": None,  # Go accepts RSA 1024
    "rotated": None,
}
# openssl s_client -verify_hostname HOST -verify_return_error: its "Verify return code" (0: the handshake completes).
S_CLIENT_VERDICT = {
    "valid": "0 (ok)",
    "expired": "10 (certificate has expired)",
    "not-yet-valid": "9 (certificate is not yet valid)",
    "wrong-host": "62 (hostname mismatch)",
    "self-signed": "18 (self-signed certificate)",
    "untrusted-root": "20 (unable to get local issuer certificate)",
    "incomplete-chain": "20 (unable to get local issuer certificate)",
    "expired-intermediate": "10 (certificate has expired)",
    "cn-only": "0 (ok)",        # OpenSSL's host check falls back to the CN when there is no subjectAltName
    "no-server-auth-eku": "26 (unsuitable certificate purpose)",
    "too-long-validity": "0 (ok)",
    "weak-key": "66 (EE certificate key too weak)",
    "rotated": "0 (ok)",
}
# The alert the client sends (journal alertReceived), for OpenSSL clients and Go. curl checks the host name
# after the handshake and closes without an alert ("completed", no request).
OPENSSL_ALERT = {
    "expired": "certificate_expired", "not-yet-valid": "bad_certificate", "wrong-host": "bad_certificate",
    "self-signed": "unknown_ca", "untrusted-root": "unknown_ca", "incomplete-chain": "unknown_ca",
    "expired-intermediate": "certificate_expired", "cn-only": "bad_certificate",
    "no-server-auth-eku": "unsupported_certificate", "weak-key": "bad_certificate",
}
GO_ALERT = "bad_certificate"   # Go sends bad_certificate for every verification failure


def check_failed_handshake(server, seen, certificate, alert):
    (entry,) = new_entries(server, seen)
    tls = entry["tls"]
    assert entry["kind"] == "connection" and tls["certificate"] == certificate, entry
    if alert is None:  # curl: the handshake completed, then curl hung up
        assert tls["handshake"] == "completed" and "alertReceived" not in tls, entry
    else:
        assert tls["handshake"] == "client-alert" and tls["alertReceived"] == alert, entry


# Chosen by server name (NAME.localhost, on a listener serving `valid`) the verdicts are the same except for the
# two certificates that do not name NAME.localhost: wrong-host's errors name the host asked for, and cn-only,
# whose one name is its CN=localhost, is refused by every client.
BY_NAME_CURL_VERDICT = {
    "wrong-host": (60, "no alternative certificate subject name matches target host name 'wrong-host.localhost'"),
    "cn-only": (60, "SSL: certificate subject name 'localhost' does not match target host name 'cn-only.localhost'"),
}
BY_NAME_PYTHON_VERDICT = {
    "wrong-host": "Hostname mismatch, certificate is not valid for 'wrong-host.localhost'",
    "cn-only": "Hostname mismatch, certificate is not valid for 'cn-only.localhost'",
}
BY_NAME_S_CLIENT_VERDICT = {"wrong-host": "62 (hostname mismatch)", "cn-only": "62 (hostname mismatch)"}
BY_NAME_GO_VERDICT = {
    "wrong-host": "x509: certificate is valid for wrong-host.invalid, not wrong-host.localhost",
    "cn-only": "x509: certificate is not valid for any names, but wanted to match cn-only.localhost",
}


def resolve_localhost_names(monkeypatch):
    """Makes NAME.localhost resolve to 127.0.0.1 in this process, as curl and browsers do and glibc does not."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("certificate", CERTIFICATES)
@pytest.mark.parametrize("way", ["tls-certificate", "server-name"])
def test_certificate_catalogue(https, go_client, monkeypatch, way, certificate):
    """Each client's verdict on each catalogue certificate, chosen by `--tls-certificate NAME` (the client asks for
    `localhost`) or by server name (the client asks for `NAME.localhost`)."""
    curl_verdict, python_verdict, go_verdict, s_client_verdict = (
        CURL_VERDICT[certificate], PYTHON_VERDICT[certificate], GO_VERDICT[certificate], S_CLIENT_VERDICT[certificate])
    # curl checks the host name after the handshake and closes without an alert.
    curl_checks_host = certificate == "wrong-host"
    # ssl.create_default_context keeps the CN fallback (hostname_checks_common_name); urllib3 2 turns it off.
    httpx_verdict = None if certificate == "cn-only" else python_verdict
    if way == "tls-certificate":
        server = https(args=["--tls-certificate", certificate])
        host, curl_flags, go_flags, go_host = "localhost", [], [], "localhost"
    else:
        server = https()
        host = f"{certificate}.localhost"
        curl_flags = ["--connect-to", f"{host}:{server.tls_port}:127.0.0.1:{server.tls_port}"]
        go_flags, go_host = ["-servername", host], "127.0.0.1"
        resolve_localhost_names(monkeypatch)
        curl_verdict = BY_NAME_CURL_VERDICT.get(certificate, curl_verdict)
        python_verdict = httpx_verdict = BY_NAME_PYTHON_VERDICT.get(certificate, python_verdict)
        go_verdict = BY_NAME_GO_VERDICT.get(certificate, go_verdict)
        s_client_verdict = BY_NAME_S_CLIENT_VERDICT.get(certificate, s_client_verdict)
        curl_checks_host = certificate in ("wrong-host", "cn-only")
    seen = len(server.journal())

    code, out, err = curl(server, *curl_flags, host=host)
    if curl_verdict is not None:
        expected_code, fragment = curl_verdict
        assert code == expected_code and fragment in err, (code, err)
        check_failed_handshake(server, seen, certificate, None if curl_checks_host else OPENSSL_ALERT[certificate])
    else:
        assert (code, out) == (0, BODY), err
        new_entries(server, seen)
    seen += 1

    response, error = python_requests(server, host=host)
    if python_verdict is None:
        assert error is None and response.text == BODY, error
        seen += 1
    else:
        assert isinstance(error, requests.exceptions.SSLError), repr(error)
        assert "CERTIFICATE_VERIFY_FAILED" in str(error) and python_verdict in str(error), str(error)
        check_failed_handshake(server, seen, certificate, OPENSSL_ALERT[certificate])
        seen += 1

    response, error = python_httpx(server, host=host)
    if httpx_verdict is None:
        assert error is None and response.text == BODY, error
        seen += 1
    else:
        assert isinstance(error, httpx.ConnectError), repr(error)
        assert httpx_verdict in str(error), str(error)
        check_failed_handshake(server, seen, certificate, OPENSSL_ALERT[certificate])
        seen += 1

    result = go(go_client, server, *go_flags, host=go_host)
    if go_verdict is None:
        assert result["status"] == 200 and result["bodyLength"] == len(BODY), result
    else:
        assert result["phase"] == "do" and go_verdict in result["error"], result
        check_failed_handshake(server, seen, certificate, GO_ALERT)
    seen += 1

    completed, _ = s_client(server, host, "-verify_hostname", host, "-verify_return_error")
    assert f"Verify return code: {s_client_verdict}" in completed.stdout, completed.stdout + completed.stderr
    if s_client_verdict == "0 (ok)":  # stdin is empty: it closes right after the handshake
        assert completed.returncode == 0, completed.stderr
        check_failed_handshake(server, seen, certificate, None)
    else:
        assert completed.returncode == 1, completed.stdout
        check_failed_handshake(server, seen, certificate, OPENSSL_ALERT[certificate])
    if certificate == "not-yet-valid":
        assert "is before" in result["error"]
    if certificate in ("expired", "expired-intermediate"):
        assert "is after" in result["error"]


def test_sni_selects_the_certificate(https, go_client):
    """NAME.localhost picks the certificate, and each certificate names NAME.localhost (OpenSSL clients do not
    match `*.localhost`, which wants two labels before it; Go does)."""
    server = https()
    result = go(go_client, server, "-servername", "valid.localhost", host="127.0.0.1")
    assert result["status"] == 200, result
    result = go(go_client, server, "-servername", "expired.localhost", host="127.0.0.1")
    assert "x509: certificate has expired" in result["error"], result
    result = go(go_client, server, "-servername", "self-signed.localhost", host="127.0.0.1")
    assert "x509: certificate signed by unknown authority" in result["error"], result
    entries = server.journal()
    assert [(e["tls"]["serverName"], e["tls"]["certificate"]) for e in entries] == [
        ("valid.localhost", "valid"), ("expired.localhost", "expired"), ("self-signed.localhost", "self-signed")]
    # Every catalogue certificate names itself under localhost, so OpenSSL clients accept valid.localhost too.
    code, out, err = curl(server, "--connect-to", f"valid.localhost:{server.tls_port}:127.0.0.1:{server.tls_port}",
                          host="valid.localhost")
    assert (code, out) == (0, BODY), err
    code, _, err = curl(server, "--connect-to", f"expired.localhost:{server.tls_port}:127.0.0.1:{server.tls_port}",
                        host="expired.localhost")
    assert code == 60 and "certificate has expired" in err, err



# -- 2a. the certificate on the wire is the one the journal names --------------------------------------

# The intermediate sent after each leaf (openssl s_client -showcerts); None: the leaf alone.
CHAIN = {name: "Faultline Intermediate CA" for name in CERTIFICATES}
CHAIN.update({"self-signed": None, "untrusted-root": None, "incomplete-chain": None,
              "expired-intermediate": "Faultline Expired Intermediate CA"})
ISSUER = {**CHAIN, "self-signed": "localhost", "untrusted-root": "Faultline Untrusted CA",
          "incomplete-chain": "Faultline Intermediate CA"}


def expected_leaf(name):
    """What catalogue certificate `name` is (CertificateAuthority.issue): key, subject, subjectAltName."""
    key = ("RSA", 1024) if name == "weak-key" else ("EC", "secp256r1")
    common_name = "wrong-host.invalid" if name == "wrong-host" else "localhost"
    if name == "cn-only":
        san = None
    elif name == "wrong-host":
        san = ["DNS:wrong-host.invalid"]
    else:
        san = ["DNS:localhost", "DNS:*.localhost", f"DNS:{name}.localhost", "IP:127.0.0.1", "IP:::1"]
    return {"key": key, "subject": f"CN={common_name},O=Faultline", "san": san, "issuer": ISSUER[name],
            "chain": [CHAIN[name]] if CHAIN[name] else []}


def describe_leaf(certificates):
    """The same description of what a server sent: its leaf first, then the chain."""
    leaf, chain = certificates[0], certificates[1:]
    key = leaf.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        kind = ("RSA", key.key_size)
    else:
        assert isinstance(key, ec.EllipticCurvePublicKey), key
        kind = ("EC", key.curve.name)
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        san = [f"DNS:{n}" for n in names.get_values_for_type(x509.DNSName)] + [
            f"IP:{a}" for a in names.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        san = None

    def common_name(name):
        return name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value

    return {"key": kind, "subject": leaf.subject.rfc4514_string(), "san": san, "issuer": common_name(leaf.issuer),
            "chain": [common_name(c.subject) for c in chain]}


def catalogue_pins(run_cli, server):
    """`faultline ca --pins` for the server's --tls-dir: {name: "sha256/…"}."""
    listed = run_cli("ca", "--tls-dir", server.tls_dir, "--pins")
    assert listed.returncode == 0, listed.stderr
    pins = dict(line.split(" ", 1) for line in listed.stdout.splitlines() if line.strip())
    assert sorted(pins) == sorted(CERTIFICATES) and len(set(pins.values())) == len(CERTIFICATES), pins
    return pins


def check_served(server, seen, pins, name, server_name):
    """Handshakes asking for `server_name` where `name` is to be served: what s_client received is `name`'s
    certificate (key, subject, subjectAltName, issuer, chain, pin), and the journal names `name` too."""
    completed, certificates = s_client(server, server_name)
    assert completed.returncode == 0 and certificates, completed.stdout + completed.stderr
    served_pin = spki_pin(certificates[0].public_bytes(serialization.Encoding.DER))
    served_name = {pin: n for n, pin in pins.items()}.get(served_pin)
    (entry,) = new_entries(server, seen)
    tls = entry["tls"]
    # The journal claims `name`; the pin says which certificate was really sent.
    assert (tls["certificate"], served_name) == (name, name), (server_name, tls)
    assert describe_leaf(certificates) == expected_leaf(name), server_name
    assert tls["serverName"] == server_name and tls["handshake"] == "completed", tls
    if name == "weak-key":
        # OpenSSL's own report of the key it was sent.
        key_line, signature_line = "Server public key is 1024 bit", "Peer signature type: RSA-PSS"
    else:
        key_line, signature_line = "Server public key is 256 bit", "Peer signature type: ECDSA"
    assert key_line in completed.stdout and signature_line in completed.stdout, completed.stdout


@pytest.mark.parametrize("way", ["server-name", "scenario", "tls-certificate"])
def test_the_certificate_served_is_the_one_journaled(https, run_cli, way):
    """Every catalogue certificate, chosen each way a connection can choose one (README: A connection gets one
    by), is the certificate on the wire: the journal's `tls.certificate`, the served leaf's key and names, and its
    pin in `faultline ca --pins` all agree. (The RSA weak-key once went out as valid's P-256 certificate when
    chosen by name or scenario, journaled weak-key.)"""
    if way == "tls-certificate":
        for name in CERTIFICATES:
            server = https(args=["--tls-certificate", name])
            check_served(server, len(server.journal()), catalogue_pins(run_cli, server), name, "localhost")
            server.stop()
        return
    if way == "server-name":
        server = https()
    else:
        server = https(tls={"handshakes": [{"certificate": name} for name in CERTIFICATES]})
    pins = catalogue_pins(run_cli, server)
    for seen, name in enumerate(CERTIFICATES):
        check_served(server, seen, pins, name, f"{name}.localhost" if way == "server-name" else "localhost")



@pytest.mark.parametrize("way", ["server-name", "scenario"])
def test_an_rsa_only_client_is_not_sent_the_listeners_rsa_certificate(https, way):
    """The reverse of the weak-key mix-up: with the RSA weak-key as the listener's certificate and the P-256
    `valid` chosen for the connection, a client that offers only RSA signature algorithms once got weak-key's
    certificate, journaled `valid`. It is refused, as a `valid` listener refuses it."""
    rsa_only = ["-sigalgs", "rsa_pss_rsae_sha256:rsa_pkcs1_sha256"]
    if way == "server-name":
        server = https(args=["--tls-certificate", "weak-key"])
        server_names = ["valid.localhost", "weak-key.localhost"]
    else:
        server = https(tls={"handshakes": [{"certificate": "valid"}, {"certificate": "weak-key"}]},
                       args=["--tls-certificate", "weak-key"])
        server_names = ["localhost", "localhost"]
    completed, certificates = s_client(server, server_names[0], *rsa_only)
    assert certificates == [] and "alert handshake failure" in completed.stderr, completed.stdout + completed.stderr
    (entry,) = new_entries(server, 0)
    tls = entry["tls"]
    assert (tls["certificate"], tls["handshake"], tls["alertSent"]) == ("valid", "alert-sent", "handshake_failure")
    assert tls["error"] == "no suitable signature algorithm", tls
    # The same client still gets weak-key when it is the certificate chosen.
    completed, certificates = s_client(server, server_names[1], *rsa_only)
    assert "Server public key is 1024 bit" in completed.stdout, completed.stdout + completed.stderr
    assert describe_leaf(certificates) == expected_leaf("weak-key")
    assert new_entries(server, 1)[0]["tls"]["certificate"] == "weak-key"


# -- 3. handshake faults ---------------------------------------------------------------------------------

CURL_ALERT_TEXT = {
    "handshake_failure": "sslv3 alert handshake failure", "protocol_version": "tlsv1 alert protocol version",
    "unrecognized_name": "tlsv1 unrecognized name", "bad_certificate": "sslv3 alert bad certificate",
    "internal_error": "tlsv1 alert internal error",
}
PYTHON_ALERT_REASON = {
    "handshake_failure": "SSLV3_ALERT_HANDSHAKE_FAILURE", "protocol_version": "TLSV1_ALERT_PROTOCOL_VERSION",
    "unrecognized_name": "TLSV1_UNRECOGNIZED_NAME", "bad_certificate": "SSLV3_ALERT_BAD_CERTIFICATE",
    "internal_error": "TLSV1_ALERT_INTERNAL_ERROR",
}
GO_ALERT_TEXT = {
    "handshake_failure": "remote error: tls: handshake failure",
    "protocol_version": "remote error: tls: protocol version not supported",
    "unrecognized_name": "remote error: tls: unrecognized name",
    "bad_certificate": "remote error: tls: bad certificate", "internal_error": "remote error: tls: internal error",
}


@pytest.mark.parametrize("alert", ALERTS)
def test_alert(https, go_client, alert):
    server = https(tls={"handshakes": [{"fault": {"type": "alert", "alert": alert}}]})
    code, _, err = curl(server)
    assert code == 35 and CURL_ALERT_TEXT[alert] in err, err
    _, error = python_requests(server)
    assert isinstance(error, requests.exceptions.SSLError) and PYTHON_ALERT_REASON[alert] in str(error), repr(error)
    _, error = python_httpx(server)
    assert isinstance(error, httpx.ConnectError) and PYTHON_ALERT_REASON[alert] in str(error), repr(error)
    result = go(go_client, server)
    assert result["error"].endswith(GO_ALERT_TEXT[alert]) and "tls.alert" in result["chain"], result
    entries = server.wait_for(4, connection=True)
    for entry in entries:
        tls = entry["tls"]
        assert (tls["handshake"], tls["alertSent"], tls["fault"], tls["step"]) == ("alert-sent", alert, "alert", 0)
    assert server.journal(route="hi") == []


def test_handshake_hang(https, go_client):
    server = https(tls={"handshakes": [{"fault": "handshake-hang"}]})
    start = time.monotonic()
    code, _, err = curl(server, max_time=1)
    assert code == 28 and "Connection timed out after" in err and time.monotonic() - start >= 1.0, err
    _, error = python_requests(server, timeout=1)
    assert isinstance(error, requests.exceptions.ReadTimeout), repr(error)
    _, error = python_httpx(server, timeout=1)
    assert isinstance(error, httpx.ConnectTimeout) and "handshake operation timed out" in str(error), repr(error)
    result = go(go_client, server, timeout="1s")
    assert result["timeout"] and "Client.Timeout exceeded" in result["error"], result

    def released():
        entries = server.journal(connection=True)
        return len(entries) == 4 and all(e["tls"]["handshake"] == "hang-released" for e in entries) and entries

    for entry in poll(released, what="four hang-released entries"):
        assert entry["tls"]["fault"] == "handshake-hang" and entry["tls"]["handshakeMs"] >= 900, entry


def test_slow_handshake(https, go_client):
    size, interval = 100, 50
    server = https(tls={"handshakes": [{"fault": {"type": "slow-handshake", "size": size, "intervalMs": interval}}]})
    # The server's flight holds at least the leaf and the intermediate: a lower bound on the ticks.
    context = ssl.create_default_context(cafile=str(server.ca))
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.tls_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            elapsed = time.monotonic() - start
            leaf = tls.getpeercert(binary_form=True)
            tls.sendall(b"GET /hi HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    intermediate = ssl.PEM_cert_to_DER_cert((server.tls_dir / "intermediate.pem").read_text())
    floor_ms = (math.ceil((len(leaf) + len(intermediate)) / size) - 1) * interval
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(BODY.encode()), data
    assert elapsed * 1000 >= floor_ms, (elapsed, floor_ms)
    # The other clients complete it too, and read the response after it (TLS 1.3 session tickets included).
    code, out, err = curl(server)
    assert (code, out) == (0, BODY), err
    response, error = python_requests(server)
    assert error is None and response.text == BODY, error
    response, error = python_httpx(server)
    assert error is None and response.text == BODY, error
    result = go(go_client, server)
    assert result["status"] == 200 and result["bodyLength"] == len(BODY), result
    entries = server.wait_for(5, route="hi")
    for entry in entries:
        tls = entry["tls"]
        assert tls["handshake"] == "completed" and tls["fault"] == "slow-handshake", entry
        assert tls["handshakeMs"] >= floor_ms, (tls, floor_ms)


def test_handshake_reset(https, go_client):
    server = https(tls={"handshakes": [{"fault": "handshake-reset"}]})
    code, _, err = curl(server)
    assert code == 35 and "Connection reset by peer" in err, err
    _, error = python_requests(server)
    assert isinstance(error, requests.exceptions.ConnectionError), repr(error)
    assert "ConnectionResetError(104" in str(error), str(error)
    _, error = python_httpx(server)
    assert isinstance(error, httpx.ConnectError) and "[Errno 104] Connection reset by peer" in str(error), repr(error)
    result = go(go_client, server)
    assert "ECONNRESET" in result["is"] and result["error"].endswith("read: connection reset by peer"), result
    entries = server.wait_for(4, connection=True)
    assert [e["tls"]["handshake"] for e in entries] == ["reset-sent"] * 4


def test_version_cap_refuses_default_clients(https, go_client):
    server = https(tls={"handshakes": [{"maxVersion": "1.1"}]})
    _, error = python_requests(server)
    assert isinstance(error, requests.exceptions.SSLError) and "TLSV1_ALERT_PROTOCOL_VERSION" in str(error)
    _, error = python_httpx(server)
    assert isinstance(error, httpx.ConnectError) and "TLSV1_ALERT_PROTOCOL_VERSION" in str(error)
    result = go(go_client, server)
    assert result["error"].endswith("remote error: tls: protocol version not supported"), result
    # A cap below 1.2 means "TLS 1.0 and 1.1 only" (the minimum goes down with it): a client that offers them
    # gets through. curl at its default settings fails on its own side (it refuses TLS 1.1's SHA-1 signature).
    code, _, err = curl(server)
    assert code == 35 and "legacy sigalg disallowed or unsupported" in err, err
    code, out, err = curl(server, "--tlsv1.0", "--tls-max", "1.1", "--ciphers", "DEFAULT@SECLEVEL=0")
    assert (code, out) == (0, BODY), err
    entries = server.wait_for(4, connection=True)
    for entry in entries[:3]:
        assert (entry["tls"]["handshake"], entry["tls"]["alertSent"], entry["tls"]["error"]) == (
            "alert-sent", "protocol_version", "unsupported protocol"), entry
    assert entries[3]["tls"]["handshake"] == "client-alert", entries[3]
    (entry,) = server.wait_for(1, route="hi")
    assert entry["tls"]["version"] == "TLSv1.1", entry


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_legacy_versions_with_a_legacy_client(https, version):
    server = https(tls={"handshakes": [{"minVersion": "1.0", "maxVersion": "1.1"}]})
    code, out, err = curl(server, f"--tlsv{version}", "--tls-max", version, "--ciphers", "DEFAULT@SECLEVEL=0")
    assert (code, out) == (0, BODY), err
    (entry,) = server.wait_for(1, route="hi")
    assert entry["tls"]["version"] == f"TLSv{version}", entry


def test_client_certificate_required(https, go_client, run_cli, tmp_path):
    server = https(tls={"clientCertificate": "required"})
    # TLS 1.3 sends the alert after the client's Finished, when the client may already have sent its request:
    # the server lingers (FIN after the alert, the request read and dropped) so the alert arrives, not an RST.
    code, _, err = curl(server)
    assert code == 56 and "tlsv13 alert certificate required" in err, err
    _, error = python_requests(server)
    assert isinstance(error, requests.exceptions.SSLError) and "TLSV13_ALERT_CERTIFICATE_REQUIRED" in str(error)
    result = go(go_client, server)
    assert result["error"].endswith("remote error: tls: certificate required"), result
    # Each client makes at least one attempt; one of them occasionally dials a second connection after
    # the refusal (CI saw four), so the count is a floor and every attempt must carry the same alert.
    entries = server.wait_for(3, connection=True)
    assert len(entries) >= 3 and {(e["tls"]["alertSent"], e["tls"]["error"]) for e in entries} == {
        ("certificate_required", "peer did not return a certificate")}, entries

    out = tmp_path / "client"  # `ca --client-cert --out` creates the folder
    issued = run_cli("ca", "--tls-dir", server.tls_dir, "--client-cert", "alice", "--out", out)
    assert issued.returncode == 0, issued.stderr
    cert, key = out / "alice.pem", out / "alice-key.pem"
    code, body, err = curl(server, "--cert", str(cert), "--key", str(key))
    assert (code, body) == (0, BODY), err
    response, error = python_requests(server, cert=(str(cert), str(key)))
    assert error is None and response.text == BODY, error
    result = go(go_client, server, "-cert", cert, "-key", key)
    assert result["status"] == 200, result
    entries = server.wait_for(3, route="hi")
    for entry in entries:
        assert "CN=alice" in entry["tls"]["clientCertificate"], entry


def test_client_cert_out_folder(run_cli, tmp_path):
    """`ca --client-cert NAME --out DIR` creates DIR (mode 0700, it holds a key) but not its parents, and says
    which DIR it could not use."""
    tls_dir = tmp_path / "tls"
    out = tmp_path / "new"
    issued = run_cli("ca", "--tls-dir", tls_dir, "--client-cert", "alice", "--out", out)
    assert issued.returncode == 0, issued.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert (out / "alice.pem").is_file() and stat.S_IMODE((out / "alice-key.pem").stat().st_mode) == 0o600
    again = run_cli("ca", "--tls-dir", tls_dir, "--client-cert", "bob", "--out", out)
    assert again.returncode == 0 and (out / "bob.pem").is_file(), again.stderr

    deep = tmp_path / "missing" / "client"
    failed = run_cli("ca", "--tls-dir", tls_dir, "--client-cert", "alice", "--out", deep)
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr == (f"faultline: ca: cannot create the folder --out {deep}: "
                             "its parent folder does not exist\n")
    assert not deep.parent.exists()
    a_file = tmp_path / "file"
    a_file.write_text("")
    failed = run_cli("ca", "--tls-dir", tls_dir, "--client-cert", "alice", "--out", a_file)
    assert failed.returncode == 1 and failed.stderr == f"faultline: ca: --out {a_file} is not a folder\n", failed.stderr


def resumed_twice(server):
    """Two Python ssl connections, the second offering the first's session: (session_reused, journal resumed)."""
    context = ssl.create_default_context(cafile=str(server.ca))
    session = None
    reused = []
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", server.tls_port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
                tls.sendall(b"GET /hi HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := tls.recv(65536):  # TLS 1.3 tickets come after the handshake: read them
                    data += chunk
                assert data.endswith(BODY.encode()), data
                reused.append(tls.session_reused)
                session = tls.session
    entries = server.wait_for(2, route="hi")
    return reused, [e["tls"]["resumed"] for e in entries]


def test_resumption_on(https):
    server = https(tls={"resumption": True})
    assert resumed_twice(server) == ([False, True], [False, True])


def test_resumption_off(https):
    server = https(tls={"resumption": False})
    assert resumed_twice(server) == ([False, False], [False, False])


@pytest.mark.parametrize("cut", [None, 5])
def test_no_close_notify(https, go_client, cut):
    """Every client here takes a body ended by FIN without close_notify as complete, even when it was cut short:
    only a client that refuses a ragged EOF (Python ssl with suppress_ragged_eofs=False) notices."""
    fault = "no-close-notify" if cut is None else {"type": "no-close-notify", "bytes": cut}
    expected = BODY if cut is None else BODY[:cut]
    server = https(fault=fault)
    # An HTTP/1.1-only fault: over h2 the route answers RST_STREAM HTTP_1_1_REQUIRED, and curl retries on a new
    # connection that offers only http/1.1 (Go does not: it fails, test_http2.py), so this costs curl nothing.
    code, out, err = curl(server)
    assert (code, out) == (0, expected), err
    response, error = python_requests(server)
    assert error is None and response.text == expected, error
    response, error = python_httpx(server)
    assert error is None and response.text == expected, error
    result = go(go_client, server, "-http1")
    assert result["status"] == 200 and result["bodyLength"] == len(expected) and "phase" not in result, result
    context = ssl.create_default_context(cafile=str(server.ca))
    with socket.create_connection(("127.0.0.1", server.tls_port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as tls:
            tls.sendall(b"GET /hi HTTP/1.1\r\nHost: localhost\r\n\r\n")
            data = b""
            with pytest.raises(ssl.SSLEOFError, match="EOF occurred in violation of protocol"):
                while chunk := tls.recv(65536):
                    data += chunk
    assert data.endswith(expected.encode()) and b"Content-Length" not in data, data
    entries = server.wait_for(6, route="hi")
    assert all(e["tls"]["handshake"] == "completed" for e in entries)
    # curl's first attempt, refused over h2 without playing the route.
    assert entries[0]["protocol"] == "h2" and entries[0]["response"]["outcome"] == "stream-reset", entries[0]
    assert "does not serve h2" in " ".join(entries[0]["notes"]) and entries[0]["step"] is None
    assert [e["protocol"] for e in entries[1:]] == ["http/1.1"] * 5


# -- 4. pinning ------------------------------------------------------------------------------------------


def pinned_fetch(server, pins):
    """A pinned client: verifies the chain as usual, then refuses a leaf whose SPKI hash is not pinned."""
    context = ssl.create_default_context(cafile=str(server.ca))
    with socket.create_connection(("127.0.0.1", server.tls_port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            pin = spki_pin(tls.getpeercert(binary_form=True))
            if pin not in pins:
                return pin, False
            tls.sendall(b"GET /hi HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
            assert data.endswith(BODY.encode())
            return pin, True


def test_pinning(https, run_cli):
    server = https(tls={"afterLast": "cycle", "handshakes": [{"certificate": "valid"}, {"certificate": "rotated"}]})
    listed = run_cli("ca", "--tls-dir", server.tls_dir, "--pins")
    assert listed.returncode == 0, listed.stderr
    pins = dict(line.split(" ", 1) for line in listed.stdout.splitlines() if line.strip())
    assert pins["valid"].startswith("sha256/") and pins["valid"] != pins["rotated"]
    # Also the pin the openssl CLI computes.
    pem = (server.tls_dir / "ca.pem").read_text()  # any certificate: the CLI pipeline must agree with spki_pin
    der = ssl.PEM_cert_to_DER_cert(pem)
    key = subprocess.run("openssl x509 -pubkey -noout | openssl pkey -pubin -outform der", shell=True,
                         input=pem.encode(), capture_output=True, check=True).stdout
    assert spki_pin(der) == "sha256/" + base64.b64encode(hashlib.sha256(key).digest()).decode()

    pin, accepted = pinned_fetch(server, {pins["valid"]})
    assert (pin, accepted) == (pins["valid"], True)
    pin, accepted = pinned_fetch(server, {pins["valid"]})
    assert (pin, accepted) == (pins["rotated"], False)
    both = {pins["valid"], pins["rotated"]}
    assert pinned_fetch(server, both) == (pins["valid"], True)
    assert pinned_fetch(server, both) == (pins["rotated"], True)
    assert [e["tls"]["certificate"] for e in server.journal()] == ["valid", "rotated", "valid", "rotated"]


# -- 5. bad input ----------------------------------------------------------------------------------------


def assert_still_serves(server):
    code, out, err = curl(server)
    assert (code, out) == (0, BODY), err


def test_plain_http_to_the_tls_port(https, raw_connect):
    server = https()
    connection = raw_connect(server.tls_port)
    connection.send("GET /hi HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data, closed = connection.read_until_close()
    assert data.startswith(b"HTTP/1.1 400") and closed is True, data
    (entry,) = server.wait_for(1, connection=True)
    assert (entry["tls"]["handshake"], entry["tls"]["error"]) == ("not-tls", "http request"), entry
    assert_still_serves(server)


def test_client_hello_to_the_plain_port(https):
    server = https()
    completed = subprocess.run(["curl", "-sS", "--max-time", "5", "--cacert", str(server.ca),
                                f"https://localhost:{server.port}/hi"], capture_output=True, text=True)
    assert completed.returncode == 35 and "wrong version number" in completed.stderr, completed.stderr
    entry = poll(lambda: [e for e in server.journal() if e["malformed"]], what="a malformed entry")[0]
    assert "a TLS handshake on the plain-HTTP port" in entry["error"] and entry["tls"] is None, entry
    assert_still_serves(server)


def test_garbage_to_the_tls_port(https, raw_connect):
    server = https()
    connection = raw_connect(server.tls_port)
    connection.send(bytes(range(1, 256)) * 4)
    _, closed = connection.read_until_close()
    assert closed in (True, "reset")
    (entry,) = server.wait_for(1, connection=True)
    assert entry["tls"]["handshake"] in ("not-tls", "failed") and entry["tls"]["error"], entry
    assert_still_serves(server)


def test_half_a_client_hello_then_close(https, raw_connect):
    server = https()
    hello = client_hello()
    connection = raw_connect(server.tls_port)
    connection.send(hello[: len(hello) // 2])
    connection.close()
    (entry,) = server.wait_for(1, connection=True)
    assert entry["tls"]["handshake"] in ("client-closed", "failed"), entry
    assert_still_serves(server)


def test_half_a_client_hello_then_silence(https, raw_connect):
    server = https(args=["--header-timeout", "300"])
    hello = client_hello()
    connection = raw_connect(server.tls_port)
    connection.send(hello[: len(hello) // 2])
    _, closed = connection.read_until_close(timeout=5)
    assert closed in (True, "reset")
    (entry,) = server.wait_for(1, connection=True)
    assert entry["tls"]["handshake"] == "timed-out" and entry["tls"]["handshakeMs"] >= 290, entry
    assert_still_serves(server)


# -- 6. security -----------------------------------------------------------------------------------------


def test_keys_are_private(https):
    server = https()
    folder = server.tls_dir
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    keys = [p for p in folder.rglob("*") if p.is_file() and p.name.endswith("-key.pem")]
    assert len(keys) >= 4, keys  # the three authorities and at least the served leaf
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_serve_refuses_a_world_writable_tls_dir(run_cli, tmp_path, write_scenario):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    completed = run_cli("serve", write_scenario(scenario()), "--port", "0", "--tls-port", "0", "--tls-dir", folder,
                        timeout=10)
    assert completed.returncode != 0 and str(folder) in completed.stderr, completed


# -- 7. HTTP/1.1 over TLS --------------------------------------------------------------------------------


def test_keep_alive_over_tls(https, go_client):
    server = https()
    with requests.Session() as session:
        for _ in range(3):
            assert session.get(f"https://localhost:{server.tls_port}/hi", verify=str(server.ca), timeout=5).text == BODY
    entries = server.wait_for(3, route="hi")
    assert [e["connection"]["reused"] for e in entries] == [False, True, True]
    assert len({e["connection"]["id"] for e in entries}) == 1


def test_transport_faults_over_tls(https, tmp_path, start_faultline, write_scenario):
    routes = []
    for fault in ("reset", "half-close", "truncate-body"):
        routes.append({"id": fault, "match": {"method": "GET", "path": f"/{fault}"},
                       "responses": [{"status": 200, "text": BODY * 4, "fault": fault}]})
    path = write_scenario({"name": "faults", "routes": routes}, name="faults.json")
    server = start_faultline(path, args=["--tls-port", "0", "--tls-dir", tmp_path / "tls"])
    server.ca = tmp_path / "tls" / "ca.pem"
    observed = {}
    for fault in ("reset", "half-close", "truncate-body"):
        # HTTP/1.1's own transport faults; test_http2.py has what they do to h2.
        code, out, err = curl(server, "--http1.1", path=f"/{fault}")
        try:
            requests.get(f"https://localhost:{server.tls_port}/{fault}", verify=str(server.ca), timeout=5)
            python = None
        except requests.exceptions.RequestException as error:
            python = error
        observed[fault] = (code, err, python)
    code, err, python = observed["reset"]
    assert code == 56 and "Recv failure: Connection reset by peer" in err, err
    assert isinstance(python, requests.exceptions.ConnectionError), repr(python)
    code, err, python = observed["half-close"]
    assert code == 52 and "Empty reply from server" in err, err
    assert isinstance(python, requests.exceptions.ConnectionError), repr(python)
    code, err, python = observed["truncate-body"]
    assert code == 18 and "transfer closed with" in err, err
    assert isinstance(python, requests.exceptions.ChunkedEncodingError), repr(python)
    for fault in observed:  # the handshake completed; the fault came after the request
        entries = server.wait_for(2, route=fault)
        assert [e["tls"]["handshake"] for e in entries] == ["completed", "completed"], entries
