"""HTTP-level limits and errors on the S3 port: floods of idle or half-sent connections do not
lock out a normal client, per-address caps refuse with a clean 503 S3 XML, and the server's own
errors (bad head, oversized head, timeout) are S3 XML documents."""
import resource
import socket
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET

import pytest

from conftest import boto3_client, wait_for

FLOOD_ADDRS = [f"127.0.0.{i}" for i in range(2, 10)]  # not the normal client's 127.0.0.1


@pytest.fixture(autouse=True, scope="module")
def many_files():
    """Room for thousands of sockets in this process (the daemon inherits the hard limit and
    raises its own soft limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 12000)
    if want < 6000:
        pytest.skip(f"open-files hard limit {hard} is too low for the flood tests")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect_from(src, port, timeout=30):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def metrics(d):
    with urllib.request.urlopen(d.s3_url + "/metrics", timeout=30) as r:
        return r.read().decode()


def metric(text, name, label=None):
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if line.split(" ")[0].split("{")[0] != name:
            continue
        if label and label not in line:
            continue
        return float(line.split()[-1])
    return None


def raw_exchange(port, data, src="127.0.0.1", timeout=30):
    """Send raw bytes, read the whole response until the server closes."""
    s = connect_from(src, port, timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def parse_response(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def assert_s3_error(raw, status, code):
    assert raw, "no response"
    st, hdrs, body = parse_response(raw)
    assert st == status, raw[:300]
    assert hdrs.get("content-type") == "application/xml", hdrs
    assert hdrs.get("connection") == "close", hdrs
    assert int(hdrs["content-length"]) == len(body)
    root = ET.fromstring(body)
    assert root.tag == "Error"
    assert root.findtext("Code") == code, body
    assert root.findtext("Message")
    assert root.find("RequestId") is not None
    return root


def normal_client_works(d, tag):
    s3 = boto3_client(d.s3_url)
    bucket = f"normal-{tag}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello " + tag.encode())
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"hello " + tag.encode()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["k"]


def thread_count(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def test_thousands_of_idle_connections_do_not_lock_out(openlaked):
    d = openlaked(kv=False)
    n = 4600  # beyond the 4096 that used to fill the server
    socks = []
    try:
        for i in range(n):
            socks.append(connect_from(FLOOD_ADDRS[i % len(FLOOD_ADDRS)], d.s3_port))
        wait_for(lambda: (metric(metrics(d), "openlake_http_connections") or 0) >= n,
                 what=f"{n} open connections")
        threads = thread_count(d.proc.pid)
        normal_client_works(d, "idle")
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                              "--max-time", "60", d.s3_url + "/openlake/health"],
                             capture_output=True, text=True, timeout=90)
        assert out.stdout == "200", out
        # the idle ones are still served, and cost no thread while idle
        assert threads < 200, threads
        for s in socks[:: n // 8]:
            s.sendall(b"GET /openlake/health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
        assert metric(metrics(d), "openlake_http_refused_total", 'limit="conns"') == 0
    finally:
        close_all(socks)


def test_half_sent_requests_hold_no_worker(openlaked):
    # a long header timeout: the half-sent heads stay open through the whole test
    d = openlaked(kv=False, args=("--http_header_timeout_ms", "600000"))
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket="half")
    s3.put_object(Bucket="half", Key="k", Body=b"v" * 1000)
    before = thread_count(d.proc.pid)
    socks = []
    try:
        for i in range(500):
            s = connect_from(FLOOD_ADDRS[i % len(FLOOD_ADDRS)], d.s3_port)
            s.sendall(b"GET /half/k HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            socks.append(s)
        wait_for(lambda: (metric(metrics(d), "openlake_http_connections") or 0) >= 500,
                 what="500 half-sent connections")
        assert s3.get_object(Bucket="half", Key="k")["Body"].read() == b"v" * 1000
        normal_client_works(d, "half")
        # the half-sent ones are still open (no answer, no close) ...
        for s in socks[::50]:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
        # ... and none of them holds a worker thread
        during = thread_count(d.proc.pid)
        assert during < before + 50, (before, during)
        # finishing a head gets it served
        socks[0].setblocking(True)
        socks[0].sendall(b"1\r\n\r\n")
        st, _, _ = parse_response(socks[0].recv(65536))
        assert st == 403  # unsigned GET: an S3 answer, so the head went through
    finally:
        close_all(socks)


def test_per_address_connection_cap_refuses_with_slowdown(openlaked):
    d = openlaked(kv=False, args=("--http_max_conns_per_addr", "8"))
    socks = []
    try:
        for _ in range(8):
            socks.append(connect_from("127.0.0.5", d.s3_port))
        wait_for(lambda: (metric(metrics(d), "openlake_http_connections") or 0) >= 8,
                 what="8 open connections")
        raw = raw_exchange(d.s3_port, b"GET /openlake/health HTTP/1.1\r\nHost: x\r\n\r\n",
                           src="127.0.0.5")
        assert_s3_error(raw, 503, "SlowDown")
        normal_client_works(d, "cap")  # another address is not affected
        text = metrics(d)
        assert metric(text, "openlake_http_refused_total", 'limit="conns_per_addr"') >= 1
        close_all(socks[:1])  # one fewer: that address gets in again
        wait_for(lambda: parse_response(raw_exchange(
            d.s3_port, b"GET /openlake/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            src="127.0.0.5"))[0] == 200, what="a freed slot")
        assert "too many connections from this address" in d.log()
    finally:
        close_all(socks)


def test_server_errors_are_s3_xml(openlaked):
    d = openlaked(kv=False, args=("--http_header_timeout_ms", "1500"))
    port = d.s3_port
    assert_s3_error(raw_exchange(port, b"GARBAGE\r\n\r\n"), 400, "BadRequest")
    assert_s3_error(raw_exchange(port, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"), 400,
                    "BadRequest")
    big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"
    assert_s3_error(raw_exchange(port, big), 400, "RequestHeaderSectionTooLarge")
    assert_s3_error(raw_exchange(port, b"GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505,
                    "HttpVersionNotSupported")
    assert_s3_error(raw_exchange(port, b"PUT /b/k HTTP/1.1\r\nHost: x\r\n"
                                 b"Transfer-Encoding: gzip\r\n\r\n"), 501, "NotImplemented")
    # a head that never ends: 408 RequestTimeout once the header timeout is up
    assert_s3_error(raw_exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n", timeout=60), 408,
                    "RequestTimeout")
    # curl sees the same document
    out = subprocess.run(["curl", "-sS", "-i", "--max-time", "60", "-H", "X-Big: " + "b" * 70000,
                          d.s3_url + "/"], capture_output=True, timeout=90)
    assert b"<Code>RequestHeaderSectionTooLarge</Code>" in out.stdout, out
    assert metric(metrics(d), "openlake_http_bad_requests_total") >= 6
    normal_client_works(d, "xml")
