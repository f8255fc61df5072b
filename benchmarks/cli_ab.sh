#!/usr/bin/env bash
# Whole-process A/B of the CLI: two builds of nncodecs, interleaved, on
# all-MiniLM-L6-v2 as bfloat16 and float32 safetensors files: compress and
# decompress seconds, container size, byte-identical restore.
#
#   benchmarks/cli_ab.sh OLD_DIR NEW_DIR [RUNS]
#
# OLD_DIR / NEW_DIR hold an installed package each, made with
#   git worktree add --detach /tmp/wt-old REV && \
#   .venv/py311/bin/pip install --no-deps --no-build-isolation --target OLD_DIR /tmp/wt-old
set -euo pipefail
old=$1; new=$2; runs=${3:-3}
cd "$(dirname "$0")/.."
PY=.venv/py311/bin/python
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
$PY - "$W" <<'PYEOF'
import sys
import ml_dtypes
from safetensors.numpy import load_file, save_file
from nncodecs.datasets import minilm_path
t = load_file(minilm_path())
save_file({k: v.astype(ml_dtypes.bfloat16) for k, v in t.items()}, f"{sys.argv[1]}/bf16.safetensors")
save_file(t, f"{sys.argv[1]}/f32.safetensors")
PYEOF
now() { date +%s.%N; }
for f in bf16 f32; do
  for run in $(seq 1 "$runs"); do
    for v in old new; do
      dir=$old; [ $v = new ] && dir=$new
      rm -rf "$W/$f.$v.zarr.zip" "$W/$f.$v.out.safetensors"
      a=$(now); PYTHONPATH=$dir $PY -m nncodecs compress "$W/$f.safetensors" -o "$W/$f.$v.zarr.zip" >/dev/null
      b=$(now); PYTHONPATH=$dir $PY -m nncodecs decompress "$W/$f.$v.zarr.zip" -o "$W/$f.$v.out.safetensors" >/dev/null
      c=$(now)
      same=no; cmp -s "$W/$f.safetensors" "$W/$f.$v.out.safetensors" && same=yes
      printf "%-5s %-4s run %d  compress %6.2f s  decompress %6.2f s  container %10d B  identical %s\n" \
        $f $v "$run" "$(echo "$b - $a" | bc)" "$(echo "$c - $b" | bc)" "$(stat -c %s "$W/$f.$v.zarr.zip")" $same
    done
  done
done
