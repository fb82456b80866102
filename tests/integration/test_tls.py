"""S3 over TLS ([s3_tls]): certificates made here with the openssl CLI, real clients (boto3,
awscli, curl --aws-sigv4) over https, plaintext refused cleanly, certificates reloaded on SIGHUP
(a bad new one keeps the old), client certificates with client_ca, bad files refuse start."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess

import boto3
import pytest
from botocore.config import Config

from conftest import (ACCESS_KEY, OPENLAKE_CLI, OPENLAKED, REGION, SECRET_KEY, aws_env,
                      wait_for)

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl CLI")


def run(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, timeout=120, **kw)


def make_ca(d):
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
        "-subj", "/CN=openlake-test-ca")
    return d / "ca.pem"


def make_cert(d, name, serial, server=True):
    """A certificate signed by the test CA, for 127.0.0.1 and localhost."""
    key, csr, pem, ext = (d / f"{name}.key", d / f"{name}.csr", d / f"{name}.pem",
                          d / f"{name}.ext")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else
                   "extendedKeyUsage=clientAuth\n")
    run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(d / "ca.pem"), "-CAkey",
        str(d / "ca.key"), "-set_serial", str(serial), "-days", "2", "-out", str(pem),
        "-extfile", str(ext))
    return pem, key


def install(src_pem, src_key, dst_pem, dst_key):
    """Replace the files the daemon reads, each in one rename."""
    for s, dst in ((src_pem, dst_pem), (src_key, dst_key)):
        tmp = dst.with_suffix(".tmp")
        shutil.copyfile(s, tmp)
        os.replace(tmp, dst)


def tls_conf(pem, key, ca=None):
    extra = f'[s3_tls]\ncert_path = "{pem}"\nkey_path = "{key}"\n'
    if ca:
        extra += f'client_ca = "{ca}"\n'
    return extra


def https_url(d):
    return f"https://127.0.0.1:{d.s3_port}"


def s3(d, ca):
    return boto3.client(
        "s3", endpoint_url=https_url(d), aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION, verify=str(ca),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      connect_timeout=10, read_timeout=60))


def server_serial(d, ca):
    """Serial number of the certificate a new connection sees (hex, upper case)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            der = s.getpeercert(binary_form=True)
    out = run("openssl", "x509", "-inform", "DER", "-noout", "-serial", input=der)
    return out.stdout.decode().strip().split("=")[1].upper()


@pytest.fixture
def certs(tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    ca = make_ca(d)
    pem, key = make_cert(d, "server1", 0x1001)
    live_pem, live_key = d / "live.pem", d / "live.key"
    install(pem, key, live_pem, live_key)
    return d, ca, live_pem, live_key


def test_clients_over_https(openlaked, certs, tmp_path):
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key))
    c = s3(d, ca)
    c.create_bucket(Bucket="tls")
    c.put_object(Bucket="tls", Key="boto", Body=b"over tls" * 1000)
    assert c.get_object(Bucket="tls", Key="boto")["Body"].read() == b"over tls" * 1000
    # awscli with --ca-bundle
    f = tmp_path / "up.bin"
    f.write_bytes(os.urandom(300000))
    env = aws_env()
    aws = ["aws", "--endpoint-url", https_url(d), "--ca-bundle", str(ca), "--region", REGION]
    run(*aws, "s3", "cp", str(f), "s3://tls/cli.bin", env=env)
    ls = run(*aws, "s3", "ls", "s3://tls/", env=env).stdout.decode()
    assert "cli.bin" in ls and "boto" in ls
    run(*aws, "s3", "cp", "s3://tls/cli.bin", str(tmp_path / "down.bin"), env=env)
    assert (tmp_path / "down.bin").read_bytes() == f.read_bytes()
    # curl --aws-sigv4
    sig = ["curl", "-sS", "--fail", "--max-time", "60", "--cacert", str(ca), "--aws-sigv4",
           f"aws:amz:{REGION}:s3", "--user", f"{ACCESS_KEY}:{SECRET_KEY}"]
    # curl 7.88 signs an upload's payload as empty unless told it is unsigned
    run(*sig, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", str(f),
        f"{https_url(d)}/tls/curl.bin")
    got = run(*sig, f"{https_url(d)}/tls/curl.bin").stdout
    assert got == f.read_bytes()
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket="tls")["Contents"])
    assert keys == ["boto", "cli.bin", "curl.bin"]
    # ALPN: http/1.1 chosen when offered beside h2
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "http/1.1"
            assert s.version() in ("TLSv1.2", "TLSv1.3")
    # an S3 error document over TLS (the server's own error, too)
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"GARBAGE\r\n\r\n")
            resp = b""
            while True:
                try:
                    b = s.recv(65536)
                except (ssl.SSLError, ConnectionResetError):
                    break
                if not b:
                    break
                resp += b
    assert resp.startswith(b"HTTP/1.1 400 ") and b"<Code>BadRequest</Code>" in resp


def test_plaintext_to_tls_port_fails_cleanly(openlaked, certs):
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key))
    # plain HTTP: a plain-text 400 S3 error saying to use https, then the connection closes
    out = subprocess.run(["curl", "-sS", "-i", "--max-time", "30",
                          f"http://127.0.0.1:{d.s3_port}/openlake/health"],
                         capture_output=True, timeout=60)
    assert out.stdout.startswith(b"HTTP/1.1 400 "), out
    assert b"<Code>BadRequest</Code>" in out.stdout and b"https://" in out.stdout
    # other bytes that are no TLS handshake: the connection just closes
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as s:
        s.sendall(b"\x00\x01\x02\x03garbage" * 100)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        assert data == b""
    assert d.proc.poll() is None  # still serving, and over TLS fine
    assert s3(d, ca).list_buckets()["Buckets"] == []
    assert "plain HTTP on the TLS port" in d.log()


def test_sighup_reloads_certificate(openlaked, certs):
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key))
    assert server_serial(d, ca) == "1001"
    c = s3(d, ca)
    c.create_bucket(Bucket="reload")
    # a connection opened before the reload keeps working after it
    ctx = ssl.create_default_context(cafile=str(ca))
    old = ctx.wrap_socket(socket.create_connection(("127.0.0.1", d.s3_port), timeout=30),
                          server_hostname="localhost")
    try:
        new_pem, new_key = make_cert(d_certs, "server2", 0x2002)
        install(new_pem, new_key, pem, key)
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: server_serial(d, ca) == "2002", what="the new certificate")
        old.sendall(b"GET /openlake/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert old.recv(4096).startswith(b"HTTP/1.1 200 ")
    finally:
        old.close()
    c.put_object(Bucket="reload", Key="k", Body=b"after reload")
    # a bad certificate on reload: the old one stays, and the log says why
    pem.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "TLS reload failed" in d.log(), what="the reload failure in the log")
    assert str(pem) in d.log()
    assert server_serial(d, ca) == "2002"
    assert s3(d, ca).get_object(Bucket="reload", Key="k")["Body"].read() == b"after reload"
    assert d.proc.poll() is None


def test_client_certificates(openlaked, certs):
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key, ca=ca))
    cpem, ckey = make_cert(d_certs, "client1", 0x3003, server=False)
    base = ["curl", "-sS", "--max-time", "30", "--cacert", str(ca), "-o", "/dev/null", "-w",
            "%{http_code}"]
    ok = subprocess.run(base + ["--cert", str(cpem), "--key", str(ckey),
                                f"{https_url(d)}/openlake/health"],
                        capture_output=True, text=True, timeout=60)
    assert ok.stdout == "200", ok
    no = subprocess.run(base + [f"{https_url(d)}/openlake/health"], capture_output=True,
                        text=True, timeout=60)
    assert no.stdout != "200", no


@pytest.mark.parametrize("which", ["cert_path", "key_path"])
def test_missing_file_refuses_start(tmp_path, certs, which):
    d_certs, ca, pem, key = certs
    missing = tmp_path / "nope.pem"
    conf = tmp_path / "c.toml"
    p = missing if which == "cert_path" else pem
    k = missing if which == "key_path" else key
    conf.write_text(f"""s3_addr = "127.0.0.1:0"
kv_addr = ""
data_dirs = ["{tmp_path / 'd0'}"]
set_drive_count = 1
default_parity_count = 0
{tls_conf(p, k)}""")
    out = subprocess.run([str(OPENLAKED), "--config", str(conf)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert str(missing) in out.stderr and which in out.stderr, out.stderr


def test_secure_transport_condition_is_true_over_tls(openlaked, certs):
    """A bucket policy that denies requests without TLS (aws:SecureTransport false) lets the
    same user in over https; test_s3_policy shows the deny over plain HTTP."""
    import json
    _, ca, pem, key = certs
    users = ('[[credentials]]\naccess_key = "alicekey"\nsecret_key = "alicesecret"\n'
             'user = "alice"\n')
    d = openlaked(kv=False, extra=tls_conf(pem, key) + users)
    alice = boto3.client(
        "s3", endpoint_url=https_url(d), aws_access_key_id="alicekey",
        aws_secret_access_key="alicesecret", region_name=REGION, verify=str(ca),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    alice.create_bucket(Bucket="sec")
    alice.put_object(Bucket="sec", Key="k", Body=b"secret")
    alice.put_bucket_policy(Bucket="sec", Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
                       "Resource": "arn:aws:s3:::sec/*",
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    assert alice.get_object(Bucket="sec", Key="k")["Body"].read() == b"secret"


def test_cli_admin_calls_over_https(openlaked, certs):
    """`openlake node info`, `heal` and `keys` reach a daemon with [s3_tls] and client
    certificates required: HTTPS to the s3_addr of --config, trusting the daemon's own
    certificate file and showing it as the client's; --endpoint https:// with AWS_CA_BUNDLE; a
    bundle that did not sign the daemon's certificate fails with a message naming it."""
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key, ca=ca))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}

    def cli(*args, **kw):
        return subprocess.run([str(OPENLAKE_CLI), *args], capture_output=True, text=True,
                              timeout=120, env={**env, **kw})

    r = cli("node", "info", "--config", str(d.config), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)["daemon"]
    # not the admin listener's plain HTTP, which the CLI falls back to when s3_addr fails
    assert got["up"] and got["endpoint"] == f"https://127.0.0.1:{d.s3_port}", got
    r = cli("heal", "--config", str(d.config))
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("keys", "list", "--config", str(d.config))
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("node", "info", "--config", str(d.config), "--endpoint", https_url(d), "--json",
            AWS_CA_BUNDLE=str(ca))
    assert r.returncode == 0 and json.loads(r.stdout)["daemon"]["endpoint"].startswith(
        "https://"), r.stdout + r.stderr
    other = d_certs / "other"
    other.mkdir()
    r = cli("heal", "--config", str(d.config), AWS_CA_BUNDLE=str(make_ca(other)))
    assert r.returncode == 1 and "AWS_CA_BUNDLE" in r.stderr, r.stdout + r.stderr


def test_session_tickets_come_with_the_first_answer(openlaked, certs):
    """TLS 1.3 session tickets go out with the first response, not right after the handshake:
    bytes the client did not ask for make its socket readable while it waits, and botocore,
    waiting a second for 100 Continue, then reads a status line that is not there and drops
    the connection when the answer takes longer (a cluster node waiting for its leader).
    Resumption still works with the tickets sent later."""
    import select
    d_certs, ca, pem, key = certs
    d = openlaked(kv=False, extra=tls_conf(pem, key))
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            assert s.version() == "TLSv1.3"
            readable, _, _ = select.select([s], [], [], 1.5)
            assert not readable, "bytes came after the handshake, before any request"
            s.sendall(b"GET /openlake/health HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got
            sess = s.session
    assert sess is not None and sess.has_ticket
    with socket.create_connection(("127.0.0.1", d.s3_port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=sess) as s:
            assert s.session_reused, "the ticket of the first connection resumes a session"
