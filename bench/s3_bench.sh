#!/bin/bash
# bench/s3_bench.sh - the S3 figures of the issue, each beside a reference measured in the same
# run on this machine. Not a pass/fail test: it prints one line per figure (ours, the reference,
# the ratio) and, with --markdown, the same as a table for bench/RESULTS.md.
#
#   GET 4 KiB, 64 connections (ops/s, p50/p99)   vs nginx (static files, same bytes) driven by wrk
#     (with the CPU per request of each server: user + system time from /proc/PID/stat over
#     the measured run, divided by its requests; the objects are PUT in a run before); and
#     the same GETs driven by wrk too (anonymous: a bucket policy opens the bench bucket)
#   GET 64 MiB (GB/s)                            vs fio sequential read on the same disk
#     (the 64 MiB rows also give the daemon's CPU seconds per GB moved: on a shared machine
#     it moves much less with the load than GB/s does)
#   GET 64 MiB, page cache dropped first (GB/s)  vs fio sequential read (needs root)
#   PUT 64 MiB (GB/s)                            vs fio sequential write x k/(k+P)
#   PUT 4 KiB, durability on, 64 conns (ops/s)   vs fio 4 KiB writes, fdatasync after each
#
# Usage: bench/s3_bench.sh [--quick] [--duration S] [--build DIR] [--dir DIR] [--markdown]
#   --quick      3 s per figure instead of 10
#   --build DIR  build directory holding cmd/openlaked/openlaked and cmd/openlake/openlake
#                (default $OPENLAKE_BUILD or build)
#   --dir DIR    where the drives, nginx files and fio files go (default a temp dir under
#                $TMPDIR or /tmp: "the same disk" for every figure); removed at the end
#   --only "F..." run only these figures: get_small large large_cold put_small
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=10
BASE=${TMPDIR:-/tmp}
MARKDOWN=0
ONLY=
CONC=64
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) DUR=3 ;;
	--duration) DUR=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--dir) BASE=$2; shift ;;
	--markdown) MARKDOWN=1 ;;
	--only) ONLY=$2; shift ;;
	-h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
	*) echo "s3_bench.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
PY=/usr/bin/python3
for b in "$OPENLAKED" "$CLI"; do
	[ -x "$b" ] || { echo "s3_bench.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done
for t in nginx wrk fio; do
	command -v $t >/dev/null || [ -x /usr/sbin/$t ] || { echo "s3_bench.sh: $t is missing (scripts/deps.sh bench installs it)" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

TMP=$(mktemp -d "$BASE/openlake-s3bench.XXXXXX")
chmod 755 "$TMP" # nginx workers run unprivileged
DPID=
NPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	[ -n "$NPID" ] && kill "$NPID" 2>/dev/null && wait "$NPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

. "$(dirname "$0")/lib.sh" # free_port, wait_port, kv_pool_config, start_s3
# jget FILE EXPR: a value out of a JSON document (EXPR in Python, the document is d)
jget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
ratio() { $PY -c "import sys
try: a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b))
except Exception: print('n/a')" "$1" "$2"; }

DRIVES=4
PARITY=1
K=$((DRIVES - PARITY))

# start_daemon FSYNC: openlaked on 4 drives under $TMP/ol (fresh), S3 on an ephemeral port
# (lib.sh's start_s3: 3+1, as DRIVES and PARITY above; sets S3_PORT and DPID)
start_daemon() {
	rm -rf "$TMP/ol"
	mkdir -p "$TMP/ol"
	start_s3 "$OPENLAKED" "$TMP/ol" "$1"
}
stop_daemon() {
	kill "$DPID" 2>/dev/null || true
	wait "$DPID" 2>/dev/null || true
	DPID=
}

# daemon_ticks: user + system CPU clock ticks of the daemon so far
daemon_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat" 2>/dev/null || echo 0; }

# nginx_ticks: user + system CPU clock ticks of nginx (master and workers) so far
nginx_ticks() {
	local p t=0
	for p in "$NPID" $(cat "/proc/$NPID/task/$NPID/children" 2>/dev/null); do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo $t
}

# per_req_us WRK_OUTPUT TICKS: microseconds of CPU per request of a wrk run
per_req_us() {
	$PY -c "import sys,re
n=re.search(r'([0-9]+) requests in', open(sys.argv[1]).read()); t=int(sys.argv[2])/int(sys.argv[3])
print('%.1f' % (t * 1e6 / int(n.group(1))) if n and int(n.group(1)) else 'n/a')" "$1" "$2" \
		"$(getconf CLK_TCK)" 2>/dev/null || echo n/a
}

# paths_lua: the wrk script that GETs the 1000 objects, /openlake-bench/bench/00000000..999
paths_lua() {
	cat >"$TMP/paths.lua" <<'EOF'
local i = 0
request = function()
	i = (i + 7919) % 1000
	return wrk.format("GET", string.format("/openlake-bench/bench/%08d", i))
end
EOF
}

# public_bucket NAME: a bucket policy on the daemon that lets anyone GetObject (boto3)
public_bucket() {
	$PY - "http://127.0.0.1:$S3_PORT" "$1" <<'EOF' || echo "s3_bench.sh: the bucket policy was refused" >&2
import json, sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="openlakeadmin",
                  aws_secret_access_key="openlakeadmin", region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}))
s3.put_bucket_policy(Bucket=sys.argv[2], Policy=json.dumps({"Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                   "Resource": "arn:aws:s3:::%s/*" % sys.argv[2]}]}))
EOF
}

# ours NAME ARGS...: openlake bench s3 against the daemon; JSON into $TMP/NAME.json, the
# daemon's CPU seconds during the run into $TMP/NAME.cpu
ours() {
	local name=$1
	shift
	echo "+ openlake bench s3 --endpoint http://127.0.0.1:PORT $* -d $DUR --json" >&2
	local t0
	t0=$(daemon_ticks)
	"$CLI" bench s3 --endpoint "http://127.0.0.1:$S3_PORT" "$@" -d "$DUR" --json -q \
		>"$TMP/$name.json" || true
	echo "$(( $(daemon_ticks) - t0 )) $(getconf CLK_TCK)" | awk '{printf "%.2f", $1 / $2}' \
		>"$TMP/$name.cpu"
}

# cpu_per_gb NAME: the daemon's CPU seconds per GB moved in run NAME (less sensitive to the
# load of a shared machine than GB/s)
cpu_per_gb() {
	$PY -c "import json,sys
d=json.load(open(sys.argv[1])); c=float(open(sys.argv[2]).read())
print('%.2f' % (c / (d['bytes'] / 1e9)) if d.get('bytes') else 'n/a')" \
		"$TMP/$1.json" "$TMP/$1.cpu" 2>/dev/null || echo n/a
}

LINES=()
line() { LINES+=("$1"); printf '%s\n' "$1"; }

# ---- GET 4 KiB x 64 connections, beside nginx + wrk ----
bench_get_small() {
	start_daemon false
	# the objects first, in a run of their own, so that the GET run's daemon CPU is the GETs'
	ours get4k_fill -w put -s 4KiB -c $CONC -n 1000 --ops 1000
	ours get4k -w get -s 4KiB -c $CONC -n 1000 --no-prefill
	# the same GETs from wrk (the same load generator as nginx's row): wrk cannot sign, so
	# the bucket is opened to anonymous GetObject by a bucket policy for this row only
	local ow0 ow1 www=$TMP/www port=$(free_port)
	public_bucket openlake-bench
	paths_lua
	echo "+ wrk -t 2 -c $CONC -d ${DUR}s --latency -s paths.lua http://127.0.0.1:S3_PORT/ (anonymous)" >&2
	ow0=$(daemon_ticks)
	wrk -t 2 -c $CONC -d "${DUR}s" --latency -s "$TMP/paths.lua" "http://127.0.0.1:$S3_PORT/" >"$TMP/wrk-ours.txt" 2>&1 || true
	ow1=$(daemon_ticks)
	stop_daemon
	# nginx serves the same bytes as static files
	# the same paths as the S3 keys: /openlake-bench/bench/00000000..00000999
	mkdir -p "$www/openlake-bench/bench" "$TMP/nginx"
	head -c 4096 /dev/urandom >"$www/obj"
	chmod 644 "$www/obj"
	for i in $(seq -f %08g 0 999); do ln "$www/obj" "$www/openlake-bench/bench/$i"; done
	cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes auto;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	keepalive_requests 1000000;
	client_body_temp_path $TMP/nginx/body;
	proxy_temp_path $TMP/nginx/proxy;
	fastcgi_temp_path $TMP/nginx/fcgi;
	uwsgi_temp_path $TMP/nginx/uwsgi;
	scgi_temp_path $TMP/nginx/scgi;
	server { listen 127.0.0.1:$port; root $www; }
}
EOF
	"$NGINX" -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >/dev/null 2>&1 &
	NPID=$!
	wait_port "$port" || { echo "s3_bench.sh: nginx did not start" >&2; cat "$TMP/nginx/error.log" >&2; exit 1; }
	echo "+ wrk -t 2 -c $CONC -d ${DUR}s --latency -s paths.lua http://127.0.0.1:PORT/" >&2
	local n0 n1
	n0=$(nginx_ticks)
	wrk -t 2 -c $CONC -d "${DUR}s" --latency -s "$TMP/paths.lua" "http://127.0.0.1:$port/" >"$TMP/wrk.txt" 2>&1 || true
	n1=$(nginx_ticks)
	# driver check: our load generator on the same nginx (its signatures are ignored there;
	# the bucket PUT gets a 405), to show what the client side itself costs beside wrk
	echo "+ openlake bench s3 --endpoint http://127.0.0.1:NGINX_PORT -w get -s 4KiB -c $CONC -n 1000 --no-prefill -d $DUR" >&2
	"$CLI" bench s3 --endpoint "http://127.0.0.1:$port" -w get -s 4KiB -c $CONC -n 1000 \
		--no-prefill -d "$DUR" --json -q >"$TMP/nginx-ours.json" 2>/dev/null || true
	kill "$NPID" 2>/dev/null || true
	wait "$NPID" 2>/dev/null || true
	NPID=
	local w_ops w_p50 w_p99
	w_ops=$(awk '/^Requests\/sec/ {print $2}' "$TMP/wrk.txt")
	w_p50=$(awk '$1=="50%" {print $2}' "$TMP/wrk.txt")
	w_p99=$(awk '$1=="99%" {print $2}' "$TMP/wrk.txt")
	local o_ops o_p50 o_p99 o_err
	o_ops=$(jget "$TMP/get4k.json" 'round(d["ops_per_s"])' 2>/dev/null || echo 0)
	o_p50=$(jget "$TMP/get4k.json" '"%.2fms" % (d["latency_us"]["p50"]/1e3)' 2>/dev/null || echo "?")
	o_p99=$(jget "$TMP/get4k.json" '"%.2fms" % (d["latency_us"]["p99"]/1e3)' 2>/dev/null || echo "?")
	o_err=$(jget "$TMP/get4k.json" 'd["errors"]' 2>/dev/null || echo "?")
	# CPU per request: the server's user + system time over the measured run / its requests
	local o_us w_us
	o_us=$($PY -c "import json,sys
d=json.load(open(sys.argv[1])); c=float(open(sys.argv[2]).read())
print('%.1f' % (c * 1e6 / d['ops']) if d.get('ops') else 'n/a')" "$TMP/get4k.json" "$TMP/get4k.cpu" 2>/dev/null || echo n/a)
	w_us=$(per_req_us "$TMP/wrk.txt" "$((n1 - n0))")
	line "GET 4KiB c=$CONC | ours ${o_ops} ops/s p50 ${o_p50} p99 ${o_p99} (errors ${o_err}) | nginx+wrk ${w_ops:-0} ops/s p50 ${w_p50:-?} p99 ${w_p99:-?} | ratio $(ratio "${o_ops}" "${w_ops:-0}") | daemon ${o_us} us CPU/GET, nginx ${w_us} us CPU/GET"
	local r_ops r_err r_us
	r_ops=$(awk '/^Requests\/sec/ {print $2}' "$TMP/wrk-ours.txt")
	r_err=$(awk '/Non-2xx/ {print $NF}' "$TMP/wrk-ours.txt")
	r_us=$(per_req_us "$TMP/wrk-ours.txt" "$((ow1 - ow0))")
	line "GET 4KiB c=$CONC, both driven by wrk (ours: anonymous GETs, no SigV4) | ours ${r_ops:-0} ops/s p50 $(awk '$1=="50%" {print $2}' "$TMP/wrk-ours.txt") (non-2xx ${r_err:-0}) | nginx+wrk ${w_ops:-0} ops/s | ratio $(ratio "${r_ops:-0}" "${w_ops:-0}") | daemon ${r_us} us CPU/GET, nginx ${w_us} us CPU/GET"
	local n_ops
	n_ops=$(jget "$TMP/nginx-ours.json" 'round(d["ops_per_s"])' 2>/dev/null || echo 0)
	line "driver check: nginx GET 4KiB c=$CONC | openlake bench s3 ${n_ops} ops/s (errors $(jget "$TMP/nginx-ours.json" 'd["errors"]' 2>/dev/null || echo ?)) | wrk ${w_ops:-0} ops/s | ratio $(ratio "$n_ops" "${w_ops:-0}")"
}

# fio_bw NAME ARGS...: fio bandwidth (bytes/s) of its only job, read or write
fio_bw() {
	local name=$1 rw=$2
	shift 2
	mkdir -p "$TMP/fio"
	echo "+ fio --name=$name --directory=DIR --rw=$rw $* --runtime=${DUR} --time_based --output-format=json" >&2
	fio --name="$name" --directory="$TMP/fio" --rw="$rw" "$@" --runtime="$DUR" --time_based \
		--output-format=json >"$TMP/$name.fio.json" 2>"$TMP/$name.fio.err" || true
	local dir=read
	case "$rw" in *write*) dir=write ;; esac
	jget "$TMP/$name.fio.json" "d['jobs'][0]['$dir']['bw_bytes']" 2>/dev/null || echo 0
}

gbs() { $PY -c "import sys
try: print('%.3f' % (float(sys.argv[1])/1e9))
except Exception: print('?')" "$1"; }

# ---- GET and PUT of 64 MiB, beside fio sequential read/write on the same disk ----
bench_large() {
	start_daemon false
	ours put64m -w put -s 64MiB -c 4 -n 4
	ours get64m -w get -s 64MiB -c 4 -n 4
	stop_daemon
	local fw fr
	fw=$(fio_bw seqwrite write --filename=seq.dat --bs=1M --size=1G --direct=1 --ioengine=libaio --iodepth=16 --end_fsync=1)
	fr=$(fio_bw seqread read --filename=seq.dat --bs=1M --size=1G --direct=1 --ioengine=libaio --iodepth=16)
	# note: the daemon's GETs read objects written seconds before, which may still be in the
	# page cache; fio reads with O_DIRECT, i.e. the disk
	rm -rf "$TMP/fio"
	local gput gget ref_put
	gput=$(jget "$TMP/put64m.json" '"%.3f" % d["gb_per_s"]' 2>/dev/null || echo 0)
	gget=$(jget "$TMP/get64m.json" '"%.3f" % d["gb_per_s"]' 2>/dev/null || echo 0)
	ref_put=$($PY -c "print('%.3f' % ($fw/1e9*$K/$DRIVES))")
	line "GET 64MiB c=4 | ours ${gget} GB/s (errors $(jget "$TMP/get64m.json" 'd["errors"]' 2>/dev/null || echo ?)) | fio seq read 1MiB QD16 O_DIRECT $(gbs "$fr") GB/s | ratio $(ratio "$gget" "$(gbs "$fr")") | daemon $(cpu_per_gb get64m) core-s/GB"
	line "PUT 64MiB c=4 | ours ${gput} GB/s (errors $(jget "$TMP/put64m.json" 'd["errors"]' 2>/dev/null || echo ?)) | fio seq write 1MiB QD16 O_DIRECT $(gbs "$fw") GB/s x k/(k+P)=$K/$DRIVES -> ${ref_put} GB/s | ratio $(ratio "$gput" "$ref_put") | daemon $(cpu_per_gb put64m) core-s/GB"
}

# drop_cache: write back and drop the page cache (root only); 0 when it was dropped
drop_cache() {
	sync
	{ echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
}

# ---- GET of 64 MiB objects that are not in the page cache, beside fio O_DIRECT reads ----
# Each object is read once (--ops = objects) right after the page cache was dropped, so the
# shards come from the disk, not from memory as in the row above.
bench_large_cold() {
	local n=32
	[ "$DUR" -le 3 ] && n=12
	start_daemon false
	ours putcold -w put -s 64MiB -c 4 -n $n --ops $n
	if ! drop_cache; then
		stop_daemon
		line "GET 64MiB cold c=4 | not run: /proc/sys/vm/drop_caches is not writable (run as root) | - | n/a"
		return
	fi
	ours getcold -w get -s 64MiB -c 4 -n $n --ops $n --no-prefill
	stop_daemon
	drop_cache || true
	local fr gget
	fr=$(fio_bw coldread read --filename=seq.dat --bs=1M --size=1G --direct=1 --ioengine=libaio --iodepth=16)
	rm -rf "$TMP/fio"
	gget=$(jget "$TMP/getcold.json" '"%.3f" % d["gb_per_s"]' 2>/dev/null || echo 0)
	line "GET 64MiB cold c=4 | ours ${gget} GB/s, $n objects each read once after drop_caches (errors $(jget "$TMP/getcold.json" 'd["errors"]' 2>/dev/null || echo ?)) | fio seq read 1MiB QD16 O_DIRECT $(gbs "$fr") GB/s | ratio $(ratio "$gget" "$(gbs "$fr")") | daemon $(cpu_per_gb getcold) core-s/GB"
}

# ---- PUT 4 KiB with durability on, beside fio 4 KiB writes + fdatasync each ----
bench_put_small() {
	start_daemon true
	ours put4k -w put -s 4KiB -c $CONC -n 100000
	stop_daemon
	mkdir -p "$TMP/fio"
	echo "+ fio --name=sync4k --rw=write --bs=4k --size=256M --fdatasync=1 --ioengine=sync --runtime=$DUR --time_based" >&2
	fio --name=sync4k --directory="$TMP/fio" --rw=write --bs=4k --size=256M --fdatasync=1 \
		--ioengine=sync --runtime="$DUR" --time_based --output-format=json \
		>"$TMP/sync4k.fio.json" 2>/dev/null || true
	rm -rf "$TMP/fio"
	local f_iops o_ops
	f_iops=$(jget "$TMP/sync4k.fio.json" "round(d['jobs'][0]['write']['iops'])" 2>/dev/null || echo 0)
	o_ops=$(jget "$TMP/put4k.json" 'round(d["ops_per_s"])' 2>/dev/null || echo 0)
	line "PUT 4KiB fsync c=$CONC | ours ${o_ops} ops/s p50 $(jget "$TMP/put4k.json" '"%.2fms" % (d["latency_us"]["p50"]/1e3)' 2>/dev/null || echo ?) (errors $(jget "$TMP/put4k.json" 'd["errors"]' 2>/dev/null || echo ?)) | fio 4KiB write+fdatasync 1 job ${f_iops} IOPS | ratio $(ratio "$o_ops" "$f_iops")"
}

echo "# s3_bench.sh: $(date -u +%FT%TZ), $(nproc) cores (load average $(cut -d" " -f1-3 /proc/loadavg)), $DUR s per figure, drives under $TMP ($(df -T "$TMP" | awk 'NR==2 {print $2" on "$1}'))"
for f in ${ONLY:-get_small large large_cold put_small}; do
	"bench_$f"
done

if [ $MARKDOWN = 1 ]; then
	echo
	echo "| figure | ours | reference | ratio | daemon CPU |"
	echo "|---|---|---|---|---|"
	for l in "${LINES[@]}"; do
		IFS='|' read -r f o r x c <<<"$l"
		echo "| ${f% } | ${o# } | ${r# } | ${x# ratio } | ${c# daemon } |"
	done
fi
