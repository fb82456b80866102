#!/bin/bash
# bench/s3_policy_bench.sh - what bucket policy and ACL evaluation cost a 4 KiB GET: the same
# GET by a non-admin user (so every check runs) on a bucket with a policy and on one without,
# alternating runs (ABBA) in the same daemon. Not a pass/fail test: one line per round and a
# summary (median ops/s with the policy, without it, and the median of the rounds' ratios).
#
# Usage: bench/s3_policy_bench.sh [--duration S] [--rounds N] [--conc N] [--build DIR]
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
	*) echo "s3_policy_bench.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-polbench.XXXXXX")
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
export AWS_ACCESS_KEY_ID=alicekey AWS_SECRET_ACCESS_KEY=alicesecret
EP=http://127.0.0.1:$PORT
/usr/bin/python3 - "$EP" <<'PY'
import json, sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="alicekey",
                  aws_secret_access_key="alicesecret", region_name="us-east-1")
for b in ("bench-nopolicy", "bench-policy"):
    s3.create_bucket(Bucket=b)
arn = "arn:aws:s3:::bench-policy"
s3.put_bucket_policy(Bucket="bench-policy", Policy=json.dumps({
    "Version": "2012-10-17", "Statement": [
        {"Sid": "ReadBench", "Effect": "Allow", "Principal": {"AWS": ["alice"]},
         "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket"],
         "Resource": [arn, arn + "/*"],
         "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}},
        {"Sid": "PublicPart", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": arn + "/public/*"},
        {"Sid": "KeepSecrets", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": arn + "/secret/*"},
        {"Sid": "TlsForWrites", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
         "Resource": arn + "/*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
PY
run() {
	"$CLI" bench s3 --endpoint "$EP" --bucket "$1" -w get -s 4KiB -c "$CONC" -d "${DUR}s" \
		--json -q ${2:-} | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["ops_per_s"])'
}
# prefill once per bucket, then measure without prefill
run bench-nopolicy >/dev/null
run bench-policy >/dev/null
no=()
yes=()
for i in $(seq "$ROUNDS"); do
	# ABBA order: a load that drifts during the run weighs on both sides alike
	if [ $((i % 2)) -eq 1 ]; then
		a=$(run bench-nopolicy --no-prefill)
		b=$(run bench-policy --no-prefill)
	else
		b=$(run bench-policy --no-prefill)
		a=$(run bench-nopolicy --no-prefill)
	fi
	echo "round $i: GET 4KiB c=$CONC  no policy $a ops/s   with policy $b ops/s"
	no+=("$a")
	yes+=("$b")
done
/usr/bin/python3 - "${no[*]}" "${yes[*]}" <<'PY'
import statistics, sys
no = [float(x) for x in sys.argv[1].split()]
yes = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(no), statistics.median(yes)
r = statistics.median(y / n for n, y in zip(no, yes))
print(f"GET 4KiB median: with policy {b:.0f} ops/s, no policy {a:.0f} ops/s; "
      f"median of the rounds' ratios {r:.3f} ({(1 - r) * 100:+.1f}% cost)")
PY
