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
PY=/usr/bin/python3
. "$REPO/bench/lib.sh"
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-keysbench.XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
start_s3_alice "$OPENLAKED" "$TMP"
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
side_a() { run bench-config alicekey alicesecret --no-prefill; }
side_b() { run bench-runtime BOBRUNTIME bob-runtime-secret --no-prefill; }
abba "$ROUNDS" "GET 4KiB c=$CONC" "config key" "run-time key"
