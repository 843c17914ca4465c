#!/usr/bin/env bash
# The README's Bazel install: the release tarball as an http_archive (it is a Bazel repository),
# with the rule running the release's own tool (`tool = "@neuron_cache//:bin/neuron-cache"`),
# fetches a configuration's files from the loopback Hub, byte for byte.
#   bazel-release-test.sh TARBALL BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tarball=$(readlink -f "${1:?usage: bazel-release-test.sh TARBALL BUILD_DIR}")
build=$(cd "${2:?usage: bazel-release-test.sh TARBALL BUILD_DIR}" && pwd)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
command -v bazel >/dev/null || fail "bazel is not installed (.ci/install-deps --tests)"
work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-cache-bazel-release.XXXXXX")
source "$root/tests/tools/hub-env.sh" "$build" "$work/hub"
cleanup() {
  stop_hub
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
start_hub
trap cleanup EXIT
seed_hub "$root/examples/neuron-cache.yaml" --config llama3-8b-chat
seed=$work/hub/seed-cache

mkdir -p "$work/ws"
cp "$root/examples/neuron-cache.yaml" "$work/ws/"
name=$(basename "$tarball" .tar.gz)
cat >"$work/ws/WORKSPACE" <<WS
load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
http_archive(
    name = "neuron_cache",
    urls = ["file://$tarball"],
    sha256 = "$(sha256sum "$tarball" | cut -d' ' -f1)",
    strip_prefix = "$name",
)
load("@neuron_cache//bazel:neuron_cache.bzl", "neuron_model_artifacts")
neuron_model_artifacts(
    name = "neuron_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    tool = "@neuron_cache//:bin/neuron-cache",
    strict = True,
)
WS
echo 'exports_files(["neuron-cache.yaml"])' >"$work/ws/BUILD.bazel"
printf '%s\n' "$HF_TOKEN" >"$work/token"
(cd "$work/ws" && env -u HF_TOKEN bazel --output_user_root="$work/bazel-root" --batch \
  --host_jvm_args=-Xmx1g build @neuron_models//:llama3-8b-chat --color=no --curses=no \
  --repository_cache="$work/repository-cache" --repo_env=HF_ENDPOINT="$HF_ENDPOINT" \
  --repo_env=HF_HOME="$HF_HOME" --repo_env=HF_TOKEN_PATH="$work/token" \
  --repo_env=NEURON_COMPILE_CACHE_URL="$work/cache") >"$work/bazel.log" 2>&1 ||
  { cat "$work/bazel.log" >&2; fail "the build with the release's rule and tool failed"; }
external=$(cd "$work/ws" && bazel --output_user_root="$work/bazel-root" --batch info output_base 2>/dev/null)/external
config=$external/neuron_models/llama3-8b-chat
n=0
while read -r file; do
  cmp -s "$file" "$seed/${file#"$config"/}" || fail "$file differs from what was pushed"
  n=$((n + 1))
done < <(find "$config/neuronxcc-"* -type f)
[[ $(find "$config" -name model.neff | wc -l) -ge 1 && $n -gt 1 ]] || fail "only $n files fetched"
grep -q "external/neuron_cache/bin/neuron-cache" <<<"$(find "$external/neuron_cache/bin" -name neuron-cache)" ||
  fail "the release's tool is not in @neuron_cache"
echo "PASS: $n files through the release's rule and tool, byte for byte"
