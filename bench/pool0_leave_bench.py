#!/usr/bin/python3
"""What `openlake cluster leave --pool 0` costs the clients: PUT+GET latency through a node of
pool 1 while the serving set moves from 0.0 to 1.0 and pool 0 drains, vs the same loop in the
same cluster just before the leave (the reference), in one run.

  OPENLAKE_BUILD=build /usr/bin/python3 bench/pool0_leave_bench.py [--objects 200] \\
      [--size-kib 256] [--steady-s 15]

Starts `scripts/cluster.sh up 4 DIR --etcd 1` and `add DIR 4` (pool 1), writes --objects
objects of --size-kib into pool 0 before the join (all of them land there), then runs one
client loop (PUT then GET of a 64 KiB object, 32 keys round robin) through node 5 for
--steady-s seconds (reference), then runs `cluster leave --pool 0` and keeps the loop going
until the layout marks pool 0 removed. Prints the latency figures of both phases side by side,
how long after the leave the new serving leader served (its log), the drain's bytes and time,
and the errors the client saw (botocore's standard retries on: a 503 retried that then
succeeds is not an error). Never a pass/fail test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OPENLAKE_BUILD", "build")
CLI = os.path.join(REPO, BUILD, "cmd/openlake/openlake")


def client(url):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="openlakeadmin",
                        aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, read_timeout=120,
                                      retries={"max_attempts": 8, "mode": "standard"}))


def status(d):
    s = subprocess.run([CLI, "cluster", "status", "--config", f"{d}/node-4/openlake.toml",
                        "--json"], capture_output=True, text=True, timeout=60)
    return json.loads(s.stdout) if s.returncode == 0 else {}


def loop(s3, until, lat, errors):
    body = os.urandom(64 << 10)
    n = 0
    while not until():
        k = f"loop/{n % 32}"
        t = time.monotonic()
        try:
            s3.put_object(Bucket="bench", Key=k, Body=body)
            if s3.get_object(Bucket="bench", Key=k)["Body"].read() != body:
                errors.append((k, "wrong bytes"))
        except Exception as e:  # noqa: BLE001 - counted, a bench never fails
            errors.append((k, repr(e)[:120]))
        lat.append(time.monotonic() - t)
        n += 1


def figures(lat):
    s = sorted(lat)
    return (len(s), statistics.median(s) * 1000, s[int(len(s) * 0.99) - 1] * 1000,
            s[-1] * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--size-kib", type=int, default=256)
    ap.add_argument("--steady-s", type=float, default=15)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="openlake-p0bench-")
    cl = os.path.join(REPO, "scripts", "cluster.sh")
    up = subprocess.run([cl, "up", "4", d, "--etcd", "1"], capture_output=True, text=True,
                        timeout=600)
    if up.returncode:
        sys.exit(up.stdout + up.stderr)
    try:
        urls = dict(re.findall(r"node (\d+) s3=(\S+)", up.stdout))
        s3 = client(urls["1"])
        s3.create_bucket(Bucket="bench")
        data = os.urandom(a.size_kib << 10)
        for i in range(a.objects):
            s3.put_object(Bucket="bench", Key=f"pool0/{i}", Body=data)
        add = subprocess.run([cl, "add", d, "4"], capture_output=True, text=True, timeout=600)
        if add.returncode:
            sys.exit(add.stdout + add.stderr)
        urls.update(re.findall(r"node (\d+) s3=(\S+)", add.stdout))
        s3 = client(urls["5"])
        steady, during, e1, e2 = [], [], [], []
        end = time.monotonic() + a.steady_s
        loop(s3, lambda: time.monotonic() > end, steady, e1)
        t0 = time.monotonic()
        r = subprocess.run([CLI, "cluster", "leave", "--config", f"{d}/node-0/openlake.toml",
                            "--pool", "0"], capture_output=True, text=True, timeout=60)
        if r.returncode:
            sys.exit(r.stdout + r.stderr)
        last = [0.0]

        def removed():
            if time.monotonic() - last[0] < 1:
                return False
            last[0] = time.monotonic()
            return (status(d).get("pools") or [{}])[0].get("state") == "removed"
        loop(s3, removed, during, e2)
        took = time.monotonic() - t0
        logs = "".join(open(f"{d}/node-{i}/openlaked.log").read() for i in range(4, 8))
        lv = status(d).get("leave") or {}
        ref, got = figures(steady), figures(during)
        print(f"PUT+GET 64 KiB through node 5 during leave --pool 0: {got[0]} ops, p50 "
              f"{got[1]:.1f} ms, p99 {got[2]:.1f} ms, max {got[3]:.0f} ms, {len(e2)} errors   "
              f"reference, the same loop before the leave: {ref[0]} ops, p50 {ref[1]:.1f} ms, "
              f"p99 {ref[2]:.1f} ms, max {ref[3]:.0f} ms, {len(e1)} errors")
        m = re.search(r"renewing it for a newer epoch", logs)
        print(f"leave --pool 0 to pool 0 removed: {took:.1f} s; drain moved "
              f"{lv.get('objects_moved', '?')} versions, "
              f"{int(lv.get('bytes_moved', 0)) / (1 << 20):.1f} MiB, {lv.get('failed', '?')} "
              f"failed; key renewed: {'yes' if m else 'no'}")
        for e in (e1 + e2)[:5]:
            print("# error:", e)
        print("# load average", open("/proc/loadavg").read().split()[:3])
    finally:
        subprocess.run([cl, "down", d], capture_output=True, timeout=300)


if __name__ == "__main__":
    main()
