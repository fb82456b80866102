#!/bin/sh
# bench/gpu_check.sh [DATA_DIR [MiB]] - build and run the ExANS GPU self-check
# (src/codec/cuda/exans_gpucheck.cu) with nvcc alone, so it works on a bare CUDA machine
# without meson or ISA-L. Checks GPU-encoded == CPU-encoded bytes, GPU decode of
# CPU-encoded blocks, corruption detection, and times GPU encode/decode on MiB (default
# 1024) built from the real KV dump, beside a device-to-device cudaMemcpy. Then builds
# libol_exans_gpu.so (src/codec/cuda/exans_gpu.c, the connector's GPU codec) and, when a
# python3 with CUDA torch is there ($PYTHON), runs bench/gpu_connector.py: the connector's
# staged load/save GB/s beside pinned cudaMemcpy, whole-value ExANS encode/decode GB/s
# beside a D2D copy.
# Exit: 0 all passed, 1 a check failed, 77 no GPU or no data.
set -e
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${CUDA_ARCH:-sm_90}
OUT=${GPUCHECK_DIR:-build-gpucheck}
DATA=${1:-../shared/data/kv-bf16/stories260K}
[ -d "$DATA" ] || DATA=shared/data/kv-bf16/stories260K
mkdir -p "$OUT"
DEF=""
LIB="-lisal"
if [ ! -f /usr/include/isa-l/crc.h ]; then
	DEF="-DOL_EXANS_NO_ISAL"
	LIB=""
fi
for f in exans exans_scalar exans_simd exans_rows; do
	cc -std=c17 -O2 -fPIC -D_GNU_SOURCE $DEF -Isrc -c src/codec/$f.c -o "$OUT/$f.o"
done
"$NVCC" -O3 -std=c++17 -arch="$ARCH" -Isrc src/codec/cuda/exans_gpucheck.cu \
	src/codec/cuda/exans.cu "$OUT"/exans.o "$OUT"/exans_scalar.o "$OUT"/exans_simd.o \
	"$OUT"/exans_rows.o \
	$LIB -lm -o "$OUT/exans_gpucheck"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv || true
CUDA_INC=$(dirname "$(dirname "$NVCC")")/include
XXH="-lxxhash" # the trailer checksum (ol_exans_gpu_xxh3); without libxxhash-dev it says ENOTSUP
if [ ! -f /usr/include/xxhash.h ]; then
	DEF="$DEF -DOL_EXANS_NO_XXHASH"
	XXH=""
	echo "gpu_check: no xxhash.h: the library's XXH3 (trailer checksums) is left out"
fi
cc -std=c17 -O2 -fPIC -D_GNU_SOURCE -DOL_EXANS_GPU_CUDA $DEF -isystem "$CUDA_INC" -Isrc \
	-c src/codec/cuda/exans_gpu.c -o "$OUT/exans_gpu.o"
for k in exans chunk; do
	"$NVCC" -O3 -std=c++17 -arch="$ARCH" -Xcompiler -fPIC -Isrc -c src/codec/cuda/$k.cu \
		-o "$OUT/${k}_cu_pic.o"
done
"$NVCC" -shared -arch="$ARCH" -Xlinker --version-script=src/codec/cuda/exans_gpu.map \
	"$OUT/exans_gpu.o" "$OUT/exans_cu_pic.o" "$OUT/chunk_cu_pic.o" "$OUT"/exans.o \
	"$OUT"/exans_scalar.o "$OUT"/exans_simd.o "$OUT"/exans_rows.o $LIB $XXH \
	-o "$OUT/libol_exans_gpu.so"
set +e
"$OUT/exans_gpucheck" "$DATA" "${2:-1024}"
rc=$?
[ $rc -eq 0 ] || exit $rc
PYTHON=${PYTHON:-python3}
if "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
	2>/dev/null; then
	OPENLAKE_EXANS_GPU_LIBRARY="$PWD/$OUT/libol_exans_gpu.so" "$PYTHON" \
		bench/gpu_connector.py --codec-mib "${2:-1024}"
	exit $?
fi
echo "gpu_check: no python3 with CUDA torch: bench/gpu_connector.py skipped"
