#!/usr/bin/env bash
# bench/node_plane.sh [--mib N] [--rounds R] - node plane shard throughput on loopback.
#
# Starts one openlaked with [cluster] secret (the plane on rpc_addr, drives on tmpfs so the
# fsync that ends a shard write costs nothing and the figure is the plane's), then streams an
# N MiB shard to it and back with the plane's C client (build/src/node/node_cli: HMAC-SHA256
# per 1 MiB frame, credit window 8 MiB) R times. Reference, in the same run: the same bytes
# over a plain loopback TCP stream (iperf3 when installed, else a Python sender/receiver with
# 1 MiB buffers). One line per figure, best of R; no pass/fail.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=256 rounds=3
while [ $# -gt 0 ]; do
	case "$1" in
	--mib) mib=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	*) echo "usage: $0 [--mib N] [--rounds R]" >&2; exit 2 ;;
	esac
done
build=${OPENLAKE_BUILD:-build}
cli=$build/src/node/node_cli
[ -x "$cli" ] && [ -x "$build/cmd/openlaked/openlaked" ] || { echo "build first: ninja -C $build" >&2; exit 2; }
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
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work shares the cores)"
printf 'node plane shard write %d MiB: %.0f MiB/s   reference %s: %.0f MiB/s   ratio %.2f\n' \
	"$mib" "$best_w" "$refname" "$ref" "$(echo "$best_w / $ref" | bc -l)"
printf 'node plane shard read  %d MiB: %.0f MiB/s   reference %s: %.0f MiB/s   ratio %.2f\n' \
	"$mib" "$best_r" "$refname" "$ref" "$(echo "$best_r / $ref" | bc -l)"
