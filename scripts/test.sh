#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to every test run:
#   scripts/test.sh
# Installs missing packages, builds everything in Release, runs the Catch2
# suites through CTest (C++ unit, integration and HTTP tests) and the
# end-to-end tests with the official openai npm SDK against a real larderd.
# The real test model is looked up in $LARDER_TEST_MODELS (default:
# ../shared/models); tests that need it are skipped when it is absent (they
# fail instead in CI, CI=true, or when LARDER_TEST_MODELS is set by hand), and
# the run ends with how many test cases were skipped and why. Then each fuzz
# target runs for $LARDER_FUZZ_SECONDS (default 10) seconds (bench/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir=${LARDER_BUILD_DIR:-build}
# A test model that is missing fails the run in CI (CI=true) or when
# LARDER_TEST_MODELS was set by hand; only our own default may be absent
# (then the tests that need it are skipped, and counted below).
if [ -z "${LARDER_TEST_MODELS:-}" ]; then
  export LARDER_TEST_MODELS="$(cd .. && pwd)/shared/models" LARDER_TEST_MODELS_DEFAULTED=1
fi
if [ ! -f "$LARDER_TEST_MODELS/stories260K.gguf" ]; then
  if [ "${CI:-}" = true ] || [ "${LARDER_TEST_MODELS_DEFAULTED:-}" != 1 ]; then
    echo "error: no test model in $LARDER_TEST_MODELS: the tests that need it will FAIL" \
         "(set LARDER_TEST_MODELS to the folder holding stories260K.gguf)" >&2
  else
    echo "note: no test model in $LARDER_TEST_MODELS: the tests that need it are SKIPPED" \
         "(set LARDER_TEST_MODELS to the folder holding stories260K.gguf)" >&2
  fi
fi
skip_log=$(mktemp)
e2e_log=$(mktemp)
trap 'rm -f "$skip_log" "$e2e_log"' EXIT
export LARDER_SKIP_LOG="$skip_log"
status=0
(cd "$build_dir" && ctest --output-on-failure --timeout 900) || status=1
if [ -f tests/e2e/package.json ]; then
  tests/e2e/run.sh "$build_dir" 2>&1 | tee "$e2e_log" || status=1
fi
# The CPU kernels are chosen at compile time, so the native build tests only
# this CPU's. Where this CPU can run them, the kernel tests (test_cpu: every
# kernel against its scalar definition, the numerics tripwire) also run in
# builds for the other x86 levels the README lists: x86-64-v3 (AVX2 + FMA +
# F16C) under an AVX-512 one, and x86-64 (the portable code) under either.
# LARDER_TEST_LEVELS=0 skips them.
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
if [ "${LARDER_TEST_LEVELS:-1}" != 0 ] && [ "$(uname -m)" = x86_64 ]; then
  levels=()
  if has avx512f && has avx2 && has fma && has f16c; then levels+=(x86-64-v3); fi
  if has avx2 || has avx512f; then levels+=(x86-64); fi
  for level in "${levels[@]}"; do
    level_dir="${build_dir%/}-$level"
    echo "== test_cpu built for $level ($level_dir)"
    # Configured every time (cheap), so that a directory of this name set up
    # another way is not reused as is; the caller's LARDER_CMAKE_ARGS first.
    # shellcheck disable=SC2086
    if cmake -S . -B "$level_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${LARDER_CMAKE_ARGS:-} \
          -DLARDER_CUDA=OFF -DLARDER_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-march=$level" "-DCMAKE_C_FLAGS=-march=$level" \
          >/dev/null &&
        cmake --build "$level_dir" -j"$(nproc)" --target test_cpu; then
      # (their kernel tests that need a higher level skip themselves, and
      # are not counted as skipped below: the native build runs them)
      LARDER_SKIP_LOG= timeout 900 "$level_dir/tests/test_cpu" || status=1
    else
      status=1
    fi
  done
fi
# test_cpu once more in a Debug build of this CPU's kernels (-O1, asserts
# on; every other build here is Release, where assert() is compiled out):
# the kernels' asserts run, and the numerics tripwire checks that another
# optimization level gives the bits its numerics id names (CMakeLists.txt:
# -ffp-contract=off). LARDER_TEST_DEBUG=0 skips it. On an AVX-512 CPU with
# GFNI it is built without GFNI (-mno-gfni), so that the AVX-512 tiles'
# plain shift-and-mask branches (CPUs with VNNI but no GFNI, such as Cascade
# Lake, and -march=x86-64-v4 builds) are tested too, and give the same bits.
if [ "${LARDER_TEST_DEBUG:-1}" != 0 ]; then
  debug_dir="${build_dir%/}-debug"
  no_gfni=(-DCMAKE_CXX_FLAGS= -DCMAKE_C_FLAGS=)
  if has avx512f && has gfni; then no_gfni=(-DCMAKE_CXX_FLAGS=-mno-gfni -DCMAKE_C_FLAGS=-mno-gfni); fi
  echo "== test_cpu in a Debug build ($debug_dir$(has avx512f && has gfni && echo ', without GFNI'))"
  # shellcheck disable=SC2086
  if cmake -S . -B "$debug_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
        -DCMAKE_C_FLAGS_DEBUG=-O1 "${no_gfni[@]}" ${LARDER_CMAKE_ARGS:-} -DLARDER_CUDA=OFF >/dev/null &&
      cmake --build "$debug_dir" -j"$(nproc)" --target test_cpu; then
    LARDER_SKIP_LOG= timeout 900 "$debug_dir/tests/test_cpu" || status=1
  else
    status=1
  fi
fi
# A short run of every fuzz target (clang, ASan + UBSan): bench/fuzz.sh runs
# them longer. LARDER_FUZZ_SECONDS sets the time per target (0: skip).
fuzz_seconds=${LARDER_FUZZ_SECONDS:-10}
if [ "$fuzz_seconds" != 0 ]; then
  bench/fuzz.sh "$fuzz_seconds" || status=1
fi
# What was not tested, and why (each skipped Catch2 case logs a line; node's
# spec reporter marks a skipped test with "﹣ name # reason").
n_cpp=$(wc -l < "$skip_log")
n_e2e=$(grep -c '^﹣' "$e2e_log" || true)
if [ "$n_cpp" -gt 0 ] || [ "$n_e2e" -gt 0 ]; then
  echo "skipped: $n_cpp Catch2 test case(s) and $n_e2e end-to-end test(s):"
  { cut -f2 "$skip_log"; sed -n 's/^﹣ .* # //p' "$e2e_log"; } | sort | uniq -c | sed 's/^/  /'
else
  echo "skipped: none"
fi
exit $status
