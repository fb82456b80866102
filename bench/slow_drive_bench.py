#!/usr/bin/python3
"""A slow drive in a set of four: PUT 4 MiB, PUT 32 MiB and GET 32 MiB through a follower,
with one drive's node-plane calls delayed 0, 300 and 900 ms, on two clusters side by side in
one run: slow-drive ejection off (`[cluster] slow_drive_ms = 0`: every request waits for
the slow drive, as before it was built) and on (the defaults: the leader takes the drive
offline as slow, writes go on with three, reads decode from the others).

  OPENLAKE_BUILD=build /usr/bin/python3 bench/slow_drive_bench.py [--rounds 3] [--delays 300,900]
  OPENLAKE_BUILD=build /usr/bin/python3 bench/slow_drive_bench.py --hedge [--delays 300,900]

--hedge compares instead, ejection off on both (a drive before it is judged, or one its set
cannot spare): hedging off (`[cluster] hedge_ms = 0`: every stripe waits for the slow drive,
as before it was built) and on (the defaults: a stripe leaves it behind after 200 ms and 4x
the others' median; reads take parity instead of it); each PUT's object is left with a miss
for heal, so no warm-up or hold applies.

Starts two `scripts/cluster.sh up 4 DIR --etcd 1` (one set N=4 P=1, one drive per node) with
the node plane's test fault hook on (OPENLAKE_FAULTS=1, a rules file per cluster: the way the
tests enable it), finds each set's leader in the nodes' logs, delays the leader's calls to
one follower's drive (`delay * MS PEER`) and sends requests through another follower. For
each delay: with ejection on, PUTs until the drive is offline as slow first (that spell is
printed: the time until ejection and the PUTs it took), then the rounds, alternating the
two clusters, medians; the rule lifted, it waits until the drive is back (its hold). One line
per figure with the reference (no delay, the same cluster) beside it, then the load average.
Stops everything it started. Never a pass/fail test.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = (("PUT", 4), ("PUT", 32), ("GET", 32))


def client(url):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="openlakeadmin",
                        aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, read_timeout=300,
                                      retries={"max_attempts": 4, "mode": "standard"}))


class Cluster:
    def __init__(self, name, conf, data_drive=False):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"openlake-slowbench-{name}-")
        self.faults = os.path.join(self.dir, "faults")
        open(self.faults, "w").close()
        env = dict(os.environ, OPENLAKE_FAULTS="1", OPENLAKE_FAULT_FILE=self.faults,
                   OPENLAKE_CLUSTER_CONF=conf)
        up = subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "up", "4", self.dir,
                             "--etcd", "1"], capture_output=True, text=True, timeout=600,
                            env=env)
        if up.returncode:
            self.down()
            sys.exit(up.stdout + up.stderr)
        urls = re.findall(r"s3=(\S+)", up.stdout)
        self.leader = next(i for i in range(4) if "serving set 0.0" in self.log(i))
        self.slow = (self.leader + 1) % 4  # its drive is delayed
        if data_drive:  # one that holds data shards (drive i is node i's; k = 3)
            self.slow = next(i for i in ((self.leader + j) % 4 for j in (1, 2, 3)) if i < 3)
        # requests go through another follower
        self.via = next(i for i in ((self.leader + j) % 4 for j in (2, 1, 3))
                        if i != self.slow)
        rpc = re.search(r'rpc_addr = "([^"]+)"', open(self.conf(self.slow)).read()).group(1)
        self.peer = rpc
        self.s3 = client(urls[self.via])
        self.s3.create_bucket(Bucket="bench")
        self.bodies = {mib: os.urandom(mib << 20) for mib in (4, 32)}
        self.s3.put_object(Bucket="bench", Key="get-32", Body=self.bodies[32])

    def conf(self, i):
        return os.path.join(self.dir, f"node-{i}", "openlake.toml")

    def log(self, i=None):
        i = self.leader if i is None else i
        with open(os.path.join(self.dir, f"node-{i}", "openlaked.log"), errors="replace") as f:
            return f.read()

    def delay(self, ms):
        with open(self.faults, "w") as f:
            f.write(f"delay * {ms} {self.peer}\n" if ms else "")

    def ejections(self):
        return len(re.findall(rf"drive node {self.slow} \S+ drive \d+ is offline: slow",
                              self.log()))

    def returns(self):
        return len(re.findall(rf"drive node {self.slow} \S+ drive \d+ is back online",
                              self.log()))

    def op(self, what, mib, n):
        t = time.monotonic()
        if what == "PUT":
            self.s3.put_object(Bucket="bench", Key=f"o{mib}-{n}", Body=self.bodies[mib])
        else:
            got = self.s3.get_object(Bucket="bench", Key="get-32")["Body"].read()
            assert got == self.bodies[32]
        return time.monotonic() - t

    def down(self):
        subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", self.dir],
                       capture_output=True, timeout=300)
        shutil.rmtree(self.dir, ignore_errors=True)  # its objects: hundreds of MB a run


def until_ejected(c, bound_s=120):
    """PUTs of 4 MiB until c's leader took the slow drive offline: (seconds, PUTs)"""
    before, t, n = c.ejections(), time.monotonic(), 0
    while c.ejections() == before and time.monotonic() - t < bound_s and n < 200:
        c.op("PUT", 4, f"warm{n}")
        n += 1
    return time.monotonic() - t, n, c.ejections() > before


def until_back(c, before, bound_s=300):
    t = time.monotonic()
    while c.returns() == before and time.monotonic() - t < bound_s:
        time.sleep(0.5)  # a bench: waiting on the drive's hold, nothing measured
    return c.returns() > before


def measure(cs, rounds, tag):
    res = {(c.name, w, m): [] for c in cs for w, m in OPS}
    for r in range(rounds):
        for c in (cs if r % 2 == 0 else list(reversed(cs))):
            for w, m in OPS:
                res[(c.name, w, m)].append(c.op(w, m, f"{tag}-{r}"))
    return {k: statistics.median(v) for k, v in res.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delays", default="300,900")
    ap.add_argument("--hedge", action="store_true",
                    help="hedging off and on, ejection off on both")
    a = ap.parse_args()
    delays = [int(x) for x in a.delays.split(",") if x]
    if a.hedge:
        return hedge(a.rounds, delays)
    cs = []
    try:
        cs.append(Cluster("off", "slow_drive_ms = 0"))
        cs.append(Cluster("on", ""))
        on = cs[1]
        base = measure(cs, a.rounds, "base")
        for ms in delays:
            for c in cs:
                c.delay(ms)
            s, n, ok = until_ejected(on)
            print(f"# delay {ms} ms, ejection on: drive offline as slow after {s:.1f} s "
                  f"({n} PUTs of 4 MiB)" if ok else f"# delay {ms} ms: NOT ejected in {s:.0f} s")
            got = measure(cs, a.rounds, f"d{ms}")
            report(cs, got, base, ms, "slow-drive ejection {}")
            back = on.returns()
            for c in cs:
                c.delay(0)
            t = time.monotonic()
            print(f"# delay lifted: the drive back after {time.monotonic() - t:.1f} s"
                  if until_back(on, back) else "# delay lifted: the drive NOT back")
        print("# load average", " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        for c in cs:
            c.down()


def report(cs, got, base, ms, what):
    """one line per request and cluster: its time with the delay against the no-delay
    reference of the same cluster; what names the cluster, its "{}" filled with c.name"""
    for w, m in OPS:
        for c in cs:
            v, b = got[(c.name, w, m)], base[(c.name, w, m)]
            print(f"{w} {m} MiB through a follower, one drive of 4 delayed {ms} ms, "
                  f"{what.format(c.name)}: {v:.2f} s   reference, no delay: "
                  f"{b:.2f} s   ratio {v / b:.1f}")


def hedge(rounds, delays):
    cs = []
    try:
        cs.append(Cluster("off", "slow_drive_ms = 0\nhedge_ms = 0", data_drive=True))
        cs.append(Cluster("on", "slow_drive_ms = 0", data_drive=True))
        base = measure(cs, rounds, "base")
        for ms in delays:
            for c in cs:
                c.delay(ms)
            got = measure(cs, rounds, f"d{ms}")
            for c in cs:
                c.delay(0)
            report(cs, got, base, ms, "ejection off, hedging {}")
        print("# load average", " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        for c in cs:
            c.down()


if __name__ == "__main__":
    main()
