#!/usr/bin/python3
"""Listing a versioned bucket vs an unversioned one with as many entries, in the same run.

    OPENLAKE_BUILD=build nice -n 10 /usr/bin/python3 bench/versions_bench.py [--count N]
        [--versions V] [--rounds R]

Starts its own openlaked (from $OPENLAKE_BUILD, default build/; 4 drives, N=4 P=1,
`[storage] fsync = false` to fill faster) on free loopback ports with drives in a temp dir.
Fills bucket `flat` with N keys (one version each) and bucket `versioned` (versioning
Enabled) with N/V keys written V times (N versions), both with `openlake bench s3` (1-byte
objects), then lists each one whole, 1000 entries per page, R times alternating:

    ListObjectVersions of `versioned` (N versions)   <- the figure
    ListObjectsV2 of `flat` (N keys)                  <- the reference
    ListObjectVersions of `flat` (N null versions)    <- second reference

One line per figure: entries/s (median of R), the reference, the ratio. Not a pass/fail test.
"""

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("OPENLAKE_BUILD", str(REPO / "build"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import conftest  # noqa: E402  (Daemon, binaries)
from test_s3_common import raw  # noqa: E402  (signed requests)


def fill(d, bucket, keys, times):
    for _ in range(times):
        subprocess.run([str(conftest.OPENLAKE_CLI), "bench", "s3", "--endpoint", d.s3_url,
                        "--bucket", bucket, "-w", "get", "-s", "1", "-n", str(keys), "--ops",
                        "1", "-c", "16", "-q"], check=True, capture_output=True, timeout=3600)


def list_all(d, bucket, versions):
    """Entries listed, seconds."""
    n, args = 0, {}
    t0 = time.monotonic()
    while True:
        q = "&".join("%s=%s" % (k, urllib.parse.quote(v, safe="")) for k, v in
                     sorted(args.items()))
        path = "/%s?%s" % (bucket, ("versions&" + q) if versions else ("list-type=2&" + q))
        st, _, body = raw(d.s3_url, "GET", path.rstrip("&"))
        assert st == 200, body[:300]
        n += body.count(b"<Version>") + body.count(b"<DeleteMarker>") + \
            body.count(b"<Contents>")
        if b"<IsTruncated>true</IsTruncated>" not in body:
            return n, time.monotonic() - t0
        if versions:
            args["key-marker"] = re.search(rb"<NextKeyMarker>([^<]*)<", body).group(1).decode()
            m = re.search(rb"<NextVersionIdMarker>([^<]*)<", body)
            args["version-id-marker"] = m.group(1).decode() if m else ""
        else:
            args["continuation-token"] = re.search(
                rb"<NextContinuationToken>([^<]*)<", body).group(1).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--versions", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="openlake-vbench-")
    d = conftest.Daemon(root, extra="\n[storage]\nfsync = false\n").start()
    try:
        t0 = time.monotonic()
        st, _, _ = raw(d.s3_url, "PUT", "/flat")
        st2, _, _ = raw(d.s3_url, "PUT", "/versioned")
        st3, _, _ = raw(d.s3_url, "PUT", "/versioned?versioning", body=(
            b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"))
        assert (st, st2, st3) == (200, 200, 200)
        fill(d, "flat", a.count, 1)
        fill(d, "versioned", a.count // a.versions, a.versions)
        print("filled: %d keys; %d keys x %d versions (%.0f s)" % (
            a.count, a.count // a.versions, a.versions, time.monotonic() - t0))
        res = {"v": [], "flat2": [], "flat_v": []}
        for _ in range(a.rounds):
            for name, bucket, versions in (("v", "versioned", True), ("flat2", "flat", False),
                                           ("flat_v", "flat", True)):
                n, secs = list_all(d, bucket, versions)
                res[name].append((n, n / secs))
        med = {k: statistics.median(r for _, r in v) for k, v in res.items()}
        nv, nf = res["v"][0][0], res["flat2"][0][0]
        print("ListObjectVersions, versioned bucket, %d versions: %.0f entries/s | "
              "reference ListObjectsV2, unversioned bucket, %d keys: %.0f entries/s | "
              "ratio %.2f" % (nv, med["v"], nf, med["flat2"], med["v"] / med["flat2"]))
        print("ListObjectVersions, versioned bucket, %d versions: %.0f entries/s | "
              "reference ListObjectVersions, unversioned bucket, %d keys: %.0f entries/s | "
              "ratio %.2f" % (nv, med["v"], nf, med["flat_v"], med["v"] / med["flat_v"]))
    finally:
        d.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
