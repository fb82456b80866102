#!/usr/bin/python3
"""Cluster crash torture: kill -9 of a random node of a 4-node cluster (the serving leader in
about a third of the rounds) under a mixed S3 load through every live node, restart, and every
key checked against a model of what was acknowledged. Not a pass/fail test: one line per round,
a summary, exit 1 on any lost or wrong acknowledged write (or a 500, a wrong byte under load,
a failed request while no node was down, a heal that leaves objects unrecoverable).

  OPENLAKE_BUILD=build nice -n 10 /usr/bin/python3 bench/cluster_torture.py [--rounds 20]
      [--minutes M] [--seed S] [--keep] [--etcd-kills P] [--heals P]

Starts `scripts/cluster.sh up 4 DIR --etcd 1` (one set N=4 P=1) in a temp dir. Each round:
one load per node (tests/integration/test_crash_torture.py's S3Load: 2 PUT threads of 0 B..8
MiB on 24 keys, so overwrites happen, a multipart thread of 2-3 parts of 5 MiB, completed,
aborted or left open, a DELETE/GET thread whose GETs must return a whole value of the key);
at a random moment (0.3-3 s after the first acknowledgement) a node is killed -9, the serving
leader (found as bench/failover_bench.py does) with probability 1/3, a follower otherwise; the
killed node's load stops, the others go on; after a random pause (0.5-8 s) the node is started
again (failover_bench.restart) and the round ends once every follower's view is open again
(one serving leader) and a PUT through every node succeeds. Then every key is checked through a node chosen by the seed
(test_crash_torture.s3_check: a GET returns the last acknowledged value or a write in flight
after it, absent only if acceptable; the listing matches; open uploads complete). Requests that
fail are counted by kind (HTTP status, or the connection error's class) and by phase (through
the killed node; through a live node while a node is down; with no node down): a 500, any
status but 503 through a live node, or any failure with no node down is a violation. After a
leader kill, the time from the kill to the end of the first write (PUT or multipart complete)
that started after it and was acknowledged is recorded, and per round the PUTs and parts
the followers wrote themselves (openlake_cluster_local_writes_total) and of them those written
without a drive (openlake_cluster_local_writes_degraded_total), the killed node left out. At the end `openlake heal` must exit 0
with 0 unrecoverable, and every key must read back through every node as the last check saw
it. With --etcd-kills P etcd runs 3 members and in a round of probability P one of them (its
leader half of the time) is also killed -9, halfway to the node's kill, and started again
after the node: the round counts as a fault from that kill on (503s allowed, nothing lost).
With --heals P a round of probability P runs `openlake heal` (a full heal: missed writes, then
every shard of every object verified) through a node other than the one killed, from the
first acknowledgement on, so the kill lands on a heal scanning beside the writes (its job
moves to the next leader when the leader is killed, and the command follows it); it must exit
0 with 0 unrecoverable (or 1 for objects only unreadable with the killed node's drive offline,
counted apart), and the key check sees what it left. Everything is stopped by pid (`scripts/cluster.sh down`) and the temp dir removed (unless
--keep, or a violation: then it is kept for the logs).
"""

import argparse
import json
import logging
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(os.path.dirname(BENCH), "tests", "integration"))

from cluster_bench import REPO, cluster_up, metric  # noqa: E402
from failover_bench import leader_of, restart  # noqa: E402
import test_crash_torture as T  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
BIG = T.SIZES_BIG + [5 * MiB, 8 * MiB]  # PUTs of 0 B..8 MiB
PART = 5 * MiB
PROBE = "probe"  # the bucket of settled()'s PUTs, outside the model's listing
BUILD = os.path.join(REPO, os.environ.get("OPENLAKE_BUILD", "build"))


def kind_of(e):
    """("status", code) for an HTTP error reply, else ("conn", the exception's class)"""
    resp = getattr(e, "response", None) or {}
    code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code:
        return "status", int(code)
    return "conn", type(e).__name__


class NodeLoad(T.S3Load):
    """S3Load through one node of the cluster: multipart uploads of 2-3 parts; each failed
    request counted by kind and phase (the shared `phase` dict: "healthy" with every node up,
    "fault" while one is down; a load through the killed node counts as "killed")."""

    def __init__(self, node, url, model, keys, rnd, stats, lock, phase, fails):
        super().__init__(url, model, keys, rnd, BIG, PART, stats, deadline_s=240, max_ops=300,
                         mpu_parts=(2, 3), mpu_last=(1, 1000, 200 * KiB, PART))
        self.node, self.phase, self.fails = node, phase, fails
        self.umu = lock  # one lock for every node's load: stats["vid"] is shared
        self.killed = False
        self.acks = []  # the ops this load acknowledged

    def _ack(self, op):
        super()._ack(op)
        self.acks.append(op)

    def _failed(self, e, step):
        """unacknowledged: counted by phase and kind; judged in fails_of"""
        ph = "killed" if self.killed else self.phase["now"]
        kind = kind_of(e)
        with self.umu:
            k = (ph,) + kind
            self.fails[k] = self.fails.get(k, 0) + 1
            if ph != "killed" and (ph == "healthy" or kind[0] == "status" and kind[1] != 503):
                self.errors.append(f"node {self.node} ({ph}): {step.__name__} "
                                   f"failed: {repr(e)[:300]}")


def etcd_pids(d):
    return {int(re.search(r"etcd-e(\d+)", f).group(1)): f"{d}/pids/{f}"
            for f in os.listdir(f"{d}/pids") if f.startswith("etcd-")}


def etcd_victim(d, rnd):
    """(member, pid file, its command line): the etcd leader half of the time, else a random
    member"""
    pids = etcd_pids(d)
    m = rnd.choice(sorted(pids))
    if rnd.random() < 0.5:
        eps = open(f"{d}/etcd/endpoints").read().strip()
        st = subprocess.run(["etcdctl", f"--endpoints={eps}", "endpoint", "status", "-w",
                             "json"], capture_output=True, text=True, timeout=30,
                            env=dict(os.environ, ETCDCTL_API="3"))
        for i, e in enumerate(json.loads(st.stdout or "[]")):
            if e.get("Status", {}).get("leader") == e.get("Status", {}).get("header", {}).get(
                    "member_id"):
                m = i  # endpoints are listed in member order (scripts/cluster.sh)
    pid = int(open(pids[m]).read().strip())
    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]
    return m, pids[m], pid, [c.decode() for c in cmd]


def etcd_restart(d, m, pidfile, cmd):
    """start the killed member again (its data dir kept: it rejoins), healthy within 60 s"""
    p = subprocess.Popen(["setsid"] + cmd, stdin=subprocess.DEVNULL,
                         stdout=open(f"{d}/etcd/e{m}.log", "a"), stderr=subprocess.STDOUT)
    with open(pidfile, "w") as f:
        f.write(f"{p.pid}\n")
    ep = cmd[cmd.index("--advertise-client-urls") + 1]
    end = time.monotonic() + 60
    while subprocess.run(["etcdctl", f"--endpoints={ep}", "endpoint", "health"],
                         capture_output=True, timeout=30,
                         env=dict(os.environ, ETCDCTL_API="3")).returncode:
        if time.monotonic() > end:
            sys.exit(f"etcd member e{m} not healthy 60 s after its restart")
        time.sleep(0.2)


def first_write_after(loads, t_kill):
    """(seconds from t_kill to the acknowledgement of the first write that started after it,
    what it was: op, key, node it went through, its start after t_kill), or (None, "")"""
    ends = [(o.t1, f"{o.what} {o.key} through node {ld.node}, sent {o.t0 - t_kill:.3f}s "
             f"after the kill") for ld in loads for o in list(ld.acks)
            if o.t0 > t_kill and o.what in ("put", "multipart")]
    if not ends:
        return None, ""
    t1, what = min(ends)
    return t1 - t_kill, what


COUNTERS = ("openlake_cluster_local_writes_total", "openlake_cluster_local_writes_degraded_total")


def counters(urls):
    """per node, COUNTERS' values (0 where a node does not answer)"""
    out = []
    for u in urls:
        try:
            out.append([metric(u, m) or 0 for m in COUNTERS])
        except OSError:
            out.append([0] * len(COUNTERS))
    return out


def pid_of(d, node):
    return int(open(f"{d}/pids/node-{node}.pid").read().strip())


def wait_first_ack(loads, limit=120):
    end = time.monotonic() + limit
    while time.monotonic() < end and not any(ld.acked for ld in loads):
        time.sleep(0.01)


def settled(urls, limit=180):
    """one serving leader with every follower's view open (leader_of), and a PUT through every
    node acknowledged: a leader restarted within a second of its kill answers the followers'
    second probe, keeps its lease and serves no more (docs/cluster.md "A dead leader"), so open
    views alone do not say that writes are served again"""
    leader_of(urls, limit=limit)
    end = time.monotonic() + limit
    for i, u in enumerate(urls):
        c = T.s3_client(u)
        while True:
            try:
                c.put_object(Bucket=PROBE, Key=f"node-{i}", Body=b"probe")
                break
            except Exception as e:
                if time.monotonic() > end:
                    sys.exit(f"no PUT through node {i} succeeds {limit} s after the restart: {e}")
                time.sleep(0.2)


def heal(d, node):
    """`openlake heal` through node: (exit status, unrecoverable count or None, count of
    objects unreadable with drives offline or None, output)"""
    r = subprocess.run([os.path.join(BUILD, "cmd/openlake/openlake"), "heal", "--config",
                        f"{d}/node-{node}/openlake.toml"], capture_output=True, text=True,
                       timeout=900)
    out = r.stderr + r.stdout  # the summary (stdout) last: violations show its tail
    m = re.findall(r"(\d+) unrecoverable", out)
    u = re.findall(r"(\d+) unreadable with drives offline", out)
    return r.returncode, int(m[-1]) if m else None, int(u[-1]) if u else None, out


def one_round(r, rnd, d, urls, model, keys, stats, lock, fails, tally, failures, log,
              etcd_kills=0.0, heals=0.0):
    t0 = time.monotonic()
    leader = leader_of(urls)
    phase = {"now": "healthy"}
    loads = [NodeLoad(i, u, model, keys, rnd, stats, lock, phase, fails)
             for i, u in enumerate(urls)]
    kill_leader = rnd.random() < 1 / 3
    victim = leader if kill_leader else rnd.choice([i for i in range(4) if i != leader])
    delay, pause = rnd.uniform(0.3, 3.0), rnd.uniform(0.5, 8.0)
    check_via = rnd.randrange(4)
    ekill = etcd_victim(d, rnd) if etcd_kills and rnd.random() < etcd_kills else None
    healer = rnd.choice([i for i in range(4) if i != victim]) if heals and \
        rnd.random() < heals else None
    c0 = counters(urls)
    for ld in loads:
        ld.start()
    wait_first_ack(loads)
    hres = []
    if healer is not None:
        ht = threading.Thread(target=lambda: hres.append(heal(d, healer)))
        ht.start()
    if ekill:
        time.sleep(delay / 2)
        phase["now"] = "fault"
        os.kill(ekill[2], 9)
        time.sleep(delay / 2)
    else:
        time.sleep(delay)
    loads[victim].stop.set()  # its requests in flight meet the kill; no new one
    loads[victim].killed = True
    phase["now"] = "fault"
    # the time after the kill, not before: between the two this thread may wait for the GIL
    # behind the load threads for tens of ms, during which the victim still serves (seen: a
    # write "0.04 s after a leader's kill", sent and answered before the kill landed)
    pid = pid_of(d, victim)
    os.kill(pid, 9)
    t_kill = time.monotonic()
    time.sleep(pause)
    restart(d, victim)
    if ekill:
        etcd_restart(d, ekill[0], ekill[1], ekill[3])
        tally["etcd_kills"] += 1
    settled(urls)  # every follower's view open again, one leader, writes served
    phase["now"] = "healthy"
    gap, gap_op = first_write_after(loads, t_kill) if kill_leader else (None, "")
    for ld in loads:
        ld.finish(timeout=300)
    c1 = counters(urls)  # the victim's counters restarted at 0: left out
    local, degraded = (sum(c1[i][j] - c0[i][j] for i in range(4) if i != victim)
                       for j in range(len(COUNTERS)))
    tally["follower_writes"] += local
    tally["follower_writes_degraded"] += degraded
    acked = sum(ld.acked for ld in loads)
    uploads = {}
    before = len(failures)
    h = ""
    if healer is not None:
        ht.join(960)
        hrc, unrec, unread, out = hres[0] if hres else (None, None, None, "did not end in 960 s")
        h = f", heal through node {healer}: exit {hrc}, {unrec} unrecoverable, {unread} " \
            "unreadable with drives offline"
        tally["heals"] += 1
        # a node is killed in the round: objects whose other shards missed writes still
        # pending read only with its drive (exit 1, counted apart), never unrecoverable
        if unrec != 0 or (hrc != 0 and not unread):
            failures.append(f"round {r}: openlake heal through node {healer} during the round: "
                            f"exit {hrc}, unrecoverable {unrec}: {out[-1500:]}")
    for ld in loads:
        uploads.update(ld.uploads)
        failures.extend(f"round {r}: {e}" for e in ld.errors)
    c = T.s3_client(urls[check_via])
    seen = T.s3_check(None, c, model, keys, uploads, failures, f"round {r}")
    for f in failures[before:]:
        if " = absent;" in f or "is not listed" in f:
            tally["lost"] += 1
        elif "acceptable:" in f or "under load" in f or " reads " in f:
            tally["wrong"] += 1
        else:
            tally["other"] += 1
    tally["rounds"] = r
    tally["acked"] += acked
    tally["uploads"] += len(uploads)
    tally["leader_kills" if kill_leader else "follower_kills"] += 1
    if gap is not None:
        tally["gaps"].append(gap)
    present = sum(v is not T.ABSENT for v in seen.values())
    g = f", first write {gap:.2f}s after the kill ({gap_op})" if gap is not None else (
        ", no write acknowledged after the kill" if kill_leader else "")
    e = f" and etcd member e{ekill[0]}" if ekill else ""
    log(f"round {r}: killed node {victim} ({'leader' if kill_leader else 'follower'}){e} "
        f"{delay:.2f}s after the first ack, down {pause:.1f}s{g}; {acked} acked, "
        f"{len(uploads)} uploads, {local:.0f} PUT/UploadPart written by followers "
        f"({degraded:.0f} without a drive), {present}/{len(keys)} keys present (checked via node "
        f"{check_via}){h}, violations {len(failures) - before}, {time.monotonic() - t0:.0f}s")
    for f in failures[before:]:
        log("  VIOLATION " + f)
    if kill_leader and gap is None:
        tally["no_write_after_leader_kill"] += 1


def final_check(d, urls, model, keys, failures, log):
    rc, unrec, _unread, out = heal(d, leader_of(urls))
    log(f"# openlake heal: exit {rc}, unrecoverable {unrec}: {out.strip().splitlines()[-1:]}")
    if rc != 0 or unrec != 0:
        failures.append(f"openlake heal: exit {rc}, unrecoverable {unrec}: {out[-2000:]}")
    for i, u in enumerate(urls):
        c = T.s3_client(u)
        for key in keys:
            want = model.acceptable(key)
            try:
                got = T.sha(c.get_object(Bucket=T.BUCKET, Key=key)["Body"].read())
            except Exception as e:
                got = T.ABSENT if T.not_found(e) else repr(e)[:200]
            if got not in want:
                failures.append(f"after heal, through node {i}: GET {key} = "
                                f"{model.name(got) if got is T.ABSENT or len(got) == 64 else got}"
                                f", was {sorted(model.name(v) for v in want)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--minutes", type=float, default=None,
                    help="start no round after this long (default: no bound but --rounds)")
    ap.add_argument("--seed", type=int, default=None, help="default: random, printed")
    ap.add_argument("--keys", type=int, default=24)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (drives, logs)")
    ap.add_argument("--etcd-kills", type=float, default=0.0, metavar="P",
                    help="run 3 etcd members and also kill -9 one (its leader half of the "
                    "time) in a round with probability P (default 0: one member, never killed)")
    ap.add_argument("--heals", type=float, default=0.0, metavar="P",
                    help="run `openlake heal` through a live node during a round with "
                    "probability P (default 0)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    logging.basicConfig(level=logging.ERROR)
    lg = logging.getLogger("urllib3.connectionpool")  # counted by the load, not printed
    lg.setLevel(logging.WARNING)
    lg.propagate = False

    def log(s):
        print(s, flush=True)

    rnd = random.Random(seed)
    d = tempfile.mkdtemp(prefix="openlake-ctorture-")
    log(f"# cluster torture: seed {seed}, build {BUILD}, dir {d}, "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    keys = [f"k/{i:02d}" for i in range(a.keys)]
    model = T.Model(keys)
    stats = {"vid": 0, "errors_live": 0, "errors_after_kill": 0, "bogus_acks": 0}
    lock = threading.Lock()
    fails = {}
    tally = dict(rounds=0, acked=0, uploads=0, lost=0, wrong=0, other=0, leader_kills=0,
                 follower_kills=0, etcd_kills=0, heals=0,
                 follower_writes=0, follower_writes_degraded=0, no_write_after_leader_kill=0, gaps=[])
    failures = []
    t_start = time.monotonic()
    keep = a.keep
    try:
        urls, _ = cluster_up(d, "", etcd=3 if a.etcd_kills else 1)
        c = T.s3_client(urls[leader_of(urls)])
        c.create_bucket(Bucket=T.BUCKET)
        c.create_bucket(Bucket=PROBE)
        for r in range(1, a.rounds + 1):
            if a.minutes is not None and time.monotonic() - t_start > a.minutes * 60:
                break
            one_round(r, rnd, d, urls, model, keys, stats, lock, fails, tally, failures,
                      log, a.etcd_kills, a.heals)
        final_check(d, urls, model, keys, failures, log)
    except BaseException:
        keep = True
        raise
    finally:
        subprocess.run([os.path.join(REPO, "scripts", "cluster.sh"), "down", d],
                       capture_output=True, timeout=300)
        keep = keep or bool(failures)
        if keep:
            log(f"# kept {d} (logs: {d}/node-*/openlaked.log)")
        else:
            shutil.rmtree(d, ignore_errors=True)
    gaps = tally.pop("gaps")
    log("# requests failed, by phase and kind: " + ", ".join(
        f"{ph} {k}={n}" for (ph, _, k), n in sorted(fails.items(), key=str)))
    log(f"# 2xx without the body's ETag (left in flight): {stats['bogus_acks']}")
    if gaps:
        log(f"# first acknowledged write after a leader kill: median "
            f"{statistics.median(gaps):.2f}s, min {min(gaps):.2f}s, max {max(gaps):.2f}s "
            f"({', '.join(f'{g:.2f}' for g in gaps)})")
    log(f"# summary: {tally}, {time.monotonic() - t_start:.0f}s")
    log("# load average " + " ".join(open("/proc/loadavg").read().split()[:3]))
    log(f"# result: {'%d VIOLATIONS' % len(failures) if failures else 'no violation'} "
        f"(seed {seed}; replay: --seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
