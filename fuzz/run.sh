#!/usr/bin/env bash
# The C++ fuzz targets (fuzz/fuzz_*.cpp) for a given time or number of runs.
#
#   fuzz/run.sh [--seconds S] [--runs N] [--asan-runs N] [--report FILE] [TARGET ...]
#
# With clang (clang++ or clang++-14): each target built twice, plain (libFuzzer's
# coverage instrumentation only, -O2: the speed of the real decoder) and with
# ASan + UBSan; the plain build runs --runs inputs (or --seconds), the sanitized
# one --asan-runs; then a coverage build (clang's source-based coverage) replays
# the corpus and llvm-cov gives the lines of cpp/src it reached. Seeds: the
# driver's frames of every mode and version, and every frame of the conformance
# corpus (tests/conformance), turned into each target's input (fuzz/targets.h);
# corpora grow in build/fuzz/corpus/TARGET. A crash is kept as
# build/fuzz/crash-TARGET-*; each becomes a case in tests/hostile/test_fuzz.py.
# Prints a table: target, build, runs, exec/s, edges (libFuzzer's cov), lines
# covered, findings, seconds; and writes it to FILE (build/fuzz/report-cpp.md).
#
# Without clang: the g++ mutation driver (fuzz/driver.cpp) under ASan + UBSan,
# in rounds of 200,000 inputs, until --seconds are up.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=0 runs=0 asan_runs=0 targets=() report=build/fuzz/report-cpp.md
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --asan-runs) asan_runs=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(frame info tables roundtrip)
[ "$secs" != 0 ] || [ "$runs" != 0 ] || secs=600
[ "$asan_runs" != 0 ] || [ "$runs" = 0 ] || asan_runs=$((runs / 10))
out=build/fuzz
mkdir -p "$out"
kernels=$(ls cpp/src/*.cpp)
frames=$(ls tests/conformance/accept/{frame,weights}-*.bin tests/conformance/reject/{frame,weights}-*.bin 2>/dev/null || true)

clang=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clang" ]; then
  [ "$secs" != 0 ] || secs=600
  for t in "${targets[@]}"; do
    g++ -std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Icpp/include \
      $kernels "fuzz/fuzz_$t.cpp" fuzz/common.cpp fuzz/driver.cpp -o "$out/driver-$t" -lzstd -lpthread
    end=$((SECONDS + secs)); round=1
    while [ $SECONDS -lt $end ]; do "$out/driver-$t" 200000 "$round"; round=$((round + 1)); done
  done
  exit 0
fi
suffix=${clang#*clang++}
profdata=$(command -v "llvm-profdata$suffix" || command -v llvm-profdata || true)
llvmcov=$(command -v "llvm-cov$suffix" || command -v llvm-cov || true)

# The kernels' objects once per build kind, then each target linked against them. An
# object is remade where its source is newer, and all of them where a header is newer
# than the last build of that kind or its flags differ.
headers=$(find cpp/src cpp/include -name '*.h' -o -name '*.hpp')
build() {  # build KIND FLAGS...: objects in $out/obj-KIND
  local kind=$1; shift
  local dir=$out/obj-$kind
  mkdir -p "$dir"
  if [ ! -f "$dir/.flags" ] || [ "$(cat "$dir/.flags")" != "$*" ] ||
     [ -n "$(find $headers -newer "$dir/.flags")" ]; then
    rm -f "$dir"/*.o
  fi
  printf '%s\n' $kernels | xargs -P 2 -I{} sh -c \
    "o=$dir/\$(basename {} .cpp).o; [ \$o -nt {} ] || $clang -std=c++17 -g -Wno-format-security -Icpp/include $* -c {} -o \$o"
  echo "$*" >"$dir/.flags"
}
link() {  # link KIND TARGET FLAGS...
  local kind=$1 t=$2; shift 2
  $clang -std=c++17 -g -Icpp/include "$@" "$out"/obj-"$kind"/*.o "fuzz/fuzz_$t.cpp" fuzz/common.cpp \
    -o "$out/fuzz_$t-$kind" -lzstd -lpthread
}
plain=(-O2 -fsanitize=fuzzer-no-link)
asan=(-O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all)
cov=(-O1 -fprofile-instr-generate -fcoverage-mapping)
build plain "${plain[@]}"
build asan "${asan[@]}"
build cov "${cov[@]}"

run() {  # run TARGET KIND RUNS: libFuzzer; prints "runs exec/s edges seconds findings"
  local t=$1 kind=$2 n=$3 log="$out/log-$1-$2.txt" limit=()
  if [ "$n" != 0 ]; then limit=(-runs="$n"); else limit=(-max_total_time="$secs"); fi
  local start=$SECONDS rc=0 max_len=70000
  [ "$t" != roundtrip ] || max_len=2048  # (an encode per input: short ones, some stretched)
  (cd "$out" && ASAN_OPTIONS=detect_leaks=0 "./fuzz_$t-$kind" "${limit[@]}" -timeout=10 \
     -rss_limit_mb=2048 -max_len=$max_len -print_final_stats=1 -artifact_prefix="crash-$t-" \
     "corpus/$t" "seeds/$t") >"$log" 2>&1 || rc=$?
  local done_runs speed edges
  done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  local findings=0
  [ $rc = 0 ] || findings=1
  echo "$done_runs $speed $edges $((SECONDS - start)) $findings"
}

{
  echo "| target | build | runs | exec/s | edges | lines of cpp/src covered | findings | seconds |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$report"
status=0
for t in "${targets[@]}"; do
  link plain "$t" "${plain[@]}" -fsanitize=fuzzer
  link asan "$t" "${asan[@]}" -fsanitize=fuzzer,address,undefined
  link cov "$t" "${cov[@]}" -fsanitize=fuzzer
  $clang -std=c++17 -O1 -Wno-format-security -Icpp/include $kernels "fuzz/fuzz_$t.cpp" fuzz/common.cpp fuzz/driver.cpp \
    -o "$out/seeder-$t" -lzstd -lpthread
  rm -rf "$out/seeds/$t" && mkdir -p "$out/seeds/$t" "$out/corpus/$t"
  "$out/seeder-$t" --write-seeds "$out/seeds/$t" $frames >/dev/null
  read -r r1 s1 e1 w1 f1 < <(run "$t" plain "$runs")
  read -r r2 s2 e2 w2 f2 < <(run "$t" asan "$asan_runs")
  # Lines reached: the coverage build replays the corpus (no mutation).
  lines=-
  if [ -n "$profdata" ] && [ -n "$llvmcov" ]; then
    (cd "$out" && LLVM_PROFILE_FILE="cov-$t.profraw" "./fuzz_$t-cov" -runs=0 "corpus/$t" "seeds/$t") \
      >"$out/log-$t-cov.txt" 2>&1 || true
    "$profdata" merge -sparse "$out/cov-$t.profraw" -o "$out/cov-$t.profdata"
    lines=$("$llvmcov" report "$out/fuzz_$t-cov" -instr-profile="$out/cov-$t.profdata" $kernels \
      | awk '/^TOTAL/ {print $(NF-3)}')
  fi
  echo "| $t | plain | $r1 | $s1 | $e1 | $lines | $f1 | $w1 |" >>"$report"
  echo "| $t | ASan+UBSan | $r2 | $s2 | $e2 | | $f2 | $w2 |" >>"$report"
  [ "$f1$f2" = 00 ] || status=1
done
cat "$report"
ls "$out"/crash-* 2>/dev/null && echo "findings: see build/fuzz/crash-* and the logs" >&2
exit $status
