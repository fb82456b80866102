#!/usr/bin/env bash
# KV gets through a 4-node cluster vs straight to one node (issue 10).
#
#   bench/kv_cluster_bench.sh [--rounds R] [--size 256KiB] [--conc C] [--duration 5s]
#
# Starts scripts/cluster.sh up 4 (one etcd) and, beside it, one standalone openlaked (mode
# kv, no etcd, the DRAM of the four nodes together: 256 MiB), then alternates, R rounds:
#   cluster: `openlake bench kv --nodes N0`: the client takes the pool's view from its seed
#            (VIEW, epoch), hashes every key to its owner (weighted rendezvous of node ids),
#            one connection per node per thread: what a vLLM worker does against a pool;
#   direct:  the same bench against the standalone node, which holds every key: the
#            reference, the client's path with no cluster in it.
# The keys fit in DRAM either way (128 MiB of them). Median GB/s of each and the ratio
# cluster/direct, with the machine's load. On one machine the four nodes share the cores the
# standalone node has to itself. Stops everything it started on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 size=256KiB conc=8 duration=5s
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--conc) conc=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "kv_cluster_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
BUILD=${OPENLAKE_BUILD:-build}
CLI=$BUILD/cmd/openlake/openlake
dir=$(mktemp -d /tmp/openlake-kvcb-XXXXXX)
solo=""
cleanup() {
	[ -n "$solo" ] && kill "$solo" 2>/dev/null && wait "$solo" 2>/dev/null
	scripts/cluster.sh down "$dir" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
echo "starting 4 nodes and etcd under $dir" >&2
scripts/cluster.sh up 4 "$dir" --etcd 1 >"$dir/nodes"
seed=$(sed -n 's/.* kv=\([^ ]*\).*/\1/p' "$dir/nodes" | head -1)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$dir/solo"
cat >"$dir/solo/openlake.toml" <<TOML
mode = "kv"
data_dirs = "$dir/solo/data"
rpc_addr = "127.0.0.1:$port"
console_addr = ""
set_drive_count = 1
default_parity_count = 0
[kv]
dram_bytes = "256MiB"
spill_dir = "$dir/solo/kv"
spill_bytes = "1GiB"
TOML
"$BUILD/cmd/openlaked/openlaked" --config "$dir/solo/openlake.toml" >"$dir/solo/log" 2>&1 &
solo=$!
for _ in $(seq 1 300); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.1
done

bytes=$(/usr/bin/python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)([KMG]i?B)?", sys.argv[1])
print(int(m.group(1)) * {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)])' "$size")
keys=$(((128 << 20) / bytes))
[ "$keys" -ge 1 ] || keys=1

gbps() { # gbps NODE: one bench run's GB/s (a run with errors fails the bench)
	"$CLI" bench kv --nodes "$1" -w get -s "$size" -c "$conc" -n "$keys" -d "$duration" \
		--device tcp --json -q | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
if r["errors"]:
    sys.exit("bench kv: %d errors: %s" % (r["errors"], r["error_codes"]))
print("%.4f" % r["gb_per_s"])'
}

c=() d=()
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then
		c+=("$(gbps "$seed")")
		d+=("$(gbps "127.0.0.1:$port")")
	else
		d+=("$(gbps "127.0.0.1:$port")")
		c+=("$(gbps "$seed")")
	fi
	echo "round $r: cluster ${c[-1]} GB/s, direct ${d[-1]} GB/s" >&2
done
/usr/bin/python3 - "$size" "$conc" "$keys" "${c[*]}" "${d[*]}" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
size, conc, keys, c, d, load = sys.argv[1:]
c = [float(x) for x in c.split()]
d = [float(x) for x in d.split()]
mc, md = statistics.median(c), statistics.median(d)
print(f"# KV get {size} over TCP, {conc} threads, {keys} keys, median of {len(c)} rounds; "
      f"load average {load}")
print(f"KV get through the cluster (4 nodes, client-side placement): {mc:.3f} GB/s   "
      f"reference straight to one node: {md:.3f} GB/s   ratio {mc / md:.2f}")
PY
