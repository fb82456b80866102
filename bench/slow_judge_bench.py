#!/usr/bin/python3
"""How long a slow drive takes to be judged slow and taken offline, under two builds side by
side in one run (issue 10: a drive is judged only on evidence that lasts, docs/cluster.md
"A slow drive"): what the lasting rule costs in detection time.

  bench/slow_judge_bench.py --builds BEFORE_BUILD_DIR,AFTER_BUILD_DIR [--rounds 3] [--ms 500]

Starts one `scripts/cluster.sh up 4 DIR --etcd 1` per build (bench/slow_drive_bench.py's
Cluster: one set N=4 P=1, a drive per node, the node plane's fault hook on), with a 2 s hold
so rounds are short. Each round, alternating which build goes first: delay every call of one
follower's drive MS, PUT 4 MiB through another follower until the leader logs the drive
offline as slow (seconds and PUTs), lift the delay, wait until it is back, and give it
SETTLE_S online before its next round (a drive just back is not judged for slow_drive_min_s:
the figure is the time to judge a drive that was serving well). One line per
round and build, then the medians side by side and the load average. Stops everything it
started (cluster.sh down). Never a pass/fail test.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slow_drive_bench import Cluster, until_back, until_ejected  # noqa: E402

SETTLE_S = 8  # online this long after its return before the next delay: past min_s (5 s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", required=True, help="BEFORE,AFTER build directories")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ms", type=int, default=500)
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.builds.split(",")]
    cs, res, back_at = [], {}, {}
    try:
        for i, b in enumerate(builds):
            os.environ["OPENLAKE_BUILD"] = b  # read by cluster.sh through Cluster's env
            cs.append(Cluster(f"b{i}", "slow_drive_hold_s = 2"))
            res[cs[-1].name] = []
        for r in range(a.rounds):
            for c in (cs if r % 2 == 0 else list(reversed(cs))):
                time.sleep(max(0.0, back_at.get(c.name, 0) + SETTLE_S - time.monotonic()))
                c.delay(a.ms)
                s, n, ok = until_ejected(c)
                back = c.returns()
                c.delay(0)
                until_back(c, back)
                back_at[c.name] = time.monotonic()
                print(f"round {r} {builds[int(c.name[1:])]}: "
                      + (f"offline as slow after {s:.1f} s ({n} PUTs of 4 MiB)" if ok
                         else f"NOT ejected in {s:.0f} s"))
                if ok:
                    res[c.name].append(s)
        for i, c in enumerate(cs):
            v = res[c.name]
            print(f"{builds[i]}: delay {a.ms} ms on one drive of 4, median time to offline "
                  f"as slow {statistics.median(v) if v else float('nan'):.1f} s "
                  f"({len(v)} of {a.rounds} rounds)")
        print("# load average", " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        for c in cs:
            c.down()


if __name__ == "__main__":
    main()
