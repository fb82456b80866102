#!/bin/bash
# bench/local_put_syscalls.sh [BUILD_DIR] - syscalls per local (shared-memory) KV put of 2 MiB,
# on the daemon and in the client. A KV-only openlaked (512 MiB DRAM, 1 GiB NVMe tier, async
# write-behind) on fresh loopback ports; C threads (default 4) of `openlake bench kv --device
# local -w put -s 2MiB` for 2 s of warm-up and 6 s measured; `perf stat -e
# raw_syscalls:sys_enter` counts the daemon's and the client's syscalls over 3 s in the middle.
# Prints puts/s, GB/s, and syscalls per put on each side (count / (puts/s x 3)). Run it with
# OPENLAKE_KV_COMMIT_ALLOC=0 in the environment for the client's ALLOC-then-COMMIT puts.
# Needs perf and the raw_syscalls tracepoints (root). Not a pass/fail test. Stops the daemon
# and removes its files at the end.
set -eu
B=${1:-${OPENLAKE_BUILD:-build}}
C=${C:-4}
PY=/usr/bin/python3
D=$(mktemp -d /tmp/olputsys.XXXXXX)
PID=
CL=
cleanup() {
	[ -n "$CL" ] && kill "$CL" 2>/dev/null && wait "$CL" 2>/dev/null
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh" # start_kv_pool
start_kv_pool "$B/cmd/openlaked/openlaked" "$D" 512MiB 1GiB
PID=$POOL_PID
P=$POOL_PORT
"$B/cmd/openlake/openlake" bench kv --nodes "127.0.0.1:$P" --device local -w put -s 2MiB \
	-c "$C" --warmup 2 -d 6 --json >"$D/out" 2>/dev/null &
CL=$!
sleep 4
perf stat -e raw_syscalls:sys_enter -p "$PID" -x, -o "$D/sd" sleep 3 &
PD=$!
perf stat -e raw_syscalls:sys_enter -p "$CL" -x, -o "$D/sc" sleep 3
wait "$PD"
wait "$CL"
CL=
ND=$(grep sys_enter "$D/sd" | cut -d, -f1)
NC=$(grep sys_enter "$D/sc" | cut -d, -f1)
$PY -c '
import json, sys
j = json.load(open(sys.argv[1]))
nd, nc = int(sys.argv[2]), int(sys.argv[3])
r = j["ops_per_s"]
print("%s c=%s OPENLAKE_KV_COMMIT_ALLOC=%s: %.0f puts/s, %.2f GB/s; syscalls per put: daemon %.2f, client %.2f"
      % (sys.argv[4], sys.argv[5], sys.argv[6], r, r * 2 * 2**20 / 1e9, nd / (r * 3), nc / (r * 3)))' \
	"$D/out" "$ND" "$NC" "$B" "$C" "${OPENLAKE_KV_COMMIT_ALLOC:-unset}"
