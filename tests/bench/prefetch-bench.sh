#!/usr/bin/env bash
# The prefetch benchmark (issues 9 and 25) as one command: builds what it needs, installs the
# official JS client (npm ci, from tests/js/package-lock.json) into the build tree, then runs
# prefetch-bench (tests/bench/prefetch_bench.cpp), which generates the set, pushes it with
# neuron-cache to the loopback Hub server, times prefetch / curl --parallel / cp -r /
# snapshotDownload interleaved, checks every result byte for byte and prints the table.
#
#   tests/bench/prefetch-bench.sh [SCALE [ROUNDS]] [--small-modules N] [--work DIR]
#                                 [--build-dir DIR] [--no-build] [--ctest]
#                                 [--tool PROGRAM] [--curl PROGRAM]   (e.g. a wrapper that profiles)
#
# SCALE (default 1) multiplies the nine large NEFFs (1 GiB and 8 x 100 MiB at 1); ROUNDS
# defaults to 3. --ctest (the smoke test): no build, and exit 77 (skipped) when the JS client
# cannot be installed. Needs about 4 x the set's size of free space under TMPDIR (or --work).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
scale=1
rounds=3
do_build=1
ctest=0
extra=()
positional=()
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --ctest) ctest=1; do_build=0; shift ;;
    --small-modules | --work | --tool | --curl) extra+=("$1" "$2"); shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "prefetch-bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
((${#positional[@]} <= 2)) || { echo "prefetch-bench.sh: too many arguments (see --help)" >&2; exit 2; }
[[ ${#positional[@]} -ge 1 ]] && scale=${positional[0]}
[[ ${#positional[@]} -ge 2 ]] && rounds=${positional[1]}

# Skipped under ctest, an error by hand: the table is meaningless without the official client.
no_js() {
  if ((ctest)) && [[ "${NEURON_CACHE_REQUIRE_NPM:-0}" != 1 ]]; then
    echo "SKIPPED: $1. The benchmark needs the official @huggingface/hub client from the npm" \
         "registry (or an npm cache holding tests/js/package-lock.json's packages)." >&2
    exit 77
  fi
  echo "prefetch-bench.sh: $1. Install node and npm (.ci/install-deps --tests) and make the npm" \
       "registry reachable (or npm's cache hold tests/js/package-lock.json's packages)." >&2
  exit 1
}

if ((do_build)); then
  [[ -f "$build/CMakeCache.txt" ]] ||
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build "$build" -j2 --target neuron-cache hub-server prefetch-bench
fi
bench=$build/tests/prefetch-bench
[[ -x "$bench" ]] || { echo "prefetch-bench.sh: $bench is not built" >&2; exit 1; }

node=$(command -v node || command -v nodejs || true)
npm=$(command -v npm || true)
[[ -n "$node" && -n "$npm" ]] || no_js "node or npm is missing"
js=$build/tests/bench-js
mkdir -p "$js"
cp "$root/tests/js/package.json" "$root/tests/js/package-lock.json" \
  "$root/tests/bench/snapshot-download.mjs" "$js/"
stamp=$js/node_modules/.neuron-cache-package-lock.json
if ! cmp -s "$root/tests/js/package-lock.json" "$stamp"; then
  echo "installing @huggingface/hub: npm ci in $js"
  npm_options=(--no-audit --no-fund --prefer-offline)
  ((ctest)) && npm_options+=(--fetch-retries=1 --fetch-timeout=30000)
  (cd "$js" && "$npm" ci "${npm_options[@]}") || no_js "npm ci failed in $js"
  cp "$root/tests/js/package-lock.json" "$stamp"
fi

exec "$bench" --scale "$scale" --rounds "$rounds" --node "$node" --js-dir "$js" "${extra[@]}"
