#!/bin/bash
# bench/kv_ucx.sh - the KV pool over UCX (transport = "rdma") beside its TCP transport, same
# daemon, same run. Not a pass/fail test: one line per figure and the ratio UCX / TCP.
#
#   GET and PUT of 256 KiB and 2 MiB blocks through libopenlake (openlake bench kv), CONC
#   connections, alternated per figure: --device tcp, then --device ucx with UCX_TLS=tcp
#   (UCX's own TCP transport, what a host without an RDMA NIC has), then --device ucx with
#   UCX_TLS=tcp,sm (shared memory between the processes of this host for the data, tcp for
#   the connection). No RDMA NIC here: the verbs, DC and GPUDirect figures are not measured.
#
# Usage: bench/kv_ucx.sh [--duration S] [--conc N] [--build DIR] [--markdown]
#   --duration S   seconds per figure (default 5)
#   --conc N       connections, one thread each (default 4)
#   --build DIR    build directory (default $OPENLAKE_BUILD or build); must be built with UCX
#   --markdown     also print a table for bench/RESULTS.md
# Everything listens on 127.0.0.1 ephemeral ports and is stopped at the end.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
DUR=5
CONC=4
MARKDOWN=0
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift ;;
	--conc) CONC=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--markdown) MARKDOWN=1 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "kv_ucx.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
PY=/usr/bin/python3
for b in "$OPENLAKED" "$CLI"; do
	[ -x "$b" ] || { echo "kv_ucx.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-kvucx.XXXXXX")
PID=
cleanup() {
	[ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

# two free consecutive ports: the KV port and its UCX listener (KV port + 1)
KVP=$($PY -c '
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    try:
        b = socket.socket(); b.bind(("127.0.0.1", p + 1)); b.close(); a.close(); print(p); break
    except OSError:
        a.close()')
mkdir -p "$TMP/d0" "$TMP/kv"
cat >"$TMP/openlake.toml" <<EOF
self_id = 0
mode = "kv"
transport = "rdma"
data_dirs = ["$TMP/d0"]
kv_addr = "127.0.0.1:$KVP"
console_addr = "127.0.0.1:0"
set_drive_count = 1
default_parity_count = 0
log_level = "warn"

[rdma]
backend = "dct"

[kv]
dram_bytes = "1GiB"
spill_dir = "$TMP/kv"
EOF
# the daemon: UCX_TLS unset, UCX offers every transport it has; each client picks with its own
env -u UCX_TLS "$OPENLAKED" --config "$TMP/openlake.toml" >"$TMP/log" 2>&1 &
PID=$!
up=0
for _ in $(seq 1 300); do # the UCX listener is a TCP socket (UCX's sockaddr connection manager)
	(exec 3<>"/dev/tcp/127.0.0.1/$((KVP + 1))") 2>/dev/null && { up=1; break; }
	kill -0 "$PID" 2>/dev/null || { cat "$TMP/log" >&2; exit 1; }
	sleep 0.1
done
[ $up = 1 ] || { echo "kv_ucx.sh: no UCX listener (built without UCX?)" >&2; cat "$TMP/log" >&2; exit 1; }
sleep 2 # the DRAM tier's background prefault (bench/kv_bench.sh waits for it; 1 GiB is quick)

echo "# openlake bench kv, $CONC connections, ${DUR}s per figure; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); UCX $(pkg-config --modversion ucx 2>/dev/null || echo ?)"
gbps() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.3f %.0f %.0f' % (d['gb_per_s'], d['latency_us']['p50'], d['latency_us']['p99']))" "$1" 2>/dev/null || echo "? ? ?"; }
run() { # run OP SIZE DEVICE UCX_TLS -> "GB/s p50 p99"
	local out=$TMP/r.json
	if env ${4:+UCX_TLS=$4} "$CLI" bench kv --nodes "127.0.0.1:$KVP" --device "$3" -w "$1" -s "$2" \
		-c "$CONC" -d "$DUR" --json -q >"$out" 2>"$TMP/err"; then
		gbps "$out"
	else
		echo "? ? ?"; sed 's/^/# /' "$TMP/err" >&2
	fi
}
ratio() { $PY -c "import sys
try: print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))
except Exception: print('n/a')" "$1" "$2"; }

ROWS=()
for op in get put; do
	for size in 256KiB 2MiB; do
		read -r t50 tp50 tp99 <<<"$(run $op $size tcp '')"
		read -r u50 up50 up99 <<<"$(run $op $size ucx tcp)"
		read -r s50 sp50 sp99 <<<"$(run $op $size ucx tcp,sm)"
		echo "$op $size tcp ${t50} GB/s p50/p99 ${tp50}/${tp99} us | ucx(tcp) ${u50} GB/s ${up50}/${up99} us ratio $(ratio "$u50" "$t50") | ucx(tcp,sm) ${s50} GB/s ${sp50}/${sp99} us ratio $(ratio "$s50" "$t50")"
		ROWS+=("| ${op^^} $size | $t50 ($tp50/$tp99) | $u50 ($up50/$up99) | $(ratio "$u50" "$t50") | $s50 ($sp50/$sp99) | $(ratio "$s50" "$t50") |")
	done
done
if [ "$MARKDOWN" = 1 ]; then
	echo
	echo "| figure | TCP GB/s (p50/p99 us) | UCX, UCX_TLS=tcp | ratio | UCX, UCX_TLS=tcp,sm | ratio |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
fi
grep -E "ERROR|WARN" "$TMP/log" | grep -v "dev_name\|beyond loopback" | sed 's/^/# daemon: /' || true
