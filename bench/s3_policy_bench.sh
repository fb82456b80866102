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
PY=/usr/bin/python3
. "$REPO/bench/lib.sh"
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-polbench.XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
start_s3_alice "$OPENLAKED" "$TMP"
export AWS_ACCESS_KEY_ID=alicekey AWS_SECRET_ACCESS_KEY=alicesecret
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
side_a() { run bench-nopolicy --no-prefill; }
side_b() { run bench-policy --no-prefill; }
abba "$ROUNDS" "GET 4KiB c=$CONC" "no policy" "with policy"
