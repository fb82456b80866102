#!/usr/bin/env bash
# bench/node_plane.sh [--mib N] [--rounds R] [--stream-mib S] - node plane throughput on
# loopback.
#
# First the plane itself, memory to memory (build/src/node/node_stream_bench, bench/node_stream.c):
# one connection streams S MiB (default 2048) as PING frames with a 1 MiB payload (the server
# reads, authenticates and grants back every byte, no disk), next to, in the same run and in
# alternating rounds: the same bytes over a plain loopback TCP stream between two threads
# (node_stream_bench --mode tcp), the same stream with the frames encrypted (--mode plane-enc,
# [cluster] plane_encrypt = true) and `openlake bench tcp --op put --size 1MiB
# --concurrency 1` (send a 1 MiB block, read an 8-byte ack). MiB/s and CPU seconds (both ends,
# user + sys, of the process: wait4) per GiB, median of R rounds, and the ratios. With UCX in
# the build, the same stream with the plane on UCX (node_stream_bench --mode ucx,
# plane_transport = "ucx") in the same rounds, with UCX_TLS=tcp on lo (UCX_NET_DEVICES=lo:
# the same loopback as the references). Not shm: UCX streams need a point-to-point
# transport (tcp, rc, ud), and with UCX_TLS=shm,tcp UCX still picks tcp for them.
#
# Then shards:
# Starts one openlaked with [cluster] secret (the plane on rpc_addr, drives on tmpfs so the
# fsync that ends a shard write costs nothing and the figure is the plane's), then streams an
# N MiB shard to it and back with the plane's C client (build/src/node/node_cli: HMAC-SHA256
# per 1 MiB frame, credit window 8 MiB) R times. Reference, in the same run: the same bytes
# over a plain loopback TCP stream (iperf3 when installed, else a Python sender/receiver with
# 1 MiB buffers). One line per figure, best of R; no pass/fail.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=256 rounds=3 smib=2048
while [ $# -gt 0 ]; do
	case "$1" in
	--mib) mib=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--stream-mib) smib=$2; shift 2 ;;
	*) echo "usage: $0 [--mib N] [--rounds R] [--stream-mib S]" >&2; exit 2 ;;
	esac
done
build=${OPENLAKE_BUILD:-build}
cli=$build/src/node/node_cli
[ -x "$cli" ] && [ -x "$build/cmd/openlaked/openlaked" ] && [ -x "$build/src/node/node_stream_bench" ] ||
	{ echo "build first: ninja -C $build" >&2; exit 2; }
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work shares the cores)"
python3 - "$build" "$smib" "$rounds" <<'EOF'
import json, os, subprocess, sys
build, smib, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def run(argv, env=None):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, **(env or {})))
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.stdout.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"{argv[0]} failed ({p.returncode})")
    return out, ru.ru_utime + ru.ru_stime
def stream(mode, tls=None):
    out, cpu = run([f"{build}/src/node/node_stream_bench", "--mode", mode, "--mib", str(smib)],
                   {"UCX_TLS": tls, "UCX_NET_DEVICES": "lo"} if tls else None)
    secs = float(out.split(" s ")[0].split()[-1])
    return smib / secs, cpu / (smib / 1024)
def bench_tcp():
    out, cpu = run([f"{build}/cmd/openlake/openlake", "bench", "tcp", "--op", "put", "--size",
                    "1MiB", "--concurrency", "1", "--duration", "3s", "--json", "--quiet"])
    j = json.loads(out)
    mib = j["bytes"] / 2**20
    return mib / j["elapsed_s"], cpu / (mib / 1024)
def try_stream(mode, tls):
    try:
        return stream(mode, tls)
    except SystemExit:
        return None
# the plane on UCX: only when this build has it (the bench refuses with 1 otherwise)
wires = ["tcp"] if try_stream("ucx", "tcp") else []
figs = {"plane": [], "plane-enc": [], "tcp": [], "bench": [], **{"ucx " + w: [] for w in wires}}
for _ in range(rounds):
    figs["plane"].append(stream("plane"))
    figs["plane-enc"].append(stream("plane-enc"))
    for w in wires:
        f = try_stream("ucx", w)
        if f:
            figs["ucx " + w].append(f)
    figs["tcp"].append(stream("tcp"))
    figs["bench"].append(bench_tcp())
med = lambda v: sorted(v)[len(v) // 2]
m = {k: (med([a for a, _ in v]), med([c for _, c in v])) for k, v in figs.items() if v}
print(f"node plane stream {smib} MiB, 1 MiB frames, one connection (median of {rounds}): "
      f"{m['plane'][0]:.0f} MiB/s  {m['plane'][1]:.2f} CPU s/GiB")
print(f"node plane stream, frames encrypted (plane_encrypt = true), same stream: "
      f"{m['plane-enc'][0]:.0f} MiB/s  {m['plane-enc'][1]:.2f} CPU s/GiB  ratio to the "
      f"authenticated plane {m['plane-enc'][0] / m['plane'][0]:.2f}, to plain TCP "
      f"{m['plane-enc'][0] / m['tcp'][0]:.2f}")
for w in wires:
    k = "ucx " + w
    if k in m:
        print(f"node plane on UCX (UCX_TLS={w}, lo), same stream (median of {len(figs[k])}): "
              f"{m[k][0]:.0f} MiB/s  {m[k][1]:.2f} CPU s/GiB  ratio to the TCP plane "
              f"{m[k][0] / m['plane'][0]:.2f}, to plain TCP {m[k][0] / m['tcp'][0]:.2f}")
    else:
        print(f"node plane on UCX (UCX_TLS={w}): failed on this host")
if wires:
    print("  (no shm row: UCX streams need a point-to-point transport; UCX_TLS=shm,tcp runs "
          "them on tcp)")
if not wires:
    print("node plane on UCX: not in this build (no libucx-dev)")
print(f"  reference plain loopback TCP stream (node_stream_bench --mode tcp): "
      f"{m['tcp'][0]:.0f} MiB/s  {m['tcp'][1]:.2f} CPU s/GiB  ratio {m['plane'][0] / m['tcp'][0]:.2f}")
print(f"  reference openlake bench tcp --op put --size 1MiB --concurrency 1: "
      f"{m['bench'][0]:.0f} MiB/s  {m['bench'][1]:.2f} CPU s/GiB  ratio {m['plane'][0] / m['bench'][0]:.2f}")
EOF
work=$(mktemp -d /dev/shm/ol-plane-bench-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rpc=$(port) s3=$(port)
secret=bench-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
cat >"$work/openlake.toml" <<EOF
data_dirs = ["$work/d0", "$work/d1"]
s3_addr = "127.0.0.1:$s3"
rpc_addr = "127.0.0.1:$rpc"
kv_addr = ""
set_drive_count = 2
default_parity_count = 1
[cluster]
secret = "$secret"
EOF
"$build/cmd/openlaked/openlaked" --config "$work/openlake.toml" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 200); do "$cli" "127.0.0.1:$rpc" "$secret" 9 1000 ping >/dev/null 2>&1 && break; sleep 0.05; done
head -c $((mib << 20)) /dev/urandom >"$work/src"
now() { date +%s.%N; }
best_w=0 best_r=0
for ((i = 0; i < rounds; i++)); do
	t0=$(now)
	"$cli" "127.0.0.1:$rpc" "$secret" 9 600000 put 0 bench/shard "$work/src" >/dev/null
	t1=$(now)
	"$cli" "127.0.0.1:$rpc" "$secret" 9 600000 get 0 bench/shard "$work/back" >/dev/null
	t2=$(now)
	cmp -s "$work/src" "$work/back" || { echo "read back differs" >&2; exit 1; }
	w=$(echo "$mib / ($t1 - $t0)" | bc -l) r=$(echo "$mib / ($t2 - $t1)" | bc -l)
	best_w=$(echo "if ($w > $best_w) $w else $best_w" | bc -l)
	best_r=$(echo "if ($r > $best_r) $r else $best_r" | bc -l)
	rm -f "$work/back"
done
if command -v iperf3 >/dev/null; then
	ip=$(port)
	iperf3 -s -1 -p "$ip" >/dev/null 2>&1 &
	sleep 0.5
	ref=$(iperf3 -c 127.0.0.1 -p "$ip" -n "${mib}M" -l 1M -J | python3 -c \
		'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8/2**20)')
	refname="iperf3 loopback stream"
else
	ref=$(python3 - "$mib" "$rounds" <<'EOF'
import socket, sys, threading, time
mib, rounds = int(sys.argv[1]), int(sys.argv[2])
buf = bytearray(1 << 20)
best = 0.0
for _ in range(rounds):
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    def sink():
        c, _ = srv.accept()
        got, view = 0, memoryview(bytearray(1 << 20))
        while got < mib << 20:
            n = c.recv_into(view)
            if not n:
                break
            got += n
        c.sendall(b"k")
        c.close()
    t = threading.Thread(target=sink)
    t.start()
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    for _ in range(mib):
        s.sendall(buf)
    s.recv(1)
    best = max(best, mib / (time.monotonic() - t0))
    s.close()
    t.join()
    srv.close()
print(best)
EOF
)
	refname="plain loopback TCP stream (Python, 1 MiB buffers)"
fi
printf 'node plane shard write %d MiB: %.0f MiB/s   reference %s: %.0f MiB/s   ratio %.2f\n' \
	"$mib" "$best_w" "$refname" "$ref" "$(echo "$best_w / $ref" | bc -l)"
printf 'node plane shard read  %d MiB: %.0f MiB/s   reference %s: %.0f MiB/s   ratio %.2f\n' \
	"$mib" "$best_r" "$refname" "$ref" "$(echo "$best_r / $ref" | bc -l)"
