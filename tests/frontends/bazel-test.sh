#!/usr/bin/env bash
# The Bazel front end end to end: a real Bazel (Debian's bazel-bootstrap, 4.2) builds a copy of
# examples/bazel, whose genrule consumes @neuron_models//:llama3-8b-chat, against the loopback Hub,
# which answers a regular file's resolve with a same-host 307 and an LFS file's with a 302 to its
# CDN. Checks: without a token, on a public repo, the rule downloads each artifact once with
# Bazel's downloader, following both redirects (the files are regular files of the external
# repository, byte-identical to what was pushed), from the plan and from a lockfile; with the
# token (given as a file) on the private repo, the tool fetches what the repository cache lacks,
# sending the token to the Hub and not to its CDN, and Bazel copies it from the local cache; a
# second workspace sharing the repository cache downloads nothing and gets the same bytes; a
# second build asks the Hub nothing; editing the manifest plans again without downloading; a
# missing configuration, or one whose download fails its sha256, gives an empty filegroup and a
# warning (a failed fetch with strict = True); offline serves the local cache; a tool that is not
# neuron-cache, or writes another report format, fails with a message; so does an HF_ENDPOINT
# with credentials, which no marker file holds; the token appears nowhere in Bazel's output,
# output bases, repository caches or the tool's command lines.
#   bazel-test.sh BUILD_DIR        (KEEP_WORK=1 keeps the temporary folder)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: bazel-test.sh BUILD_DIR}" && pwd)

if ! command -v bazel >/dev/null; then
  echo "FAIL: bazel is not installed (Debian: apt-get install bazel-bootstrap; .ci/install-deps does it)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-cache-bazel.XXXXXX")
# The demo Hub with the cache repo private (a download without the token fails), and a public one.
python3 -c '
import json, sys
config = json.load(open(sys.argv[1]))
for repo in config["repos"]:
    if repo["id"] == "acme/neuron-cache":
        repo["private"] = True
config["repos"].append({"id": "acme/open-cache", "private": False, "files": {"README.md": "open"}})
json.dump(config, open(sys.argv[2], "w"))' "$root/examples/demo-hub.json" "$work/hub-config.json"
HUB_CONFIG=$work/hub-config.json
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
seed=$work/hub/seed-cache
seed_hub "$root/examples/neuron-cache.yaml" --config llama3-8b-chat --repo acme/open-cache

# The token goes to Bazel as a file: Bazel logs its client environment in the output base's
# java.log, so a token in HF_TOKEN would end up there.
token=$HF_TOKEN
printf '%s\n' "$token" >"$work/token"
unset HF_TOKEN

# The tool as the rule runs it, through a wrapper that logs its command lines (and nothing else).
printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>"%s"\nexec "%s" "$@"\n' "$work/tool-calls.log" \
  "$NEURON_CACHE_TOOL" >"$work/neuron-cache"
chmod +x "$work/neuron-cache"

cp -r "$root/examples/bazel" "$work/ws"
outputs=$work/outputs
mkdir -p "$outputs"
run=0
ws=$work/ws
bazel_root=$work/bazel-root
# bazel ARGS...: one --batch Bazel (no server left behind) in $ws on $bazel_root, with the
# repository cache every workspace here shares; its output goes to $outputs/<n>.log and $last.
bazel_in_ws() {
  run=$((run + 1))
  last=$outputs/$run.log
  local status=0
  (cd "$ws" && bazel --output_user_root="$bazel_root" --batch --host_jvm_args=-Xmx1g \
    "$1" --override_repository=neuron_cache="$root" --jobs=2 --local_cpu_resources=2 \
    --repository_cache="$work/repository-cache" \
    --nosandbox_debug --color=no --curses=no \
    --repo_env=HF_ENDPOINT="$HF_ENDPOINT" --repo_env=HF_HOME="$HF_HOME" \
    --repo_env=HF_TOKEN_PATH="$work/token" --repo_env=NEURON_CACHE_TOOL="$work/neuron-cache" \
    --repo_env=NEURON_COMPILE_CACHE_URL="$work/cache" "${@:2}") >"$last" 2>&1 || status=$?
  return $status
}
show_last() { sed 's/^/  | /' "$last" >&2; }
module_downloads() { hub_log | grep -o '"path":"[^"]*/resolve/[^"]*MODULE_[^"]*"' | wc -l; }
requests() { hub_log | grep -o '"method":' | wc -l; }
external() { echo "$(cd "$ws" && bazel --output_user_root="$bazel_root" --batch info output_base 2>/dev/null)/external"; }

entry=$seed/neuronxcc-2.21.33363.0+82129205
expected=$(find "$entry" -path '*/MODULE_*/model.neff' | wc -l)
[[ $expected -ge 1 ]] || fail "the seed put no NEFF in $seed"
# resolve_gets: how many GETs of each MODULE_ file's resolve URL (path: count), on stdout.
resolve_gets() {
  hub_log | python3 -c '
import collections, json, sys
log = json.load(sys.stdin)
gets = collections.Counter(r["path"].split("?")[0] for r in log
                           if r["method"] == "GET" and "/resolve/" in r["path"] and "MODULE_" in r["path"])
print(json.dumps(gets))'
}
# check_public_fetch REPORT: each distinct content was GET once from its resolve URL, regular files
# through the Hub's 307 to /api/resolve-cache/ and LFS files through the 302 to the CDN, and no
# request carried a token.
check_public_fetch() {
  hub_log | python3 -c '
import json, sys
log = json.load(sys.stdin)
rows = json.load(open(sys.argv[1]))["configurations"] if sys.argv[1] != "-" else None
resolve = [r for r in log if r["method"] == "GET" and "/resolve/" in r["path"] and "MODULE_" in r["path"]]
paths = [r["path"].split("?")[0] for r in resolve]
if len(paths) != len(set(paths)):
    sys.exit("a file was downloaded twice: %s" % sorted(paths))
if rows is not None:
    distinct = len({f["sha256"] for r in rows for f in r["files"] if f["size"] > 0})
    if len(paths) != distinct:
        sys.exit("%d resolve GETs of MODULE_ files for %d contents" % (len(paths), distinct))
hops = [r for r in log if "/api/resolve-cache/" in r["path"] and "MODULE_" in r["path"]]
cdn = [r for r in log if r["listener"] == "cdn"]
if not hops or not cdn:
    sys.exit("not both redirects were followed: %d resolve-cache GETs, %d CDN GETs" % (len(hops), len(cdn)))
if any(r["authorization"] for r in log):
    sys.exit("a request carried a token")
print("%d files: %d through the same-host 307, %d through the CDN; no token" % (len(paths), len(hops), len(cdn)))' "$1"
}

step "a public repo without a token: Bazel's downloader follows the Hub's 307 and 302 redirects"
cp -r "$root/examples/bazel" "$work/ws0"
sed -i 's|^    manifest = "//:neuron-cache.yaml",|&\n    cache_repo = "acme/open-cache",|' "$work/ws0/WORKSPACE"
no_token=(--repo_env=HF_TOKEN_PATH="$work/no-token" --repo_env=NEURON_COMPILE_CACHE_URL="$work/cache0")
: >"$work/tool-calls.log"
hub_clear_log
ws=$work/ws0 bazel_root=$work/bazel-root0 bazel_in_ws build //:neff_list "${no_token[@]}" \
  --repository_cache="$work/public-repository-cache" || { show_last; fail "the public build failed"; }
public=$(ws=$work/ws0 bazel_root=$work/bazel-root0 external)/neuron_models
check_public_fetch "$public/report.json" || fail "the public fetch"
if grep -q '^prefetch ' "$work/tool-calls.log"; then fail "public: the rule ran prefetch"; fi
[[ -z $(find "$work/cache0" -name 'MODULE_*' 2>/dev/null) ]] || fail "public: the fetch wrote into the local cache"
cmp -s <(cd "$public/llama3-8b-chat" && find neuronxcc-* -type f | sort | xargs sha256sum) \
  <(cd "$seed" && find neuronxcc-* -path '*MODULE_*' -type f | sort | xargs sha256sum) ||
  fail "public: not the pushed files"

step "a public repo's lockfile without a token: the same redirects, from the locked commit"
NEURON_COMPILE_CACHE_URL="$work/cache0" "$NEURON_CACHE_TOOL" lock "$work/ws0/neuron-cache.yaml" \
  --config llama3-8b-chat --repo acme/open-cache >"$outputs/lock0.log" 2>&1 ||
  { cat "$outputs/lock0.log" >&2; fail "neuron-cache lock of the public repo failed"; }
sed -i 's|^    manifest = "//:neuron-cache.yaml",|&\n    lockfile = "//:neuron-cache.lock",|' "$work/ws0/WORKSPACE"
: >"$work/tool-calls.log"
hub_clear_log
ws=$work/ws0 bazel_root=$work/bazel-root0 bazel_in_ws build //:neff_list "${no_token[@]}" \
  --repository_cache="$work/public-lock-repository-cache" || { show_last; fail "the public locked build failed"; }
check_public_fetch - || fail "the public locked fetch"
[[ ! -s "$work/tool-calls.log" ]] || { cat "$work/tool-calls.log" >&2; fail "public: the rule ran the tool with a lockfile"; }

step "first build (the private repo, a token): plans, the tool fetches, Bazel copies"
: >"$work/tool-calls.log"
hub_clear_log
bazel_in_ws build //:neff_list || { show_last; fail "the first build failed"; }
list=$ws/bazel-bin/neff_list.txt
[[ -f "$list" ]] || fail "no $list"
cat "$list"
[[ $(grep -c '\.neff ' "$list") -eq $expected ]] || fail "the genrule lists not all $expected NEFFs"
grep -q '^NEURON_COMPILE_CACHE_URL=.*/llama3-8b-chat$' "$list" || fail "no cache folder in the list"
generated=$(external)/neuron_models
config_dir=$generated/llama3-8b-chat
# Real files of the external repository, byte-identical to the pushed ones; no symlink anywhere.
[[ -z $(find "$generated" -type l) ]] || { find "$generated" -type l >&2; fail "the repository holds symlinks"; }
files=0
while read -r file; do
  cmp -s "$file" "$seed/${file#"$config_dir"/}" || fail "$file differs from what was pushed"
  files=$((files + 1))
done < <(find "$config_dir/neuronxcc-"* -type f)
[[ $files -gt $expected ]] || fail "only $files files in $config_dir"
# The tool fetched into the local cache (each file once), and Bazel copied from there.
[[ $(find "$work/cache" -name model.neff | wc -l) -eq $expected ]] ||
  fail "the tool did not fetch the configuration into the local cache $work/cache"
[[ $(resolve_gets | python3 -c 'import json,sys; print(max(json.load(sys.stdin).values()))') -eq 1 ]] ||
  { resolve_gets >&2; fail "a file was downloaded twice"; }
hub_log | python3 -c '
import json, sys
log = json.load(sys.stdin)
hub = [r for r in log if r["listener"] == "hub"]
cdn = [r for r in log if r["listener"] == "cdn"]
if not hub or not all(r["authorization"] for r in hub):
    sys.exit("a Hub request went without the token from the token file")
if any(r["authorization"] for r in cdn):
    sys.exit("the token went along a redirect to the CDN")
print("%d Hub requests with the token, %d CDN requests without" % (len(hub), len(cdn)))' ||
  fail "the token went where it should not"
grep -q 'name = "llama3-8b-chat_entry"' "$generated/BUILD.bazel" || fail "no llama3-8b-chat_entry"
grep -q 'name = "all"' "$generated/BUILD.bazel" || fail "no :all"
grep -q '^plan .* --json .*--files' "$work/tool-calls.log" || fail "the rule did not run plan --files"
grep -q '^prefetch .*--config llama3-8b-chat .*--export-dir ' "$work/tool-calls.log" ||
  fail "with a token, the rule did not have the tool fetch"
[[ -z $(find "$generated" -name '_neuron_cache_fetched') ]] || fail "the export folder was left behind"
# The tool's transfer lines reached the terminal while it ran, and its message was kept clean.
grep -q 'Downloading done: ' "$last" || { show_last; fail "the tool's progress was not shown"; }

step "second build: the repository is not fetched again"
hub_clear_log
before=$(stat -c %Y "$generated/report.json")
bazel_in_ws build //:neff_list || { show_last; fail "the second build failed"; }
[[ $(requests) -eq 0 ]] || { hub_log >&2; fail "the second build made Hub requests"; }
[[ $(stat -c %Y "$generated/report.json") == "$before" ]] || fail "the second build refetched"

step "a second workspace sharing the repository cache downloads nothing"
cp -r "$root/examples/bazel" "$work/ws2"
hub_clear_log
ws=$work/ws2 bazel_root=$work/bazel-root2 bazel_in_ws build //:neff_list ||
  { show_last; fail "the second workspace's build failed"; }
[[ $(module_downloads) -eq 0 ]] || { hub_log >&2; fail "the second workspace downloaded artifacts"; }
second=$(ws=$work/ws2 bazel_root=$work/bazel-root2 external)/neuron_models/llama3-8b-chat
diff -r "$config_dir" "$second" >/dev/null || fail "the second workspace's files differ"
cmp -s "$ws/bazel-bin/neff_list.txt" "$work/ws2/bazel-bin/neff_list.txt" ||
  fail "the second workspace's neff_list differs"
echo "second workspace: $(requests) Hub requests (the plan), no artifact downloaded"

step "editing the manifest plans again, the repository cache serves the files"
sleep 1  # the marker is content based; this only makes report.json's mtime tell a refetch
echo "# edited" >>"$ws/neuron-cache.yaml"
hub_clear_log
bazel_in_ws build //:neff_list || { show_last; fail "the build after the edit failed"; }
[[ $(requests) -gt 0 ]] || fail "the edited manifest was not fetched again (no Hub request)"
[[ $(module_downloads) -eq 0 ]] || fail "the refetch downloaded again what the repository cache has"
[[ $(stat -c %Y "$generated/report.json") != "$before" ]] || fail "report.json was not rewritten"

step "the Hub down after a manifest edit: empty filegroups, and the example still builds"
echo "# edited with the Hub down" >>"$ws/neuron-cache.yaml"
# (An empty local cache: the one the tool fetched into would serve the configuration.)
bazel_in_ws build //:neff_list --repo_env=HF_ENDPOINT=http://127.0.0.1:9 \
  --repo_env=NEURON_COMPILE_CACHE_URL="$work/empty-cache" ||
  { show_last; fail "the example failed with an empty filegroup"; }
grep -q '^llama3-8b-chat: not in the cache' "$ws/bazel-bin/neff_list.txt" ||
  { cat "$ws/bazel-bin/neff_list.txt"; fail "the list does not say what is missing"; }
echo "# the Hub is back" >>"$ws/neuron-cache.yaml"
bazel_in_ws build //:neff_list || { show_last; fail "the build with the Hub back failed"; }
[[ $(grep -c '\.neff ' "$list") -eq $expected ]] || fail "the Hub is back: not all NEFFs listed"

step "a configuration the cache lacks: empty filegroup and a warning; strict: the fetch fails"
cat >>"$ws/WORKSPACE" <<'WS'

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

step "trusted_keys and require_signatures: the Hub's unsigned entries are not fetched, and say why"
"$NEURON_CACHE_TOOL" key generate bazel-ci-1 --secret-file "$work/bazel-ci-1.secret" >"$work/bazel-ci-1.pub"
cat >>"$ws/WORKSPACE" <<WS

neuron_model_artifacts(
    name = "signed_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    cache_dir = "$work/signed-cache",
    trusted_keys = ["$(head -n1 "$work/bazel-ci-1.pub")"],
    require_signatures = True,
)
WS
hub_clear_log
bazel_in_ws build @signed_models//:llama3-8b-chat || { show_last; fail "an untrusted entry failed the build"; }
grep -q 'WARNING: neuron-cache: not in the cache.*unsigned, and signatures are required' "$last" ||
  { show_last; fail "no reason for the refused entry"; }
! hub_log | grep -q 'MODULE_[^"]*/model.neff' || { hub_log >&2; fail "an unsigned NEFF was downloaded"; }

step "offline: served by the local cache (file:// URLs); a name with ':' becomes a valid target"
echo '      - {name: "chat:bf16", batch_size: 1, sequence_length: 4096, num_cores: 8, precision: bf16}' \
  >>"$ws/neuron-cache.yaml"
cat >>"$ws/WORKSPACE" <<WS

neuron_model_artifacts(
    name = "offline_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["chat:bf16", "llama3-8b-chat"],
    cache_dir = "$seed",
    offline = True,
)
WS
hub_clear_log
bazel_in_ws build @offline_models//:chat_bf16 @offline_models//:llama3-8b-chat ||
  { show_last; fail "the offline build failed"; }
[[ $(requests) -eq 0 ]] || { hub_log >&2; fail "offline = True made Hub requests"; }
# The tool's notices reach the user (here: the revision remembered from the seed's run).
grep -q '@offline_models: .*remembered' "$last" || { show_last; fail "no notice"; }
offline=$(dirname "$generated")/offline_models
[[ $(grep -c '/model.neff"' "$offline/BUILD.bazel") -eq $((2 * expected)) ]] ||
  { cat "$offline/BUILD.bazel" >&2; fail "offline: not every NEFF of both configurations"; }
grep -q 'name = "chat_bf16"' "$offline/BUILD.bazel" || fail "chat:bf16 is not the target chat_bf16"
grep -q '"source": "local"' "$offline/report.json" || fail "offline: no file:// source"
[[ -z $(find "$offline" -type l) ]] || fail "offline: the repository holds symlinks"
diff -r "$offline/llama3-8b-chat/neuronxcc-2.21.33363.0+82129205" \
  "$config_dir/neuronxcc-2.21.33363.0+82129205" >/dev/null || fail "offline: other bytes"

step "a tool that is not neuron-cache, or writes another report format: the fetch fails and says why"
printf '#!/bin/sh\necho "other-tool 1.0"\n' >"$work/other-tool"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "neuron-cache 9.0.0"; exit 0; }\necho '"'"'{"format_version": 99, "configurations": []}'"'"'\n' >"$work/future-tool"
chmod +x "$work/other-tool" "$work/future-tool"
cat >>"$ws/WORKSPACE" <<WS

neuron_model_artifacts(
    name = "future_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
)

neuron_model_artifacts(
    name = "other_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    tool = "//:other-tool",
)
WS
cp "$work/other-tool" "$ws/other-tool"
echo 'exports_files(["other-tool"])' >>"$ws/BUILD.bazel"
if bazel_in_ws build @future_models//:llama3-8b-chat --repo_env=NEURON_CACHE_TOOL="$work/future-tool"; then show_last; fail "a report of format 99 was read"; fi
grep -q 'writes JSON reports of format 99; this rule reads format 2' "$last" ||
  { show_last; fail "another report format: no clear message"; }
# The label is the tool when NEURON_CACHE_TOOL is not set.
if bazel_in_ws build @other_models//:llama3-8b-chat --repo_env=NEURON_CACHE_TOOL=; then show_last; fail "a tool that is not neuron-cache was used"; fi
grep -q 'other-tool (from the `tool` label [^)]*other-tool) is not neuron-cache' "$last" ||
  { show_last; fail "a tool that is not neuron-cache: no clear message"; }

step "a download that fails its sha256: empty filegroup and a warning; strict: Bazel's error"
# The public repo without a token, so Bazel's downloader meets the damage itself.
cat >>"$ws/WORKSPACE" <<'WS'

neuron_model_artifacts(
    name = "corrupt_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    cache_repo = "acme/open-cache",
)

neuron_model_artifacts(
    name = "corrupt_strict_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    cache_repo = "acme/open-cache",
    strict = True,
)
WS
# The CDN flips a byte of every LFS file; an empty repository cache, so the downloads happen.
curl -sf -X POST -H 'Content-Type: application/json' "$HF_ENDPOINT/_admin/faults" \
  -d '[{"match": {"listener": "cdn", "path_contains": "/lfs/"}, "count": -1, "action": "corrupt"}]' >/dev/null
bazel_in_ws build @corrupt_models//:llama3-8b-chat --repository_cache="$work/empty-repository-cache" \
  "${no_token[@]}" ||
  { show_last; fail "a failed download failed the build without strict"; }
grep -q 'WARNING: neuron-cache: not in the cache.*llama3-8b-chat (downloading .* failed' "$last" ||
  { show_last; fail "no warning for the failed download"; }
[[ $(grep -c '/model.neff"' "$(dirname "$generated")/corrupt_models/BUILD.bazel") -eq 0 ]] ||
  fail "a configuration whose download failed has files"
if bazel_in_ws build @corrupt_strict_models//:llama3-8b-chat --repository_cache="$work/empty-repository-cache" \
  "${no_token[@]}"; then
  show_last; fail "strict = True with a corrupt download did not fail"
fi
grep -qi 'checksum' "$last" || { show_last; fail "strict: not Bazel's checksum error"; }
curl -sf -X DELETE "$HF_ENDPOINT/_admin/faults" >/dev/null

# The same rule against a shared folder (Bazel downloads its file:// URLs) and an S3 bucket (no
# plain URL: the tool prefetches into cache_dir, then Bazel copies the file:// URLs).
source "$root/tests/tools/s3-env.sh" "$work/s3"
cleanup_all() { stop_s3; cleanup; }
trap cleanup_all EXIT
start_s3 bazel-cache || { status=$?; [[ $status == 77 ]] && exit 77; fail "s3rver did not start"; }
mkdir -p "$work/shared-folder"
"$NEURON_CACHE_TOOL" create -n "file://$work/shared-folder" >/dev/null || fail "create file://"
for store in "file://$work/shared-folder" s3://bazel-cache/neuron; do
  kind=${store%%:*}
  step "cache_repo = $store: the files arrive byte for byte"
  NEURON_COMPILE_CACHE_URL="$seed" seed_hub "$root/examples/neuron-cache.yaml" \
    --config llama3-8b-chat --repo "$store"
  cat >>"$ws/WORKSPACE" <<WS

neuron_model_artifacts(
    name = "${kind}_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
    cache_repo = "$store",
    cache_dir = "$work/$kind-local-cache",
    strict = True,
)
WS
  : >"$work/tool-calls.log"
  bazel_in_ws build "@${kind}_models//:llama3-8b-chat" || { show_last; fail "the $store build failed"; }
  store_repo=$(dirname "$generated")/${kind}_models
  diff -r "$store_repo/llama3-8b-chat/neuronxcc-2.21.33363.0+82129205" \
    "$config_dir/neuronxcc-2.21.33363.0+82129205" >/dev/null || fail "$store: other bytes"
  if [[ $kind == s3 ]]; then
    grep -q '^prefetch ' "$work/tool-calls.log" || fail "s3: the rule did not prefetch first"
  else
    grep -q '"source": "folder"' "$store_repo/report.json" || fail "folder: not read from the store"
    if grep -q '^prefetch ' "$work/tool-calls.log"; then fail "folder: the rule prefetched"; fi
  fi
done
stop_s3
# AWS keys reach the tool only through its environment: not its command lines, not the fetched
# repository, not Bazel's output.
if grep -rlF "$AWS_SECRET_ACCESS_KEY" "$outputs" "$work/tool-calls.log" \
  "$(dirname "$generated")/s3_models" 2>/dev/null; then
  fail "the S3 secret leaked into the files above"
fi

step "HF_ENDPOINT with credentials: refused with a message, in no marker file"
# Bazel writes the values of the variables a rule watches in clear into its marker file; a new
# HF_ENDPOINT fetches the repository again.
if bazel_in_ws build @neuron_models//:llama3-8b-chat \
  --repo_env=HF_ENDPOINT="${HF_ENDPOINT/:\/\//://alice:endpoint-s3cr3t@}"; then
  show_last; fail "an HF_ENDPOINT with credentials was used"
fi
grep -q 'HF_ENDPOINT holds credentials' "$last" || { show_last; fail "HF_ENDPOINT with credentials: no clear message"; }
if grep -lF "endpoint-s3cr3t" "$(dirname "$generated")"/*.marker "$last"; then
  fail "the password of HF_ENDPOINT was written in the files above"
fi

step "a lockfile with a token: prefetch --locked fetches; with the Hub stopped, the repository cache serves"
cp -r "$root/examples/bazel" "$work/ws3"
HF_TOKEN=$token NEURON_COMPILE_CACHE_URL="$work/cache" "$NEURON_CACHE_TOOL" lock \
  "$work/ws3/neuron-cache.yaml" --config llama3-8b-chat >"$outputs/lock.log" 2>&1 ||
  { cat "$outputs/lock.log" >&2; fail "neuron-cache lock failed"; }
sed -i 's|^    manifest = "//:neuron-cache.yaml",|&\n    lockfile = "//:neuron-cache.lock",|' "$work/ws3/WORKSPACE"
grep -q 'lockfile = ' "$work/ws3/WORKSPACE" || fail "the lockfile attribute was not added"
: >"$work/tool-calls.log"
hub_clear_log
ws=$work/ws3 bazel_root=$work/bazel-root3 bazel_in_ws build //:neff_list \
  --repository_cache="$work/lock-repository-cache" --repo_env=NEURON_COMPILE_CACHE_URL="$work/lock-cache" ||
  { show_last; fail "the locked build failed"; }
grep -q '^prefetch .*--locked' "$work/tool-calls.log" || { cat "$work/tool-calls.log" >&2; fail "the tool did not fetch the locked files"; }
if grep -q '^plan ' "$work/tool-calls.log"; then fail "with a lockfile, the rule ran plan"; fi
[[ $(module_downloads) -ge 1 ]] || { hub_log >&2; fail "the locked fetch downloaded nothing from the Hub"; }
# Every file byte-identical to what was pushed, and every NEFF of the configuration there.
same_as_seed() {
  local n=0 file
  while read -r file; do
    cmp -s "$file" "$seed/${file#"$1"/}" || fail "$file differs from what was pushed"
    n=$((n + 1))
  done < <(find "$1/neuronxcc-"* -type f)
  [[ $(find "$1" -name model.neff | wc -l) -eq $expected && $n -gt $expected ]] ||
    fail "$1 holds $n files, not the configuration's"
}
locked=$(ws=$work/ws3 bazel_root=$work/bazel-root3 external)/neuron_models/llama3-8b-chat
same_as_seed "$locked"
# `gc --squash` forgets the locked commit: with an empty repository cache each file then comes
# from main, its sha256 still deciding.
HF_TOKEN=$token NEURON_COMPILE_CACHE_URL="$work/cache" "$NEURON_CACHE_TOOL" gc \
  --repo acme/neuron-cache --unreferenced keep --apply --squash >"$outputs/squash.log" 2>&1 ||
  { cat "$outputs/squash.log" >&2; fail "gc --squash failed"; }
hub_clear_log
ws=$work/ws3 bazel_root=$work/bazel-root5 bazel_in_ws build //:neff_list \
  --repository_cache="$work/squash-repository-cache" --repo_env=NEURON_COMPILE_CACHE_URL="$work/squash-cache" ||
  { show_last; fail "after gc --squash, the locked build failed"; }
# The tool reads main's commit (by its id) once the locked one is gone.
hub_log | python3 -c '
import json, sys
locked = json.load(open(sys.argv[1]))["revision"]
log = json.load(sys.stdin)
read = [r for r in log if "/resolve/" in r["path"] and "MODULE_" in r["path"]
        and locked not in r["path"] and r["status"] in (200, 302, 307)]
sys.exit(0 if read else "after gc --squash, no file was read at another commit than the locked one")' \
  "$work/ws3/neuron-cache.lock" || { hub_log >&2; fail "after gc --squash"; }
same_as_seed "$(ws=$work/ws3 bazel_root=$work/bazel-root5 external)/neuron_models/llama3-8b-chat"
stop_hub
: >"$work/tool-calls.log"
ws=$work/ws3 bazel_root=$work/bazel-root4 bazel_in_ws build //:neff_list \
  --repository_cache="$work/lock-repository-cache" --repo_env=NEURON_COMPILE_CACHE_URL="$work/empty-cache" ||
  { show_last; fail "with the Hub stopped, the locked build failed"; }
same_as_seed "$(ws=$work/ws3 bazel_root=$work/bazel-root4 external)/neuron_models/llama3-8b-chat"
[[ ! -s "$work/tool-calls.log" ]] || { cat "$work/tool-calls.log" >&2; fail "the repository cache held every file, yet the tool ran"; }
echo "locked: fetched again from the repository cache with the Hub stopped, no tool run"

step "the token is nowhere in Bazel's output, output bases, repository cache or command lines"
if grep -rlF "$token" "$outputs" "$work/bazel-root" "$work/bazel-root2" "$work/"*repository-cache \
  "$work/ws0" "$work/ws" "$work/ws2" "$work/ws3" "$work/bazel-root0" "$work/bazel-root3" "$work/bazel-root4" "$work/bazel-root5" \
  "$work/tool-calls.log" 2>/dev/null; then
  fail "the token leaked into the files above"
fi
echo "PASS"
