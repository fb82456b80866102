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
