#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install the dependencies, build neuron-cache, lay
# out an example Neuron cache, and look at it the way a pipeline would.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/install-deps"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" --target neuron-cache -j "$(nproc)"
tool="$root/build/core/neuron-cache"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache="$work/neuron-compile-cache"
bash "$root/examples/make-example-cache.sh" "$cache" "$tool"
cc=neuronxcc-2.21.33363.0+82129205

step() { printf '\n$ neuron-cache %s\n' "$*"; "$tool" "$@"; }
export NEURON_COMPILE_CACHE_URL="$cache"
step config show
step status --compiler-version 2.21.33363.0
step inspect "$cache/$cc/MODULE_26254ca2c7a3ba18d3e1+d7cde3b5"
step inspect "$cache/$cc/MODULE_9993940051196728623+d7cde3b5"
step inspect --flags '["--model-type=transformer", "--auto-cast=none"]'
step inspect --json "$root/examples/data/llama-tiny.entry.json"
step cleanup --dry-run
step cleanup
step status --compiler-version 2.21.33363.0
