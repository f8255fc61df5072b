#!/usr/bin/env bash
# The Python fuzz targets (fuzz/targets.py, atheris) for a given time or number of runs.
#
#   fuzz/run_python.sh PYTHON [--seconds S] [--runs N] [--report FILE] [TARGET ...]
#
# PYTHON: an interpreter with nncodecs and atheris installed (make fuzz: the Python 3.11
# environment). Seeds from fuzz/targets.py --write-seeds; corpora grow in
# build/fuzz/corpus-py/TARGET; a finding is kept as build/fuzz/crash-py-TARGET-* (each
# becomes a case in fuzz/regressions/TARGET, which tests/hostile/test_fuzz.py runs).
# Prints a table (target, runs, exec/s, edges: atheris' coverage of nncodecs' Python
# code, findings, seconds) and writes it to FILE (build/fuzz/report-python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1; shift
secs=0 runs=0 targets=() report=build/fuzz/report-python.md
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(frame container safetensors gguf onnx torch npz ztensor)
[ "$secs" != 0 ] || [ "$runs" != 0 ] || secs=600
out=build/fuzz
mkdir -p "$out"
{
  echo "| target | runs | exec/s | edges | findings | seconds |"
  echo "|---|---|---|---|---|---|"
} >"$report"
status=0
for t in "${targets[@]}"; do
  rm -rf "$out/seeds-py/$t" && mkdir -p "$out/seeds-py/$t" "$out/corpus-py/$t"
  "$py" fuzz/targets.py --write-seeds "$t" "$out/seeds-py/$t" >/dev/null
  if [ "$runs" != 0 ]; then limit=(-runs="$runs"); else limit=(-max_total_time="$secs"); fi
  log=$out/log-py-$t.txt start=$SECONDS rc=0
  "$py" fuzz/targets.py "$t" "${limit[@]}" -timeout=20 -rss_limit_mb=3072 -max_len=100000 \
    -print_final_stats=1 -artifact_prefix="$out/crash-py-$t-" \
    "$out/corpus-py/$t" "$out/seeds-py/$t" >"$log" 2>&1 || rc=$?
  done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  findings=0
  [ $rc = 0 ] || { findings=1; status=1; }
  echo "| $t | $done_runs | $speed | $edges | $findings | $((SECONDS - start)) |" >>"$report"
done
cat "$report"
exit $status
