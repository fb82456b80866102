#!/usr/bin/python3
"""S3 PUT and GET of large objects through a 4-node cluster: through a non-leader (forwarded by
src/http/proxy.c) vs straight to the set's leader, and both vs the same number of drives
behind one standalone node (the issue's reference), in one run, alternating, medians.

  OPENLAKE_BUILD=build /usr/bin/python3 bench/cluster_bench.py [--size-mib 64] [--rounds 5]
  OPENLAKE_BUILD=build /usr/bin/python3 bench/cluster_bench.py --reads [--size-mib 64] \
      [--rounds 5] [--agg-gets 4]
  OPENLAKE_BUILD=build /usr/bin/python3 bench/cluster_bench.py --writes [--size-mib 64] \
      [--rounds 5] [--agg-puts 2] [--degraded]

--reads: GETs through a non-leader with `[cluster] read_any` on (the node serves them from its
read-only view) vs off (forwarded to the leader), and the aggregate GET rate with one client
per node (all four at once, --agg-gets GETs each), on two 4-node clusters up side by side
(`scripts/cluster.sh up` with OPENLAKE_CLUSTER_CONF="read_any = false" for the reference),
alternating in each round.

--writes: PUTs through a non-leader with `[cluster] write_any` on (the node writes the data
itself and sends the commit to the leader) vs off (forwarded whole to the leader), and the
aggregate PUT rate with one client per node (all four at once, --agg-puts PUTs each), on two
4-node clusters up side by side (OPENLAKE_CLUSTER_CONF="write_any = false" for the
reference), alternating in each round; and the CPU time the leader's process used for them
(write_any on: only the commits of the PUTs through non-leaders reach it). The clusters' dirs
are removed at the end (several GB). With --degraded one non-leader of each cluster is killed
(-9) first and the rounds run with its drive offline (the aggregate over the three nodes
left): the followers write without a drive the leader lacks too, once it has told so.

Starts `scripts/cluster.sh up 4 DIR --etcd 1` (one set N=4 P=1, one drive per node), finds
the leader in the nodes' logs, and beside it one standalone openlaked with four drives
(N=4 P=1, the same file system, its own temp dir); runs the rounds with boto3 (one client per
endpoint, objects streamed from memory), prints one line per figure with the reference beside
it, and stops everything. Never a pass/fail test.
"""
import argparse
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def client(url, attempts=5, read_timeout=300, connect_timeout=60):
    """boto3 on url with scripts/cluster.sh's embedded default credentials; attempts=1 sends
    each request once"""
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="openlakeadmin",
                        aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, read_timeout=read_timeout,
                                      connect_timeout=connect_timeout,
                                      retries={"total_max_attempts": attempts,
                                               "mode": "standard"}))


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def cluster_up(d, conf, etcd=1, build=None):
    """scripts/cluster.sh up 4 d (build: its build directory, default $OPENLAKE_BUILD):
    (the nodes' S3 URLs, the serving leader's index)"""
    env = dict(os.environ, OPENLAKE_CLUSTER_CONF=conf)
    if build:
        env["OPENLAKE_BUILD"] = build
    up = subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "up", "4", d, "--etcd",
                         str(etcd)], capture_output=True, text=True, timeout=600, env=env)
    if up.returncode:
        sys.exit(up.stdout + up.stderr)
    urls = re.findall(r"s3=(\S+)", up.stdout)
    leader = next(i for i in range(4)
                  if "serving set 0.0" in open(f"{d}/node-{i}/openlaked.log").read())
    return urls, leader


def metric(url, name):
    """a sample of url's /metrics (None when absent); OSError when it does not answer"""
    import urllib.request
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for ln in r.read().decode().splitlines():
            if ln.startswith(name + " "):
                return float(ln.split()[-1])
    return None


def views_open(urls, leader):
    """every non-leader's read-only view serves (its /metrics gauge)"""
    return all(metric(u, "openlake_cluster_read_view_open") == 1
               for i, u in enumerate(urls) if i != leader)


def aggregate_of(urls, fn):
    """MiB/s of one client per node at once, client i moving fn(i, s3) bytes"""
    import threading
    moved = [0] * len(urls)

    def run(i):
        moved[i] = fn(i, client(urls[i]))
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(urls))]
    t = time.monotonic()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return sum(moved) / (1 << 20) / (time.monotonic() - t)


def aggregate(urls, key, n):
    """MiB/s of one client per node, each GETting key n times, all at once"""
    return aggregate_of(urls, lambda i, s3: sum(
        len(s3.get_object(Bucket="bench", Key=key)["Body"].read()) for _ in range(n)))


def aggregate_puts(urls, body, n, tag):
    """MiB/s of one client per node, each PUTting body n times, all at once"""
    def puts(i, s3):
        for j in range(n):
            s3.put_object(Bucket="bench", Key=f"agg-{tag}-{i}-{j}", Body=body)
        return n * len(body)
    return aggregate_of(urls, puts)


def cpu_s(d, node):
    """CPU seconds (user + system) node of the cluster in d has used so far"""
    pid = open(f"{d}/pids/node-{node}.pid").read().strip()
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def two_clusters(kind, off, what, on=""):
    """Two 4-node clusters side by side, "on" as configured by default, "off" with the [cluster]
    line off; yields ({"on"|"off": (urls, leader)}, {"on"|"off": dir}) once the "on" cluster's
    non-leaders have their views open; both are stopped and their dirs (GBs of objects per
    run) removed after"""
    dirs = {k: tempfile.mkdtemp(prefix=f"openlake-{kind}bench-{k}-") for k in ("on", "off")}
    try:
        cl = {"on": cluster_up(dirs["on"], on), "off": cluster_up(dirs["off"], off)}
        for _ in range(600):
            if views_open(*cl["on"]):
                break
            time.sleep(0.1)
        else:
            sys.exit(f"the non-leaders' {what} views did not open")
        yield cl, dirs
    finally:
        for d in dirs.values():
            subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", d],
                           capture_output=True, timeout=300)
            shutil.rmtree(d, ignore_errors=True)


def degrade(cl, dirs):
    """kill -9 node leader+3 of each cluster; wait until the "on" cluster's writing follower
    has been told by its leader that the killed node's drive is offline; the killed node is
    left out of the urls"""
    for k, (urls, leader) in cl.items():
        victim = (leader + 3) % 4
        pid = int(open(f"{dirs[k]}/pids/node-{victim}.pid").read().strip())
        os.kill(pid, 9)
        cl[k] = ([u for i, u in enumerate(urls) if i != victim], leader, urls)
    urls, leader, every = cl["on"]
    for _ in range(1200):
        if metric(every[(leader + 1) % 4], "openlake_cluster_leader_drives_offline") == 1:
            break
        time.sleep(0.1)
    else:
        sys.exit("the leader did not tell that the killed node's drive is offline")


def writes(a):
    # --degraded: the followers of the "on" cluster write without a drive the leader lacks too
    on = "write_degraded = true" if a.degraded else ""
    with two_clusters("w", "write_any = false", "shard-writing", on) as (cl, dirs):
        body = os.urandom(a.size_mib << 20)
        for urls, leader in cl.values():
            client(urls[leader]).create_bucket(Bucket="bench")
        if a.degraded:
            degrade(cl, dirs)
        else:
            cl = {k: (urls, leader, urls) for k, (urls, leader) in cl.items()}
        one = {k: [] for k in cl}
        agg = {k: [] for k in cl}
        lead_cpu = {k: 0.0 for k in cl}  # the leader's CPU seconds over every PUT measured
        mib_put = {k: 0 for k in cl}
        for r in range(a.rounds):
            for k in (["on", "off"] if r % 2 == 0 else ["off", "on"]):
                urls, leader, every = cl[k]
                s3 = client(every[(leader + 1) % 4])
                c0 = cpu_s(dirs[k], leader)
                one[k].append(timed(lambda: s3.put_object(Bucket="bench", Key=f"o{r}",
                                                          Body=body)))
                agg[k].append(aggregate_puts(urls, body, a.agg_puts, r))
                lead_cpu[k] += cpu_s(dirs[k], leader) - c0
                mib_put[k] += a.size_mib * (1 + len(urls) * a.agg_puts)
        mib = a.size_mib
        if a.degraded:
            urls, leader, every = cl["on"]
            n = metric(every[(leader + 1) % 4], "openlake_cluster_local_writes_degraded_total")
            print(f"# one non-leader of each cluster killed: {len(urls)} nodes serve; the "
                  f"single client's follower wrote {n:.0f} PUTs without the killed node's drive")
        on, off = (mib / statistics.median(one[k]) for k in ("on", "off"))
        print(f"S3 PUT {mib} MiB through a non-leader, write_any on (written there): {on:.0f} "
              f"MiB/s   reference, write_any off (forwarded to the leader): {off:.0f} MiB/s   "
              f"ratio {on / off:.2f}")
        on, off = (statistics.median(agg[k]) for k in ("on", "off"))
        print(f"S3 PUT {mib} MiB aggregate, one client per node ({len(cl['on'][0])} at once, "
              f"{a.agg_puts} PUTs "
              f"each), write_any on: {on:.0f} MiB/s   reference, write_any off: {off:.0f} "
              f"MiB/s   ratio {on / off:.2f}")
        on, off = (lead_cpu[k] / (mib_put[k] / 1024) for k in ("on", "off"))
        print(f"the leader's CPU seconds per GiB of the PUTs above (the single client's through "
              f"a non-leader, the non-leaders' aggregate clients' too), write_any on: {on:.2f} s   "
              f"reference, write_any off: {off:.2f} s   ratio {on / off:.2f}")
        print("# load average", open("/proc/loadavg").read().split()[:3])


def reads(a):
    with two_clusters("r", "read_any = false", "read-only") as (cl, _):
        body = os.urandom(a.size_mib << 20)
        for urls, leader in cl.values():
            s3 = client(urls[leader])
            s3.create_bucket(Bucket="bench")
            s3.put_object(Bucket="bench", Key="o", Body=body)
        one = {k: [] for k in cl}
        agg = {k: [] for k in cl}
        for r in range(a.rounds):
            for k in (["on", "off"] if r % 2 == 0 else ["off", "on"]):
                urls, leader = cl[k]
                s3 = client(urls[(leader + 1) % 4])
                one[k].append(timed(lambda: s3.get_object(Bucket="bench", Key="o")["Body"]
                                    .read()))
                agg[k].append(aggregate(urls, "o", a.agg_gets))
        mib = a.size_mib
        on, off = (mib / statistics.median(one[k]) for k in ("on", "off"))
        print(f"S3 GET {mib} MiB through a non-leader, read_any on (served there): {on:.0f} "
              f"MiB/s   reference, read_any off (forwarded to the leader): {off:.0f} MiB/s   "
              f"ratio {on / off:.2f}")
        on, off = (statistics.median(agg[k]) for k in ("on", "off"))
        print(f"S3 GET {mib} MiB aggregate, one client per node (4 at once, {a.agg_gets} GETs "
              f"each), read_any on: {on:.0f} MiB/s   reference, read_any off: {off:.0f} MiB/s"
              f"   ratio {on / off:.2f}")
        print("# load average", open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reads", action="store_true")
    ap.add_argument("--agg-gets", type=int, default=4)
    ap.add_argument("--writes", action="store_true")
    ap.add_argument("--agg-puts", type=int, default=2)
    ap.add_argument("--degraded", action="store_true")
    a = ap.parse_args()
    if a.reads:
        reads(a)
        return
    if a.writes:
        writes(a)
        return
    d = tempfile.mkdtemp(prefix="openlake-cbench-")
    up = subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "up", "4", d, "--etcd",
                         "1"], capture_output=True, text=True, timeout=600)
    if up.returncode:
        sys.exit(up.stdout + up.stderr)
    solo = None
    try:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        dirs = ", ".join(f'"{d}/solo/d{i}"' for i in range(4))
        os.makedirs(f"{d}/solo")
        with open(f"{d}/solo/openlake.toml", "w") as f:
            f.write(f'data_dirs = [{dirs}]\ns3_addr = "127.0.0.1:{port}"\nconsole_addr = ""\n'
                    f'kv_addr = ""\nset_drive_count = 4\ndefault_parity_count = 1\n')
        build = os.environ.get("OPENLAKE_BUILD", "build")
        solo = subprocess.Popen([os.path.join(REPO, build, "cmd/openlaked/openlaked"),
                                 "--config", f"{d}/solo/openlake.toml"],
                                stdout=open(f"{d}/solo/log", "w"), stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        urls = re.findall(r"s3=(\S+)", up.stdout)
        leader = next(i for i in range(4)
                      if "serving set 0.0" in open(f"{d}/node-{i}/openlaked.log").read())
        other = (leader + 1) % 4
        c = {"leader": client(urls[leader]), "non-leader": client(urls[other]),
             "single node": client(f"http://127.0.0.1:{port}")}
        c["leader"].create_bucket(Bucket="bench")
        c["single node"].create_bucket(Bucket="bench")
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
            sn = mib / statistics.median(res[(op, "single node")])
            print(f"S3 {op} {mib} MiB through a non-leader: {nl:.0f} MiB/s   "
                  f"reference, straight to the leader: {ld:.0f} MiB/s   ratio {nl / ld:.2f}")
            print(f"S3 {op} {mib} MiB through the cluster (a non-leader): {nl:.0f} MiB/s   "
                  f"reference, the same 4 drives behind one node: {sn:.0f} MiB/s   "
                  f"ratio {nl / sn:.2f}")
            print(f"S3 {op} {mib} MiB through the cluster (the leader): {ld:.0f} MiB/s   "
                  f"reference, the same 4 drives behind one node: {sn:.0f} MiB/s   "
                  f"ratio {ld / sn:.2f}")
        print("# load average", open("/proc/loadavg").read().split()[:3])
    finally:
        if solo:
            solo.terminate()
            solo.wait(60)
        subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", d],
                       capture_output=True, timeout=300)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
