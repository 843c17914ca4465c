#!/usr/bin/env bash
# ctest entry of the JS cross-check: installs the pinned @huggingface/hub with `npm ci` into the
# build tree (again only when package-lock.json changes), then runs crosscheck.mjs against a
# fresh hub-server. When npm cannot install (a distribution build runs its tests offline), this
# is skipped (exit 77) with the reason; NEURON_CACHE_REQUIRE_NPM=1 (set by tests/run-tests.sh, so
# by CI) makes it a failure instead: the cross-check is what shows the test server behaves like
# the Hub for the official client.
#   run-crosscheck.sh SOURCE_JS_DIR WORK_DIR HUB_SERVER [NODE] [NPM] [HUB_TRANSFER]
set -euo pipefail
src=$1
work=$2
server=$3
node=${4:-node}
npm=${5:-npm}
transfer=${6:-}

# The official client cannot be installed: skipped, unless the run requires it.
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
cp "$src/package.json" "$src/package-lock.json" "$src/crosscheck.mjs" "$work/"
stamp="$work/node_modules/.neuron-cache-package-lock.json"
if ! cmp -s "$src/package-lock.json" "$stamp"; then
  echo "installing @huggingface/hub: npm ci in $work (node $("$node" --version), npm $("$npm" --version))"
  if ! (cd "$work" && "$npm" ci --no-audit --no-fund); then
    unavailable "npm ci failed in $work. The JS cross-check needs the npm registry (or an npm" \
      "cache holding the packages of tests/js/package-lock.json); check the network or npm's" \
      "proxy settings, then rerun ctest"
  fi
  cp "$src/package-lock.json" "$stamp"
fi
extra=()
[[ -n "$transfer" ]] && extra=(--transfer "$transfer")
exec "$node" "$work/crosscheck.mjs" --server "$server" --config "$src/../hub_server/example-config.json" "${extra[@]}"
