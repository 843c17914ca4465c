#!/usr/bin/env bash
# Installs the dependencies, builds neuron-cache with warnings as errors and runs every test.
# SANITIZE=1 builds with AddressSanitizer and UBSan instead (in build-asan/). Then the thread tests
# run under ThreadSanitizer (tests/run-tsan.sh, in build-tsan/; TSAN=0 skips them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# What each part of the run costs, printed at the end (and so in every CI log).
costs=()
timed() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  costs+=("$(printf '%-34s %5d s' "$name" $((SECONDS - start)))")
  return "$rc"
}
print_costs() {
  echo "== what this run cost (wall time, $(nproc) cores) =="
  printf '  %s\n' "${costs[@]}"
  printf '  %-34s %5d s\n' "total" "$SECONDS"
}
trap print_costs EXIT
timed "dependencies (apt-get, npm ci)" bash "$root/.ci/install-deps" --tests

build="$root/build"
# The release's options too: the release checks (packaging/release/) package this very build.
options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEURON_CACHE_WERROR=ON -DNEURON_CACHE_PORTABLE=ON
  -DNEURON_CACHE_INSTALL_ACTION=ON)
if [[ "${SANITIZE:-0}" == 1 ]]; then
  build="$root/build-asan"
  options+=(-DNEURON_CACHE_SANITIZE=ON)
fi
timed "configure" cmake -S "$root" -B "$build" "${options[@]}" >/dev/null
timed "build (tool, tests, release)" cmake --build "$build" -j "$(nproc)"
cd "$build"
# Here (and so in CI) the tests that need the npm registry fail rather than skip when it is down.
export NEURON_CACHE_REQUIRE_NPM=${NEURON_CACHE_REQUIRE_NPM:-1}
# Tests talk to loopback only: boto3 (the S3 cross-check) never asks the EC2 metadata address for
# credentials, even when a test leaves its keys out.
export AWS_EC2_METADATA_DISABLED=true
status=0
timed "tests (ctest: unit, e2e, packaging)" ctest --output-on-failure -j "$(nproc)" --timeout 600 ||
  status=$?
# The thread tests under ThreadSanitizer (tests/run-tsan.sh, its own build-tsan/), also when a
# test above failed: one CI run shows both. TSAN=0 leaves them out (as does SANITIZE=1).
if [[ "${TSAN:-1}" == 1 && "${SANITIZE:-0}" != 1 ]]; then
  timed "ThreadSanitizer (build and tests)" bash "$root/tests/run-tsan.sh" || status=$?
fi
exit "$status"
