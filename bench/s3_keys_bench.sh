#!/bin/bash
# bench/s3_keys_bench.sh - what a run-time S3 key (admin API, base/keyring) costs a 4 KiB GET
# against a config key: user alice signs with her [[credentials]] key, user bob with a key
# added at run time (beside 1000 other run-time keys), each on a bucket of their own, alternating
# runs (ABBA) in the same daemon. Not a pass/fail test: one line per round and a summary (median
# ops/s of each, and the median of the rounds' ratios).
#
# Usage: bench/s3_keys_bench.sh [--duration S] [--rounds N] [--conc N] [--build DIR]
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=3
ROUNDS=8
CONC=16
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--conc) CONC=$2; shift ;;
	--build) BUILD=$2; shift ;;
	-h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
	*) echo "s3_keys_bench.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-keysbench.XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$TMP/cfg.toml" <<CFG
data_dirs = ["$TMP/d0", "$TMP/d1", "$TMP/d2", "$TMP/d3"]
s3_addr = "127.0.0.1:$PORT"
console_addr = ""
kv_addr = ""
set_drive_count = 4
default_parity_count = 1
[[credentials]]
access_key = "openlakeadmin"
secret_key = "openlakeadmin"
[[credentials]]
user = "alice"
access_key = "alicekey"
secret_key = "alicesecret"
CFG
"$OPENLAKED" --config "$TMP/cfg.toml" >"$TMP/log" 2>&1 &
DPID=$!
for _ in $(seq 100); do
	(exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
	sleep 0.1
done
EP=http://127.0.0.1:$PORT
keys() { "$CLI" keys --endpoint "$EP" --access-key openlakeadmin --secret-key openlakeadmin "$@"; }
for i in $(seq 1000); do
	echo "filler-secret-$i" | keys add "filler$((i % 50))" --key "FILLER$i" --secret-stdin >/dev/null
done
echo "bob-runtime-secret" | keys add bob --key BOBRUNTIME --secret-stdin >/dev/null
run() { # bucket access_key secret [--no-prefill]
	AWS_ACCESS_KEY_ID=$2 AWS_SECRET_ACCESS_KEY=$3 \
		"$CLI" bench s3 --endpoint "$EP" --bucket "$1" -w get -s 4KiB -c "$CONC" -d "${DUR}s" \
		--json -q ${4:-} | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["ops_per_s"])'
}
run bench-config alicekey alicesecret >/dev/null
run bench-runtime BOBRUNTIME bob-runtime-secret >/dev/null
cfg=()
rt=()
for i in $(seq "$ROUNDS"); do
	if [ $((i % 2)) -eq 1 ]; then
		a=$(run bench-config alicekey alicesecret --no-prefill)
		b=$(run bench-runtime BOBRUNTIME bob-runtime-secret --no-prefill)
	else
		b=$(run bench-runtime BOBRUNTIME bob-runtime-secret --no-prefill)
		a=$(run bench-config alicekey alicesecret --no-prefill)
	fi
	echo "round $i: GET 4KiB c=$CONC  config key $a ops/s   run-time key $b ops/s"
	cfg+=("$a")
	rt+=("$b")
done
/usr/bin/python3 - "${cfg[*]}" "${rt[*]}" <<'PY'
import statistics, sys
cfg = [float(x) for x in sys.argv[1].split()]
rt = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(cfg), statistics.median(rt)
r = statistics.median(y / n for n, y in zip(cfg, rt))
print(f"GET 4KiB median: run-time key {b:.0f} ops/s, config key {a:.0f} ops/s; "
      f"median of the rounds' ratios {r:.3f} ({(1 - r) * 100:+.1f}% cost)")
PY
