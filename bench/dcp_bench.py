#!/usr/bin/python3
"""Checkpoint save and load through the torch.distributed.checkpoint plug-in
(openlake_client.dcp, driven by the DCP stand-in of tests/integration/dcp_standin.py: two ranks
in this process, one after the other) vs openlake_client.s3.save / s3.load of the same tensors,
alternating, in one daemon, in the same run.

    OPENLAKE_BUILD=build nice -n 10 /usr/bin/python3 bench/dcp_bench.py [--size-mib 256]
        [--rounds 4]

Starts its own openlaked (from $OPENLAKE_BUILD, default build/; 4 drives, defaults) on free
loopback ports. The state dict: float32 tensors of 16 MiB (and a small bias each) making up
--size-mib, split between the two ranks tensor by tensor. Each round saves it once each way
under a fresh prefix (the order swapped every round), then loads each in place into
preallocated tensors (dcp: read_data into the planner's tensors; s3: load(out=...)) and checks
them bit-exact. Prints per round and the medians: GB/s (wall) and this process's CPU seconds
per GB (utime + stime), and the ratio dcp / s3. Not a pass/fail test.
"""

import argparse
import os
import pathlib
import resource
import shutil
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("OPENLAKE_BUILD", str(REPO / "build"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "python"))

import conftest  # noqa: E402  (Daemon)
import torch  # noqa: E402

import dcp_standin as standin  # noqa: E402
from openlake_client import dcp, s3  # noqa: E402

BUCKET = "bench"


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def state_dicts(size_mib):
    torch.manual_seed(0)
    ranks = [{}, {}]
    for i in range(max(1, size_mib // 16)):
        ranks[i % 2]["layer%d.weight" % i] = torch.randn(4096, 1024)
        ranks[i % 2]["layer%d.bias" % i] = torch.randn(1024)
    return ranks


def timed(fn):
    c0, t0 = cpu_s(), time.monotonic()
    fn()
    return time.monotonic() - t0, cpu_s() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="openlake-dcpbench-")
    d = conftest.Daemon(root, kv=False).start()
    try:
        c = s3.Client(endpoint=d.s3_url, access_key=conftest.ACCESS_KEY,
                      secret_key=conftest.SECRET_KEY, region=conftest.REGION)
        c.create_bucket(BUCKET)
        sds = state_dicts(a.size_mib)
        flat = {k: v for sd in sds for k, v in sd.items()}
        gb = sum(t.numel() * t.element_size() for t in flat.values()) / 1e9
        out = [{k: torch.empty_like(v) for k, v in sd.items()} for sd in sds]
        out_flat = {k: v for sd in out for k, v in sd.items()}
        res = {m: {"save": [], "load": [], "savecpu": [], "loadcpu": []} for m in ("dcp", "s3")}
        print("load average: %.2f %.2f %.2f" % os.getloadavg())
        print("round  mode  save GB/s  load GB/s  CPU s/GB: save  load")
        for r in range(a.rounds):
            for m in (("dcp", "s3") if r % 2 == 0 else ("s3", "dcp")):
                uri = "s3://%s/r%d-%s" % (BUCKET, r, m)
                for t in out_flat.values():
                    t.zero_()
                if m == "dcp":
                    ws = [dcp.S3StorageWriter(client=c) for _ in sds]
                    rs = [dcp.S3StorageReader(client=c) for _ in sds]
                    st, sc = timed(lambda: standin.save(sds, ws, uri))
                    lt, lc = timed(lambda: standin.load(out, rs, uri))
                else:
                    st, sc = timed(lambda: s3.save(flat, uri + "/", client=c))
                    lt, lc = timed(lambda: s3.load(uri + "/", client=c, out=out_flat))
                for k, v in flat.items():
                    assert torch.equal(out_flat[k], v), (m, k)
                res[m]["save"].append(gb / st)
                res[m]["load"].append(gb / lt)
                res[m]["savecpu"].append(sc / gb)
                res[m]["loadcpu"].append(lc / gb)
                print("%5d  %-4s  %9.3f  %9.3f  %14.2f  %4.2f" % (
                    r + 1, m, res[m]["save"][-1], res[m]["load"][-1], res[m]["savecpu"][-1],
                    res[m]["loadcpu"][-1]))
        med = {m: {k: statistics.median(v) for k, v in x.items()} for m, x in res.items()}
        for op in ("save", "load"):
            print("%s %.0f MB: dcp plug-in %.3f GB/s, s3.%s %.3f GB/s (median of %d), "
                  "ratio %.2f; CPU s/GB dcp %.2f, s3 %.2f" % (
                      op, gb * 1e3, med["dcp"][op], op, med["s3"][op], a.rounds,
                      med["dcp"][op] / med["s3"][op], med["dcp"][op + "cpu"],
                      med["s3"][op + "cpu"]))
        print("load average: %.2f %.2f %.2f" % os.getloadavg())
    finally:
        d.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
