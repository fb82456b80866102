"""libopenlake's native S3 client (openlake_s3.h, through openlake_client.s3's ctypes binding):
multipart PUT and ranged scatter GETs against the real daemon (checked with boto3), the AWS
config/credentials files and profiles, the INI reader, and a hostile HTTP server in the test
that drops connections and answers 503: retries succeed, and give up with a clear error."""

import ctypes
import hashlib
import http.server
import os
import re
import socket
import subprocess
import sys
import threading

import pytest

from conftest import ACCESS_KEY, REGION, SECRET_KEY, REPO

sys.path.insert(0, str(REPO / "python"))
from openlake_client import s3  # noqa: E402

MiB = 1 << 20


def client(d, **kw):
    return s3.Client(endpoint=d.s3_url, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                     region=REGION, **kw)


def test_multipart_put_ranged_scatter_get(s3_daemon, s3_client):
    c = client(s3_daemon, conns=4)
    c.create_bucket("native")
    c.create_bucket("native")  # again: already ours, not an error
    data = os.urandom(37 * MiB + 12345)
    assert c.part_size(len(data)) == 8 * MiB
    # written from a scatter list of three unequal pieces, no copy
    etag, resumed = c.put("native", "big/obj.bin", [data[:5], data[5:20 * MiB], data[20 * MiB:]])
    assert resumed == 0 and re.fullmatch(r'"[0-9a-f]{32}-5"', etag), etag
    got = s3_client.get_object(Bucket="native", Key="big/obj.bin")
    assert got["ETag"] == etag
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(data).digest()
    # the whole object, then ranges across part boundaries into a scatter list
    assert c.get("native", "big/obj.bin") == data
    bufs = [bytearray(3), bytearray(9 * MiB), memoryview(bytearray(7 * MiB + 1))]
    c.get_into("native", "big/obj.bin", bufs, offset=8 * MiB - 1)
    want = data[8 * MiB - 1:]
    assert bytes(bufs[0]) == want[:3]
    assert bytes(bufs[1]) == want[3:3 + 9 * MiB]
    assert bytes(bufs[2]) == want[3 + 9 * MiB:3 + 16 * MiB + 1]
    # small object: one PUT with a CRC32C the daemon checks and keeps, one GET
    c.put("native", "small", b"hello world")
    h = s3_client.head_object(Bucket="native", Key="small", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32C"] == "yZRlqg=="  # CRC32C("hello world"), big-endian base64
    assert c.get("native", "small") == b"hello world"
    assert c.get("native", "small", size=5, offset=6) == b"world"
    # a range past the end is an error, never short data
    with pytest.raises(s3.S3Error) as e:
        c.get_into("native", "small", bytearray(20))
    assert "ends before byte 20" in str(e.value)
    with pytest.raises(s3.S3Error) as e:
        c.get_into("native", "big/obj.bin", bytearray(20 * MiB), offset=30 * MiB)
    assert "has %d bytes" % len(data) in str(e.value)
    assert [k for k, _ in c.list("native", "big/")] == ["big/obj.bin"]
    assert c.list("native") == [("big/obj.bin", len(data)), ("small", 11)]
    c.delete("native", "small")
    with pytest.raises(s3.S3Error) as e:
        c.head("native", "small")
    assert e.value.not_found and "HTTP 404" in str(e.value)
    # no multipart upload is left behind
    assert s3_client.list_multipart_uploads(Bucket="native").get("Uploads", []) == []


def test_bad_keys_are_access_denied(s3_daemon):
    c = s3.Client(endpoint=s3_daemon.s3_url, access_key=ACCESS_KEY, secret_key="wrong")
    with pytest.raises(s3.S3Error) as e:
        c.list("native")
    assert e.value.rc == s3.EDENIED and "SignatureDoesNotMatch" in str(e.value)


@pytest.fixture
def aws_files(tmp_path, monkeypatch):
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
              "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(v, raising=False)
    conf, cred = tmp_path / "config", tmp_path / "credentials"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(conf))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(cred))
    return conf, cred


def test_profiles_from_the_aws_files(s3_daemon, aws_files, monkeypatch):
    conf, cred = aws_files
    conf.write_text("[default]\nregion = eu-west-9\n\n[profile train]\n# a comment\n"
                    "region = %s\nendpoint_url = %s\ns3 =\n    addressing_style = path\n"
                    % (REGION, s3_daemon.s3_url))
    cred.write_text("[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
                    "[train]\n  aws_access_key_id =  %s  \n; other comment\n"
                    "aws_secret_access_key=%s\n" % (ACCESS_KEY, SECRET_KEY))
    monkeypatch.setenv("AWS_PROFILE", "train")
    c = s3.Client()
    assert (c.endpoint, c.region, c.access_key) == (s3_daemon.s3_url, REGION, ACCESS_KEY)
    c.create_bucket("profiles")
    c.put("profiles", "k", b"from a profile")
    assert c.get("profiles", "k") == b"from a profile"
    # arguments win over the profile; the environment wins over the files
    assert s3.Client(region="r-arg").region == "r-arg"
    monkeypatch.setenv("AWS_REGION", "r-env")
    assert s3.Client().region == "r-env"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    assert s3.Client().endpoint == "http://127.0.0.1:1"
    assert s3.Client(endpoint=s3_daemon.s3_url).endpoint == s3_daemon.s3_url
    # the default profile: its keys are read, its region (no env) too
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.delenv("AWS_REGION")
    d = s3.Client()
    assert (d.access_key, d.region) == ("nobody", "eu-west-9")


def test_config_errors_name_the_fix(aws_files, monkeypatch):
    conf, cred = aws_files
    monkeypatch.setenv("AWS_PROFILE", "absent")
    with pytest.raises(s3.S3Error) as e:
        s3.Client(endpoint="http://127.0.0.1:1")
    assert e.value.rc == s3.ECONFIG and "profile 'absent' not found" in str(e.value)
    monkeypatch.delenv("AWS_PROFILE")
    with pytest.raises(s3.S3Error) as e:
        s3.Client(endpoint="http://127.0.0.1:1")
    assert "no S3 credentials: set AWS_ACCESS_KEY_ID" in str(e.value)
    cred.write_text("[default]\nthis line is broken\naws_access_key_id = a\n")
    with pytest.raises(s3.S3Error) as e:
        s3.Client(endpoint="http://127.0.0.1:1")
    assert str(cred) in str(e.value) and "neither 'key = value' nor a [section]" in str(e.value)
    cred.unlink()
    with pytest.raises(s3.S3Error) as e:
        s3.Client(endpoint="https://127.0.0.1:1", access_key="a", secret_key="b",
                  ca_file=str(conf.parent / "absent.pem"))
    assert e.value.rc == s3.ECONFIG and "CA bundle" in str(e.value)
    with pytest.raises(s3.S3Error) as e:
        s3.Client(endpoint="ftp://127.0.0.1:1", access_key="a", secret_key="b")
    assert "does not start with http:// or https://" in str(e.value)
    with pytest.raises(s3.S3Error) as e:
        s3.Client(access_key="a", secret_key="b")
    assert "no S3 endpoint" in str(e.value) and "AWS_ENDPOINT_URL" in str(e.value)


def test_ini_reader():
    lib = s3._lib_s3()
    f = lib.ol_s3_ini_get
    f.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
                  ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    text = (b"top = 1\n[a]\nk = v1\n  k = continuation, ignored\n[ b ]\r\nk=  v2 \r\n"
            b"#k = commented\n;k = too\nempty =\n[a]\nk = last wins\n[c]\nbroken\n")

    def get(sect, key, cap=64):
        out = ctypes.create_string_buffer(cap)
        rc = f(text, len(text), sect, key, out, cap)
        return (rc, out.value) if rc >= 0 else (rc, None)

    assert get(b"a", b"k") == (9, b"last wins")
    assert get(b"b", b"k") == (2, b"v2")
    assert get(b"b", b"empty") == (0, b"")
    assert get(b"b", b"missing")[0] == -2  # ENOENT
    assert get(b"zz", b"k")[0] == -2
    assert get(b"a", b"k", cap=4)[0] == -36  # ENAMETOOLONG
    assert get(b"c", b"k")[0] == -22  # EINVAL: a malformed line in that section
    assert f(b"", 0, b"a", b"k", ctypes.create_string_buffer(4), 4) == -2


# ---- a hostile server -------------------------------------------------------------------

class Hostile(http.server.ThreadingHTTPServer):
    """A tiny S3 (PUT/GET/HEAD with Range, multipart) that fails the first `fail` requests:
    alternately 503 SlowDown and a connection closed without an answer. fail < 0: fails
    every request. drop_complete: CompleteMultipartUpload is done but its answer is lost."""

    daemon_threads = True

    def __init__(self, fail, drop_complete=False):
        super().__init__(("127.0.0.1", 0), Handler)
        self.fail, self.drop_complete = fail, drop_complete
        self.lock = threading.Lock()
        self.requests = self.failed = 0
        self.objects, self.uploads, self.crc_checked, self.crcs = {}, {}, 0, {}
        self.bad_crc = False  # answer GETs with another CRC32C than the one stored
        self.fail_parts = False  # answer every UploadPart with 503
        self.stall = 0  # the next `stall` requests get no answer until the client gives up
        self.aborted = []
        self.ranges = []  # the Range of every ranged GET answered

    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _fail(self):
        srv = self.server
        with srv.lock:
            srv.requests += 1
            n = srv.requests
            stall = srv.stall > 0
            srv.stall -= stall
            bad = srv.fail < 0 or n <= srv.fail
            if bad and not stall:
                srv.failed += 1
        if stall:  # no answer: wait (at most 30 s) until the client gives up and closes
            self.connection.settimeout(30)
            try:
                while self.connection.recv(4096):
                    pass
            except OSError:
                pass
            self.close_connection = True
            return True
        if not bad:
            return False
        if n % 2:
            self._send(503, b"<Error><Code>SlowDown</Code><Message>Reduce your request rate."
                            b"</Message></Error>")
        else:
            self.connection.shutdown(socket.SHUT_RDWR)  # drop it, no answer
            self.close_connection = True
        return True

    def _send(self, st, body=b"", hdrs=()):
        self.send_response(st)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length", 0))
        return self.rfile.read(n) if n else b""

    def do_PUT(self):
        body = self._body()
        if self._fail():
            return
        path, _, q = self.path.partition("?")
        crc = self.headers.get("x-amz-checksum-crc32c")
        assert crc and self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256")
        self.server.crc_checked += 1
        etag = '"%s"' % hashlib.md5(body).hexdigest()
        m = re.match(r"partNumber=(\d+)&uploadId=(\w+)", q)
        if m and self.server.fail_parts:
            return self._send(503, b"<Error><Code>SlowDown</Code></Error>")
        if m:
            self.server.uploads[m.group(2)][int(m.group(1))] = body
        else:
            self.server.objects[path] = body
            self.server.crcs[path] = crc
        self._send(200, hdrs=[("ETag", etag), ("x-amz-checksum-crc32c", crc)])

    def do_POST(self):
        self._body()
        if self._fail():
            return
        path, _, q = self.path.partition("?")
        if q == "uploads=":
            uid = "u%d" % len(self.server.uploads)
            self.server.uploads[uid] = {}
            return self._send(200, b"<InitiateMultipartUploadResult><UploadId>%s</UploadId>"
                                   b"</InitiateMultipartUploadResult>" % uid.encode())
        uid = q.split("=", 1)[1]
        parts = self.server.uploads.pop(uid, None)
        if parts is None:
            return self._send(404, b"<Error><Code>NoSuchUpload</Code></Error>")
        self.server.objects[path] = b"".join(parts[i] for i in sorted(parts))
        if self.server.drop_complete:
            self.server.drop_complete = False
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self._send(200, b"<CompleteMultipartUploadResult><ETag>&quot;x-%d&quot;</ETag>"
                        b"</CompleteMultipartUploadResult>" % len(parts))

    def do_GET(self):
        if self._fail():
            return
        data = self.server.objects.get(self.path)
        if data is None:
            return self._send(404, b"<Error><Code>NoSuchKey</Code></Error>")
        rng = self.headers.get("Range")
        if rng:
            a, b = (int(x) for x in rng[6:].split("-"))
            with self.server.lock:
                self.server.ranges.append((a, b))
            b = min(b, len(data) - 1)
            return self._send(206, data[a:b + 1], [("Content-Range",
                                                    "bytes %d-%d/%d" % (a, b, len(data)))])
        hdrs = []
        if self.headers.get("x-amz-checksum-mode") == "ENABLED" and self.path in self.server.crcs:
            hdrs = [("x-amz-checksum-crc32c",
                     "AAAAAA==" if self.server.bad_crc else self.server.crcs[self.path])]
        self._send(200, data, hdrs)

    do_HEAD = do_GET

    def do_DELETE(self):
        if self._fail():
            return
        path, _, q = self.path.partition("?")
        if q.startswith("uploadId="):
            self.server.aborted.append(q.split("=", 1)[1])
            self.server.uploads.pop(q.split("=", 1)[1], None)
        else:
            self.server.objects.pop(path, None)
        self._send(204)


@pytest.fixture
def hostile():
    servers = []

    def make(fail, **kw):
        s = Hostile(fail, **kw)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def test_retries_through_drops_and_503(hostile):
    srv = hostile(fail=6, drop_complete=True)
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b", retries=8, backoff_ms=5,
                  conns=3)
    small = os.urandom(1000)
    c.put("bkt", "small", small)  # 503, drop, 503, drop, 503, drop, then stored
    assert srv.failed == 6 and srv.objects["/bkt/small"] == small
    srv.fail = srv.requests + 4  # the next four requests fail: parts of a multipart upload
    data = os.urandom(24 * MiB + 7)
    c.put("bkt", "big", data)  # its CompleteMultipartUpload is done but the answer is lost
    assert srv.objects["/bkt/big"] == data and srv.failed == 10
    srv.fail = srv.requests + 3
    assert c.get("bkt", "big") == data  # HEAD and ranges retried
    assert srv.failed == 13 and srv.crc_checked >= 4


def test_ranges_from_an_offset_end_on_part_boundaries(hostile):
    """A GET from an offset (a safetensors file's data after its header) asks for the ranges
    a multipart PUT of the object wrote as parts: the first up to the next part boundary,
    then whole parts, so a server storing parts (or stripes within them) reads each once."""
    srv = hostile(fail=0)
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b", conns=4)
    data = os.urandom(37 * MiB + 5)
    c.put("bkt", "big", data)
    ps = c.part_size(len(data))
    assert ps == 8 * MiB
    buf = bytearray(len(data) - 12345)
    c.get_into("bkt", "big", buf, offset=12345)
    assert buf == data[12345:]
    assert sorted(srv.ranges) == [(12345, ps - 1)] + [
        (a, min(a + ps, len(data)) - 1) for a in range(ps, len(data), ps)]
    srv.ranges.clear()  # from 0: whole parts, as before
    assert c.get("bkt", "big") == data
    assert sorted(srv.ranges) == [(a, min(a + ps, len(data)) - 1)
                                  for a in range(0, len(data), ps)]


def test_a_silent_server_times_out_and_is_retried(hostile):
    srv = hostile(fail=0)
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b", timeout_ms=300,
                  backoff_ms=5, retries=3)
    c.put("bkt", "k", b"data")
    srv.stall = 1
    assert c.get("bkt", "k") == b"data"  # HEAD times out and is retried, then the GET
    assert srv.requests == 4
    srv.stall = 3
    with pytest.raises(s3.S3Error) as e:
        c.get("bkt", "k")
    assert "timed out after 3 attempt" in str(e.value), str(e.value)


def test_failed_multipart_upload_is_aborted(hostile):
    srv = hostile(fail=0)
    srv.fail_parts = True
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b", retries=2, backoff_ms=5)
    with pytest.raises(s3.S3Error) as e:
        c.put("bkt", "big", bytes(17 * MiB))
    assert e.value.rc == s3.ESERVER and "UploadPart" in str(e.value)
    assert "after 2 attempts" in str(e.value)
    assert srv.aborted == ["u0"] and srv.uploads == {} and "/bkt/big" not in srv.objects


def test_crc32c_mismatch_is_an_error(hostile):
    srv = hostile(fail=0)
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b")
    c.put("bkt", "k", b"hello world")
    assert srv.crcs["/bkt/k"] == "yZRlqg=="  # what the client sent: CRC32C, base64
    assert c.get("bkt", "k") == b"hello world"  # checked against the stored CRC32C
    srv.bad_crc = True
    with pytest.raises(s3.S3Error) as e:
        c.get("bkt", "k")
    assert e.value.rc == s3.ECHECKSUM and "the server says AAAAAA==" in str(e.value)


def test_gives_up_after_the_retry_budget(hostile):
    srv = hostile(fail=-1)
    c = s3.Client(endpoint=srv.url(), access_key="a", secret_key="b", retries=3, backoff_ms=5)
    with pytest.raises(s3.S3Error) as e:
        c.put("bkt", "k", b"x" * 100)
    assert e.value.rc in (s3.ESERVER, -104)  # 503 or the dropped connection, last attempt
    assert "after 3 attempt" in str(e.value), str(e.value)
    assert srv.requests == 3
    with pytest.raises(s3.S3Error) as e:
        c.get("bkt", "k", size=10)
    assert "after 3 attempt" in str(e.value) and srv.requests == 6
    # nothing listens: connection refused, retried, then a message naming the endpoint
    port = srv.server_address[1]
    srv.shutdown()
    srv.server_close()
    c2 = s3.Client(endpoint="http://127.0.0.1:%d" % port, access_key="a", secret_key="b",
                   retries=2, backoff_ms=5)
    with pytest.raises(s3.S3Error) as e:
        c2.head("bkt", "k")
    assert "127.0.0.1:%d" % port in str(e.value) and "refused" in str(e.value)


def test_signer_matches_an_independent_sigv4():
    """ol_s3_sign (the one signer of the library and the CLI) against SigV4 computed here from
    AWS's description, with extra signed headers and a session token."""
    import hmac
    import time as _time

    class Signer(ctypes.Structure):
        _fields_ = [("access_key", ctypes.c_char_p), ("secret_key", ctypes.c_char_p),
                    ("region", ctypes.c_char_p), ("session_token", ctypes.c_char_p),
                    ("key_date", ctypes.c_char * 9), ("key", ctypes.c_ubyte * 32)]

    lib = s3._lib_s3()
    f = lib.ol_s3_sign
    f.argtypes = [ctypes.POINTER(Signer), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                  ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                  ctypes.c_size_t, ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_size_t
    now = 1767225600 + 3723  # 2026-01-01T01:02:03Z
    xh = (ctypes.c_char_p * 2)(b"x-amz-checksum-crc32c:yZRlqg==", b"content-type:a/b")
    sg = Signer(b"AKID", b"SECRET/key", b"eu-west-1", b"TOKEN+1")
    out = ctypes.create_string_buffer(4096)
    path, query, host = "/b/dir/a%20b.bin", "partNumber=2&uploadId=u%2B1", "127.0.0.1:9000"
    n = f(ctypes.byref(sg), b"PUT", path.encode(), query.encode(), host.encode(),
          b"UNSIGNED-PAYLOAD", xh, 2, now, out, 4096)
    got = out.value.decode()
    assert n == len(got) > 0

    amz = _time.strftime("%Y%m%dT%H%M%SZ", _time.gmtime(now))
    hdrs = {"host": host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": amz,
            "x-amz-security-token": "TOKEN+1", "x-amz-checksum-crc32c": "yZRlqg==",
            "content-type": "a/b"}
    names = sorted(hdrs)
    creq = "\n".join(["PUT", path, query, "".join("%s:%s\n" % (k, hdrs[k]) for k in names),
                      ";".join(names), "UNSIGNED-PAYLOAD"])
    scope = "%s/eu-west-1/s3/aws4_request" % amz[:8]
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4SECRET/key").encode()
    for part in (amz[:8], "eu-west-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    assert ("Authorization: AWS4-HMAC-SHA256 Credential=AKID/%s, SignedHeaders=%s, "
            "Signature=%s\r\n" % (scope, ";".join(names), sig)) in got
    assert "x-amz-security-token: TOKEN+1\r\n" in got and "x-amz-date: %s\r\n" % amz in got
    # uri encoding: unreserved kept, '/' kept only when asked
    enc = ctypes.create_string_buffer(64)
    lib.ol_s3_uri_encode.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                     ctypes.c_size_t]
    assert lib.ol_s3_uri_encode("a b/~é+".encode(), 1, enc, 64) == 0
    assert enc.value == b"a%20b/~%C3%A9%2B"
    assert lib.ol_s3_uri_encode(b"a/b", 0, enc, 64) == 0 and enc.value == b"a%2Fb"
    assert lib.ol_s3_uri_encode(b"x" * 70, 0, enc, 64) == -36


def test_https_endpoint(openlaked, tmp_path):
    """TLS through OpenSSL: the daemon's [s3_tls] port with a certificate of a test CA; the
    client and `openlake cp` verify it (the CA given by argument or AWS_CA_BUNDLE) and refuse
    it without the CA."""
    pytest.importorskip("test_tls")
    from conftest import OPENLAKE_CLI, aws_env
    from test_tls import make_ca, make_cert, tls_conf

    ca = make_ca(tmp_path)
    pem, key = make_cert(tmp_path, "server", 2)
    d = openlaked(extra=tls_conf(pem, key))
    url = "https://127.0.0.1:%d" % d.s3_port
    c = s3.Client(endpoint=url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, ca_file=ca,
                  conns=3)
    c.create_bucket("tlsb")
    data = os.urandom(17 * MiB)
    c.put("tlsb", "obj", data)
    assert c.get("tlsb", "obj") == data
    other = make_ca(tmp_path / "other") if (tmp_path / "other").mkdir() is None else None
    bad = s3.Client(endpoint=url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, ca_file=other)
    with pytest.raises(s3.S3Error) as e:
        bad.head("tlsb", "obj")
    assert e.value.rc == -13 and "not trusted" in str(e.value)  # EACCES, not retried
    src = tmp_path / "f"
    src.write_bytes(data[:1000])
    r = subprocess.run([str(OPENLAKE_CLI), "cp", str(src), "s3://tlsb/f", "--endpoint-url", url],
                       env=aws_env({"AWS_CA_BUNDLE": str(ca)}), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert c.get("tlsb", "f") == data[:1000]
