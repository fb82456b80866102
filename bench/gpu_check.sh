#!/bin/sh
# bench/gpu_check.sh [DATA_DIR [MiB]] - build and run the ExANS GPU self-check
# (src/codec/cuda/exans_gpucheck.cu) with nvcc alone, so it works on a bare CUDA machine
# without meson or ISA-L. Checks GPU-encoded == CPU-encoded bytes, GPU decode of
# CPU-encoded blocks, corruption detection, and times GPU encode/decode on MiB (default
# 1024) built from the real KV dump, beside a device-to-device cudaMemcpy.
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
	cc -std=c17 -O2 -D_GNU_SOURCE $DEF -Isrc -c src/codec/$f.c -o "$OUT/$f.o"
done
"$NVCC" -O3 -std=c++17 -arch="$ARCH" -Isrc src/codec/cuda/exans_gpucheck.cu \
	src/codec/cuda/exans.cu "$OUT"/exans.o "$OUT"/exans_scalar.o "$OUT"/exans_simd.o \
	"$OUT"/exans_rows.o \
	$LIB -lm -o "$OUT/exans_gpucheck"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv || true
set +e
"$OUT/exans_gpucheck" "$DATA" "${2:-1024}"
