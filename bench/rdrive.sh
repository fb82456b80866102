#!/bin/bash
# bench/rdrive.sh - a 64 MiB PUT and GET through an erasure set over remote drives (four
# openlaked node planes on loopback, store/rdrive.c) against the same on a local set of four
# temp dirs, alternating (local, remote, remote, local, ...) in the same run. Not a pass/fail
# test: one line per round, then the medians and their ratio (remote / local).
# Both sets: N=4 P=1, 1 MiB blocks, fsync on; the client is build/src/store/rset_cli.
#
# With --view: instead, one PUT of M MiB, then GETs of it through the writer's store and
# through a read-only view opened beside it (ol_store_set_opts.readonly) over the same
# planes, alternating, N rounds each (rset_cli ... -- view): their medians and the ratio.
#
# Usage: bench/rdrive.sh [--rounds N] [--mib M] [--build DIR] [--view]
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
ROUNDS=4
MIB=64
VIEW=0
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift ;;
	--mib) MIB=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--view) VIEW=1 ;;
	-h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
	*) echo "rdrive.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
RSET=$BUILD/src/store/rset_cli
SECRET=rdrive-bench-secret
TMP=$(mktemp -d "${TMPDIR:-/tmp}/openlake-rdrive.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

PEERS=()
for i in 0 1 2 3; do
	mkdir -p "$TMP/n$i"
	RPC=$(port)
	cat >"$TMP/n$i/cfg.toml" <<CFG
data_dirs = ["$TMP/n$i/own", "$TMP/n$i/served"]
s3_addr = "127.0.0.1:$(port)"
console_addr = "127.0.0.1:$(port)"
rpc_addr = "127.0.0.1:$RPC"
kv_addr = ""
set_drive_count = 1
default_parity_count = 0
[cluster]
secret = "$SECRET"
plane_only_drives = 1
${PLANE_EXTRA:-}
CFG
	"$OPENLAKED" --config "$TMP/n$i/cfg.toml" >"$TMP/n$i/log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 200); do
		(exec 3<>/dev/tcp/127.0.0.1/$RPC) 2>/dev/null && break
		sleep 0.1
	done
	PEERS+=("127.0.0.1:$RPC#1")
done

daemons_cpu() { # CPU seconds the four daemons used so far
	local t=0
	for p in "${PIDS[@]}"; do t=$((t + $(cut -d' ' -f14,15 /proc/$p/stat | tr ' ' '+'))); done
	echo "$t $(getconf CLK_TCK)" | awk '{printf "%.2f", $1 / $2}'
}

run() { # kind -> "put_mibs X get_mibs Y put_cpu_s A get_cpu_s B daemons_cpu_s C"
	if [ "$1" = local ]; then
		rm -rf "$TMP/local"
		echo "$("$RSET" x 1 1 local "$TMP/local/d0" "$TMP/local/d1" "$TMP/local/d2" \
			"$TMP/local/d3" -- bench "$MIB") daemons_cpu_s 0"
	else
		local c0 c1 out
		c0=$(daemons_cpu)
		out=$("$RSET" "$SECRET" 1 1 "${PEERS[@]}" -- bench "$MIB")
		c1=$(daemons_cpu)
		echo "$out daemons_cpu_s $(echo "$c0 $c1" | awk '{printf "%.2f", $2 - $1}')"
	fi
}

if [ "$VIEW" = 1 ]; then
	echo "# $MIB MiB GET through the writer and through a read-only view, N=4 P=1;" \
		"$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
	"$RSET" "$SECRET" 1 1 "${PEERS[@]}" -- view "$MIB" "$ROUNDS"
	exit
fi
echo "# $MIB MiB PUT and GET, N=4 P=1, fsync on; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
RES=()
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order="local remote"; else order="remote local"; fi
	for kind in $order; do
		line=$(run "$kind")
		echo "round $r $kind $line"
		RES+=("$kind $line")
	done
done
printf '%s\n' "${RES[@]}" | /usr/bin/python3 -c '
import statistics, sys
v = {"local": ([], [], []), "remote": ([], [], [])}
for line in sys.stdin:
    f = line.split()
    kind, put, get, cpu = f[0], float(f[2]), float(f[4]), float(f[6]) + float(f[8]) + float(f[10])
    v[kind][0].append(put); v[kind][1].append(get); v[kind][2].append(cpu)
lp, lg, lc = map(statistics.median, v["local"]); rp, rg, rc = map(statistics.median, v["remote"])
print(f"median PUT MiB/s: local {lp:.1f} remote {rp:.1f} ratio {rp / lp:.2f}")
print(f"median GET MiB/s: local {lg:.1f} remote {rg:.1f} ratio {rg / lg:.2f}")
print(f"median CPU s (client + daemons, PUT + GET): local {lc:.2f} remote {rc:.2f}")
'
