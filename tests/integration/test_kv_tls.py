"""TLS on the KV port ([kv_tls]) against a real openlaked: the python package over the real
libopenlake puts and gets over TLS, `openssl s_client` proves the port speaks TLS with the
configured certificate, a client that trusts another CA (or expects another name) is refused,
a plaintext client gets a clear error frame instead of a hang, SIGHUP serves a new certificate
to new connections (compared by fingerprint), tokens are still checked over TLS, and with
client_ca only a client showing a certificate that CA signed gets in."""
import hashlib
import shutil
import signal
import socket
import ssl
import struct
import subprocess

import pytest

from conftest import OPENLAKE_CLI, OPENLAKED, Daemon, wait_for
from test_kv_security import hdr, read_hdr, recv_exact, start
from test_tls import install, make_ca, make_cert
from vllm_standin.pool import require_pool_binaries

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl CLI")

EPROTONOSUPPORT = 93


@pytest.fixture
def ol():
    require_pool_binaries()
    import openlake_client

    return openlake_client


@pytest.fixture
def certs(tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    ca = make_ca(d)
    pem, key = make_cert(d, "kv1", 0x1001)
    live_pem, live_key = d / "live.pem", d / "live.key"
    install(pem, key, live_pem, live_key)
    return d, ca, live_pem, live_key


def kv_tls(pem, key, ca=None):
    return f'\n[kv_tls]\ncert_path = "{pem}"\nkey_path = "{key}"\n' + (
        f'client_ca = "{ca}"\n' if ca else "")


def key(tag, i):
    return hashlib.sha256(f"{tag}-{i}".encode()).digest()


def fingerprint(d, ca):
    """SHA-256 of the certificate a new TLS connection to the KV port is shown."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", d.kv_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def file_fingerprint(pem):
    der = subprocess.run(["openssl", "x509", "-in", str(pem), "-outform", "DER"], check=True,
                         capture_output=True, timeout=60).stdout
    return hashlib.sha256(der).hexdigest()


def test_put_get_over_tls_and_the_port_speaks_tls(openlaked, ol, certs):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path))
    vals = [bytes([i]) * (2 << 20 if i == 0 else 4096 + i) for i in range(8)]
    ks = [key("tls", i) for i in range(8)]
    for dev in ("tcp", "local"):  # local: HELLO over TLS, then the shm grant's Unix socket
        c = ol.connect([d.kv_addr], device=dev, namespace="tls-" + dev, tls=True,
                       ca_file=str(ca), timeout_ms=30000)
        assert c.put(ks, vals) == [ol.Status.OK] * 8
        assert c.get(ks) == vals
        assert c.exists(ks) == [True] * 8
        c.close()
    # the same port, seen by OpenSSL's own client: a verified TLS session with our certificate
    out = subprocess.run(
        ["openssl", "s_client", "-connect", d.kv_addr, "-CAfile", str(ca),
         "-verify_return_error", "-servername", "localhost"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    text = out.stdout.decode(errors="replace")
    assert out.returncode == 0, text + out.stderr.decode(errors="replace")
    assert "Verify return code: 0 (ok)" in text
    assert "CN = kv1" in text
    assert fingerprint(d, ca) == file_fingerprint(pem)
    # the CLI too (flags)
    cli = subprocess.run([str(OPENLAKE_CLI), "kv", "stats", "--nodes", d.kv_addr, "--tls",
                          "--ca-file", str(ca), "--json"], capture_output=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert b'"up":true' in cli.stdout


def test_wrong_ca_or_name_is_refused(openlaked, ol, certs, tmp_path, caplog):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path))
    other = tmp_path / "other"
    other.mkdir()
    other_ca = make_ca(other)
    k = [key("ca", 0)]
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(other_ca), timeout_ms=30000)
    assert c.put(k, [b"x" * 100]) == [ol.Status.UNREACHABLE]
    c.close()
    assert "certificate verify failed" in caplog.text or "unable to get local issuer" in \
        caplog.text, caplog.text
    caplog.clear()
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca),
                   server_name="not-the-pool.example", timeout_ms=30000)
    assert c.put(k, [b"x" * 100]) == [ol.Status.UNREACHABLE]
    c.close()
    assert "hostname mismatch" in caplog.text, caplog.text
    good = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca),
                      server_name="localhost", timeout_ms=30000)
    assert good.get(k) == [None]  # nothing was stored by the refused clients
    good.close()


def test_plaintext_client_is_refused_cleanly(openlaked, ol, certs, caplog):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path))
    # a raw plaintext HELLO: an error frame in plaintext, then the server closes
    s = socket.create_connection(("127.0.0.1", d.kv_port), timeout=30)
    body = struct.pack("<IIHH", 1, 0, 1, 0) + b"m"
    s.sendall(hdr(1, 0, len(body)) + body)
    h = read_hdr(s)
    assert h["status"] == -EPROTONOSUPPORT
    assert s.recv(1) == b""
    s.close()
    # the python package without tls: unreachable, and the log says to use TLS
    c = ol.connect([d.kv_addr], device="tcp", timeout_ms=30000)
    assert c.put([key("p", 0)], [b"v"]) == [ol.Status.UNREACHABLE]
    c.close()
    assert "speaks TLS" in caplog.text, caplog.text
    assert "plaintext KV client on the TLS port" in d.log()
    # a TLS client on a plaintext port fails its handshake (no hang) and stores nothing
    p = start(openlaked)
    c = ol.connect([p.kv_addr], device="tcp", tls=True, ca_file=str(ca), timeout_ms=30000)
    assert c.put([key("p", 1)], [b"v"]) == [ol.Status.UNREACHABLE]
    c.close()
    assert "TLS handshake failed" in caplog.text


def test_sighup_reloads_the_certificate(openlaked, ol, certs):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path))
    first = fingerprint(d, ca)
    assert first == file_fingerprint(pem)
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca), timeout_ms=30000)
    ks = [key("reload", i) for i in range(4)]
    assert c.put(ks, [b"before" * 100] * 4) == [ol.Status.OK] * 4
    new_pem, new_key = make_cert(d_certs, "kv2", 0x2002)
    install(new_pem, new_key, pem, key_path)
    second = file_fingerprint(pem)
    assert second != first
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: fingerprint(d, ca) == second, what="the new certificate on the KV port")
    # pooled connections made before the reload keep working
    assert c.get(ks) == [b"before" * 100] * 4
    c.close()
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca), timeout_ms=30000)
    assert c.get(ks) == [b"before" * 100] * 4
    c.close()
    # a bad file on reload: the old certificate stays and the log names the file
    pem.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "kv: TLS reload failed" in d.log(), what="the reload failure in the log")
    assert fingerprint(d, ca) == second
    assert d.proc.poll() is None


def test_tokens_are_still_checked_over_tls(openlaked, ol, certs):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, 'secret = "tls-s3cr3t"\n' + kv_tls(pem, key_path))
    ks = [key("tok", i) for i in range(3)]
    for tok in (None, "wrong"):
        c = ol.connect([d.kv_addr], device="tcp", namespace="m", token=tok, tls=True,
                       ca_file=str(ca), timeout_ms=30000)
        assert c.put(ks, [b"v" * 10] * 3) == [ol.Status.UNREACHABLE] * 3
        c.close()
    c = ol.connect([d.kv_addr], device="tcp", namespace="m", token="tls-s3cr3t", tls=True,
                   ca_file=str(ca), timeout_ms=30000)
    assert c.put(ks, [b"v" * 10] * 3) == [ol.Status.OK] * 3
    assert c.get(ks) == [b"v" * 10] * 3
    c.close()
    assert "the pool requires a token" in d.log() or "token refused" in d.log()


def test_client_certificates_with_client_ca(openlaked, ol, certs, caplog):
    d_certs, ca, pem, key_path = certs
    d = start(openlaked, kv_tls(pem, key_path, ca=ca))
    cpem, ckey = make_cert(d_certs, "client1", 0x3003, server=False)
    ks = [key("mtls", i) for i in range(3)]
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca), timeout_ms=30000)
    assert c.put(ks, [b"m" * 10] * 3) == [ol.Status.UNREACHABLE] * 3  # no certificate
    c.close()
    wait_for(lambda: "TLS handshake failed" in d.log(), what="the refusal in the log")
    c = ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca), cert_file=str(cpem),
                   key_file=str(ckey), timeout_ms=30000)
    assert c.put(ks, [b"m" * 10] * 3) == [ol.Status.OK] * 3
    assert c.get(ks) == [b"m" * 10] * 3
    c.close()
    with pytest.raises(Exception):  # a key that does not match: refused at connect()
        ol.connect([d.kv_addr], device="tcp", tls=True, ca_file=str(ca), cert_file=str(cpem),
                   key_file=str(key_path))
    assert "TLS client certificate" in caplog.text


def test_missing_key_file_refuses_start(tmp_path, certs):
    d_certs, ca, pem, key_path = certs
    root = tmp_path / "n"
    root.mkdir()
    d = Daemon(root, mode="kv", extra=kv_tls(pem, d_certs / "missing.key"))
    r = subprocess.run([str(OPENLAKED), "--config", str(d.config)], capture_output=True,
                       timeout=60, cwd=root)
    assert r.returncode != 0
    err = (r.stdout + r.stderr).decode(errors="replace")
    assert "[kv_tls] key_path" in err and "missing.key" in err, err
