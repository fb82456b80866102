#!/usr/bin/env bash
# bench/kv_wbcpu.sh BUILD SIZE [DEVICE]: KV pool as kv_bench.sh starts it (1 GiB DRAM prefaulted, 2 GiB NVMe,
# async write-behind); 3 s of PUT SIZE to warm (DEVICE tcp, c=16, the
# default; or local: shared memory, c=4), then a measured 3 s run: the
# write-behind thread's CPU (utime+stime of the daemon's threads still named "openlaked": the
# main thread sleeps) per block it wrote (writebacks), and the daemon's CPU per put. One line;
# compare builds by alternating them (bench/RESULTS.md, "The write-behind writes from the slot").
# Needs a build's cmd/openlaked and cmd/openlake; stops the daemon it started by pid.
set -u
cd "$(dirname "$0")/.."
B=$1; S=$2; DEV=${3:-tcp}; C=16; [ "$DEV" = local ] && C=4; D=$(mktemp -d /tmp/kv_wbcpu.XXXXXX)
PY=/usr/bin/python3
. bench/lib.sh
start_kv_pool $B/cmd/openlaked/openlaked $D 1GiB 2GiB
PID=$POOL_PID; kp=$POOL_PORT
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
st() { $B/cmd/openlake/openlake kv stats --nodes 127.0.0.1:$kp --json 2>/dev/null | $PY -c 'import json,sys
s=json.load(sys.stdin)["nodes"][0]["stats"]; print(s.get("prefaulted_pages",0) >= s["dram_capacity"]//(2<<20), s["writebacks"], s["writeback_dropped"])' 2>/dev/null || echo "False x x"; }
for i in $(seq 1 240); do set -- $(st); [ "$1" = True ] && break; sleep 0.5; done
[ "$1" = True ] || { echo "kv_wbcpu.sh: the DRAM tier was not prefaulted in 120 s" >&2; exit 1; }
cpu() { $PY - $PID <<'PY'
import os,sys
pid=sys.argv[1]; hz=os.sysconf('SC_CLK_TCK'); wb=0.0
for t in os.listdir('/proc/%s/task'%pid):
    try: f=open('/proc/%s/task/%s/stat'%(pid,t)).read()
    except OSError: continue
    comm=f[f.index('(')+1:f.rindex(')')]; x=f[f.rindex(')')+2:].split()
    if comm=='openlaked': wb+=(int(x[11])+int(x[12]))/hz
x=open('/proc/%s/stat'%pid).read(); x=x[x.rindex(')')+2:].split()
print(wb, (int(x[11])+int(x[12]))/hz)
PY
}
$B/cmd/openlake/openlake bench kv --nodes 127.0.0.1:$kp --device $DEV -w put -s $S -c $C -d 3 >/dev/null
set -- $(st); w0=$2; d0=$3; set -- $(cpu); c0=$1; t0=$2
out=$($B/cmd/openlake/openlake bench kv --nodes 127.0.0.1:$kp --device $DEV -w put -s $S -c $C -d 3 | grep "ops in")
set -- $(st); w1=$2; d1=$3; set -- $(cpu); c1=$1; t1=$2
ops=$(echo "$out" | sed 's/.*: \([0-9]*\) ops in.*/\1/')
$PY -c "
import sys
w=$w1-$w0; ops=$ops
print('%s %s $DEV c=$C | %s | written %d dropped %d | write-behind %.0f ms = %.1f us per block written | daemon %.1f us per put | load %s' % ('$B', '$S', '''$out'''.split(': ',1)[1], w, $d1-$d0, ($c1-$c0)*1e3, ($c1-$c0)*1e6/max(w,1), ($t1-$t0)*1e6/max(ops,1), open('/proc/loadavg').read().split()[0]))"
