#!/usr/bin/python3
"""Long crash torture: the rounds of tests/integration/test_crash_torture.py (kill -9 of the
real openlaked under concurrent load, restart, check against a model of what was
acknowledged), with more rounds and bigger objects. Not a pass/fail test: it prints one line
per round and a final tally (rounds, ops acknowledged, objects lost, wrong bytes) and exits 1
when a round found a violation.

    OPENLAKE_BUILD=build nice -n 10 /usr/bin/python3 bench/torture.py --s3-minutes 10 --kv-rounds 0
    OPENLAKE_BUILD=build nice -n 10 /usr/bin/python3 bench/torture.py --s3-rounds 0 --kv-minutes 5

It starts its own openlaked (from $OPENLAKE_BUILD, default build/) on free loopback ports
with drives in a temp dir (removed at the end unless --keep), one for S3 (4 drives, N=4 P=1)
and one for the KV pool (mode = "kv", writeback_ms = 100), and stops them.
"""

import argparse
import logging
import os
import pathlib
import random
import shutil
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("OPENLAKE_BUILD", str(REPO / "build"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import conftest  # noqa: E402  (Daemon, binaries)
import test_crash_torture as T  # noqa: E402
from vllm_standin.pool import library_path  # noqa: E402  (puts python/ on sys.path)

KiB, MiB = 1 << 10, 1 << 20


def run(name, fn, log):
    t0 = time.monotonic()
    try:
        tally = fn()
        ok = True
    except AssertionError as e:
        log(str(e))
        tally, ok = None, False
    log(f"{name}: {'no violation' if ok else 'VIOLATIONS (see above)'} in "
        f"{time.monotonic() - t0:.0f}s")
    return ok, tally


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--s3-rounds", type=int, default=1000, help="0 skips S3 (default 1000)")
    ap.add_argument("--s3-minutes", type=float, default=10.0,
                    help="stop starting S3 rounds after this long (default 10)")
    ap.add_argument("--kv-rounds", type=int, default=1000, help="0 skips the KV pool")
    ap.add_argument("--kv-minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=None, help="default: random, printed")
    ap.add_argument("--small", action="store_true",
                    help="the test's object sizes (default: up to 16 MiB PUTs, 8 MiB parts)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (drives, logs)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    os.environ.setdefault("OPENLAKE_LIBRARY", str(library_path()))
    # "node unreachable" after each kill and urllib3's header warnings: not results
    logging.basicConfig(level=logging.ERROR)
    lg = logging.getLogger("urllib3.connectionpool")  # counted by the torture, not printed
    lg.setLevel(logging.WARNING)
    lg.propagate = False

    def log(s):
        print(s, flush=True)

    root = pathlib.Path(tempfile.mkdtemp(prefix="openlake-torture-"))
    log(f"# torture: seed {seed}, build {conftest.BUILD}, dir {root}, "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    results = []
    daemons = []
    try:
        if a.s3_rounds > 0:
            (root / "s3").mkdir()
            d = conftest.Daemon(root / "s3").start()
            daemons.append(d)
            big = T.SIZES_BIG if a.small else T.SIZES_BIG + T.SIZES_HUGE
            part = 5 * MiB if a.small else 8 * MiB
            deadline = time.monotonic() + a.s3_minutes * 60
            results.append(("s3",) + run("s3", lambda: T.s3_torture(
                d, a.s3_rounds, seed, big_sizes=big, mpu_part=part, log=log,
                deadline=deadline), log))
            d.stop()
        if a.kv_rounds > 0:
            (root / "kv").mkdir()
            d = conftest.Daemon(root / "kv", mode="kv", drives=1, extra=(
                'dram_bytes = "512MiB"\nspill_bytes = "8GiB"\nwriteback_ms = 100\n')).start()
            daemons.append(d)
            sizes = T.KV_SIZES if a.small else T.KV_SIZES + [4 * MiB, 8 * MiB + 1]
            deadline = time.monotonic() + a.kv_minutes * 60
            results.append(("kv",) + run("kv", lambda: T.kv_torture(
                d, a.kv_rounds, seed, sizes=sizes, log=log, deadline=deadline), log))
            d.stop()
    finally:
        for d in daemons:
            d.cleanup()
        if a.keep:
            log(f"# kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    bad = [name for name, ok, _ in results if not ok]
    log(f"# result: {'VIOLATIONS in ' + ', '.join(bad) if bad else 'no violation'} "
        f"(seed {seed}; replay: --seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
