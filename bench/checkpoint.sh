#!/bin/bash
# bench/checkpoint.sh - the MLPerf Storage checkpoint shape scaled to this machine, beside
# references measured in the same run. Not a pass/fail test: one line per figure (ours, the
# reference, the ratio) and, with --markdown, a table for bench/RESULTS.md.
#
#   W writer processes each save their shard (SIZE bytes of tensors) with openlake_client.s3
#   at once (durable: the daemon runs with fsync on), then W readers load them all back:
#     save GB/s   vs fio writing the same bytes (W jobs, end_fsync) x k/(k+P)
#     load GB/s   vs fio reading them (W jobs): into fresh tensors, and in place into the
#                 readers' own tensors (load(out=state_dict), as a resuming job does)
#     save/load   vs boto3's TransferManager (W processes, same bytes, same daemon)
#     save/load   vs `aws s3 cp` (W processes, files of SIZE bytes, same daemon)
#   model load: one safetensors file into memory (load_safetensors) vs fio read of SIZE, 1 job
#   both loads also vs the same bytes read from local files (on the same disk) into fresh
#     tensors (huge pages advised, as ours are), W processes / 1: what landing them in new
#     memory costs any loader on this machine, which fio's reused buffer does not pay
#   openlake cp vs aws s3 cp, up and down (W processes)
#   with --cold, every read figure (fio's, ours, boto3's, aws's) starts with the page cache
#   dropped (sync; echo 3 > /proc/sys/vm/drop_caches; needs root): a reload after a failure,
#   from the drives, where the default measures reads of bytes just written (still cached)
#   client CPU seconds per GB of the save and load processes, ours vs boto3
#
# Usage: bench/checkpoint.sh [--writers W] [--size SIZE_MiB] [--build DIR] [--dir DIR]
#                            [--markdown] [--cold]
#   --writers W   writer/reader processes (default 4)
#   --size MiB    bytes of tensors per writer (default 256: 1 GiB in all)
#   --build DIR   build directory (default $OPENLAKE_BUILD or build)
#   --dir DIR     where the drives and the fio and cp files go (default a temp dir under
#                 $TMPDIR or /tmp: the same disk for every figure); removed at the end
#   --cold        drop the page cache before each read figure (root)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OPENLAKE_BUILD:-build}
BASE=${TMPDIR:-/tmp}
W=4
SIZE_MIB=256
MARKDOWN=0
COLD=0
while [ $# -gt 0 ]; do
	case "$1" in
	--writers) W=$2; shift ;;
	--size) SIZE_MIB=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--dir) BASE=$2; shift ;;
	--markdown) MARKDOWN=1 ;;
	--cold) COLD=1 ;;
	-h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
	*) echo "checkpoint.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
OPENLAKED=$BUILD/cmd/openlaked/openlaked
CLI=$BUILD/cmd/openlake/openlake
PY=/usr/bin/python3
for b in "$OPENLAKED" "$CLI" "$BUILD/client/libopenlake.so"; do
	[ -x "$b" ] || [ -f "$b" ] || { echo "checkpoint.sh: $b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done
for t in fio aws; do
	command -v $t >/dev/null || { echo "checkpoint.sh: $t is missing (scripts/deps.sh bench installs it)" >&2; exit 1; }
done
if [ "$COLD" = 1 ] && ! [ -w /proc/sys/vm/drop_caches ]; then
	echo "checkpoint.sh: --cold drops the page cache through /proc/sys/vm/drop_caches: run it as root" >&2
	exit 1
fi
$PY -c 'import torch, boto3' 2>/dev/null || { echo "checkpoint.sh: needs python3-torch and python3-boto3" >&2; exit 1; }

TMP=$(mktemp -d "$BASE/openlake-ckptbench.XXXXXX")
DPID=
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

. "$(dirname "$0")/lib.sh" # free_port, start_s3
ratio() { $PY -c "import sys
try: a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b))
except Exception: print('n/a')" "$1" "$2"; }
now() { date +%s.%N; }
gbps() { $PY -c "import sys; print('%.3f' % (float(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2])) / 1e9))" "$@"; }

DRIVES=4
PARITY=1
K=$((DRIVES - PARITY))
BYTES=$((W * SIZE_MIB * 1048576))

root=$TMP/ol
mkdir -p "$root"
start_s3 "$OPENLAKED" "$root" true # 4 drives, 3+1: DRIVES and PARITY above; sets DPID
URL=http://127.0.0.1:$S3_PORT
export AWS_ENDPOINT_URL=$URL AWS_ACCESS_KEY_ID=openlakeadmin AWS_SECRET_ACCESS_KEY=openlakeadmin \
	AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
	AWS_EC2_METADATA_DISABLED=true PYTHONPATH=$REPO/python OPENLAKE_LIBRARY=$BUILD/client/libopenlake.so
aws s3 mb --endpoint-url "$URL" s3://ckpt >/dev/null

# the Python side: W processes released together by a barrier; prints GB/s
cat >"$TMP/drive.py" <<'EOF'
import io, multiprocessing as mp, os, resource, sys, time
import torch
from openlake_client import s3

mode, W, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 20

def shard(r):
    g = torch.Generator().manual_seed(r)
    n = size // 4 // 4  # four float32 tensors
    return {"layer%d.weight" % i: torch.rand(n, generator=g) for i in range(4)}

def work(r, bar, q):
    if mode.startswith("ol"):
        c = s3.Client(conns=8)
    elif mode.startswith("b3"):
        import boto3
        from boto3.s3.transfer import TransferConfig
        b3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20,
                             max_concurrency=10)
        data = b"".join(bytes(t.numpy().data) for t in shard(r).values())
    # the job's own tensors: saved from, or (in place) loaded into, as a resuming job does
    sd = shard(r) if mode in ("ol-save", "ol-inplace") else None
    bar.wait()
    t0 = time.time()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    if mode == "ol-save":
        s3.save(sd, "s3://ckpt/step/rank-%d/" % r, client=c)
    elif mode == "ol-load":
        out = s3.load("s3://ckpt/step/rank-%d/" % r, client=c)
        assert sum(t.numel() * 4 for t in out.values()) == size
    elif mode == "ol-inplace":
        out = s3.load("s3://ckpt/step/rank-%d/" % r, client=c, out=sd)
        assert all(out[k] is sd[k] for k in sd)
    elif mode == "ol-model":
        idx = s3._read_index(c, "ckpt", "step/rank-%d/" % r)
        f = sorted(set(idx["weight_map"].values()))[0]
        out = s3.load_safetensors("s3://ckpt/step/rank-%d/%s" % (r, f), client=c)
    elif mode in ("file-load", "file-model"):
        t = torch.empty(size, dtype=torch.uint8)
        s3._advise_huge(t)
        mv, got = memoryview(t.numpy()), 0
        with open(os.path.join(os.environ["CKPT_FILES"], "f%d" % r), "rb", buffering=0) as f:
            while got < size:
                n = f.readinto(mv[got:got + (8 << 20)])
                assert n, "short file"
                got += n
    elif mode == "b3-save":
        b3.upload_fileobj(io.BytesIO(data), "ckpt", "boto3/rank-%d" % r, Config=cfg)
    elif mode == "b3-load":
        buf = io.BytesIO()
        b3.download_fileobj("ckpt", "boto3/rank-%d" % r, buf, Config=cfg)
        assert buf.getbuffer().nbytes == size
    ru = resource.getrusage(resource.RUSAGE_SELF)
    q.put((t0, time.time(), ru.ru_utime - ru0.ru_utime + ru.ru_stime - ru0.ru_stime))

if __name__ == "__main__":
    mp.set_start_method("fork")
    bar, q = mp.Barrier(W), mp.Queue()
    ps = [mp.Process(target=work, args=(r, bar, q)) for r in range(W)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            sys.exit("drive.py %s: a worker failed (exit %s)" % (mode, p.exitcode))
    ts = [q.get(timeout=10) for _ in ps]
    # GB/s over the W transfers, and the client processes' CPU seconds per GB moved
    print("%.3f %.2f" % (W * size / (max(e for _, e, _ in ts) - min(s for s, _, _ in ts)) / 1e9,
                         sum(c for _, _, c in ts) / (W * size / 1e9)))
EOF
drive() { echo "+ drive.py $1 $W $SIZE_MIB" >&2; $PY "$TMP/drive.py" "$1" "$W" "$SIZE_MIB"; }
# cold: with --cold, what was written goes to the disk and the page cache is dropped, so the
# read after it comes from the drives
cold() {
	[ "$COLD" = 1 ] || return 0
	echo "+ sync; echo 3 >/proc/sys/vm/drop_caches" >&2
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# fio on the same disk: W jobs of SIZE, written with a final fsync, then read
fio_bw() { # fio_bw RW JOBS -> GB/s
	echo "+ fio --rw=$1 --numjobs=$2 --size=${SIZE_MIB}m --bs=1m --end_fsync=1" >&2
	fio --name=ckpt --directory="$TMP/fio" --rw="$1" --numjobs="$2" --size="${SIZE_MIB}m" \
		--bs=1m --ioengine=psync --end_fsync=1 --group_reporting --output-format=json \
		>"$TMP/fio.json"
	$PY -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]
print('%.3f' % (j[sys.argv[2]]['bw_bytes'] / 1e9))" "$TMP/fio.json" "${1/rand/}"
}
mkdir -p "$TMP/fio" "$TMP/files" "$TMP/down"

# local files of SIZE each: the file loads' input, and what the cp figures copy
for r in $(seq 0 $((W - 1))); do head -c "$((SIZE_MIB * 1048576))" /dev/urandom >"$TMP/files/f$r"; done
export CKPT_FILES=$TMP/files
FIO_W=$(fio_bw write "$W")
cold
FIO_R=$(fio_bw read "$W")
cold
FIO_R1=$(fio_bw read 1)
rm -rf "$TMP/fio"
read -r OL_SAVE OL_SAVE_CPU <<<"$(drive ol-save)"
cold
read -r OL_LOAD OL_LOAD_CPU <<<"$(drive ol-load)"
cold
read -r OL_INPLACE OL_INPLACE_CPU <<<"$(drive ol-inplace)"
cold
read -r OL_MODEL _ <<<"$($PY "$TMP/drive.py" ol-model 1 "$SIZE_MIB")"
cold
read -r FILE_LOAD _ <<<"$(drive file-load)"
cold
read -r FILE_MODEL _ <<<"$($PY "$TMP/drive.py" file-model 1 "$SIZE_MIB")"
read -r B3_SAVE B3_SAVE_CPU <<<"$(drive b3-save)"
cold
read -r B3_LOAD B3_LOAD_CPU <<<"$(drive b3-load)"

# cp: the W files of SIZE, all at once
cp_run() { # cp_run TOOL DIR -> GB/s
	local t0 t1 pids=()
	t0=$(now)
	for r in $(seq 0 $((W - 1))); do
		if [ "$2" = up ]; then
			if [ "$1" = aws ]; then aws s3 cp --endpoint-url "$URL" --only-show-errors "$TMP/files/f$r" "s3://ckpt/$1/f$r" &
			else "$CLI" cp -q "$TMP/files/f$r" "s3://ckpt/$1/f$r" & fi
		else
			if [ "$1" = aws ]; then aws s3 cp --endpoint-url "$URL" --only-show-errors "s3://ckpt/$1/f$r" "$TMP/down/$1-f$r" &
			else "$CLI" cp -q "s3://ckpt/$1/f$r" "$TMP/down/$1-f$r" & fi
		fi
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	t1=$(now)
	gbps "$BYTES" "$t0" "$t1"
}
echo "+ aws s3 cp / openlake cp x $W" >&2
AWS_UP=$(cp_run aws up)
OLCP_UP=$(cp_run ol up)
cold
AWS_DOWN=$(cp_run aws down)
cold
OLCP_DOWN=$(cp_run ol down)
cmp "$TMP/files/f0" "$TMP/down/ol-f0"

FIO_WK=$($PY -c "print('%.3f' % ($FIO_W * $K / $DRIVES))")
row() { # row FIGURE OURS REFNAME REF
	if [ "$MARKDOWN" = 1 ]; then
		echo "| $1 | $2 | $3 | $4 | $(ratio "$2" "$4") |"
	else
		printf '%-44s %8s GB/s   %-40s %8s GB/s   ratio %s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$4")"
	fi
}
[ "$COLD" = 1 ] && echo "(--cold: the page cache dropped before each read figure)"
[ "$MARKDOWN" = 1 ] && echo "| figure | GB/s | reference | GB/s | ratio |" && echo "|---|---|---|---|---|"
row "checkpoint save, $W writers x ${SIZE_MIB} MiB" "$OL_SAVE" "fio write x k/(k+P) ($K/$DRIVES)" "$FIO_WK"
row "checkpoint save" "$OL_SAVE" "boto3 TransferManager, $W procs" "$B3_SAVE"
row "checkpoint save" "$OL_SAVE" "aws s3 cp, $W procs" "$AWS_UP"
row "checkpoint load, $W readers" "$OL_LOAD" "fio read, $W jobs" "$FIO_R"
row "checkpoint load" "$OL_LOAD" "boto3 TransferManager, $W procs" "$B3_LOAD"
row "checkpoint load" "$OL_LOAD" "aws s3 cp, $W procs" "$AWS_DOWN"
row "checkpoint load in place (out=state_dict)" "$OL_INPLACE" "fio read, $W jobs" "$FIO_R"
row "model load, 1 file of ${SIZE_MIB} MiB" "$OL_MODEL" "fio read, 1 job" "$FIO_R1"
row "checkpoint load, $W readers" "$OL_LOAD" "local files into fresh tensors, $W procs" "$FILE_LOAD"
row "model load" "$OL_MODEL" "a local file into fresh tensors, 1 proc" "$FILE_MODEL"
row "openlake cp up, $W procs" "$OLCP_UP" "aws s3 cp up" "$AWS_UP"
row "openlake cp down, $W procs" "$OLCP_DOWN" "aws s3 cp down" "$AWS_DOWN"
# client CPU seconds per GB (lower is better; the ratio is boto3's over ours): what the
# client costs the training job's cores, apart from what the server and the disk can do
if [ "$MARKDOWN" = 1 ]; then
	echo
	echo "| client CPU s/GB | ours | boto3 TransferManager | boto3/ours |"
	echo "|---|---|---|---|"
	echo "| save | $OL_SAVE_CPU | $B3_SAVE_CPU | $(ratio "$B3_SAVE_CPU" "$OL_SAVE_CPU") |"
	echo "| load | $OL_LOAD_CPU | $B3_LOAD_CPU | $(ratio "$B3_LOAD_CPU" "$OL_LOAD_CPU") |"
	echo "| load in place | $OL_INPLACE_CPU | $B3_LOAD_CPU | $(ratio "$B3_LOAD_CPU" "$OL_INPLACE_CPU") |"
else
	printf 'client CPU s/GB save: ours %s, boto3 %s (boto3/ours %s)\n' "$OL_SAVE_CPU" "$B3_SAVE_CPU" "$(ratio "$B3_SAVE_CPU" "$OL_SAVE_CPU")"
	printf 'client CPU s/GB load: ours %s, boto3 %s (boto3/ours %s)\n' "$OL_LOAD_CPU" "$B3_LOAD_CPU" "$(ratio "$B3_LOAD_CPU" "$OL_LOAD_CPU")"
	printf 'client CPU s/GB load in place: ours %s\n' "$OL_INPLACE_CPU"
fi
