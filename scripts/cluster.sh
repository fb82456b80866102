#!/usr/bin/env bash
# A local OpenLake cluster on loopback, for trying it out and for tests:
#
#   scripts/cluster.sh up [N] DIR [--etcd 1|3] [--drives D] [--sets S] [--parity P]
#                         [--plane tcp|ucx]
#       builds if needed, starts etcd (3 members by default), runs `openlake cluster init`
#       (S erasure sets of N x D / S drives each, P parity, defaults N=4 D=1 S=1 P=1; a set
#       takes one drive of each node while it can, so `up 4 DIR --drives 2 --sets 2` is two
#       sets of 4, one drive of each on every node), then starts N openlaked nodes under DIR on
#       free loopback ports, waits until S3 answers through every node (the leader of set 0.0
#       serves every set, the others forward to it), prints one line per node
#           node ID s3=http://127.0.0.1:PORT kv=127.0.0.1:PORT pid=PID
#       and returns, leaving them running (logs and pid files under DIR). --plane ucx runs the
#       node planes on UCX ([cluster] plane_transport; a build with libucx-dev; UCX_TLS and
#       UCX_NET_DEVICES in the environment reach the nodes, e.g. UCX_TLS=tcp on one host).
#   scripts/cluster.sh add DIR K [--drives D]
#       grows the cluster running under DIR by K new nodes of D drives each (default 1) as a
#       new pool: writes their configs (listing every node), runs `openlake cluster join`
#       (K x D must be a multiple of the cluster's set size N), starts them, waits until S3
#       answers through each and the leader serves the new pool, and prints their lines as
#       `up` does. Old objects stay where they are; new ones go to a pool by free space.
#   scripts/cluster.sh leave DIR P [--timeout S]
#       decommissions pool P of the cluster running under DIR: runs `openlake cluster leave
#       --pool P`, waits (up to S seconds, default 600) until the leader has moved the pool's
#       objects to the other pools and removed it from the layout, then stops the pool's
#       nodes and prints `node ID stopped` for each.
#   scripts/cluster.sh down DIR
#       stops every process it started under DIR (by the pid files), etcd last.
#
# The nodes serve one object store (docs/cluster.md): any node takes any S3 request.
# OPENLAKE_BUILD names the build directory (default build); OPENLAKE_CLUSTER_CONF, when set,
# is added to every node's [cluster] section by `up` (lines of TOML, e.g. "slow_drive_ms = 0").
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BUILD=${OPENLAKE_BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac

die() { # a failed `up` stops what it started
	echo "cluster.sh: $*" >&2
	if [ -n "${UP_DIR:-}" ]; then down "$UP_DIR" >/dev/null 2>&1 || true; fi
	exit 1
}

free_ports() { # free_ports COUNT: that many distinct ports free a moment ago
	/usr/bin/python3 - "$1" <<'PY'
# below the kernel's ephemeral range, so no client's outgoing connection takes one of them
# between this check and the bind of the process that gets it
import os, random, socket, sys
try:
    hi = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0]) - 1
except (OSError, ValueError, IndexError):
    hi = 32767
lo = 10000 if hi - 10000 >= 1000 else 1024
rng = random.Random(os.getpid())
socks, want = [], int(sys.argv[1])
for p in rng.sample(range(lo, hi + 1), hi - lo + 1):
    if len(socks) == want:
        break
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p))
        socks.append(s)
    except OSError:
        s.close()
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

wait_until() { # wait_until SECONDS CMD...: run CMD until it succeeds or the time is up
	local end=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_bg() { # start_bg PIDFILE LOG CMD...: detached, its pid in PIDFILE
	local pidfile=$1 log=$2; shift 2
	setsid "$@" </dev/null >"$log" 2>&1 &
	echo $! >"$pidfile"
}

build() {
	if [ -f "$BUILD/build.ninja" ]; then
		ninja -C "$BUILD" >/dev/null || die "build failed (ninja -C $BUILD)"
	else
		scripts/build.sh "$BUILD" >/dev/null || die "build failed"
	fi
}

start_etcd() { # start_etcd DIR MEMBERS -> sets ETCD_EPS
	local dir=$1 m=$2 i ports init="" eps=""
	command -v etcd >/dev/null || die "etcd is not installed (apt-get install etcd-server)"
	read -r -a ports <<<"$(free_ports $((2 * m)))"
	for ((i = 0; i < m; i++)); do
		init+="${init:+,}e$i=http://127.0.0.1:${ports[$((2 * i + 1))]}"
		eps+="${eps:+,}http://127.0.0.1:${ports[$((2 * i))]}"
	done
	mkdir -p "$dir/etcd"
	for ((i = 0; i < m; i++)); do
		local c=${ports[$((2 * i))]} p=${ports[$((2 * i + 1))]}
		start_bg "$dir/pids/etcd-e$i.pid" "$dir/etcd/e$i.log" etcd --name "e$i" \
			--data-dir "$dir/etcd/e$i" --listen-client-urls "http://127.0.0.1:$c" \
			--advertise-client-urls "http://127.0.0.1:$c" \
			--listen-peer-urls "http://127.0.0.1:$p" \
			--initial-advertise-peer-urls "http://127.0.0.1:$p" \
			--initial-cluster "$init" --initial-cluster-state new \
			--initial-cluster-token "openlake-$$" --pre-vote
	done
	echo "$eps" >"$dir/etcd/endpoints"
	wait_until 60 env ETCDCTL_API=3 etcdctl --endpoints="$eps" endpoint health ||
		die "etcd did not become healthy (logs: $dir/etcd/*.log)"
	ETCD_EPS=$eps
}

nodes_text() { # nodes_text FIRST_ID D RPC_PORTS...: [[nodes]] entries, ids from FIRST_ID on
	local id=$1 d=$2 p; shift 2
	for p in "$@"; do
		printf '\n[[nodes]]\nid = %d\nrpc_addr = "127.0.0.1:%d"\ndisk_count = %d\n' "$id" "$p" "$d"
		id=$((id + 1))
	done
}

node_config() { # node_config DIR ID D S3 KV RPC NODES: NODES is nodes_text's for every node
	local dir=$1 id=$2 d=$3 s3=$4 kv=$5 rpc=$6 nodes=$7
	local nd="$dir/node-$id" dirs="" j eps=""
	for ((j = 0; j < d; j++)); do dirs+="${dirs:+, }\"$nd/d$j\""; done
	IFS=, read -r -a list <<<"$ETCD_EPS"
	for j in "${list[@]}"; do eps+="${eps:+, }\"$j\""; done
	{
		echo "self_id = $id"
		echo "data_dirs = [$dirs]"
		echo "s3_addr = \"127.0.0.1:$s3\""
		echo 'console_addr = ""  # N nodes on one host: the admin plane stays on the S3 port'
		echo "rpc_addr = \"127.0.0.1:$rpc\""
		echo "kv_addr = \"127.0.0.1:$kv\""
		echo "set_drive_count = $SET_DRIVES"
		echo "default_parity_count = $PARITY"
		echo "log_level = \"info\""
		printf '\n[[credentials]]\naccess_key = "openlakeadmin"\nsecret_key = "openlakeadmin"\n'
		printf '%s\n' "$nodes"
		printf '\n[kv]\ndram_bytes = "64MiB"\nspill_dir = "%s/kv"\nspill_bytes = "256MiB"\n' "$nd"
		printf '\n[cluster]\netcd = [%s]\nlease_ttl_s = 10\nsecret = "%s"\n' "$eps" \
			"$CLUSTER_SECRET"
		echo "plane_transport = \"$PLANE\""
		if [ -n "${OPENLAKE_CLUSTER_CONF:-}" ]; then printf '%s\n' "$OPENLAKE_CLUSTER_CONF"; fi
	} >"$nd/openlake.toml"
}

s3_answers() { # s3_answers PORT: an unsigned GET / gets S3's own answer (403), not a 503
	local code
	code=$(curl -s -o /dev/null -m 20 -w '%{http_code}' "http://127.0.0.1:$1/") || return 1
	[ "$code" = 403 ]
}

up() {
	local n=4 dir members=3 drives=1 sets=1 i
	PARITY=1 PLANE=tcp
	if [[ "$1" =~ ^[0-9]+$ ]]; then n=$1; shift; fi
	dir=$1
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		--etcd) members=$2; shift 2 ;;
		--drives) drives=$2; shift 2 ;;
		--parity) PARITY=$2; shift 2 ;;
		--sets) sets=$2; shift 2 ;;
		--plane) PLANE=$2; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	[[ "$n" =~ ^[0-9]+$ && $n -ge 1 && $n -le 64 ]] || die "N must be 1..64"
	[[ "$members" == 1 || "$members" == 3 ]] || die "--etcd takes 1 or 3"
	[[ "$PLANE" == tcp || "$PLANE" == ucx ]] || die "--plane takes tcp or ucx"
	[[ "$drives" =~ ^[0-9]+$ && $drives -ge 1 && $drives -le 16 ]] || die "--drives: 1..16"
	[[ "$sets" =~ ^[0-9]+$ && $sets -ge 1 && $((n * drives % sets)) -eq 0 ]] ||
		die "--sets must divide the $((n * drives)) drives"
	SET_DRIVES=$((n * drives / sets))
	[ $SET_DRIVES -gt 1 ] || PARITY=0
	[[ "$PARITY" =~ ^[0-9]+$ && $PARITY -lt $SET_DRIVES ]] ||
		die "--parity must be below the $SET_DRIVES drives of a set"
	mkdir -p "$dir/pids"
	dir=$(cd "$dir" && pwd)
	ls "$dir"/pids/*.pid >/dev/null 2>&1 && die "$dir has a cluster running: cluster.sh down $dir"
	UP_DIR=$dir
	build
	start_etcd "$dir" "$members"
	# one node-plane secret for this cluster (every frame between nodes is MACed with it)
	CLUSTER_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
	local ports rpcs=()
	read -r -a ports <<<"$(free_ports $((3 * n)))"
	for ((i = 0; i < n; i++)); do rpcs+=("${ports[$((3 * i + 2))]}"); done
	local nodes
	nodes=$(nodes_text 0 "$drives" "${rpcs[@]}")
	for ((i = 0; i < n; i++)); do
		mkdir -p "$dir/node-$i"
		node_config "$dir" "$i" "$drives" "${ports[$((3 * i))]}" \
			"${ports[$((3 * i + 1))]}" "${rpcs[$i]}" "$nodes"
	done
	# the layout first: a node reads it at start to know it serves the cluster's set
	"$BUILD/cmd/openlake/openlake" cluster init --config "$dir/node-0/openlake.toml" \
		>"$dir/init.log" 2>&1 || die "cluster init failed: $(cat "$dir/init.log")"
	for ((i = 0; i < n; i++)); do
		start_bg "$dir/pids/node-$i.pid" "$dir/node-$i/openlaked.log" \
			"$BUILD/cmd/openlaked/openlaked" --config "$dir/node-$i/openlake.toml"
	done
	for ((i = 0; i < n; i++)); do
		wait_until 60 port_open "${ports[$((3 * i))]}" ||
			die "node $i did not start (log: $dir/node-$i/openlaked.log)"
	done
	for ((i = 0; i < n; i++)); do
		wait_until 90 s3_answers "${ports[$((3 * i))]}" ||
			die "S3 does not answer through node $i (logs: $dir/node-*/openlaked.log)"
	done
	for ((i = 0; i < n; i++)); do
		echo "node $i s3=http://127.0.0.1:${ports[$((3 * i))]} kv=127.0.0.1:${ports[$((3 * i + 1))]} pid=$(cat "$dir/pids/node-$i.pid")"
	done
	UP_DIR=
}

conf_value() { # conf_value FILE NAME: a top-level `NAME = VALUE` of a config cluster.sh wrote
	sed -n "s/^$2 = \"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$1" | head -n 1
}

add() {
	local dir=$1 k=$2 drives=1 i first ports rpcs=() nodes joined pools
	shift 2
	while [ $# -gt 0 ]; do
		case "$1" in
		--drives) drives=$2; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	[[ "$k" =~ ^[0-9]+$ && $k -ge 1 && $k -le 60 ]] || die "K must be 1..60"
	[[ "$drives" =~ ^[0-9]+$ && $drives -ge 1 && $drives -le 16 ]] || die "--drives: 1..16"
	[ -f "$dir/node-0/openlake.toml" ] && [ -f "$dir/etcd/endpoints" ] ||
		die "no cluster under $dir (cluster.sh up first)"
	dir=$(cd "$dir" && pwd)
	build
	ETCD_EPS=$(cat "$dir/etcd/endpoints")
	CLUSTER_SECRET=$(conf_value "$dir/node-0/openlake.toml" secret)
	SET_DRIVES=$(conf_value "$dir/node-0/openlake.toml" set_drive_count)
	PARITY=$(conf_value "$dir/node-0/openlake.toml" default_parity_count)
	PLANE=$(conf_value "$dir/node-0/openlake.toml" plane_transport)
	PLANE=${PLANE:-tcp}
	first=$(find "$dir" -maxdepth 1 -name 'node-*' -type d | wc -l)
	[ $((k * drives % SET_DRIVES)) -eq 0 ] ||
		die "$k nodes x $drives drives do not make whole sets of N = $SET_DRIVES"
	read -r -a ports <<<"$(free_ports $((3 * k)))"
	for ((i = 0; i < k; i++)); do rpcs+=("${ports[$((3 * i + 2))]}"); done
	# every node so far (as the last node's config lists them), then the new ones
	nodes=$(sed -n '/^\[\[nodes\]\]/,/^\[kv\]/p' "$dir/node-$((first - 1))/openlake.toml" |
		sed '$d')$'\n'$(nodes_text "$first" "$drives" "${rpcs[@]}")
	for ((i = 0; i < k; i++)); do
		mkdir -p "$dir/node-$((first + i))"
		node_config "$dir" $((first + i)) "$drives" "${ports[$((3 * i))]}" \
			"${ports[$((3 * i + 1))]}" "${rpcs[$i]}" "$nodes"
	done
	"$BUILD/cmd/openlake/openlake" cluster join --config "$dir/node-$first/openlake.toml" \
		>"$dir/join-$first.log" 2>&1 || die "cluster join failed: $(cat "$dir/join-$first.log")"
	joined=$(sed -n 's/^pool \([0-9]*\) added.*/\1/p' "$dir/join-$first.log")
	pools=$((joined + 1))
	for ((i = 0; i < k; i++)); do
		start_bg "$dir/pids/node-$((first + i)).pid" "$dir/node-$((first + i))/openlaked.log" \
			"$BUILD/cmd/openlaked/openlaked" --config "$dir/node-$((first + i))/openlake.toml"
	done
	for ((i = 0; i < k; i++)); do
		wait_until 60 port_open "${ports[$((3 * i))]}" ||
			die "node $((first + i)) did not start (log: $dir/node-$((first + i))/openlaked.log)"
		wait_until 90 s3_answers "${ports[$((3 * i))]}" ||
			die "S3 does not answer through node $((first + i))"
	done
	# the serving leader (set 0 of the first active pool) opens the new pool once its nodes' planes answer
	wait_until 90 grep -qE "cluster: serving ($pools pools|set [0-9]+\.0 and .* of $pools pool)" \
		"$dir"/node-*/openlaked.log || die "the leader does not serve pool $joined (logs: $dir/node-*/openlaked.log)"
	for ((i = 0; i < k; i++)); do
		echo "node $((first + i)) s3=http://127.0.0.1:${ports[$((3 * i))]} kv=127.0.0.1:${ports[$((3 * i + 1))]} pid=$(cat "$dir/pids/node-$((first + i)).pid")"
	done
}

leave() {
	local dir=$1 p=$2 timeout=600 nodes id
	shift 2
	while [ $# -gt 0 ]; do
		case "$1" in
		--timeout) timeout=$2; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	[[ "$p" =~ ^[0-9]+$ ]] || die "P must be a pool number"
	[[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout: seconds"
	[ -f "$dir/node-0/openlake.toml" ] || die "no cluster under $dir (cluster.sh up first)"
	dir=$(cd "$dir" && pwd)
	build
	"$BUILD/cmd/openlake/openlake" cluster leave --config "$dir/node-0/openlake.toml" \
		--pool "$p" >"$dir/leave-$p.log" 2>&1 || die "cluster leave failed: $(cat "$dir/leave-$p.log")"
	# the pool's nodes, as leave printed the pools: "  pool P: ... nodes 4,5,6,7, draining"
	nodes=$(sed -n "s/^  pool $p: .* nodes \([0-9,]*\).*/\1/p" "$dir/leave-$p.log" | tr , ' ')
	[ -n "$nodes" ] || die "cannot read pool $p's nodes from $dir/leave-$p.log"
	wait_until "$timeout" grep -q "cluster: pool $p is empty: removed from the layout" \
		"$dir"/node-*/openlaked.log ||
		die "pool $p is not drained after $timeout s (openlake cluster status shows the progress)"
	for id in $nodes; do
		stop_pid "$dir/pids/node-$id.pid" "$dir"
		echo "node $id stopped"
	done
}

gone() { # gone PID: exited (a zombie waiting for its reaper counts as exited)
	[ ! -e "/proc/$1" ] || grep -qE '^[0-9]+ \(.*\) [ZX]' "/proc/$1/stat" 2>/dev/null
}

stop_pid() { # stop_pid PIDFILE DIR: SIGTERM, then SIGKILL after 15 s; only our own process
	local f=$1 dir=$2 pid
	pid=$(cat "$f" 2>/dev/null) || return 0
	if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$dir"; then
		kill -TERM "$pid" 2>/dev/null || true
		wait_until 15 gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
		wait_until 5 gone "$pid" || true
	fi
	rm -f "$f"
}

down() {
	local dir f
	[ -d "$1/pids" ] || die "no cluster under $1"
	dir=$(cd "$1" && pwd)
	for f in "$dir"/pids/node-*.pid; do [ -e "$f" ] && stop_pid "$f" "$dir"; done
	for f in "$dir"/pids/etcd-*.pid; do [ -e "$f" ] && stop_pid "$f" "$dir"; done
	return 0
}

case "${1:-}" in
up) [ $# -ge 2 ] || die "usage: cluster.sh up [N] DIR [--etcd 1|3] [--drives D] [--sets S] [--parity P] [--plane tcp|ucx]"; shift; up "$@" ;;
add) [ $# -ge 3 ] || die "usage: cluster.sh add DIR K [--drives D]"; shift; add "$@" ;;
leave) [ $# -ge 3 ] || die "usage: cluster.sh leave DIR P [--timeout S]"; shift; leave "$@" ;;
down) [ $# -eq 2 ] || die "usage: cluster.sh down DIR"; down "$2" ;;
*) die "usage: cluster.sh up [N] DIR [--etcd 1|3] [--drives D] [--sets S] [--parity P] [--plane tcp|ucx] | add DIR K [--drives D] | leave DIR P [--timeout S] | down DIR" ;;
esac
