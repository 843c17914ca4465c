#!/usr/bin/env bash
# Installs the dependencies, builds neuron-cache with warnings as errors and runs every test.
# SANITIZE=1 builds with AddressSanitizer and UBSan instead (in build-asan/). Then the thread tests
# run under ThreadSanitizer (tests/run-tsan.sh, in build-tsan/; TSAN=0 skips them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/install-deps" --tests

build="$root/build"
# The release's options too: the release checks (packaging/release/) package this very build.
options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEURON_CACHE_WERROR=ON -DNEURON_CACHE_PORTABLE=ON
  -DNEURON_CACHE_INSTALL_ACTION=ON)
if [[ "${SANITIZE:-0}" == 1 ]]; then
  build="$root/build-asan"
  options+=(-DNEURON_CACHE_SANITIZE=ON)
fi
cmake -S "$root" -B "$build" "${options[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build"
# Here (and so in CI) the tests that need the npm registry fail rather than skip when it is down.
export NEURON_CACHE_REQUIRE_NPM=${NEURON_CACHE_REQUIRE_NPM:-1}
# Tests talk to loopback only: boto3 (the S3 cross-check) never asks the EC2 metadata address for
# credentials, even when a test leaves its keys out.
export AWS_EC2_METADATA_DISABLED=true
status=0
ctest --output-on-failure -j "$(nproc)" --timeout 600 || status=$?
# The thread tests under ThreadSanitizer (tests/run-tsan.sh, its own build-tsan/), also when a
# test above failed: one CI run shows both. TSAN=0 leaves them out (as does SANITIZE=1).
if [[ "${TSAN:-1}" == 1 && "${SANITIZE:-0}" != 1 ]]; then
  bash "$root/tests/run-tsan.sh" || status=$?
fi
exit "$status"
