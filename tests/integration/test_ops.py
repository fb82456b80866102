"""Operator endpoints on the S3 port: /metrics, status JSON (signed by an admin), health,
console."""
import json
import os
import sys
import urllib.request

import pytest

from conftest import admin_get, boto3_client, REPO


def fetch(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


def metric_lines(text, name):
    return [l for l in text.splitlines() if l.startswith(name + "{") or l.startswith(name + " ")]


def test_metrics_count_s3_requests(daemon):
    s3 = boto3_client(daemon.s3_url)
    s3.create_bucket(Bucket="ops-bucket")
    for i in range(3):
        s3.put_object(Bucket="ops-bucket", Key=f"k{i}", Body=b"x" * 100)
    s3.get_object(Bucket="ops-bucket", Key="k0")["Body"].read()
    with pytest.raises(Exception):
        s3.get_object(Bucket="ops-bucket", Key="missing")
    status, hdrs, body = fetch(daemon.s3_url + "/metrics")
    assert status == 200 and hdrs["Content-Type"].startswith("text/plain")
    text = body.decode()
    puts = [l for l in metric_lines(text, "openlake_s3_requests_total") if 'op="PutObject"' in l]
    assert puts and float(puts[0].split()[-1]) == 3, puts
    errs = [l for l in metric_lines(text, "openlake_s3_errors_total") if 'op="GetObject"' in l]
    assert errs and float(errs[0].split()[-1]) == 1, errs
    assert metric_lines(text, "openlake_http_connections_total")
    assert metric_lines(text, "process_resident_memory_bytes")
    # the upstream path serves the same document
    assert b"openlake_s3_requests_total" in fetch(daemon.s3_url + "/openlake/admin/v1/metrics")[2]


def test_metrics_show_the_io_buffer_cache(daemon):
    """Large PUT/GET buffers are kept for reuse after a request; /metrics says how many bytes
    sit idle (the memory a burst leaves behind), within the cache's bound."""
    from conftest import wait_for
    s3 = boto3_client(daemon.s3_url)
    s3.create_bucket(Bucket="bufs")
    body = os.urandom(9 << 20)
    s3.put_object(Bucket="bufs", Key="big", Body=body)
    assert s3.get_object(Bucket="bufs", Key="big")["Body"].read() == body

    def cached():
        text = fetch(daemon.s3_url + "/metrics")[2].decode()
        return float(metric_lines(text, "openlake_io_buffer_cache_bytes")[0].split()[-1])
    wait_for(lambda: cached() > 0, 30, "idle buffers in the cache after a 9 MiB PUT and GET")
    assert cached() <= 1 << 30  # [memory_pool] size_bytes' default


def test_metrics_show_the_etag_lanes(daemon):
    """PUT bodies' MD5 (the ETag) runs in vector lanes shared by concurrent requests; /metrics
    counts the passes and the bodies hashed in them, and names the instruction set. The
    ETags stay plain MD5."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    def lanes():
        text = fetch(daemon.s3_url + "/metrics")[2].decode()
        info = metric_lines(text, "openlake_etag_md5_info")
        assert len(info) == 1 and any(f'isa="{i}"' in info[0]
                                      for i in ("avx512", "avx2", "generic")), info
        return [float(metric_lines(text, n)[0].split()[-1])
                for n in ("openlake_etag_md5_passes_total", "openlake_etag_md5_lanes_total")]
    s3 = boto3_client(daemon.s3_url)
    s3.create_bucket(Bucket="md5lanes")
    bodies = [os.urandom((1 << 20) + 4099 * i) for i in range(8)]
    passes0, lanes0 = lanes()
    with ThreadPoolExecutor(8) as ex:
        etags = list(ex.map(lambda i: s3.put_object(Bucket="md5lanes", Key=f"k{i}",
                                                    Body=bodies[i])["ETag"], range(8)))
    assert etags == ['"%s"' % hashlib.md5(b).hexdigest() for b in bodies]
    passes, lanes_ = lanes()
    assert passes > passes0 and lanes_ - lanes0 >= passes - passes0, (passes0, lanes0, passes,
                                                                       lanes_)


@pytest.mark.parametrize("section, bound", [("enabled = false", 0),
                                            ('size_bytes = "3MiB"', 3 << 20)])
def test_memory_pool_bounds_the_io_buffer_cache(openlaked, section, bound):
    """[memory_pool] (the upstream section) bounds what the buffer cache keeps idle: nothing
    with enabled = false, at most size_bytes for all sizes together; the data is unchanged."""
    d = openlaked(extra=f"[memory_pool]\n{section}\n")
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket="bufs")
    body = os.urandom(9 << 20)
    for i in range(3):
        s3.put_object(Bucket="bufs", Key=f"big{i}", Body=body)
        assert s3.get_object(Bucket="bufs", Key=f"big{i}")["Body"].read() == body
    text = fetch(d.s3_url + "/metrics")[2].decode()
    idle = float(metric_lines(text, "openlake_io_buffer_cache_bytes")[0].split()[-1])
    assert idle <= bound, (section, idle)


@pytest.mark.parametrize("encrypt", [False, True])
def test_an_unused_rpc_tls_section_is_named_at_start(openlaked, encrypt):
    """Upstream's configs carry [rpc_tls], which our node plane does not use (it is not TLS):
    the daemon says so at start and what protects the plane instead, and serves as usual."""
    d = openlaked(extra=f"[rpc_tls]\ncert_path = \"/etc/openlake/rpc.crt\"\n"
                        f"[cluster]\nplane_encrypt = {str(encrypt).lower()}\n")
    s3 = boto3_client(d.s3_url)
    s3.create_bucket(Bucket="rpctls")
    log = d.log()
    assert "[rpc_tls] is set but not used" in log, log
    assert "authenticated with [cluster] secret" in log, log
    assert ("encrypted ([cluster] plane_encrypt)" in log) == encrypt, log
    assert ("set [cluster] plane_encrypt = true" in log) == (not encrypt), log


def test_without_rpc_tls_no_warning(daemon):
    boto3_client(daemon.s3_url).list_buckets()
    assert "[rpc_tls]" not in daemon.log()


def test_metrics_show_kv_pool(daemon):
    sys.path.insert(0, str(REPO / "python"))
    import openlake_client as ol

    if not ol.library_available():
        pytest.skip("libopenlake is not built")
    c = ol.connect([daemon.kv_addr], device="tcp")
    keys = [bytes([i]) * 32 for i in range(4)]
    c.put(keys, [os.urandom(4096) for _ in keys])
    c.get(keys[:2])
    c.get([b"\xee" * 32])
    c.close()
    text = fetch(daemon.s3_url + "/metrics")[2].decode()
    assert float(metric_lines(text, "openlake_kv_puts_total")[0].split()[-1]) == 4
    hits = sum(float(l.split()[-1]) for l in metric_lines(text, "openlake_kv_hits_total"))
    assert hits == 2
    assert float(metric_lines(text, "openlake_kv_misses_total")[0].split()[-1]) == 1
    dram = [l for l in metric_lines(text, "openlake_kv_capacity_bytes") if "dram" in l]
    assert dram and float(dram[0].split()[-1]) > 0


def test_status_health_console(daemon):
    status, body = admin_get(daemon, "/openlake/admin/v1/status")
    assert status == 200, body
    st = json.loads(body)
    assert st["mode"] == "storage" and st["erasure"] == {"set_drive_count": 4, "data": 3,
                                                          "parity": 1}
    assert [d["path"] for d in st["drives"]] == daemon.data_dirs
    assert all(d["online"] and d["writable"] for d in st["drives"])
    assert fetch(daemon.s3_url + "/openlake/health")[2] == b"ok\n"
    status, hdrs, body = fetch(daemon.s3_url + "/openlake/console")
    assert status == 200 and hdrs["Content-Type"].startswith("text/html")
    assert b"/openlake/admin/v1/status" in body and b"<script>" in body


def test_browser_root_redirects_but_s3_root_is_s3(daemon):
    req = urllib.request.Request(daemon.s3_url + "/", headers={"Accept": "text/html"})
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                              {"redirect_request": lambda *a, **k: None}))
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(req, timeout=10)
    assert e.value.code == 302 and e.value.headers["Location"] == "/openlake/console"
    # a signed request for / is ListBuckets, and a signed GET /metrics lists bucket "metrics"
    s3 = boto3_client(daemon.s3_url)
    s3.create_bucket(Bucket="metrics")
    s3.put_object(Bucket="metrics", Key="a", Body=b"1")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="metrics")["Contents"]] == ["a"]
    assert "metrics" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


# ---- issue 15: an admin listener in every mode, HELP for every metric, ops counted, messages

import re  # noqa: E402
import subprocess  # noqa: E402

import urllib.error  # noqa: E402

from conftest import OPENLAKE_CLI, OPENLAKED, admin_request, free_port, wait_for  # noqa: E402

KV_SMALL = 'dram_bytes = "64MiB"\nspill_bytes = "64MiB"\nprefault = "off"\n'


def cli(*args, timeout=60):
    return subprocess.run([str(OPENLAKE_CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def wait_ready(d):
    """/openlake/ready answers 503 until every service listens, then 200 "ready"."""
    def ready():
        try:
            return fetch(d.admin_url + "/openlake/ready")[2] == b"ready\n"
        except urllib.error.HTTPError as e:
            assert e.code == 503 and e.read() == b"starting\n"
            return False
    assert wait_for(ready, 60, "/openlake/ready")


def families_without_help_or_type(text):
    """Metric families of a Prometheus text scrape that lack a # HELP or a # TYPE line."""
    helps = set(re.findall(r"^# HELP (\S+) \S", text, re.M))
    types = set(re.findall(r"^# TYPE (\S+) (?:counter|gauge|histogram|summary|untyped)$",
                           text, re.M))
    fams = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            fams.add(base if base in types else name)
    assert fams, text[:500]
    return sorted(f for f in fams if f not in helps or f not in types)


def test_kv_only_daemon_serves_admin_listener(openlaked):
    """mode = "kv" has no S3 port, yet /metrics, health, readiness, status and the console are
    served on console_addr, and the CLI reports what runs: no S3, a version, KV stats."""
    d = openlaked(mode="kv", drives=1, extra=KV_SMALL)
    wait_ready(d)
    text = fetch(d.admin_url + "/metrics")[2].decode()
    assert metric_lines(text, "openlake_kv_capacity_bytes"), text[:400]
    assert families_without_help_or_type(text) == []
    assert fetch(d.admin_url + "/openlake/health")[2] == b"ok\n"
    assert b"<script>" in fetch(d.admin_url + "/openlake/console")[2]
    status, _, body = admin_request(d, "GET", "/openlake/admin/v1/status", port=d.admin_port)
    st = json.loads(body)
    assert status == 200 and st["mode"] == "kv" and st["ready"] is True, body
    assert st["services"] == {"s3": None, "kv": d.kv_addr,
                              "admin": f"127.0.0.1:{d.admin_port}"}
    # unsigned status is refused there as on the S3 port
    assert admin_request(d, "GET", "/openlake/admin/v1/status", signed=False,
                         port=d.admin_port)[0] == 403

    r = cli("node", "info", "--config", d.config)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"daemon +up at http://127.0.0.1:%d, version \d+\.\d+\.\d+, uptime [\d.]+ s"
                     % d.admin_port, r.stdout), r.stdout
    assert "s3       (not served" in r.stdout and "erasure" not in r.stdout
    r = cli("cluster", "status", "--config", d.config, "--json")
    out = json.loads(r.stdout)
    assert out["mode"] == "kv", r.stdout + r.stderr  # (its [[nodes]] rpc_addr is not served)
    assert out["s3"] == {"addr": None, "reachable": False}
    assert out["kv"] == {"addr": d.kv_addr, "reachable": True}
    r = cli("cluster", "status", "--config", d.config)
    assert f"127.0.0.1:{d.s3_port}" not in r.stdout and "s3     (not served" in r.stdout
    r = cli("kv", "stats", "--config", d.config, "--json")
    nodes = json.loads(r.stdout)["nodes"]
    assert r.returncode == 0 and [n["addr"] for n in nodes] == [d.kv_addr], r.stdout + r.stderr
    assert nodes[0]["up"] and nodes[0]["stats"]["dram_capacity"] == 64 << 20
    r = cli("heal", "--endpoint", d.admin_url, "--status")
    assert r.returncode == 1 and "no object store" in r.stderr, r.stderr


def test_every_metric_family_has_help_and_type(daemon):
    """Both ports, after S3 and KV traffic, so that the per-op and per-tier families show."""
    s3 = boto3_client(daemon.s3_url)
    s3.create_bucket(Bucket="helpbucket")
    s3.put_object(Bucket="helpbucket", Key="k", Body=b"x")
    sys.path.insert(0, str(REPO / "python"))
    import openlake_client as ol

    if ol.library_available():
        c = ol.connect([daemon.kv_addr], device="tcp")
        c.put([b"\x01" * 32], [b"v" * 4096])
        c.close()
    for url in (daemon.s3_url, daemon.admin_url):
        text = fetch(url + "/metrics")[2].decode()
        assert metric_lines(text, "openlake_s3_requests_total"), url
        assert families_without_help_or_type(text) == [], url


def test_list_v2_on_missing_bucket_counted_under_its_op(daemon):
    s3 = boto3_client(daemon.s3_url)
    with pytest.raises(Exception) as e:
        s3.list_objects_v2(Bucket="no-such-bucket")
    assert "NoSuchBucket" in str(e.value)
    with pytest.raises(Exception):
        s3.head_object(Bucket="no-such-bucket", Key="k")
    text = fetch(daemon.admin_url + "/metrics")[2].decode()
    ops = {re.search(r'op="([^"]+)"', l).group(1): float(l.split()[-1])
           for l in metric_lines(text, "openlake_s3_errors_total")}
    assert ops.get("ListObjectsV2") == 1 and ops.get("HeadObject") == 1, ops
    assert "Other" not in ops, ops


def test_second_daemon_on_same_drives_names_lock_and_holder(openlaked, tmp_path):
    d = openlaked(drives=1, kv=False)
    r = subprocess.run([str(OPENLAKED), "--config", str(d.config), "--s3-addr",
                        f"127.0.0.1:{free_port()}", "--console-addr", ""],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    lock = f"{d.data_dirs[0]}/.openlake/lock"
    assert lock in r.stderr and f"pid {d.proc.pid}" in r.stderr, r.stderr
    assert "Input/output error" not in r.stderr
    # the first daemon still serves
    assert fetch(d.s3_url + "/openlake/health")[2] == b"ok\n"



def test_s3_port_in_use_names_the_fix(tmp_path):
    """The S3 address taken by another program: exit 1, the address, the cause and the fix (as
    the KV and admin listeners already said theirs; S3 said only 'Address already in use')."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        addr = "127.0.0.1:%d" % holder.getsockname()[1]
        dirs = ",".join(str(tmp_path / ("d%d" % i)) for i in range(4))
        r = subprocess.run([str(OPENLAKED), "--s3-addr", addr, "--kv-addr", "",
                            "--console-addr", "", "--data-dirs", dirs],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert ("cannot serve S3 on %s: Address already in use" % addr in r.stderr
            and "set s3_addr to a free port" in r.stderr), r.stderr

def test_messages_name_cause_and_fix(tmp_path):
    port = free_port()  # nothing listens there
    r = cli("heal", "--status", "--endpoint", f"http://127.0.0.1:{port}")
    assert r.returncode == 1 and not re.search(r"\(-?\d+\)", r.stderr), r.stderr
    assert "Connection refused" in r.stderr and "openlaked" in r.stderr, r.stderr

    cfg = tmp_path / "q.toml"
    cfg.write_text('set_drive_count = "4"\n')
    r = subprocess.run([str(OPENLAKED), "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=60)
    assert "set_drive_count = 4" in r.stderr and "number" in r.stderr, r.stderr
    # --check-config exits as --help says it does
    helptext = subprocess.run([str(OPENLAKED), "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    said = re.search(r"--check-config +parse and validate, then exit 0 \(or (\d)", helptext)
    assert said and r.returncode == int(said.group(1)), (helptext, r.returncode)


def test_kv_memory_over_a_quarter_of_ram_is_a_warning(tmp_path):
    """kv_local.toml's cpu_ram_frac = 0.5: --check-config says what start would claim (no
    memory is taken to say it), naming the key and the way to use less."""
    r = subprocess.run([str(OPENLAKED), "--config", str(REPO / "configs" / "kv_local.toml"),
                        "--check-config"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    warn = [l for l in r.stderr.splitlines() if "WARN" in l and "DRAM tier" in l]
    assert warn and "cpu_ram_frac = 0.5" in warn[0] and "dram_bytes" in warn[0], r.stderr
    assert "prefault" in r.stderr
    r = subprocess.run([str(OPENLAKED), "--config", str(REPO / "configs" / "kv_local.toml"),
                        "--kv.dram_bytes", "64MiB", "--check-config"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "WARN" not in r.stderr, r.stderr
