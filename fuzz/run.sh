#!/usr/bin/env bash
# Long fuzzing runs of the frame decoders.
#   fuzz/run.sh [SECONDS]     (default 600)
# With clang: libFuzzer + ASan + UBSan, corpus in fuzz/corpus. Without: the
# g++ mutation driver under ASan + UBSan, in rounds until the time is up.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
srcs=$(ls cpp/src/*.cpp)  # every kernel source, as tests/test_sanitizers.py builds
mkdir -p build/fuzz fuzz/corpus
if command -v clang++ >/dev/null; then
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -Icpp/include $srcs fuzz/fuzz_frame.cpp -o build/fuzz/fuzz_frame -lzstd -lpthread
  build/fuzz/fuzz_frame -max_total_time="$secs" fuzz/corpus
else
  g++ -std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Icpp/include $srcs fuzz/fuzz_frame.cpp fuzz/driver.cpp -o build/fuzz/driver -lzstd -lpthread
  end=$((SECONDS + secs)); round=1
  while [ $SECONDS -lt $end ]; do build/fuzz/driver 200000 "$round"; round=$((round + 1)); done
fi
