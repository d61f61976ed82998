#!/usr/bin/env bash
# Prepares the GPU check for a device machine that cannot build larder (no
# network, no Debian packages: a CUDA image with nvcc and cuBLAS only).
# Builds test_cuda, test_engine and bench_gpu here for sm_90 with portable
# CPU code (-march=x86-64-v4: AVX-512 without the extensions only some CPUs
# have), and puts them, stripped, with the shared libraries they need that
# such an image lacks (spdlog, fmt, xxhash, compression libraries; not libc,
# libstdc++ or CUDA's own) into one folder:
#
#   scripts/gpu-bundle.sh [DIR]        (default: build-gpu, about 30 MB)
#
# Then, in a session with a device (build-gpu is git-ignored, so carry it):
#   run(command='LARDER_GPU_PREBUILT=1 scripts/gpu-check.sh "$OUT"',
#       carry=['build-gpu'], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
bundle="${1:-build-gpu}"
full="${bundle}-tree"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B "$full" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=ON -DLARDER_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS=-march=x86-64-v4 -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$full" -j"$(nproc)" --target test_cuda test_engine bench_gpu
rm -rf "$bundle"
mkdir -p "$bundle/tests" "$bundle/bench" "$bundle/lib"
cp "$full/tests/test_cuda" "$full/tests/test_engine" "$bundle/tests/"
cp "$full/bench/bench_gpu" "$bundle/bench/"
strip "$bundle"/tests/* "$bundle"/bench/*
# Shared libraries outside the C/C++ runtime and CUDA.
for bin in "$bundle"/tests/* "$bundle"/bench/*; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
    libcuda*|libcublas*|libcudart*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" > "$bundle/COMMIT"
du -sh "$bundle"
ls "$bundle/lib"
