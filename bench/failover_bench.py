#!/usr/bin/python3
"""How long writes stop when the serving leader's process dies (kill -9): the gap between the
kill and the first PUT through a follower that succeeds after it, with `[cluster]
revoke_dead_leader` on (the followers revoke the dead leader's lease once its S3 port refuses
connections) vs off (the next leader waits for the lease's end, `lease_ttl_s`, 10 s by
default), on two 4-node clusters up side by side (`scripts/cluster.sh up 4 DIR --etcd 1`; the
reference with OPENLAKE_CLUSTER_CONF="revoke_dead_leader = false"), alternating in each round.

  OPENLAKE_BUILD=build /usr/bin/python3 bench/failover_bench.py [--rounds 3]

Each round, per cluster: a client PUTs 64 KiB objects through a follower in a loop (each PUT
sent once, a failure tried again after 50 ms), the leader is killed, the gap is measured from
the kill to the end of the first PUT that starts after it and succeeds; the killed node is
started again and the next round waits until every follower's view is open again. Prints the
median gap of each side and their ratio; the clusters' dirs are removed at the end. Never a
pass/fail test.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_bench import REPO, client, metric, two_clusters  # noqa: E402



def view_open(url):
    """the node's read-only view serves (None: the node does not answer)"""
    try:
        return metric(url, "openlake_cluster_read_view_open") == 1
    except OSError:
        return None


def leader_of(urls, limit=120):
    """the one node whose view is closed (it serves) while the other three have theirs open"""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        st = [view_open(u) for u in urls]
        if st.count(False) == 1 and st.count(True) == len(urls) - 1:
            return st.index(False)
        time.sleep(0.2)
    sys.exit("no single serving leader with every follower's view open")


def restart(d, node):
    """start node again as scripts/cluster.sh does, its pid in the pid file"""
    build = os.path.join(REPO, os.environ.get("OPENLAKE_BUILD", "build"))
    p = subprocess.Popen(["setsid", f"{build}/cmd/openlaked/openlaked", "--config",
                          f"{d}/node-{node}/openlake.toml"], stdin=subprocess.DEVNULL,
                         stdout=open(f"{d}/node-{node}/openlaked.log", "a"),
                         stderr=subprocess.STDOUT)
    with open(f"{d}/pids/node-{node}.pid", "w") as f:
        f.write(f"{p.pid}\n")


def gap(d, urls, tag):
    """seconds from kill -9 of the leader to the first PUT through a follower that started
    after it and succeeded"""
    lid = leader_of(urls)
    f = (lid + 1) % len(urls)
    c = client(urls[f], attempts=1, read_timeout=20, connect_timeout=2)
    body = os.urandom(64 << 10)
    c.put_object(Bucket="bench", Key=f"{tag}-warm", Body=body)
    pid = int(open(f"{d}/pids/node-{lid}.pid").read().strip())
    t_kill = time.monotonic()
    os.kill(pid, 9)
    result = None
    for i in range(100000):  # bounded: each try ends within its timeouts
        t0 = time.monotonic()
        try:
            c.put_object(Bucket="bench", Key=f"{tag}-{i}", Body=body)
            result = time.monotonic() - t_kill
            break
        except Exception:
            if t0 - t_kill > 120:
                break
            time.sleep(0.05)
    restart(d, lid)
    leader_of(urls)  # the killed node back, every view open
    if result is None:
        sys.exit("no PUT succeeded within 120 s of the kill")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with two_clusters("f", "revoke_dead_leader = false", "shard-writing") as (cl, dirs):
        for urls, leader in cl.values():
            client(urls[leader]).create_bucket(Bucket="bench")
        gaps = {k: [] for k in cl}
        for r in range(a.rounds):
            for k in (["on", "off"] if r % 2 == 0 else ["off", "on"]):
                urls, _ = cl[k]
                g = gap(dirs[k], urls, f"r{r}")
                gaps[k].append(g)
                print(f"# round {r} revoke_dead_leader {k}: writes resumed {g:.2f} s after "
                      f"the kill", flush=True)
        on, off = (statistics.median(gaps[k]) for k in ("on", "off"))
        print(f"writes stopped by kill -9 of the serving leader: revoke_dead_leader on "
              f"{on:.2f} s   reference, off (the lease's end, lease_ttl_s 10): {off:.2f} s   "
              f"ratio {on / off:.2f}")
        print("# load average", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
