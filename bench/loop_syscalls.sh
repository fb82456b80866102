#!/bin/bash
# bench/loop_syscalls.sh [BUILD_DIR] - io_uring_enter calls per KV get on the daemon's loops.
# A KV-only openlaked (64 MiB DRAM) on fresh loopback ports, C connections (default 1) of
# 4 KiB gets for 5 s (`openlake bench kv`), and `perf stat` counting the daemon's
# io_uring_enter syscalls over the middle 3 s of it. Prints gets/s, the count, and
# enters per get = count / (gets/s x 3). Needs perf and the syscalls tracepoints (root).
# Not a pass/fail test. Stops the daemon and removes its files at the end.
set -eu
B=${1:-${OPENLAKE_BUILD:-build}}
C=${C:-1}
PY=/usr/bin/python3
D=$(mktemp -d /tmp/olloop.XXXXXX)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh" # start_kv_pool
start_kv_pool "$B/cmd/openlaked/openlaked" "$D" 64MiB 128MiB
PID=$POOL_PID
P=$POOL_PORT
"$B/cmd/openlake/openlake" bench kv --nodes "127.0.0.1:$P" --device tcp -w put -s 4KiB -c 1 -d 2 \
	--json >/dev/null 2>&1
(sleep 1 && perf stat -e syscalls:sys_enter_io_uring_enter -p "$PID" -x, -o "$D/st" sleep 3) &
PERF=$!
J=$("$B/cmd/openlake/openlake" bench kv --nodes "127.0.0.1:$P" --device tcp -w get -s 4KiB \
	-c "$C" -d 5 --json 2>/dev/null)
wait "$PERF"
N=$(grep io_uring_enter "$D/st" | cut -d, -f1)
echo "$J" | $PY -c '
import json, sys
j = json.load(sys.stdin)
n = int(sys.argv[1])
r = j["ops_per_s"]
print("%s c=%s: %.0f gets/s, p50 %.1f us, %d io_uring_enter in 3 s, %.2f per get"
      % (sys.argv[2], sys.argv[3], r, j["latency_us"]["p50"], n, n / (r * 3)))' "$N" "$B" "$C"
