#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install the dependencies, build neuron-cache, lay
# out an example Neuron cache and look at it, then run the pipeline of examples/neuron-cache.yaml
# twice against a loopback Hub: the first run compiles and pushes, the second (a fresh machine
# with an empty cache) fetches everything and compiles nothing.
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
"$hub_server" --data "$work/hub" --config "$root/examples/demo-hub.json" \
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

# The main job: examples/neuron-cache.yaml declares 5 configurations of 3 public models. The real
# neuronx-cc cannot run here (no Neuron hardware), so `optimum-cli` is the project's stand-in
# compiler (tests/tools/stand-in-export): it follows neuronx-cc's cache contract, writes real
# MODULE_ folders and registry entries, and takes a moment per graph.
mkdir -p "$work/bin"
printf '#!/bin/sh\n[ "$1 $2" = "export neuron" ] && shift 2\nexec "%s" "$@"\n' \
  "$root/tests/tools/stand-in-export" >"$work/bin/optimum-cli"
chmod +x "$work/bin/optimum-cli"
export PATH="$work/bin:$PATH"
export STAND_IN_DELAY=0.5 STAND_IN_NEFF_BYTES=4194304 STAND_IN_CALL_LOG="$work/compiler-calls.jsonl"
manifest="$root/examples/neuron-cache.yaml"
calls() { [[ -f "$STAND_IN_CALL_LOG" ]] && wc -l <"$STAND_IN_CALL_LOG" || echo 0; }

printf '\n==== first machine: empty cache, empty Hub repo ====\n'
export NEURON_COMPILE_CACHE_URL="$work/machine-1/neuron-compile-cache"
step plan "$manifest"
step ci "$manifest" --jobs 2 --output-dir "$work/machine-1/out" --report "$work/report-1.json" \
  --summary "$work/summary-1.md"
echo "compiler calls so far: $(calls)"
cat "$work/summary-1.md"
# The registry entries the compile command wrote went up unchanged: optimum-neuron's lookup (and
# ours) finds the configurations in the repo.
step lookup meta-llama/Llama-3.1-8B-Instruct --repo acme/neuron-cache

printf '\n==== second machine: empty cache, the Hub has everything ====\n'
export NEURON_COMPILE_CACHE_URL="$work/machine-2/neuron-compile-cache"
step plan "$manifest"
step ci "$manifest" --jobs 2 --output-dir "$work/machine-2/out" --report "$work/report-2.json" \
  --summary "$work/summary-2.md"
echo "compiler calls so far: $(calls) (none on this machine)"
cat "$work/summary-2.md"

printf '\n==== second machine again: nothing to download, nothing to compile ====\n'
step ci "$manifest" --output-dir "$work/machine-2/out" --quiet
echo "compiler calls so far: $(calls)"
