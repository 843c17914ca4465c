#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install the dependencies, build neuron-cache, lay
# out an example Neuron cache and look at it, then run the pipeline of examples/neuron-cache.yaml
# twice against each kind of store, with the same commands (only --repo changes): a loopback Hub,
# an S3-compatible bucket (s3rver) and a shared folder. The first run compiles and pushes, the
# second (a fresh machine with an empty cache) fetches everything and compiles nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/install-deps" --demo
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" --target neuron-cache hub-server -j "$(nproc)"
tool="$root/build/core/neuron-cache"
hub_server="$root/build/tests/hub_server/hub-server"

work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  declare -F stop_s3 >/dev/null && stop_s3
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

# Two machines share one store: the first compiles and pushes, the second fetches everything and
# compiles nothing, and a warm rerun moves nothing. STORE is a --repo value, or "" for the
# manifest's cache_repo (the loopback Hub).
two_machines() {
  local label=$1 store=$2 repo=()
  [[ -n "$store" ]] && repo=(--repo "$store")
  local before
  printf '\n==== %s, first machine: empty cache, empty store ====\n' "$label"
  export NEURON_COMPILE_CACHE_URL="$work/$label-1/neuron-compile-cache"
  step plan "$manifest" "${repo[@]}"
  step ci "$manifest" "${repo[@]}" --jobs 2 --output-dir "$work/$label-1/out" \
    --report "$work/$label-report-1.json" --summary "$work/$label-summary-1.md"
  echo "compiler calls so far: $(calls)"
  cat "$work/$label-summary-1.md"

  printf '\n==== %s, second machine: empty cache, the store has everything ====\n' "$label"
  export NEURON_COMPILE_CACHE_URL="$work/$label-2/neuron-compile-cache"
  before=$(calls)
  step plan "$manifest" "${repo[@]}"
  step ci "$manifest" "${repo[@]}" --jobs 2 --output-dir "$work/$label-2/out" \
    --report "$work/$label-report-2.json" --summary "$work/$label-summary-2.md"
  echo "compiler calls so far: $(calls) (none on this machine)"
  cat "$work/$label-summary-2.md"
  [[ "$(calls)" == "$before" ]] || { echo "the second machine compiled: the store failed" >&2; exit 1; }

  printf '\n==== %s, second machine again: nothing to download, nothing to compile ====\n' "$label"
  step ci "$manifest" "${repo[@]}" --output-dir "$work/$label-2/out" --quiet
  echo "compiler calls so far: $(calls)"
}

two_machines hub ""
# The registry entries the compile command wrote went up unchanged: optimum-neuron's lookup (and
# ours) finds the configurations in the repo.
step lookup meta-llama/Llama-3.1-8B-Instruct --repo acme/neuron-cache

# The same job against an S3 bucket, in libneuronxla's layout (NEURON_COMPILE_CACHE_URL=s3://...
# jobs share it), on the project's S3-compatible test server, and against a shared folder.
source "$root/tests/tools/s3-env.sh" "$work"
start_s3 demo-neuron-cache
two_machines s3 s3://demo-neuron-cache/compile-cache
step lookup meta-llama/Llama-3.1-8B-Instruct --repo s3://demo-neuron-cache/compile-cache
stop_s3
mkdir -p "$work/shared-folder"  # a mounted share: a store never fills a folder it was not made
step create -n "file://$work/shared-folder/neuron-compile-cache"
two_machines folder "file://$work/shared-folder/neuron-compile-cache"
printf '\n$ ls %s\n' "$work/shared-folder/neuron-compile-cache/$cc"
ls "$work/shared-folder/neuron-compile-cache/$cc" | head -8
