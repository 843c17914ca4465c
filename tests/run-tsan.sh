#!/usr/bin/env bash
# The thread tests under ThreadSanitizer (tests/README.md, "ThreadSanitizer"): configures
# build-tsan/ with -DNEURON_CACHE_TSAN=ON, builds the thread-test program only (not the tool, the
# servers or the other test programs) and runs its ctests (label tsan). Any report fails the run:
# TSAN_OPTIONS=halt_on_error=1 (tests/CMakeLists.txt) makes the test exit with 66 at the first.
# TSAN_BUILD_DIR picks another build folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${TSAN_BUILD_DIR:-$root/build-tsan}"

start=$SECONDS
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEURON_CACHE_TSAN=ON \
  -DNEURON_CACHE_WERROR=ON >/dev/null
cmake --build "$build" --target neuron_cache_thread_tests -j "$(nproc)"
built=$SECONDS
cd "$build"
ctest -L tsan --no-tests=error --output-on-failure -j "$(nproc)" --timeout 300
echo "ThreadSanitizer job: build $((built - start)) s, tests $((SECONDS - built)) s"
