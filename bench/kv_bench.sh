#!/bin/bash
# bench/kv_bench.sh - the KV pool figures of the issue, each beside references measured in the
# same run on this machine. Not a pass/fail test: one line per figure (ours, the references,
# the ratios) and, with --markdown, a table for bench/RESULTS.md.
#
#   TCP get/put of 256 KiB and 2 MiB blocks, 16 connections (GB/s, p50/p99), beside
#     redis-server (SET/GET) and memcached (set/get), both driven by the same C driver
#     (openlake bench redis|memcached), and a plain loopback socket stream (openlake bench tcp)
#   local shared-memory get/put of 2 MiB, beside memcpy of the same blocks (openlake bench memcpy)
#
# Usage: bench/kv_bench.sh [--quick] [--duration S] [--build DIR] [--markdown]
#   --quick      3 s per figure instead of 10
#   --build DIR  build directory with cmd/openlaked/openlaked and cmd/openlake/openlake
#                (default $OPENLAKE_BUILD or build)
# Everything listens on 127.0.0.1 ephemeral ports and is stopped at the end.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=10
MARKDOWN=0
CONC=16
LOCAL_CONC=4
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) DUR=3 ;;
	--duration) DUR=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--markdown) MARKDOWN=1 ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "kv_bench.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
PY=/usr/bin/python3
for b in "$OPENLAKED" "$CLI"; do
	[ -x "$b" ] || { echo "kv_bench.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done
for t in redis-server memcached; do
	command -v $t >/dev/null || { echo "kv_bench.sh: $t is missing (apt-get install redis-server memcached)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-kvbench.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
jget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo "?"; }
ratio() { $PY -c "import sys
try: a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b))
except Exception: print('n/a')" "$1" "$2"; }

# ---- the servers ----
KV_PORT=$(free_port)
RPC_PORT=$(free_port)
mkdir -p "$TMP/ol/d0" "$TMP/ol/kv"
cat >"$TMP/ol/openlake.toml" <<EOF
self_id = 0
mode = "kv"
data_dirs = ["$TMP/ol/d0"]
rpc_addr = "127.0.0.1:$RPC_PORT"
kv_addr = "127.0.0.1:$KV_PORT"
set_drive_count = 1
default_parity_count = 0
log_level = "warn"

[[nodes]]
id = 0
rpc_addr = "127.0.0.1:$RPC_PORT"
disk_count = 1

[kv]
dram_bytes = "1GiB"
spill_dir = "$TMP/ol/kv"
spill_bytes = "2GiB"
EOF
"$OPENLAKED" --config "$TMP/ol/openlake.toml" >"$TMP/ol/log" 2>&1 &
PIDS+=($!)
wait_port "$KV_PORT" || { echo "kv_bench.sh: openlaked (KV pool) did not start:" >&2; cat "$TMP/ol/log" >&2; exit 1; }

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
	--protected-mode no --dir "$TMP" >"$TMP/redis.log" 2>&1 &
PIDS+=($!)
MEMC_PORT=$(free_port)
memcached -u "$(id -un)" -l 127.0.0.1 -p "$MEMC_PORT" -U 0 -m 1024 -I 4m -t 4 >"$TMP/memc.log" 2>&1 &
PIDS+=($!)
wait_port "$REDIS_PORT" || { echo "kv_bench.sh: redis-server did not start" >&2; cat "$TMP/redis.log" >&2; exit 1; }
wait_port "$MEMC_PORT" || { echo "kv_bench.sh: memcached did not start" >&2; cat "$TMP/memc.log" >&2; exit 1; }

# run NAME ARGS...: one openlake bench run; JSON into $TMP/NAME.json
run() {
	local name=$1
	shift
	echo "+ openlake bench $* -d $DUR --json" >&2
	"$CLI" bench "$@" -d "$DUR" --json -q >"$TMP/$name.json" || true
}
fig() { jget "$TMP/$1.json" '"%.3f" % d["gb_per_s"]'; }
lat() { jget "$TMP/$1.json" '"p50 %.2fms p99 %.2fms" % (d["latency_us"]["p50"]/1e3, d["latency_us"]["p99"]/1e3)'; }
errs() { jget "$TMP/$1.json" 'd["errors"]'; }

LINES=()
line() { LINES+=("$1"); printf '%s\n' "$1"; }

echo "# kv_bench.sh: $(date -u +%FT%TZ), $(nproc) cores (load average $(cut -d" " -f1-3 /proc/loadavg)), $DUR s per figure, $CONC connections (local: $LOCAL_CONC threads)"
for size in 256KiB 2MiB; do
	for op in put get; do
		t=$op$size
		run "ol$t" kv --nodes "127.0.0.1:$KV_PORT" --device tcp -w $op -s $size -c $CONC
		run "redis$t" redis --addr "127.0.0.1:$REDIS_PORT" -w $op -s $size -c $CONC
		run "memc$t" memcached --addr "127.0.0.1:$MEMC_PORT" -w $op -s $size -c $CONC
		run "tcp$t" tcp -w $op -s $size -c $CONC
		line "KV TCP ${op^^} $size c=$CONC | ours $(fig ol$t) GB/s $(lat ol$t) (errors $(errs ol$t)) | redis $(fig redis$t) GB/s, memcached $(fig memc$t) GB/s, plain socket $(fig tcp$t) GB/s | ratio vs redis $(ratio "$(fig ol$t)" "$(fig redis$t)"), vs memcached $(ratio "$(fig ol$t)" "$(fig memc$t)"), vs socket $(ratio "$(fig ol$t)" "$(fig tcp$t)")"
	done
done
for op in put get; do
	t=local$op
	run "ol$t" kv --nodes "127.0.0.1:$KV_PORT" --device local -w $op -s 2MiB -c $LOCAL_CONC
	run "mc$t" memcpy -w $op -s 2MiB -c $LOCAL_CONC
	line "KV local ${op^^} 2MiB c=$LOCAL_CONC | ours $(fig ol$t) GB/s $(lat ol$t) (errors $(errs ol$t)) | memcpy $(fig mc$t) GB/s | ratio $(ratio "$(fig ol$t)" "$(fig mc$t)")"
done

if [ $MARKDOWN = 1 ]; then
	echo
	echo "| figure | ours | reference | ratio |"
	echo "|---|---|---|---|"
	for l in "${LINES[@]}"; do
		IFS='|' read -r f o r x <<<"$l"
		echo "| ${f% } | ${o# } | ${r# } | ${x# ratio } |"
	done
fi
