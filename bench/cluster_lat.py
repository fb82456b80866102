#!/usr/bin/python3
"""Per-request latency and the leader's CPU per request of small S3 calls through a 4-node
cluster, for two builds side by side (alternating), in one run.

  /usr/bin/python3 bench/cluster_lat.py --build build --base /tmp/base/build [--rounds 4] \
      [--requests 1000]

Each round brings up `scripts/cluster.sh up 4 DIR --etcd 1` (one set N=4 P=1, one drive per
node) on one build, then on the other; in each, a 1 MiB and a 64 MiB object are written
through the leader, and --requests HEADs of the 64 MiB object and GETs of the 1 MiB one go
through the leader, then through a non-leader (boto3, one client each, kept connections).
Prints a line per cluster: the median latency of each figure and the CPU time the leader's
process used per request (user + system from /proc/PID/stat, over the timed loop only), then
the medians over the rounds of each build side by side. Never a pass/fail test.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_bench import REPO, client, cluster_up, cpu_s, views_open  # noqa: E402


def one(build, n):
    """{figure: (median ms, leader CPU ms per request)} of one cluster on build"""
    d = tempfile.mkdtemp(prefix="openlake-clat-")
    try:
        urls, leader = cluster_up(d, "", build=build)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                if views_open(urls, leader):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        lc, fc = client(urls[leader]), client(urls[(leader + 1) % 4])
        lc.create_bucket(Bucket="lat")
        lc.put_object(Bucket="lat", Key="one", Body=os.urandom(1 << 20))
        lc.put_object(Bucket="lat", Key="big", Body=os.urandom(64 << 20))
        out = {}
        for via, c in (("leader", lc), ("non-leader", fc)):
            calls = (("HEAD 64 MiB", lambda: c.head_object(Bucket="lat", Key="big")),
                     ("GET 1 MiB", lambda: c.get_object(Bucket="lat", Key="one")["Body"].read()))
            for op, fn in calls:
                for _ in range(20):  # warm: connections, caches
                    fn()
                ts = []
                c0 = cpu_s(d, leader)
                for _ in range(n):
                    t = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t)
                out[f"{op} via the {via}"] = (statistics.median(ts) * 1e3,
                                              (cpu_s(d, leader) - c0) / n * 1e3)
        return out
    finally:
        subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", d],
                       capture_output=True, timeout=120)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--base", required=True, help="the reference build directory")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=1000)
    a = ap.parse_args()
    runs = {a.build: [], a.base: []}
    for r in range(a.rounds):
        for b in (a.base, a.build):
            res = one(b, a.requests)
            runs[b].append(res)
            print(f"round {r + 1} {b}: " + "; ".join(
                f"{k} {ms:.2f} ms, leader CPU {cpu:.2f} ms" for k, (ms, cpu) in res.items()),
                flush=True)
    print("# load average", open("/proc/loadavg").read().split()[:3])
    for k in runs[a.build][0]:
        m = [statistics.median(x[k][i] for x in runs[a.build]) for i in (0, 1)]
        r = [statistics.median(x[k][i] for x in runs[a.base]) for i in (0, 1)]
        print(f"{k}: {m[0]:.2f} ms, leader CPU {m[1]:.2f} ms per request   reference "
              f"({a.base}): {r[0]:.2f} ms, {r[1]:.2f} ms   ratio (reference / this) "
              f"{r[0] / m[0]:.2f}, {r[1] / m[1] if m[1] else float('inf'):.2f}")


if __name__ == "__main__":
    main()
