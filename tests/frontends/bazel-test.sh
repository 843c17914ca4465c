#!/usr/bin/env bash
# The Bazel front end end to end: a real Bazel (Debian's bazel-bootstrap, 4.2) builds a copy of
# examples/bazel, whose genrule consumes @neuron_models//:llama3-8b-chat, against the loopback Hub.
# Checks: the genrule lists the configuration's NEFFs; a second build asks the Hub nothing; editing
# the manifest fetches again; a missing configuration gives an empty filegroup and a warning (a
# failed fetch with strict = True); the token, given as a file, reaches the tool and appears nowhere
# in Bazel's output or output base.
#   bazel-test.sh BUILD_DIR        (KEEP_WORK=1 keeps the temporary folder)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: bazel-test.sh BUILD_DIR}" && pwd)

if ! command -v bazel >/dev/null; then
  echo "FAIL: bazel is not installed (Debian: apt-get install bazel-bootstrap; .ci/install-deps does it)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-cache-bazel.XXXXXX")
source "$root/tests/tools/hub-env.sh" "$build" "$work/hub"
cleanup() {
  stop_hub
  if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work"; return; fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

start_hub
trap cleanup EXIT
seed_hub "$root/examples/neuron-cache.yaml" --config llama3-8b-chat

# The token goes to Bazel as a file: Bazel logs its client environment in the output base's
# java.log, so a token in HF_TOKEN would end up there.
token=$HF_TOKEN
printf '%s\n' "$token" >"$work/token"
unset HF_TOKEN

cp -r "$root/examples/bazel" "$work/ws"
outputs=$work/outputs
mkdir -p "$outputs"
run=0
# bazel ARGS...: one --batch Bazel (no server left behind) on the shared output root; its output
# goes to $outputs/<n>.log and $last.
bazel_in_ws() {
  run=$((run + 1))
  last=$outputs/$run.log
  local status=0
  (cd "$work/ws" && bazel --output_user_root="$work/bazel-root" --batch --host_jvm_args=-Xmx1g \
    "$1" --override_repository=neuron_cache="$root" --jobs=2 --local_cpu_resources=2 \
    --nosandbox_debug --color=no --curses=no \
    --repo_env=HF_ENDPOINT="$HF_ENDPOINT" --repo_env=HF_HOME="$HF_HOME" \
    --repo_env=HF_TOKEN_PATH="$work/token" --repo_env=NEURON_CACHE_TOOL="$NEURON_CACHE_TOOL" \
    --repo_env=NEURON_COMPILE_CACHE_URL="$work/cache" "${@:2}") >"$last" 2>&1 || status=$?
  return $status
}
show_last() { sed 's/^/  | /' "$last" >&2; }
module_downloads() { hub_log | grep -o '"path":"[^"]*/resolve/[^"]*MODULE_[^"]*"' | wc -l; }
requests() { hub_log | grep -o '"method":' | wc -l; }

step "first build: fetches llama3-8b-chat"
hub_clear_log
bazel_in_ws build //:neff_list || { show_last; fail "the first build failed"; }
list=$work/ws/bazel-bin/neff_list.txt
[[ -f "$list" ]] || fail "no $list"
cat "$list"
entry=$work/cache/neuronxcc-2.21.33363.0+82129205
expected=$(find "$entry" -path '*/MODULE_*/model.neff' | wc -l)
# Only the configuration's modules: the seed compiled llama3-8b-chat alone into this cache.
[[ $expected -ge 1 ]] || fail "prefetch put no NEFF in $work/cache"
[[ $(grep -c '\.neff ' "$list") -eq $expected ]] || fail "the genrule lists not all $expected NEFFs"
while read -r path size; do
  [[ "$path" == *.neff ]] || continue
  actual=$(wc -c <"$entry/${path#neuronxcc-*/}")
  [[ "$size" == "$actual" ]] || fail "$path: listed $size bytes, the cache has $actual"
done < <(grep '\.neff ' "$list")
grep -q '^NEURON_COMPILE_CACHE_URL=.*/llama3-8b-chat$' "$list" || fail "no cache folder in the list"
[[ $(module_downloads) -ge $expected ]] || fail "the fetch downloaded no MODULE_ file"
hub_log | python3 -c '
import json, sys
hub = [r for r in json.load(sys.stdin) if r["listener"] == "hub"]  # the CDN gets signed URLs
sys.exit(0 if hub and all(r["authorization"] for r in hub) else 1)' ||
  fail "a Hub request went without the token from the token file"
generated=$(cd "$work/ws" && echo "$(bazel --output_user_root="$work/bazel-root" --batch info output_base 2>/dev/null)/external/neuron_models")
grep -q 'name = "llama3-8b-chat_entry"' "$generated/BUILD.bazel" || fail "no llama3-8b-chat_entry"
grep -q 'name = "all"' "$generated/BUILD.bazel" || fail "no :all"

step "second build: the repository is not fetched again"
hub_clear_log
before=$(stat -c %Y "$generated/report.json")
bazel_in_ws build //:neff_list || { show_last; fail "the second build failed"; }
[[ $(requests) -eq 0 ]] || { hub_log >&2; fail "the second build made Hub requests"; }
[[ $(stat -c %Y "$generated/report.json") == "$before" ]] || fail "the second build refetched"

step "editing the manifest fetches again"
sleep 1  # the marker is content based; this only makes report.json's mtime tell a refetch
echo "# edited" >>"$work/ws/neuron-cache.yaml"
hub_clear_log
bazel_in_ws build //:neff_list || { show_last; fail "the build after the edit failed"; }
[[ $(requests) -gt 0 ]] || fail "the edited manifest was not fetched again (no Hub request)"
[[ $(module_downloads) -eq 0 ]] || fail "the refetch downloaded again what the local cache has"
[[ $(stat -c %Y "$generated/report.json") != "$before" ]] || fail "report.json was not rewritten"

step "a configuration the cache lacks: empty filegroup and a warning; strict: the fetch fails"
cat >>"$work/ws/WORKSPACE" <<'WS'

load("@neuron_cache//bazel:repositories.bzl", "neuron_cache_repositories")

neuron_cache_repositories(
    name = "missing_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-batch"],
)

neuron_model_artifacts(
    name = "strict_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-batch"],
    strict = True,
)

neuron_model_artifacts(
    name = "typo_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["no-such-configuration"],
)
WS
bazel_in_ws build @missing_models//:llama3-8b-batch || { show_last; fail "a missing configuration failed the build"; }
grep -q 'WARNING: neuron-cache: not in the cache.*llama3-8b-batch' "$last" ||
  { show_last; fail "no warning for the missing configuration"; }
if bazel_in_ws build @strict_models//:llama3-8b-batch; then show_last; fail "strict = True did not fail"; fi
grep -q 'not in the cache for @strict_models: llama3-8b-batch' "$last" ||
  { show_last; fail "strict: no clear message"; }
if bazel_in_ws build @typo_models//:no-such-configuration; then show_last; fail "an unknown configuration did not fail"; fi
grep -q 'no configuration named "no-such-configuration"' "$last" ||
  { show_last; fail "unknown configuration: not the tool's message"; }

step "offline: served by the local cache; a name with ':' becomes a valid target"
echo '      - {name: "chat:bf16", batch_size: 1, sequence_length: 4096, num_cores: 8, precision: bf16}' \
  >>"$work/ws/neuron-cache.yaml"
cat >>"$work/ws/WORKSPACE" <<'WS'

neuron_model_artifacts(
    name = "offline_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["chat:bf16", "llama3-8b-chat"],
    offline = True,
)
WS
hub_clear_log
bazel_in_ws build @offline_models//:chat_bf16 @offline_models//:llama3-8b-chat ||
  { show_last; fail "the offline build failed"; }
[[ $(requests) -eq 0 ]] || { hub_log >&2; fail "offline = True made Hub requests"; }
# The tool's notices reach the user (here: the revision remembered from the first fetch).
grep -q '@offline_models: .*remembered' "$last" || { show_last; fail "no notice"; }
offline_build=$(dirname "$generated")/offline_models/BUILD.bazel
[[ $(grep -c '/model.neff"' "$offline_build") -eq $((2 * expected)) ]] ||
  { cat "$offline_build" >&2; fail "offline: not every NEFF of both configurations"; }
grep -q 'name = "chat_bf16"' "$offline_build" || fail "chat:bf16 is not the target chat_bf16"

step "a tool whose JSON report has another format: the fetch fails and says why"
printf '#!/bin/sh\necho '"'"'{"format_version": 99, "configurations": []}'"'"'\n' >"$work/future-tool"
chmod +x "$work/future-tool"
cat >>"$work/ws/WORKSPACE" <<WS

neuron_model_artifacts(
    name = "future_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
)
WS
if bazel_in_ws build @future_models//:llama3-8b-chat --repo_env=NEURON_CACHE_TOOL="$work/future-tool"; then show_last; fail "a report of format 99 was read"; fi
grep -q 'writes JSON reports of format 99; this rule reads format 1' "$last" ||
  { show_last; fail "another report format: no clear message"; }

step "the token is nowhere in Bazel's output or output base"
if grep -rlF "$token" "$outputs" "$work/bazel-root" "$work/ws" 2>/dev/null; then
  fail "the token leaked into the files above"
fi
echo "PASS"
