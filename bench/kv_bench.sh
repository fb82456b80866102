#!/bin/bash
# bench/kv_bench.sh - the KV pool figures of the issue, each beside references measured in the
# same run on this machine. Not a pass/fail test: one line per figure (ours, the references,
# the ratios) and, with --markdown, a table for bench/RESULTS.md.
#
#   TCP get/put of 256 KiB and 2 MiB blocks, 16 connections (GB/s, p50/p99), beside
#     redis-server (SET/GET) and memcached (set/get), both driven by the same C driver
#     (openlake bench redis|memcached), and a plain loopback socket stream (openlake bench tcp);
#     ours and memcached's CPU per op over the measured phase (utime + stime, /proc/PID/stat)
#   local shared-memory get/put of 2 MiB, beside memcpy of the same blocks (openlake bench memcpy:
#     one block per thread, in cache; and --cold: the far side cycling over 512 MiB, as the
#     tier's slots do, so memory's speed);
#     puts after an 8 s warm-up in the same process (its mapping of the tier touched once), with
#     a fresh process's figure beside
#   latency of single 256 KiB gets over TCP at half of each server's peak rate: p50/p99/p99.9
#     of a paced (open-loop) run, --rate = half the ops/s of the closed-loop GET 256KiB figure,
#     for ours, redis and memcached alike
#   TLS: TCP get of 2 MiB blocks from a second openlaked whose KV port speaks TLS ([kv_tls],
#     a self-signed P-256 certificate made here with the openssl CLI) beside the same gets in
#     plaintext from the first, alternated: plain, TLS, plain, TLS; then 2 MiB puts the same
#     way; with each daemon's CPU per op over the measured phase (from /proc/PID/stat)
#   NVMe tier: 64 KiB random gets, 32 outstanding (32 connections x batch 1), from a second
#     openlaked with a 64 MiB DRAM tier and a key set 16x larger (most gets come from the
#     NVMe tier; the share is read from the daemon's stats), beside fio io_uring O_DIRECT
#     random reads of 64 KiB at iodepth 32 on a file in the same directory
#
# Usage: bench/kv_bench.sh [--quick] [--duration S] [--build DIR] [--markdown] [--figures LIST]
#                          [--nv-batch B] [--perf-record FILE]
#   --quick         3 s per figure instead of 10
#   --build DIR     build directory with cmd/openlaked/openlaked and cmd/openlake/openlake
#                   (default $OPENLAKE_BUILD or build)
#   --nv-batch B    NVMe figure: 32 / B connections sending B gets per frame (default 1); the
#                   32 outstanding gets and fio's iodepth 32 stay
#   --perf-record FILE  NVMe figure: perf record -g the daemon over the measured window into
#                   FILE (for perf report); the daemon's and fio's syscalls per get / per read
#                   are counted with perf stat whenever perf may trace
#   --figures LIST  comma-separated subset of tcp,local,latency,nvme,tls (default all; latency
#                   measures the peaks itself when tcp is not run)
# Everything listens on 127.0.0.1 ephemeral ports and is stopped at the end.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=10
MARKDOWN=0
CONC=16
LOCAL_CONC=4
LOCAL_WARM=8    # s of local puts before the measured ones (see "local" below)
FIGURES=tcp,local,latency,nvme,tls
NV_DRAM=64MiB   # DRAM tier of the NVMe-tier daemon
NV_KEYS=16384   # x 64 KiB = 1 GiB of keys, 16x the DRAM tier
NV_CONC=32      # outstanding gets (one thread and connection each, batch 1)
NV_BATCH=1      # --nv-batch B: 32 / B connections with B gets per frame (the read-ahead path)
PERF_RECORD=    # --perf-record FILE: perf record -g of the NVMe-tier daemon over the measured window
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) DUR=3 ;;
	--duration) DUR=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--markdown) MARKDOWN=1 ;;
	--figures) FIGURES=$2; shift ;;
	--nv-batch) NV_BATCH=$2; shift ;;
	--perf-record) PERF_RECORD=$2; shift ;;
	-h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
# syscalls per get / per read come from perf stat (a tracepoint count) where perf may trace
PERF=0
perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1 && PERF=1
want() { case ",$FIGURES," in *",$1,"*) return 0 ;; esac; return 1; }
# redis and memcached are the references of the tcp and latency figures only
REFS=0
if want tcp || want latency; then REFS=1; fi
for t in $([ $REFS = 1 ] && echo redis-server memcached) $(want nvme && echo fio); do
	command -v $t >/dev/null || { echo "kv_bench.sh: $t is missing (scripts/deps.sh bench installs it)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-kvbench.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

. "$(dirname "$0")/lib.sh" # free_port, wait_port, start_kv_pool
jget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo "?"; }
ratio() { $PY -c "import sys
try: a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b))
except Exception: print('n/a')" "$1" "$2"; }

# ---- the servers ----
# start_pool DIR DRAM SPILL [KVLINE]: openlaked with mode = "kv" on fresh ports, data in DIR,
# KVLINE added to [kv]; sets POOL
start_pool() {
	start_kv_pool "$OPENLAKED" "$1" "$2" "$3" "${4:-}"
	PIDS+=("$POOL_PID")
	POOL=127.0.0.1:$POOL_PORT
}
start_pool "$TMP/ol" 1GiB 2GiB
KV=$POOL
KV_PID=$POOL_PID
# The DRAM tier is prefaulted by a nice-19 thread after start: fresh shared memory is slow to
# first touch on some VMs (bench/first_touch.c: ~0.3 GB/s here), so puts into an untouched
# tier measure the VM's page faults, not the put path (every daemon build alike). Wait for
# the prefault before the first figure, at most 120 s or 15 s without progress, and say how
# far it got.
wait_prefault() {
	local t0=$SECONDS since=$SECONDS last=-1 p=0 cap=1
	while [ $((SECONDS - t0)) -lt 120 ]; do
		read -r p cap < <("$CLI" kv stats --nodes "$1" --json 2>/dev/null | $PY -c 'import json,sys
s=json.load(sys.stdin)["nodes"][0]["stats"]
print(s.get("prefaulted_pages", 0), s["dram_capacity"] // (2 << 20))' 2>/dev/null || echo "0 1")
		[ "$p" -ge "$cap" ] && break
		[ "$p" != "$last" ] && { last=$p; since=$SECONDS; }
		[ $((SECONDS - since)) -ge 15 ] && break
		sleep 0.5
	done
	echo "# DRAM tier of $1 prefaulted: $p of $cap 2 MiB pages after $((SECONDS - t0)) s"
}
if want tcp || want local; then wait_prefault "$KV"; fi

REDIS_PORT=0
MEMC_PORT=0
if [ $REFS = 1 ]; then
	REDIS_PORT=$(free_port)
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--protected-mode no --dir "$TMP" >"$TMP/redis.log" 2>&1 &
	PIDS+=($!)
	MEMC_PORT=$(free_port)
	memcached -u "$(id -un)" -l 127.0.0.1 -p "$MEMC_PORT" -U 0 -m 1024 -I 4m -t 4 >"$TMP/memc.log" 2>&1 &
	PIDS+=($!)
	MEMC_PID=$!
	wait_port "$REDIS_PORT" || { echo "kv_bench.sh: redis-server did not start" >&2; cat "$TMP/redis.log" >&2; exit 1; }
	wait_port "$MEMC_PORT" || { echo "kv_bench.sh: memcached did not start" >&2; cat "$TMP/memc.log" >&2; exit 1; }
fi

# run NAME ARGS...: one openlake bench run; JSON into $TMP/NAME.json
run() {
	local name=$1
	shift
	echo "+ openlake bench $* -d $DUR --json" >&2
	"$CLI" bench "$@" -d "$DUR" --json -q >"$TMP/$name.json" || true
}
# run_cpu NAME PID ARGS...: run, with the CPU of process PID sampled every 0.1 s meanwhile
# (uptime seconds and utime + stime ticks into $TMP/NAME.cpu)
run_cpu() {
	local name=$1 pid=$2 w
	shift 2
	(while :; do
		echo "$(cut -d" " -f1 /proc/uptime) $(awk '{print $14 + $15}' "/proc/$pid/stat")"
		sleep 0.1
	done) >"$TMP/$name.cpu" 2>/dev/null &
	w=$!
	run "$name" "$@"
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
}
# cpu_op NAME: the daemon's CPU per op of a run_cpu run, over its measured phase only (the
# last elapsed_s seconds of the samples; a get's prefill before it is left out), and the
# cores it used meanwhile
cpu_op() { $PY -c "import json,os,sys
try:
    d = json.load(open(sys.argv[1])); hz = os.sysconf('SC_CLK_TCK')
    s = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if len(l.split()) == 2]
    t1, c1 = s[-1]; t0 = t1 - d['elapsed_s']
    c0 = next(c for t, c in s if t >= t0)
    sec = (c1 - c0) / hz
    print('daemon CPU %.0f µs per op (%.2f cores)' % (sec / (d['ops_per_s'] * d['elapsed_s']) * 1e6, sec / d['elapsed_s']))
except Exception: print('daemon CPU ?')" "$TMP/$1.json" "$TMP/$1.cpu"; }
fig() { jget "$TMP/$1.json" '"%.3f" % d["gb_per_s"]'; }
lat() { jget "$TMP/$1.json" '"p50 %.2fms p99 %.2fms" % (d["latency_us"]["p50"]/1e3, d["latency_us"]["p99"]/1e3)'; }
errs() { jget "$TMP/$1.json" 'd["errors"]'; }
ops() { jget "$TMP/$1.json" '"%.0f" % d["ops_per_s"]'; }
# lat3 NAME: a paced run's percentiles, its achieved rate, and its latency from the actual send
lat3() { jget "$TMP/$1.json" '"p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs at %.0f/s (from the actual send: p50 %.0f µs, p99 %.0f µs)" % (d["latency_us"]["p50"], d["latency_us"]["p99"], d["latency_us"]["p99_9"], d["ops_per_s"], d["service_us"]["p50"], d["service_us"]["p99"])'; }
p99() { jget "$TMP/$1.json" 'd["latency_us"]["p99"]'; }
half() { $PY -c "import sys
try: print('%.0f' % max(1.0, float(sys.argv[1]) / 2))
except Exception: print('')" "$1"; }

LINES=()
line() { LINES+=("$1"); printf '%s\n' "$1"; }

# the drivers of the three servers; the same flags follow each
KV_TCP=(kv --nodes "$KV" --device tcp)
REDIS=(redis --addr "127.0.0.1:$REDIS_PORT")
MEMC=(memcached --addr "127.0.0.1:$MEMC_PORT")

echo "# kv_bench.sh: $(date -u +%FT%TZ), $(nproc) cores (load average $(cut -d" " -f1-3 /proc/loadavg)), $DUR s per figure, $CONC connections (local: $LOCAL_CONC threads)"
if want tcp; then
	for size in 256KiB 2MiB; do
		for op in put get; do
			t=$op$size
			run_cpu "ol$t" "$KV_PID" "${KV_TCP[@]}" -w $op -s $size -c $CONC
			run "redis$t" "${REDIS[@]}" -w $op -s $size -c $CONC
			run_cpu "memc$t" "$MEMC_PID" "${MEMC[@]}" -w $op -s $size -c $CONC
			run "tcp$t" tcp -w $op -s $size -c $CONC
			line "KV TCP ${op^^} $size c=$CONC | ours $(fig ol$t) GB/s $(lat ol$t) (errors $(errs ol$t)), $(cpu_op ol$t) | redis $(fig redis$t) GB/s, memcached $(fig memc$t) GB/s ($(cpu_op memc$t | sed 's/^daemon/its/')), plain socket $(fig tcp$t) GB/s | ratio vs redis $(ratio "$(fig ol$t)" "$(fig redis$t)"), vs memcached $(ratio "$(fig ol$t)" "$(fig memc$t)"), vs socket $(ratio "$(fig ol$t)" "$(fig tcp$t)")"
		done
	done
fi
if want tls; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-keyout "$TMP/tls.key" -out "$TMP/tls.pem" -subj /CN=kvbench \
		-addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1
	start_pool "$TMP/oltls" 1GiB 0 "$(printf '\n[kv_tls]\ncert_path = "%s"\nkey_path = "%s"' \
		"$TMP/tls.pem" "$TMP/tls.key")"
	KVT=$POOL
	KVT_PID=$POOL_PID
	# puts into a tier not yet prefaulted measure this VM's first touch of fresh shm, not
	# the put path (see wait_prefault): both pools first
	if ! want tcp && ! want local; then wait_prefault "$KV"; fi
	OPENLAKE_KV_TLS=1 OPENLAKE_KV_CA_FILE=$TMP/tls.pem wait_prefault "$KVT"
	for i in 1 2; do
		run_cpu "plain2m$i" "$KV_PID" kv --nodes "$KV" --device tcp -w get -s 2MiB -c $CONC
		OPENLAKE_KV_TLS=1 OPENLAKE_KV_CA_FILE=$TMP/tls.pem \
			run_cpu "tls2m$i" "$KVT_PID" kv --nodes "$KVT" --device tcp -w get -s 2MiB -c $CONC
		line "KV TCP GET 2MiB c=$CONC TLS (run $i) | ours over TLS $(fig tls2m$i) GB/s $(lat tls2m$i) (errors $(errs tls2m$i)), $(cpu_op tls2m$i) | plaintext $(fig plain2m$i) GB/s $(lat plain2m$i), $(cpu_op plain2m$i) | ratio $(ratio "$(fig tls2m$i)" "$(fig plain2m$i)")"
		run_cpu "plainput$i" "$KV_PID" kv --nodes "$KV" --device tcp -w put -s 2MiB -c $CONC
		OPENLAKE_KV_TLS=1 OPENLAKE_KV_CA_FILE=$TMP/tls.pem \
			run_cpu "tlsput$i" "$KVT_PID" kv --nodes "$KVT" --device tcp -w put -s 2MiB -c $CONC
		line "KV TCP PUT 2MiB c=$CONC TLS (run $i) | ours over TLS $(fig tlsput$i) GB/s $(lat tlsput$i) (errors $(errs tlsput$i)), $(cpu_op tlsput$i) | plaintext $(fig plainput$i) GB/s $(lat plainput$i), $(cpu_op plainput$i) | ratio $(ratio "$(fig tlsput$i)" "$(fig plainput$i)")"
	done
fi
# Local puts run after a warm-up of LOCAL_WARM s in the same process (the get's prefill does the
# same for gets): the first access of each page of a new process's mapping of the tier is a
# page fault, and on this VM (PVM: the host shadows page tables) a ~10-35 us trap per 4 KiB page
# on top (bench/first_touch.c), so a 3 s run of a fresh process measured only that one-off
# pass over the tier, not the put path. The line says how much the warm-up put (1 GiB covers
# the tier once) and, from a first run without it, what a fresh process gets.
if want local; then
	run olcoldput kv --nodes "$KV" --device local -w put -s 2MiB -c $LOCAL_CONC
	for op in put get; do
		t=local$op
		warm=()
		[ $op = put ] && warm=(--warmup "$LOCAL_WARM")
		run_cpu "ol$t" "$KV_PID" kv --nodes "$KV" --device local -w $op -s 2MiB -c $LOCAL_CONC "${warm[@]}"
		run "mc$t" memcpy -w $op -s 2MiB -c $LOCAL_CONC
		run "mcc$t" memcpy -w $op -s 2MiB -c $LOCAL_CONC --cold
		extra=
		[ $op = put ] && extra=" after a ${LOCAL_WARM} s warm-up of $(jget "$TMP/ol$t.json" '"%.1f" % (d["warmup"]["ops"] * d["size"] / 2**30)') GiB (a fresh process, no warm-up: $(fig olcoldput) GB/s)"
		line "KV local ${op^^} 2MiB c=$LOCAL_CONC | ours $(fig ol$t) GB/s $(lat ol$t) (errors $(errs ol$t)), $(cpu_op ol$t)$extra | memcpy $(fig mc$t) GB/s | ratio $(ratio "$(fig ol$t)" "$(fig mc$t)") | memcpy to/from a cold 512 MiB region $(fig mcc$t) GB/s | ratio $(ratio "$(fig ol$t)" "$(fig mcc$t)")"
	done
fi

# Latency at half the peak. The peak is the closed-loop ops/s of single 256 KiB gets (batch 1,
# $CONC connections): the GET 256KiB figure above, or measured here when tcp is not run. The
# paced run sends half of it on a fixed schedule over the same $CONC connections, latency
# counted from each scheduled send (openlake bench --rate: no coordinated omission), after 1 s
# of closed-loop warm-up on other keys. Half of a faster server's peak is a harder test on
# this machine (client and server share its cores), so a second row runs all three at one
# rate: half the slowest peak.
if want latency; then
	for srv in ol redis memc; do
		case $srv in
		ol) drv=("${KV_TCP[@]}") ;;
		redis) drv=("${REDIS[@]}") ;;
		memc) drv=("${MEMC[@]}") ;;
		esac
		[ -s "$TMP/${srv}get256KiB.json" ] || run "${srv}get256KiB" "${drv[@]}" -w get -s 256KiB -c $CONC
		rate=$(half "$(ops ${srv}get256KiB)")
		[ -n "$rate" ] && run "${srv}half" "${drv[@]}" -w get -s 256KiB -c $CONC --rate "$rate" --warmup 1
	done
	line "KV TCP GET 256KiB c=$CONC latency at half peak (open loop) | ours $(lat3 olhalf), peak $(ops olget256KiB)/s (errors $(errs olhalf)) | redis $(lat3 redishalf), peak $(ops redisget256KiB)/s; memcached $(lat3 memchalf), peak $(ops memcget256KiB)/s | p99 vs redis $(ratio "$(p99 olhalf)" "$(p99 redishalf)"), vs memcached $(ratio "$(p99 olhalf)" "$(p99 memchalf)") (lower is better; target p99 < 500 µs)"
	same=$($PY -c "import sys
try: print('%.0f' % (min(float(x) for x in sys.argv[1:]) / 2))
except Exception: print('')" "$(ops olget256KiB)" "$(ops redisget256KiB)" "$(ops memcget256KiB)")
	if [ -n "$same" ]; then
		run olsame "${KV_TCP[@]}" -w get -s 256KiB -c $CONC --rate "$same" --warmup 1
		run redissame "${REDIS[@]}" -w get -s 256KiB -c $CONC --rate "$same" --warmup 1
		run memcsame "${MEMC[@]}" -w get -s 256KiB -c $CONC --rate "$same" --warmup 1
		line "KV TCP GET 256KiB c=$CONC latency, all at $same/s (half the slowest peak, open loop) | ours $(lat3 olsame) (errors $(errs olsame)) | redis $(lat3 redissame); memcached $(lat3 memcsame) | p99 vs redis $(ratio "$(p99 olsame)" "$(p99 redissame)"), vs memcached $(ratio "$(p99 olsame)" "$(p99 memcsame)") (lower is better)"
	fi
fi

# NVMe tier: a second pool whose DRAM tier holds 1/16 of the keys. Every get picks a key at
# random (uniform), so most are read from the NVMe tier (and promoted into DRAM, evicting
# another). The share is hits_nvme / hits from that daemon's own counters (it serves nothing
# else; its count includes the warm-up). 2 s of warm-up first: in trials the first second
# after the fill ran at a tenth of the later rate. fio reads a 1 GiB file in the same
# directory: O_DIRECT, io_uring, 32 in flight. For both, the disk's average queue depth
# meanwhile is read from /proc/diskstats: how many of the 32 reads are really at the disk.
nv_share() {
	"$CLI" kv stats --nodes "$1" --json 2>/dev/null | $PY -c 'import json,sys
s=json.load(sys.stdin)["nodes"][0]["stats"]
print("%.2f of %d gets from NVMe (%d from DRAM, %d misses, %d promotions)" % (s["hits_nvme"]/max(1,s["hits"]), s["hits"], s["hits_dram"], s["misses"], s.get("promotions", -1)))' 2>/dev/null || echo "?"
}
# disk_qd FILE SECONDS: average requests in flight on the disk under $TMP over the next SECONDS
# (weighted I/O time / wall time, from /proc/diskstats; everything on that disk counts)
DISK=$(basename "$(df --output=source "$TMP" | tail -1)")
disk_qd() {
	local a b
	a=$(awk -v d="$DISK" '$3==d {print $14}' /proc/diskstats)
	sleep "$2"
	b=$(awk -v d="$DISK" '$3==d {print $14}' /proc/diskstats)
	$PY -c "import sys
try: print('%.1f' % ((int(sys.argv[2]) - int(sys.argv[1])) / 1000 / float(sys.argv[3])))
except Exception: print('?')" "$a" "$b" "$2" >"$1"
}
# cpu_ticks PID: user + system CPU of a process so far, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# qd_during LOG OUT PID: once the measured run has printed its first progress line, sample
# the disk's queue depth (into OUT) and the CPU of process PID (into OUT.cpu: ticks, ticks per
# second, seconds sampled)
qd_during() {
	local log=$1 out=$2 pid=$3 c0 c1
	for _ in $(seq 1 600); do
		grep -q "^\[.*\] kv get" "$log" 2>/dev/null && break
		sleep 0.1
	done
	local win=$(( DUR > 2 ? DUR - 2 : 1 )) sc=() rec=()
	if [ $PERF = 1 ]; then
		perf stat -x, -e raw_syscalls:sys_enter -p "$pid" -o "$out.sc" -- sleep "$win" &
		sc=($!)
	fi
	if [ -n "$PERF_RECORD" ]; then
		perf record -q -g -p "$pid" -o "$PERF_RECORD" -- sleep "$win" >/dev/null 2>&1 &
		rec=($!)
	fi
	c0=$(cpu_ticks "$pid")
	disk_qd "$out" "$win"
	c1=$(cpu_ticks "$pid")
	for p in "${sc[@]}" "${rec[@]}"; do wait "$p" || true; done
	echo "$(( c1 - c0 )) $(getconf CLK_TCK) $(( DUR > 2 ? DUR - 2 : 1 ))" >"$out.cpu"
}
# sc_per_op SCFILE OPS_PER_S: system calls per operation over the sampled window (perf stat's
# count of raw_syscalls:sys_enter on the process; "?" without perf)
sc_per_op() { $PY -c "import sys
try:
    n = float(open(sys.argv[1]).read().strip().splitlines()[-1].split(',')[0])
    print('%.1f' % (n / (float(sys.argv[2]) * float(sys.argv[3]))))
except Exception: print('?')" "$1" "$2" "$(( DUR > 2 ? DUR - 2 : 1 ))"; }
# us_per_op CPUFILE OPS_PER_S: CPU microseconds per operation over the sampled window (at the
# run's mean rate, so approximate)
us_per_op() { $PY -c "import sys
try:
    t, hz, s = map(float, open(sys.argv[1]).read().split()); print('%.0f' % (t / hz / (float(sys.argv[2]) * s) * 1e6))
except Exception: print('?')" "$1" "$2"; }
# fio's own CPU (usr + sys) per read
fio_cpu() { jget "$TMP/$1.json" '"%.1f" % ((d["jobs"][0]["usr_cpu"] + d["jobs"][0]["sys_cpu"]) / 100 * d["jobs"][0]["job_runtime"] / 1e3 / max(1, d["jobs"][0]["read"]["total_ios"]) * 1e6)'; }
# fio_run NAME: the reference, with the disk's queue depth sampled meanwhile
fio_run() {
	echo "+ fio ${fio_args[*]}" >&2
	local pre=()
	[ $PERF = 1 ] && pre=(perf stat -x, -e raw_syscalls:sys_enter -o "$TMP/$1.sc" --)
	"${pre[@]}" fio "${fio_args[@]}" --output-format=json >"$TMP/$1.json" 2>"$TMP/$1.err" &
	local pid=$!
	sleep 1
	disk_qd "$TMP/$1.qd" "$(( DUR > 2 ? DUR - 2 : 1 ))"
	wait $pid || cat "$TMP/$1.err" >&2
}
# fio_sc NAME: fio's system calls per read (the whole process under perf stat: its setup too)
fio_sc() { $PY -c "import json,sys
try:
    d = json.load(open(sys.argv[1]))
    n = float(open(sys.argv[2]).read().strip().splitlines()[-1].split(',')[0])
    print('%.2f' % (n / max(1, d['jobs'][0]['read']['total_ios'])))
except Exception: print('?')" "$TMP/$1.json" "$TMP/$1.sc"; }
iops() { jget "$TMP/$1.json" '"%.0f" % d["jobs"][0]["read"]["iops"]'; }
mean2() { $PY -c "import sys
try: print('%.0f' % ((float(sys.argv[1]) + float(sys.argv[2])) / 2))
except Exception: print('?')" "$1" "$2"; }
if want nvme; then
	# every key of the fill must reach the NVMe tier: with the default async write-behind a
	# fill faster than the disk drops blocks (a cache), so this pool is strict (builds before
	# issue 9 have no such key and always waited for the disk)
	strict=""
	case "$("$OPENLAKED" --print-config 2>/dev/null || true)" in
	*$'\n'"writeback = "*) strict='writeback = "strict"' ;;
	esac
	start_pool "$TMP/nv" $NV_DRAM 4GiB "$strict"
	nvd=${PIDS[-1]}
	# fio's file is laid out first, then fio runs before and after ours (on this VM the same
	# fio moved between 10k and 66k IOPS within minutes; the ratio is against their mean)
	echo "+ fio --name=layout --filename=$TMP/nv/fio.dat --rw=write --bs=1M --size=1G --ioengine=psync --end_fsync=1" >&2
	fio --name=layout --filename="$TMP/nv/fio.dat" --rw=write --bs=1M --size=1G \
		--ioengine=psync --end_fsync=1 >/dev/null 2>&1 || true
	fio_args=(--name=r --filename="$TMP/nv/fio.dat" --rw=randread --bs=64k --iodepth=32
		--ioengine=io_uring --direct=1 --size=1G --runtime="$DUR" --time_based)
	fio_run fio1
	nvc=$((NV_CONC / NV_BATCH))
	nv=(kv --nodes "$POOL" --device tcp -w get -s 64KiB -b "$NV_BATCH" -c "$nvc" -n $NV_KEYS --warmup 2)
	echo "+ openlake bench ${nv[*]} -d $DUR --json" >&2
	"$CLI" bench "${nv[@]}" -d "$DUR" --json >"$TMP/nvget.json" 2>"$TMP/nvget.err" &
	nvpid=$!
	qd_during "$TMP/nvget.err" "$TMP/nvget.qd" "$nvd"
	wait $nvpid || true
	share=$(nv_share "$POOL")
	fio_run fio2
	rm -f "$TMP/nv/fio.dat"
	fio_iops=$(mean2 "$(iops fio1)" "$(iops fio2)")
	# gets/s: ops/s counts frames, each of NV_BATCH gets
	nvgets=$($PY -c "import sys
try: print('%.0f' % (float(sys.argv[1]) * int(sys.argv[2])))
except Exception: print('?')" "$(ops nvget)" "$NV_BATCH")
	nvus=$(us_per_op "$TMP/nvget.qd.cpu" "$nvgets")
	fio_us=$(mean2 "$(fio_cpu fio1)" "$(fio_cpu fio2)")
	line "KV NVMe tier GET 64KiB random, 32 outstanding (c=$nvc b=$NV_BATCH), DRAM $NV_DRAM, $NV_KEYS keys | ours $nvgets gets/s $(lat nvget) per frame (errors $(errs nvget)); $share; disk queue depth $(cat "$TMP/nvget.qd"), daemon CPU $nvus µs and $(sc_per_op "$TMP/nvget.qd.sc" "$nvgets") syscalls per get | fio randread 64k io_uring direct iodepth=32 $(iops fio1) / $(iops fio2) IOPS before / after ours, disk queue depth $(cat "$TMP/fio1.qd") / $(cat "$TMP/fio2.qd"), fio CPU $(fio_cpu fio1) / $(fio_cpu fio2) µs and $(fio_sc fio1) / $(fio_sc fio2) syscalls per read | ratio $(ratio "$nvgets" "$fio_iops") of their mean (target 0.8); CPU per get $(ratio "$nvus" "$fio_us")x fio's mean per read (target <= 3)"
fi

if [ $MARKDOWN = 1 ]; then
	echo
	echo "| figure | ours | reference | ratio |"
	echo "|---|---|---|---|"
	for l in "${LINES[@]}"; do
		IFS='|' read -r f o r x <<<"$l"
		echo "| ${f% } | ${o# } | ${r# } | ${x# ratio } |"
	done
fi
