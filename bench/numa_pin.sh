#!/bin/bash
# bench/numa_pin.sh - the KV pool with its loops pinned (pin_threads = "auto") beside the same
# daemon unpinned (pin_threads = "off", the reference), alternated in the same run. Not a
# pass/fail test: one line per figure and the ratio pinned / unpinned.
#
#   GET of 64 KiB and 1 MiB blocks over TCP through libopenlake (openlake bench kv), CONC
#   connections, ROUNDS rounds; each round starts the daemon pinned, measures, stops it, then
#   the same unpinned. On a host of one NUMA node this shows what pinning costs or gains by
#   itself (no migrations, no choice for the scheduler); the NUMA effect needs a host of
#   several nodes and clients on another host (docs/ARCHITECTURE.md, "Pinning and NUMA").
#
# Usage: bench/numa_pin.sh [--duration S] [--conc N] [--rounds R] [--build DIR]
#   --duration S   seconds per figure (default 5)
#   --conc N       connections, one thread each (default 4)
#   --rounds R     pinned/unpinned pairs (default 2)
#   --build DIR    build directory (default $OPENLAKE_BUILD or build)
# Everything listens on 127.0.0.1 ephemeral ports and is stopped at the end.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=5
CONC=4
ROUNDS=2
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift ;;
	--conc) CONC=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--build) BUILD=$2; shift ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "numa_pin.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
PY=/usr/bin/python3
for b in "$OPENLAKED" "$CLI"; do
	[ -x "$b" ] || { echo "numa_pin.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-numapin.XXXXXX")
PID=
stop() { [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }; PID=; }
cleanup() { stop; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
KVP=$(port)
AP=$(port)

start() { # start PIN: the daemon with pin_threads = PIN, back once it says it is ready
	mkdir -p "$TMP/d0"
	cat >"$TMP/openlake.toml" <<EOF
self_id = 0
mode = "kv"
data_dirs = ["$TMP/d0"]
kv_addr = "127.0.0.1:$KVP"
console_addr = "127.0.0.1:$AP"
set_drive_count = 1
default_parity_count = 0
log_level = "warn"
pin_threads = "$1"

[kv]
dram_bytes = "1GiB"
spill_bytes = 0
prefault = "on"
EOF
	"$OPENLAKED" --config "$TMP/openlake.toml" >>"$TMP/log" 2>&1 &
	PID=$!
	for _ in $(seq 1 600); do
		curl -sf "http://127.0.0.1:$AP/openlake/ready" >/dev/null 2>&1 && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "numa_pin.sh: the daemon did not become ready" >&2
	cat "$TMP/log" >&2
	exit 1
}

run() { # run SIZE -> "ops/s p50 p99"
	local out=$TMP/r.json
	if "$CLI" bench kv --nodes "127.0.0.1:$KVP" -w get -s "$1" -c "$CONC" -d "$DUR" --json -q \
		>"$out" 2>"$TMP/err"; then
		$PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.0f %.0f %.0f' % (d['ops_per_s'], d['latency_us']['p50'], d['latency_us']['p99']))" "$out" 2>/dev/null || echo "? ? ?"
	else
		echo "? ? ?"; sed 's/^/# /' "$TMP/err" >&2
	fi
}
ratio() { $PY -c "import sys
try: print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))
except Exception: print('n/a')" "$1" "$2"; }

echo "# openlake bench kv GET over TCP, $CONC connections, ${DUR}s per figure; $(nproc) CPUs, $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l) NUMA node(s), load $(cut -d' ' -f1 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
	for size in 64KiB 1MiB; do
		start auto
		read -r p ops50 ops99 <<<"$(run $size)"
		stop
		start off
		read -r u ups50 ups99 <<<"$(run $size)"
		stop
		echo "round $r GET $size pinned $p ops/s p50/p99 ${ops50}/${ops99} us | unpinned (reference) $u ops/s ${ups50}/${ups99} us | ratio $(ratio "$p" "$u")"
	done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E "ERROR" "$TMP/log" | sed 's/^/# daemon: /' || true
