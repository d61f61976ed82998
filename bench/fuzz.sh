#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs
# each for a set time on its seed corpus (tests/fuzz/corpus/<target>/, plus the
# real chat templates for chat_template):
#
#   bench/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, every target
#
# Targets: http_request request_body chat_template gguf_file disk_record (tests/fuzz/harness.h).
# New inputs that reach new code stay in build-fuzz/corpus/<target>/ between
# runs. A crash, a leak, a sanitizer report or a hang (-timeout, default 10 s
# per input) stops that target: the input is saved as
# build-fuzz/crashes/<target>/crash-* (or timeout-*, leak-*), the script goes
# on with the others and exits 1. Fix the bug, then copy the input to
# tests/fuzz/regressions/<target>/ (a name saying what it broke): test_fuzz
# replays it in every build from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http_request request_body chat_template gguf_file disk_record)
build_dir=${LARDER_FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLARDER_FUZZ=ON -DLARDER_CUDA=OFF >/dev/null
fi
fuzzers=()
for t in "${targets[@]}"; do fuzzers+=("fuzz_$t"); done
cmake --build "$build_dir" -j"$(nproc)" --target "${fuzzers[@]}"

status=0
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  crashes="$build_dir/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  seeds=(tests/fuzz/corpus/"$t")
  [ -d tests/fuzz/regressions/"$t" ] && seeds+=(tests/fuzz/regressions/"$t")
  [ "$t" = chat_template ] && seeds+=(tests/template/fixtures/templates)
  echo "fuzz.sh: $t for ${seconds} s"
  # -rss_limit_mb: a parser that allocates without bound is a finding too.
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
       "$build_dir/tests/fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 \
       > "$build_dir/fuzz_$t.log" 2>&1; then
    echo "fuzz.sh: $t FAILED; see $build_dir/fuzz_$t.log and $crashes/" >&2
    grep -E "ERROR|SUMMARY|Test unit written" "$build_dir/fuzz_$t.log" | head -5 >&2 || true
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$build_dir/fuzz_$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
