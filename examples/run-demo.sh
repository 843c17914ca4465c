#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install the dependencies, build neuron-cache, lay
# out an example Neuron cache, and look at it the way a pipeline would.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/install-deps"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" --target neuron-cache hub-server -j "$(nproc)"
tool="$root/build/core/neuron-cache"
hub_server="$root/build/tests/hub_server/hub-server"

work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
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

# The Hub part, against the project's loopback Hub (tests/hub_server): no real Hub is reachable
# here, and the tool cannot tell the difference.
"$hub_server" --data "$work/hub" --config "$root/tests/hub_server/example-config.json" \
  --ready-file "$work/hub.json" >"$work/hub.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [[ -s "$work/hub.json" ]] && break; sleep 0.1; done
export HF_ENDPOINT=$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$work/hub.json")
export HF_HOME="$work/hf-home"
export HF_TOKEN=hf_alice_write  # a token of the example config; never printed in full
step whoami
step create -n demo-cache
step config show
step synchronize
step lookup llamafactory/tiny-random-Llama-3
step synchronize --json
