#!/bin/bash
# bench/put_cpu.sh - large PUTs through libopenlake's S3 client, and what they cost the daemon.
#
# W processes (released together by a barrier) each PUT R objects of SIZE MiB of random bytes
# with openlake_client.s3 (C connections each: parallel multipart), into a 4-drive daemon
# (3+1) started here on a temp dir. Prints one line: the label, GB/s written, and the daemon's
# CPU seconds (user + sys, from /proc) per GB written, over the timed window only. Run it with
# two builds alternately (--build) to compare them: no reference of its own, and no pass/fail.
#
# Usage: bench/put_cpu.sh [--build DIR] [--label NAME] [--writers W] [--rounds R]
#                         [--size MiB] [--conns C] [--no-fsync] [--dir DIR]
#   defaults: build, label = the build dir's name, 4 writers, 4 rounds, 128 MiB, 8
#   connections, fsync on (a PUT acknowledged only once durable), temp dir under $TMPDIR or /tmp
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
BUILD=${OPENLAKE_BUILD:-build}
LABEL=
W=4 R=4 SIZE=128 CONNS=8 FSYNC=true BASE=${TMPDIR:-/tmp}
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift ;;
	--label) LABEL=$2; shift ;;
	--writers) W=$2; shift ;;
	--rounds) R=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--conns) CONNS=$2; shift ;;
	--no-fsync) FSYNC=false ;;
	--dir) BASE=$2; shift ;;
	-h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
	*) echo "put_cpu.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
LABEL=${LABEL:-$(basename "$(dirname "$BUILD")")/$(basename "$BUILD")}
OPENLAKED=$BUILD/cmd/openlaked/openlaked
LIB=$REPO/build/client/libopenlake.so
[ -f "$LIB" ] || LIB=$BUILD/client/libopenlake.so
for b in "$OPENLAKED" "$LIB"; do
	[ -f "$b" ] || { echo "put_cpu.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done
$PY -c 'import numpy' 2>/dev/null || { echo "put_cpu.sh: needs python3-numpy" >&2; exit 1; }

. "$(dirname "$0")/lib.sh" # start_s3
TMP=$(mktemp -d "$BASE/openlake-putcpu.XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
start_s3 "$OPENLAKED" "$TMP" "$FSYNC" # sets DPID, S3_PORT
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_ACCESS_KEY_ID=openlakeadmin \
	AWS_SECRET_ACCESS_KEY=openlakeadmin AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null \
	AWS_SHARED_CREDENTIALS_FILE=/dev/null PYTHONPATH=$REPO/python OPENLAKE_LIBRARY=$LIB
$PY - "$W" "$R" "$SIZE" "$CONNS" "$DPID" "$LABEL" <<'PY'
import multiprocessing as mp, os, sys, time
import numpy as np
from openlake_client import s3

W, R, size, conns, dpid, label = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) << 20,
                                  int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])

def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def work(r, bar):
    c = s3.Client(conns=conns)
    data = np.random.default_rng(r).integers(0, 255, size, dtype=np.uint8)
    c.put("putcpu", "warm-%d" % r, data[: 16 << 20])  # connections and buffers made
    bar.wait()
    for i in range(R):
        c.put("putcpu", "obj-%d-%d" % (r, i), data)

s3.Client().create_bucket("putcpu")
bar = mp.Barrier(W + 1)
ps = [mp.Process(target=work, args=(r, bar)) for r in range(W)]
[p.start() for p in ps]
bar.wait()
c0, t0 = cpu(dpid), time.time()
[p.join() for p in ps]
t, gb = time.time() - t0, W * R * size / 1e9
if any(p.exitcode for p in ps):
    sys.exit("put_cpu.sh: a writer failed")
print("%s: %d x %d x %d MiB, %d conns: %.3f GB/s, daemon %.2f CPU-s/GB (%.1f s, load %.1f)"
      % (label, W, R, size >> 20, conns, gb / t, (cpu(dpid) - c0) / gb, t, os.getloadavg()[0]))
PY
