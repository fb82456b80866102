"""libopenlake's S3 client and `openlake cp` against another S3 implementation: moto's
server (moto_server, from the pyenv Python that awscli runs on here; the test skips when it
is absent). Multipart PUT, whole and ranged scatter GETs (CRC32C checked where moto keeps a
full-object one), listing, delete, cp up and down."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import OPENLAKE_CLI, REPO, free_port, wait_port

sys.path.insert(0, str(REPO / "python"))
from openlake_client import s3  # noqa: E402

MiB = 1 << 20


def moto_server_path():
    return shutil.which("moto_server") or next(
        (p for p in [os.path.expanduser("~/.pyenv/shims/moto_server")] if os.path.exists(p)),
        None)


@pytest.fixture(scope="module")
def moto():
    exe = moto_server_path()
    if not exe:
        pytest.skip("moto_server (pip's moto[server]) is not installed: no second S3 server")
    port = free_port()
    p = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, 60, p):
            pytest.skip("moto_server did not start")
        yield "http://127.0.0.1:%d" % port
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def test_client_against_moto(moto):
    c = s3.Client(endpoint=moto, access_key="testing", secret_key="testing", conns=4)
    c.create_bucket("other")
    data = os.urandom(19 * MiB + 5)
    etag, _ = c.put("other", "m/big", [data[:7], data[7:]])
    assert etag.endswith('-3"')
    assert c.get("other", "m/big") == data
    bufs = [bytearray(11), bytearray(9 * MiB)]
    c.get_into("other", "m/big", bufs, offset=8 * MiB - 5)
    assert bytes(bufs[0]) + bytes(bufs[1]) == data[8 * MiB - 5:8 * MiB + 6 + 9 * MiB]
    c.put("other", "m/small", b"hello world")
    assert c.get("other", "m/small") == b"hello world"  # moto keeps its CRC32C: checked
    assert c.list("other", "m/") == [("m/big", len(data)), ("m/small", 11)]
    c.delete("other", "m/small")
    assert not c.exists("other", "m/small")


def test_cp_against_moto(moto, tmp_path):
    src = tmp_path / "f.bin"
    data = os.urandom(17 * MiB)
    src.write_bytes(data)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_ENDPOINT_URL=moto, AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    s3.Client(endpoint=moto, access_key="testing", secret_key="testing").create_bucket("cpo")
    r = subprocess.run([str(OPENLAKE_CLI), "cp", str(src), "s3://cpo/x/"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(OPENLAKE_CLI), "cp", "-r", "s3://cpo/x/", str(tmp_path / "back")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back" / "f.bin").read_bytes() == data
