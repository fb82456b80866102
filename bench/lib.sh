# bench/lib.sh - sourced by the bench scripts (after they set PY): fresh loopback ports,
# waiting for a port to listen, and the config and start of a KV-only openlaked.

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
