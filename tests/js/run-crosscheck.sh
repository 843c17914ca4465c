#!/usr/bin/env bash
# ctest entry of the JS cross-check: installs the pinned @huggingface/hub with `npm ci` into the
# build tree (again only when package-lock.json changes), then runs crosscheck.mjs against a
# fresh hub-server. When npm cannot install, this FAILS rather than skips: the cross-check is
# what shows the test server behaves like the Hub for the official client.
#   run-crosscheck.sh SOURCE_JS_DIR WORK_DIR HUB_SERVER [NODE] [NPM] [HUB_TRANSFER]
set -euo pipefail
src=$1
work=$2
server=$3
node=${4:-node}
npm=${5:-npm}
transfer=${6:-}

mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/crosscheck.mjs" "$work/"
stamp="$work/node_modules/.neuron-cache-package-lock.json"
if ! cmp -s "$src/package-lock.json" "$stamp"; then
  echo "installing @huggingface/hub: npm ci in $work (node $("$node" --version), npm $("$npm" --version))"
  if ! (cd "$work" && "$npm" ci --no-audit --no-fund); then
    echo "error: npm ci failed in $work. The JS cross-check needs the npm registry (or an npm" \
         "cache holding the packages of tests/js/package-lock.json); check the network or" \
         "npm's proxy settings, then rerun ctest." >&2
    exit 1
  fi
  cp "$src/package-lock.json" "$stamp"
fi
extra=()
[[ -n "$transfer" ]] && extra=(--transfer "$transfer")
exec "$node" "$work/crosscheck.mjs" --server "$server" --config "$src/../hub_server/example-config.json" "${extra[@]}"
