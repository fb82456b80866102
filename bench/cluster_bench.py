#!/usr/bin/python3
"""S3 PUT and GET of large objects through a non-leader (forwarded by src/http/proxy.c) vs
straight to the set's leader, in one run on one cluster, alternating, medians.

  OPENLAKE_BUILD=build /usr/bin/python3 bench/cluster_bench.py [--size-mib 64] [--rounds 5]

Starts `scripts/cluster.sh up 4 DIR --etcd 1` (one set N=4 P=1, one drive per node), finds
the leader in the nodes' logs, runs the rounds with boto3 (one client per node, objects
streamed from memory), prints one line per figure with the reference beside it, and stops
the cluster. Never a pass/fail test.
"""
import argparse
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


def client(url):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="openlakeadmin",
                        aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, read_timeout=300,
                                      retries={"max_attempts": 4, "mode": "standard"}))


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="openlake-cbench-")
    up = subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "up", "4", d, "--etcd",
                         "1"], capture_output=True, text=True, timeout=600)
    if up.returncode:
        sys.exit(up.stdout + up.stderr)
    try:
        urls = re.findall(r"s3=(\S+)", up.stdout)
        leader = next(i for i in range(4)
                      if "serving set 0.0" in open(f"{d}/node-{i}/openlaked.log").read())
        other = (leader + 1) % 4
        c = {"leader": client(urls[leader]), "non-leader": client(urls[other])}
        c["leader"].create_bucket(Bucket="bench")
        body = os.urandom(a.size_mib << 20)
        res = {(op, who): [] for op in ("PUT", "GET") for who in c}
        for r in range(a.rounds):
            order = list(c) if r % 2 == 0 else list(reversed(c))
            for who in order:
                s3 = c[who]
                key = f"o-{who}-{r}"
                res[("PUT", who)].append(timed(lambda: s3.put_object(Bucket="bench", Key=key,
                                                                     Body=body)))
                res[("GET", who)].append(
                    timed(lambda: s3.get_object(Bucket="bench", Key=key)["Body"].read()))
        mib = a.size_mib
        for op in ("PUT", "GET"):
            nl = mib / statistics.median(res[(op, "non-leader")])
            ld = mib / statistics.median(res[(op, "leader")])
            print(f"S3 {op} {mib} MiB through a non-leader: {nl:.0f} MiB/s   "
                  f"reference, straight to the leader: {ld:.0f} MiB/s   ratio {nl / ld:.2f}")
    finally:
        subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", d],
                       capture_output=True, timeout=300)


if __name__ == "__main__":
    main()
