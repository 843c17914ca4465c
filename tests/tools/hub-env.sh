# Sourced by the shell tests of the front ends (CMake, Bazel): a loopback Hub with the demo's
# repos and a cache repo filled by `neuron-cache ci` with the stand-in compiler.
#   source tests/tools/hub-env.sh BUILD_DIR WORK_DIR
#   start_hub                 starts hub-server (examples/demo-hub.json, or $HUB_CONFIG); sets
#                             HF_ENDPOINT, HF_TOKEN, HF_HOME; stopped by stop_hub (also on EXIT)
#   stand_in_path             puts an `optimum-cli` shim for tests/tools/stand-in-export on PATH
#   seed_hub MANIFEST [ARGS]  compiles and pushes MANIFEST's configurations with a throwaway cache
#   hub_log / hub_clear_log   the server's access log (JSON) / empties it
# Needs: neuron-cache and hub-server built in BUILD_DIR.
hub_env_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
hub_env_build=$1
hub_env_work=$2
NEURON_CACHE_TOOL=${NEURON_CACHE_TOOL:-$hub_env_build/core/neuron-cache}
hub_env_server=$hub_env_build/tests/hub_server/hub-server
hub_env_pid=

start_hub() {
  mkdir -p "$hub_env_work"
  rm -f "$hub_env_work/hub.json"
  "$hub_env_server" --data "$hub_env_work/hub-data" --config "${HUB_CONFIG:-$hub_env_root/examples/demo-hub.json}" \
    --ready-file "$hub_env_work/hub.json" >"$hub_env_work/hub.log" 2>&1 &
  hub_env_pid=$!
  trap stop_hub EXIT
  for _ in $(seq 100); do [[ -s "$hub_env_work/hub.json" ]] && break; sleep 0.1; done
  [[ -s "$hub_env_work/hub.json" ]] || { cat "$hub_env_work/hub.log"; return 1; }
  HF_ENDPOINT=$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$hub_env_work/hub.json")
  export HF_ENDPOINT HF_TOKEN=hf_alice_write HF_HOME="$hub_env_work/hf-home"
  export NEURON_CACHE_RETRY_BASE_MS=10
}

stop_hub() {
  [[ -n "$hub_env_pid" ]] && kill "$hub_env_pid" 2>/dev/null && wait "$hub_env_pid" 2>/dev/null
  hub_env_pid=
  return 0
}

stand_in_path() {
  mkdir -p "$hub_env_work/bin"
  printf '#!/bin/sh\n[ "$1 $2" = "export neuron" ] && shift 2\nexec "%s" "$@"\n' \
    "$hub_env_root/tests/tools/stand-in-export" >"$hub_env_work/bin/optimum-cli"
  chmod +x "$hub_env_work/bin/optimum-cli"
  export PATH="$hub_env_work/bin:$PATH" STAND_IN_DELAY=${STAND_IN_DELAY:-0}
}

seed_hub() {
  local manifest=$1
  shift
  stand_in_path
  NEURON_COMPILE_CACHE_URL="$hub_env_work/seed-cache" "$NEURON_CACHE_TOOL" ci "$manifest" \
    --output-dir "$hub_env_work/seed-out" --quiet "$@"
}

hub_log() { curl -s "$HF_ENDPOINT/_admin/log"; }
hub_clear_log() { curl -s -X DELETE "$HF_ENDPOINT/_admin/log" >/dev/null; }
