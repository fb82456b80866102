# bench/lib.sh - sourced by the bench scripts (after they set PY): fresh loopback ports,
# waiting for a port to listen, the config and start of a KV-only or a small S3 openlaked,
# and ABBA rounds of two figures.

# free_port: a TCP port on 127.0.0.1 nothing listens on now
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT: 0 once something accepts on 127.0.0.1:PORT, 1 after 10 s
wait_port() {
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# kv_pool_config DIR KV_PORT RPC_PORT DRAM SPILL [KVLINE]: DIR/openlake.toml for an openlaked
# with mode = "kv" (one drive, DIR/d0; NVMe tier in DIR/kv), KVLINE added to [kv]
kv_pool_config() {
	local dir=$1
	mkdir -p "$dir/d0" "$dir/kv"
	cat >"$dir/openlake.toml" <<EOT
self_id = 0
mode = "kv"
data_dirs = ["$dir/d0"]
rpc_addr = "127.0.0.1:$3"
kv_addr = "127.0.0.1:$2"
set_drive_count = 1
default_parity_count = 0
log_level = "warn"

[[nodes]]
id = 0
rpc_addr = "127.0.0.1:$3"
disk_count = 1

[kv]
dram_bytes = "$4"
spill_dir = "$dir/kv"
spill_bytes = "$5"
${6:-}
EOT
}

# start_kv_pool OPENLAKED DIR DRAM SPILL [KVLINE]: a KV-only openlaked (kv_pool_config) on
# fresh ports, its log in DIR/log; sets POOL_PID and POOL_PORT once it listens; if it does not
# within 10 s, stops it, shows its log and exits 1
start_kv_pool() {
	POOL_PORT=$(free_port)
	kv_pool_config "$2" "$POOL_PORT" "$(free_port)" "$3" "$4" "${5:-}"
	"$1" --config "$2/openlake.toml" >"$2/log" 2>&1 &
	POOL_PID=$!
	wait_port "$POOL_PORT" && return 0
	echo "$(basename "$0"): openlaked (KV pool) did not start:" >&2
	cat "$2/log" >&2
	kill "$POOL_PID" 2>/dev/null
	exit 1
}

# start_s3_alice OPENLAKED DIR: a single-node S3 openlaked on 4 drives under DIR (P=1, no
# console, no KV) with the admin key and user alice's (alicekey / alicesecret), on a fresh
# port, its log in DIR/log; sets DPID and EP once it listens, else shows the log and exits 1
start_s3_alice() {
	local port
	port=$(free_port)
	cat >"$2/cfg.toml" <<EOT
data_dirs = ["$2/d0", "$2/d1", "$2/d2", "$2/d3"]
s3_addr = "127.0.0.1:$port"
console_addr = ""
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
EOT
	"$1" --config "$2/cfg.toml" >"$2/log" 2>&1 &
	DPID=$!
	EP=http://127.0.0.1:$port
	wait_port "$port" && return 0
	echo "$(basename "$0"): openlaked did not start:" >&2
	cat "$2/log" >&2
	exit 1
}

# start_s3 OPENLAKED DIR FSYNC: a single-node S3 openlaked on 4 drives under DIR (3+1, admin
# key only, no console, no KV), [storage] fsync = FSYNC, on fresh ports, its log in DIR/log;
# sets DPID, S3_PORT and EP once it listens, else shows the log and exits 1
start_s3() {
	S3_PORT=$(free_port)
	local rpc
	rpc=$(free_port)
	cat >"$2/openlake.toml" <<EOT
self_id = 0
data_dirs = ["$2/d0", "$2/d1", "$2/d2", "$2/d3"]
s3_addr = "127.0.0.1:$S3_PORT"
rpc_addr = "127.0.0.1:$rpc"
console_addr = ""
kv_addr = ""
set_drive_count = 4
default_parity_count = 1
log_level = "warn"

[[credentials]]
access_key = "openlakeadmin"
secret_key = "openlakeadmin"

[[nodes]]
id = 0
rpc_addr = "127.0.0.1:$rpc"
disk_count = 4

[storage]
fsync = $3
EOT
	"$1" --config "$2/openlake.toml" >"$2/log" 2>&1 &
	DPID=$!
	EP=http://127.0.0.1:$S3_PORT
	wait_port "$S3_PORT" && return 0
	echo "$(basename "$0"): openlaked did not start:" >&2
	cat "$2/log" >&2
	exit 1
}

# abba ROUNDS WHAT LABEL_A LABEL_B: ROUNDS rounds of the caller's functions side_a and side_b
# (each prints one figure, ops/s), in ABBA order so that a load drifting during the run weighs
# on both alike; a line per round, then the medians and the median of the rounds' ratios b/a
abba() {
	local a b as=() bs=()
	for i in $(seq "$1"); do
		if [ $((i % 2)) -eq 1 ]; then
			a=$(side_a)
			b=$(side_b)
		else
			b=$(side_b)
			a=$(side_a)
		fi
		echo "round $i: $2  $3 $a ops/s   $4 $b ops/s"
		as+=("$a")
		bs+=("$b")
	done
	$PY - "${as[*]}" "${bs[*]}" "$2" "$3" "$4" <<'PY'
import statistics, sys
a_s = [float(x) for x in sys.argv[1].split()]
b_s = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(a_s), statistics.median(b_s)
r = statistics.median(y / n for n, y in zip(a_s, b_s))
print(f"{sys.argv[3]} median: {sys.argv[5]} {b:.0f} ops/s, {sys.argv[4]} {a:.0f} ops/s; "
      f"median of the rounds' ratios {r:.3f} ({(1 - r) * 100:+.1f}% cost)")
PY
}
