#!/usr/bin/env bash
# ctest entry of the S3 backend's tests: installs the pinned s3rver (tests/s3/package-lock.json)
# with `npm ci` into the build tree (again only when package-lock.json changes), then runs the
# S3 gtest binary with NEURON_CACHE_S3RVER naming s3rver's script (tests/unit/s3_server.h starts
# one per test). When npm cannot install (a distribution build runs its tests offline), this is
# skipped (exit 77) with the reason; NEURON_CACHE_REQUIRE_NPM=1 (tests/run-tests.sh, so CI)
# makes it a failure instead.
#   run-s3-tests.sh SOURCE_S3_DIR WORK_DIR NODE NPM TEST_BINARY [gtest arguments...]
set -euo pipefail
src=$1
work=$2
node=$3
npm=$4
binary=$5
shift 5

unavailable() {
  if [[ "${NEURON_CACHE_REQUIRE_NPM:-0}" == 1 ]]; then
    echo "error: $*." >&2
    exit 1
  fi
  echo "SKIPPED: $* (NEURON_CACHE_REQUIRE_NPM=1 makes this a failure)." >&2
  exit 77
}
command -v "$node" >/dev/null && command -v "$npm" >/dev/null ||
  unavailable "node or npm is missing: run .ci/install-deps --tests, then cmake again"

mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$work/"
stamp="$work/node_modules/.neuron-cache-package-lock.json"
if ! cmp -s "$src/package-lock.json" "$stamp"; then
  echo "installing s3rver: npm ci in $work (node $("$node" --version), npm $("$npm" --version))"
  if ! (cd "$work" && "$npm" ci --no-audit --no-fund); then
    unavailable "npm ci failed in $work. The S3 tests need the npm registry (or an npm cache" \
      "holding the packages of tests/s3/package-lock.json); check the network or npm's proxy" \
      "settings, then rerun ctest"
  fi
  cp "$src/package-lock.json" "$stamp"
fi
export NEURON_CACHE_S3RVER="$work/node_modules/s3rver/bin/s3rver.js"
export NEURON_CACHE_NODE="$(command -v "$node")"
exec "$binary" "$@"
