#!/usr/bin/env bash
# KV gets through a 4-node cluster vs straight to one node (issue 10).
#
#   bench/kv_cluster_bench.sh [--rounds R] [--size 256KiB] [--conc C] [--duration 5s]
#
# Starts scripts/cluster.sh up 4 (one etcd) and, beside it, one standalone openlaked (mode
# kv, no etcd, the DRAM of the four nodes together: 256 MiB) and four more standalone ones,
# then alternates, R rounds:
#   cluster: `openlake bench kv --nodes N0`: the client takes the pool's view from its seed
#            (VIEW, epoch), hashes every key to its owner (weighted rendezvous of node ids),
#            one connection per node per thread: what a vLLM worker does against a pool;
#   loose:   the same bench against four standalone kv-mode nodes (64 MiB of DRAM each, as
#            the cluster's) given as static seeds: no etcd, no VIEW epoch, the client hashes
#            keys over its seeds. Four daemons on the same cores with no cluster: what the
#            cluster costs beyond the nodes' being four;
#   direct:  the same bench against the standalone node, which holds every key: the
#            reference, the client's path with no cluster in it.
# The keys fit in DRAM either way (128 MiB of them). Median GB/s of each, the ratios
# cluster/direct and cluster/loose of those, the median of the rounds' own ratios, and the
# machine's load. On one machine the four nodes share the cores the
# standalone node has to itself, so beside GB/s it prints, per side, where the CPU went (from
# /proc and the client's rusage, less sensitive to other load than GB/s): the daemons' CPU
# seconds per GB served (the four nodes and etcd together vs the one node), the client's,
# and the daemons' context switches per get.
# Stops everything it started on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 size=256KiB conc=8 duration=5s
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--conc) conc=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "kv_cluster_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
BUILD=${OPENLAKE_BUILD:-build}
CLI=$BUILD/cmd/openlake/openlake
dir=$(mktemp -d /tmp/openlake-kvcb-XXXXXX)
solos=()
cleanup() {
	for p in "${solos[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	scripts/cluster.sh down "$dir" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
echo "starting 4 nodes and etcd under $dir" >&2
scripts/cluster.sh up 4 "$dir" --etcd 1 >"$dir/nodes"
seed=$(sed -n 's/.* kv=\([^ ]*\).*/\1/p' "$dir/nodes" | head -1)
cat "$dir"/pids/*.pid >"$dir/cpids"
mapfile -t cpids <"$dir/cpids" # the four nodes and etcd

# start_kv NAME DRAM: a standalone kv-mode openlaked under $dir/NAME; sets $port, adds its pid
# to solos. In its own session, as scripts/cluster.sh starts the cluster's nodes (and a service
# manager any daemon): with the kernel's autogroup scheduling a daemon left in the bench's
# session would share one scheduling group with the client, which the cluster's nodes do not.
start_kv() {
	port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	mkdir -p "$dir/$1"
	cat >"$dir/$1/openlake.toml" <<TOML
mode = "kv"
data_dirs = "$dir/$1/data"
rpc_addr = "127.0.0.1:$port"
console_addr = ""
set_drive_count = 1
default_parity_count = 0
[kv]
dram_bytes = "$2"
spill_dir = "$dir/$1/kv"
spill_bytes = "1GiB"
TOML
	setsid "$BUILD/cmd/openlaked/openlaked" --config "$dir/$1/openlake.toml" >"$dir/$1/log" 2>&1 </dev/null &
	solos+=($!)
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "kv_cluster_bench.sh: $1 did not listen on $port" >&2
	exit 1
}
start_kv solo 256MiB
solo=${solos[0]} direct=127.0.0.1:$port
loose="" # four kv nodes with no cluster (no etcd, no VIEW epoch): the client's static seeds
for i in 0 1 2 3; do
	start_kv "loose-$i" 64MiB
	loose=${loose:+$loose,}127.0.0.1:$port
done
lpids=("${solos[@]:1}")

bytes=$(/usr/bin/python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)([KMG]i?B)?", sys.argv[1])
print(int(m.group(1)) * {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)])' "$size")
keys=$(((128 << 20) / bytes))
[ "$keys" -ge 1 ] || keys=1

# measure NODE PID...: one bench run against NODE, printed as "GB/s daemon-CPU-s/GB
# client-CPU-s/GB daemon-switches/get" with PID... the daemons serving it (a run with errors
# fails the bench). The daemons' figures are /proc deltas over the whole run (its prefill of
# keys already stored included: those are EXISTS answers, a few hundred small requests).
measure() {
	/usr/bin/python3 - "$@" -- "$CLI" bench kv --nodes "$1" -w get -s "$size" -c "$conc" \
		-n "$keys" -d "$duration" --device tcp --json -q <<'PY'
import glob, json, resource, subprocess, sys
args = sys.argv[1:]
pids, cmd = args[1:args.index("--")], args[args.index("--") + 1:]
tick = 100.0  # USER_HZ

def daemons():
    cpu = cs = 0
    for p in pids:
        with open(f"/proc/{p}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        cpu += int(st[11]) + int(st[12])  # utime, stime
        for t in glob.glob(f"/proc/{p}/task/*/status"):
            try:
                with open(t) as f:
                    cs += sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
    return cpu / tick, cs

u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
d0 = daemons()
out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
d1 = daemons()
u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
r = json.loads(out)
if r["errors"]:
    sys.exit("bench kv: %d errors: %s" % (r["errors"], r["error_codes"]))
gb = r["bytes"] / 1e9
client = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
gets = r["ops"] + r["prefill"]["ops"]
print("%.4f %.4f %.4f %.3f" % (r["gb_per_s"], (d1[0] - d0[0]) / gb, client / gb,
                               (d1[1] - d0[1]) / gets))
PY
}

c=() d=() l=()
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then
		c+=("$(measure "$seed" "${cpids[@]}")")
		l+=("$(measure "$loose" "${lpids[@]}")")
		d+=("$(measure "$direct" "$solo")")
	else
		d+=("$(measure "$direct" "$solo")")
		l+=("$(measure "$loose" "${lpids[@]}")")
		c+=("$(measure "$seed" "${cpids[@]}")")
	fi
	echo "round $r: cluster ${c[-1]%% *} GB/s, four nodes without a cluster ${l[-1]%% *} GB/s," \
		"direct ${d[-1]%% *} GB/s" >&2
done
/usr/bin/python3 - "$size" "$conc" "$keys" "$(cut -d' ' -f1-3 /proc/loadavg)" "${c[@]}" -- "${d[@]}" -- "${l[@]}" <<'PY'
import statistics, sys
size, conc, keys, load = sys.argv[1:5]
groups = [[]]
for a in sys.argv[5:]:  # the rounds of each side, the sides separated by --
    if a == "--":
        groups.append([])
    else:
        groups[-1].append([float(x) for x in a.split()])
c, d, l = groups
mc = [statistics.median(v[i] for v in c) for i in range(4)]
md = [statistics.median(v[i] for v in d) for i in range(4)]
ml = [statistics.median(v[i] for v in l) for i in range(4)]
print(f"# KV get {size} over TCP, {conc} threads, {keys} keys, median of {len(c)} rounds; "
      f"load average {load}")
print(f"KV get through the cluster (4 nodes, client-side placement): {mc[0]:.3f} GB/s   "
      f"reference straight to one node: {md[0]:.3f} GB/s   ratio {mc[0] / md[0]:.2f}")
print(f"KV get through the cluster (4 nodes, client-side placement): {mc[0]:.3f} GB/s   "
      f"reference, the same four nodes' shape with no cluster (static seeds): {ml[0]:.3f} GB/s   "
      f"ratio {mc[0] / ml[0]:.2f}")
# the rounds alternate the sides, so a load that drifts weighs on both: the median of the
# rounds' own ratios is the steadier figure on a busy machine
rd = statistics.median(a[0] / b[0] for a, b in zip(c, d))
rl = statistics.median(a[0] / b[0] for a, b in zip(c, l))
print(f"  median of the rounds' ratios: cluster / one node {rd:.2f}   "
      f"cluster / four nodes without a cluster {rl:.2f}")
for name, i, unit in (("daemons' CPU per GB", 1, " s"), ("client's CPU per GB", 2, " s"),
                      ("daemons' context switches per get", 3, "")):
    print(f"  {name}: cluster {mc[i]:.3f}{unit}   four nodes, no cluster {ml[i]:.3f}{unit}   "
          f"one node {md[i]:.3f}{unit}")
PY
