#!/usr/bin/env bash
# The CMake front end end to end (ctest frontend_cmake): installs this build into a temporary
# prefix, then runs real cmake on examples/cmake and on small projects against the local Hub
# server.
#   tests/frontends/cmake-test.sh BUILD_DIR [SOURCE_DIR]
# NEURON_CACHE_PREFIX=DIR runs it against that package (the release's unpacked tarball) instead.
# Proves: find_package(NeuronCache CONFIG) works from an install; configure prefetches with
# CHECK messages and exports folders holding model.neff; the consumer builds and sees them; a
# second configure downloads nothing; COMPILE_MISSING compiles and pushes at build time; the
# in-tree (add_subdirectory) path prefetches at build time; bad arguments fail with a clear
# message; the token never reaches the cache, the build files or the output.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-cache-cmake-test.XXXXXX")
prefix=$work/prefix
log=$work/all-output.log
: >"$log"

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
# Runs a command, keeps its output in $log (checked for the token at the end) and in $out.
run() {
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  printf '%s\n' "$out" >>"$log"
}
expect_ok() { run "$@"; [[ $rc == 0 ]] || { echo "$out"; fail "$* exited $rc"; }; }
expect_in() { grep -qF -- "$1" <<<"$out" || { echo "$out"; fail "expected in the output: $1"; }; }
module_downloads() { hub_log | grep -o '"path":"[^"]*/resolve/[^"]*MODULE_[^"]*"' | wc -l; }

source "$root/tests/tools/hub-env.sh" "$build" "$work/hub"
cleanup() { stop_hub; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"; }
trap cleanup EXIT

if [[ -n "${NEURON_CACHE_PREFIX:-}" ]]; then
  # The release's CMake package (its unpacked tarball) instead of an install of this build.
  prefix=$(cd "$NEURON_CACHE_PREFIX" && pwd)
  step "the package in $prefix"
else
  step "install into $prefix"
  expect_ok cmake --install "$build" --prefix "$prefix"
  if grep -q '^NEURON_CACHE_INSTALL_ACTION:BOOL=OFF' "$build/CMakeCache.txt"; then
    [[ ! -e $prefix/bin/neuron-cache-action ]] || fail "the install holds the CI-only neuron-cache-action"
  fi
fi
[[ -x $prefix/bin/neuron-cache && -f $prefix/lib/cmake/NeuronCache/NeuronCacheConfig.cmake ]] ||
  fail "the package lacks the tool or the package files"

step "start the Hub and push two configurations"
start_hub
trap cleanup EXIT  # start_hub set its own
seed_hub "$root/examples/neuron-cache.yaml" --config llama3-8b-chat --config qwen2.5-7b-trn2
export NEURON_COMPILE_CACHE_URL=$work/cache
unset CUSTOM_CACHE_REPO HF_HUB_OFFLINE NEURON_CACHE_OFFLINE

step "configure examples/cmake: both configurations come from a slow Hub, with progress as it comes"
consumer=$work/consumer
# The CDN at 64 KiB/s per download: the prefetch lasts long enough for several progress lines.
curl -s -X POST "$HF_ENDPOINT/_admin/faults" -d '[{"match": {"listener": "cdn", "method": "GET"},
  "count": -1, "action": "trickle", "bytes_per_second": 65536}]' >/dev/null
NEURON_CACHE_PROGRESS_INTERVAL_MS=100 expect_ok cmake -S "$root/examples/cmake" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix"
curl -s -X DELETE "$HF_ENDPOINT/_admin/faults" >/dev/null
expect_in "-- neuron-cache: prefetching 2 configurations from acme/neuron-cache"
expect_in "-- neuron-cache: prefetching 2 configurations from acme/neuron-cache - 0 local, 2 from the Hub ("
# The tool's progress lines came during the configure: between the CHECK_START line and its
# result, not after the result (a captured stderr would show them at the end, or never).
during=$(sed -n '/^-- neuron-cache: prefetching 2 configurations from acme\/neuron-cache$/,/^-- neuron-cache: prefetching 2 configurations from acme\/neuron-cache - /p' <<<"$out")
grep -q '^Downloading: [0-9.]* [KM]*i*B of [0-9.]* [KM]iB ([0-9]*%), .*/s' <<<"$during" ||
  { echo "$out"; fail "no transfer progress line during the configure"; }
grep -q '^Downloading done: ' <<<"$during" || { echo "$out"; fail "no final transfer line during the configure"; }
! grep -q 'CMake Warning' <<<"$out" || { echo "$out"; fail "progress lines were taken for warnings"; }
expect_in "models with artifacts: llama3-8b-chat;qwen2.5-7b-trn2; missing: "
exported=$consumer/neuron-cache/neuron-cache
for config in llama3-8b-chat qwen2.5-7b-trn2; do
  n=$(find -L "$exported/$config" -name model.neff | wc -l)
  [[ $n -gt 0 ]] || fail "no model.neff under $exported/$config"
done
grep -qx "$exported/qwen2.5-7b-trn2" "$consumer/qwen-dir.txt" || fail "qwen-dir.txt: $(cat "$consumer/qwen-dir.txt")"

step "build and run the consumer"
expect_ok cmake --build "$consumer"
expect_ok "$consumer/list-models"
for config in llama3-8b-chat qwen2.5-7b-trn2; do
  n=$(find -L "$exported/$config" -name model.neff | wc -l)
  expect_in "$config: $exported/$config ($n model.neff)"
done

step "configure again: nothing is downloaded"
hub_clear_log
expect_ok cmake "$consumer"
expect_in "- 2 local, 0 from the Hub (0 B)"
[[ $(module_downloads) == 0 ]] || fail "the second configure downloaded MODULE files"

step "OFFLINE and CACHE_DIR: served from the given cache without a request"
mkdir -p "$work/offline-src"
cat >"$work/offline-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(offline NONE)
find_package(NeuronCache CONFIG REQUIRED)
neuron_cache_prefetch(MANIFEST "$root/examples/neuron-cache.yaml" CONFIGS llama3-8b-chat
  OFFLINE CACHE_DIR "$work/cache" CACHE_REPO acme/neuron-cache)
message(STATUS "llama=\${NEURON_CACHE_ARTIFACTS_LLAMA3_8B_CHAT}")
message(STATUS "old-name=\${NEURON_CACHE_LLAMA3_8B_CHAT_DIR}")
CMAKE
hub_clear_log
NEURON_COMPILE_CACHE_URL=$work/elsewhere expect_ok cmake -S "$work/offline-src" -B "$work/offline-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "- 1 local, 0 from the Hub (0 B)"
expect_in "llama=$work/offline-build/neuron-cache/neuron-cache/llama3-8b-chat"
expect_in "old-name=$work/offline-build/neuron-cache/neuron-cache/llama3-8b-chat"
[[ $(hub_log) == "[]" ]] || fail "OFFLINE made requests: $(hub_log)"

step "LOCKED: exactly the locked files, no index read; a lock the manifest outgrew fails"
mkdir -p "$work/locked-src"
cp "$root/examples/neuron-cache.yaml" "$work/locked-src/neuron-cache.yaml"
expect_ok "$prefix/bin/neuron-cache" lock "$work/locked-src/neuron-cache.yaml" --config llama3-8b-chat
cat >"$work/locked-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(locked NONE)
find_package(NeuronCache CONFIG REQUIRED)
neuron_cache_prefetch(MANIFEST neuron-cache.yaml CONFIGS llama3-8b-chat LOCKED)
message(STATUS "llama=\${NEURON_CACHE_ARTIFACTS_LLAMA3_8B_CHAT}")
CMAKE
hub_clear_log
NEURON_COMPILE_CACHE_URL=$work/locked-cache expect_ok cmake -S "$work/locked-src" -B "$work/locked-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "- 0 local, 1 from the Hub ("
[[ $(find -L "$work/locked-build/neuron-cache/neuron-cache/llama3-8b-chat" -name model.neff | wc -l) -gt 0 ]] ||
  fail "LOCKED exported no model.neff"
if hub_log | grep -q 'neuron-cache-index\|/tree/\|/paths-info/'; then
  hub_log; fail "LOCKED read the index or listed the repo"
fi
# Offline, from the locked files now in the local cache: no request at all.
mkdir -p "$work/locked-offline"
sed 's|CONFIGS llama3-8b-chat LOCKED)|CONFIGS llama3-8b-chat LOCKED OFFLINE CACHE_DIR "'"$work/locked-cache"'")|' \
  "$work/locked-src/CMakeLists.txt" >"$work/locked-offline/CMakeLists.txt"
cp "$work/locked-src/neuron-cache.yaml" "$work/locked-src/neuron-cache.lock" "$work/locked-offline/"
grep -q 'LOCKED OFFLINE' "$work/locked-offline/CMakeLists.txt" || fail "the offline project was not written"
hub_clear_log
expect_ok cmake -S "$work/locked-offline" -B "$work/locked-offline-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "- 1 local, 0 from the Hub (0 B)"
[[ $(hub_log) == "[]" ]] || fail "LOCKED OFFLINE made requests: $(hub_log)"
echo "# edited" >>"$work/locked-src/neuron-cache.yaml"
run env NEURON_COMPILE_CACHE_URL="$work/locked-cache" cmake "$work/locked-build"
[[ $rc != 0 ]] || { echo "$out"; fail "LOCKED configured with a manifest changed since the lock"; }
out=$(tr -s ' \n' '  ' <<<"$out")  # CMake wraps long messages
expect_in "refused the call's input (exit 2; its message is above)"; expect_in "changed"

step "COMPILE_MISSING PUSH: a configuration the Hub lacks is compiled and pushed by the build"
mkdir -p "$work/compile-src"
cp "$root/examples/neuron-cache.yaml" "$work/compile-src/models.yaml"
cat >"$work/compile-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(compile_missing NONE)
find_package(NeuronCache CONFIG REQUIRED)
neuron_cache_prefetch(MANIFEST models.yaml CONFIGS llama3-8b-chat mistral-7b-inf2
  COMPILE_MISSING PUSH OUTPUT_VARIABLE got)
message(STATUS "got=\${got} missing=\${got_MISSING} mistral=\${NEURON_CACHE_ARTIFACTS_MISTRAL_7B_INF2}")
add_custom_target(use-mistral ALL
  COMMAND \${CMAKE_COMMAND} -E cat "\$<TARGET_PROPERTY:NeuronCache::mistral-7b-inf2,NEURON_CACHE_ARTIFACTS_DIR>/neuron-cache-entry.json"
  DEPENDS NeuronCache::mistral-7b-inf2)
CMAKE
compile_build=$work/compile-build
expect_ok cmake -S "$work/compile-src" -B "$compile_build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "- 1 local, 0 from the Hub (0 B), 1 to compile at build time"
expect_in "got=llama3-8b-chat missing=mistral-7b-inf2 mistral=$compile_build/neuron-cache/models/mistral-7b-inf2"
hub_clear_log
expect_ok cmake --build "$compile_build"
n=$(find -L "$compile_build/neuron-cache/models/mistral-7b-inf2" -name model.neff | wc -l)
[[ $n -gt 0 ]] || fail "the build did not export mistral-7b-inf2"
hub_log | grep -q '"path":"/api/models/acme/neuron-cache/commit/main"' || fail "no push commit"
hub_clear_log
expect_ok cmake --build "$compile_build"
[[ $(module_downloads) == 0 ]] && ! grep -q 'neuron-cache: compile' <<<"$out" ||
  fail "an up-to-date build ran the compile again"
touch "$work/compile-src/models.yaml"
expect_ok cmake --build "$compile_build"
expect_in "- 2 local, 0 from the Hub (0 B)"  # a changed manifest re-runs the configure

step "add_subdirectory: the in-tree tool prefetches at build time"
mkdir -p "$work/subdir-src"
cat >"$work/subdir-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(subdir_consumer NONE)
add_subdirectory("$root" neuron-cache EXCLUDE_FROM_ALL)
neuron_cache_prefetch(MANIFEST "$root/examples/neuron-cache.yaml" CONFIGS qwen2.5-7b-trn2)
# The old names (0.1) still work: the target neuron_cache::<name> with its property
# NEURON_CACHE_DIR, and the cache variable NEURON_CACHE_DIR (with a deprecation message).
add_custom_target(use-qwen ALL COMMAND \${CMAKE_COMMAND} -E echo
  "qwen: \$<TARGET_PROPERTY:neuron_cache::qwen2.5-7b-trn2,NEURON_CACHE_DIR>"
  DEPENDS neuron_cache::qwen2.5-7b-trn2)
if(NOT TARGET NeuronCache::neuron_cache OR NOT TARGET NeuronCache::neuron-cache)
  message(FATAL_ERROR "add_subdirectory gives no NeuronCache::neuron_cache or NeuronCache::neuron-cache")
endif()
CMAKE
subdir_build=$work/subdir-build
expect_ok cmake -S "$work/subdir-src" -B "$subdir_build" -DNEURON_CACHE_DIR="$work/subdir-cache"
expect_in "NEURON_CACHE_DIR is the old name of"  # CMake wraps the rest
expect_in "neuron-cache: 1 configuration of neuron-cache prefetched at build time by neuron_cache_prefetch_neuron-cache"
# A consumer gets the tool and the library, not our tests, the Action binary or a build type.
run cmake --build "$subdir_build" --target help
for target in neuron_cache_unit_tests neuron_cache_e2e_tests hub-server neuron-cache-action; do
  ! grep -qw -- "$target" <<<"$out" || fail "add_subdirectory defines the project's own target $target"
done
grep -qw -- neuron-cache <<<"$out" || fail "add_subdirectory does not define the tool's target"
! grep -q '^CMAKE_BUILD_TYPE:STRING=.\+' "$subdir_build/CMakeCache.txt" ||
  fail "add_subdirectory set the consumer's CMAKE_BUILD_TYPE: $(grep ^CMAKE_BUILD_TYPE "$subdir_build/CMakeCache.txt")"
if [[ -n "${NEURON_CACHE_TEST_SUBDIR_BUILD:-}" ]]; then
  expect_ok cmake --build "$subdir_build" -j2
  n=$(find -L "$subdir_build/neuron-cache/neuron-cache/qwen2.5-7b-trn2" -name model.neff | wc -l)
  [[ $n -gt 0 ]] || fail "the in-tree build did not export qwen2.5-7b-trn2"
else
  echo "(not building the in-tree project: set NEURON_CACHE_TEST_SUBDIR_BUILD=1 to build it too)"
fi

step "bad arguments fail with a clear message"
bad_project() {  # NAME CALL EXPECTED
  mkdir -p "$work/bad-$1"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(bad NONE)\nfind_package(NeuronCache CONFIG REQUIRED)\n%s\n' \
    "$2" >"$work/bad-$1/CMakeLists.txt"
  run cmake -S "$work/bad-$1" -B "$work/bad-$1/build" -DCMAKE_PREFIX_PATH="$prefix"
  [[ $rc != 0 ]] || { echo "$out"; fail "$1: configure succeeded"; }
  out=$(tr -s ' \n' '  ' <<<"$out")  # CMake wraps long messages
  expect_in "$3"
}
bad_project unknown "neuron_cache_prefetch(MANIFEST $root/examples/neuron-cache.yaml FOO bar)" \
  "neuron_cache_prefetch: unknown argument FOO (expected MANIFEST, CONFIGS, CACHE_REPO, CACHE_DIR, COMPILE_MISSING, PUSH, READ_ONLY, OFFLINE, STRICT, LOCKED, LOCKFILE, TRUSTED_KEYS, REQUIRE_SIGNATURES, OUTPUT_VARIABLE)"
bad_project no-value "neuron_cache_prefetch(MANIFEST $root/examples/neuron-cache.yaml CACHE_REPO)" \
  "neuron_cache_prefetch: CACHE_REPO needs a value"
bad_project no-manifest "neuron_cache_prefetch(CONFIGS llama3-8b-chat)" \
  "neuron_cache_prefetch: MANIFEST <file> is required"
bad_project missing-file "neuron_cache_prefetch(MANIFEST nope.yaml)" \
  "neuron_cache_prefetch: manifest $work/bad-missing-file/nope.yaml not found"
bad_project strict-unknown-config \
  "neuron_cache_prefetch(MANIFEST $root/examples/neuron-cache.yaml CONFIGS nope STRICT)" \
  'no configuration named "nope"'
# An input error (exit 2: a typo in CONFIGS) fails at the call even without STRICT: reported as
# merely missing, the valid configuration would vanish too and generate fail later.
bad_project unknown-config \
  "neuron_cache_prefetch(MANIFEST $root/examples/neuron-cache.yaml CONFIGS llama3-8b-chat nope)" \
  "neuron-cache refused the call's input (exit 2; its message is above)"
expect_in 'no configuration named "nope"'
expect_in "Fix the neuron_cache_prefetch() arguments or the manifest"
[[ $(grep -o 'no configuration named "nope"' <<<"$out" | wc -l) == 1 ]] ||
  { echo "$out"; fail "the tool's refusal was shown more than once"; }

printf '#!/bin/sh\necho '"'"'{"format_version": 99, "configurations": []}'"'"'\n' >"$work/future-tool"
chmod +x "$work/future-tool"
bad_project future-format \
  "set(NEURON_CACHE_TOOL $work/future-tool CACHE FILEPATH \"\" FORCE)
neuron_cache_prefetch(MANIFEST $root/examples/neuron-cache.yaml CONFIGS llama3-8b-chat STRICT)" \
  "writes JSON reports of format 99; this NeuronCache.cmake reads format 2"

step "TRUSTED_KEYS and REQUIRE_SIGNATURES: the Hub's unsigned entries are not installed, and say why"
expect_ok "$prefix/bin/neuron-cache" key generate cmake-ci-1 --secret-file "$work/cmake-ci-1.secret"
trusted=${out%%$'\n'*}
mkdir -p "$work/signed-src"
cat >"$work/signed-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(signed NONE)
find_package(NeuronCache CONFIG REQUIRED)
neuron_cache_prefetch(MANIFEST "$root/examples/neuron-cache.yaml" CONFIGS llama3-8b-chat
                      CACHE_DIR "$work/signed-cache" TRUSTED_KEYS "$trusted" REQUIRE_SIGNATURES
                      OUTPUT_VARIABLE got)
message(STATUS "got=[\${got}] missing=[\${got_MISSING}]")
CMAKE
hub_clear_log
expect_ok cmake -S "$work/signed-src" -B "$work/signed-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "got=[] missing=[llama3-8b-chat]"
out=$(tr -s ' \n' '  ' <<<"$out")  # CMake wraps long messages
expect_in "unsigned, and signatures are required (--require-signatures)"
[[ $(module_downloads) == 0 ]] || fail "an unsigned entry was downloaded under REQUIRE_SIGNATURES"

step "a tool failing operationally (exit 1) without STRICT: a warning, the configurations missing"
printf '#!/bin/sh\necho "the disk is on fire" >&2\nexit 1\n' >"$work/failing-tool"
chmod +x "$work/failing-tool"
mkdir -p "$work/soft-src"
cat >"$work/soft-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(soft NONE)
find_package(NeuronCache CONFIG REQUIRED)
set(NEURON_CACHE_TOOL $work/failing-tool CACHE FILEPATH "" FORCE)
neuron_cache_prefetch(MANIFEST "$root/examples/neuron-cache.yaml" CONFIGS llama3-8b-chat
                      OUTPUT_VARIABLE got)
message(STATUS "got=[\${got}] missing=[\${got_MISSING}]")
get_target_property(marked NeuronCache::llama3-8b-chat NEURON_CACHE_MISSING)
message(STATUS "a target for a missing configuration, marked \${marked}")
CMAKE
expect_ok cmake -S "$work/soft-src" -B "$work/soft-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "- failed"
expect_in "CMake Warning"
expect_in "got=[] missing=[llama3-8b-chat]"
out=$(tr -s ' \n' '  ' <<<"$out")  # CMake wraps long messages
expect_in "neuron-cache prefetch failed (1; its message is above)"
# The tool's own words are shown once, as they came, not again inside the warning.
[[ $(grep -o "the disk is on fire" <<<"$out" | wc -l) == 1 ]] || { echo "$out"; fail "the tool's message was shown more than once"; }
# docs/cmake.md: a missing configuration's target exists, marked.
expect_in "a target for a missing configuration, marked TRUE"

step "configure with the Hub down: the tool's warning once, marked for CMake's summary"
mkdir -p "$work/down-src"
cat >"$work/down-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(down C)
find_package(NeuronCache CONFIG REQUIRED)
neuron_cache_prefetch(MANIFEST "$root/examples/neuron-cache.yaml" CONFIGS llama3-8b-chat
                      OUTPUT_VARIABLE got)
message(STATUS "got=[\${got}] missing=[\${got_MISSING}]")
# A plain link, no if(TARGET): it configures; building it says which model is missing and why.
add_executable(app main.c)
target_link_libraries(app PRIVATE NeuronCache::llama3-8b-chat)
CMAKE
printf 'int main(void) { return 0; }\n' >"$work/down-src/main.c"
# Port 9 (discard) on loopback: nothing listens, every connection is refused at once.
HF_ENDPOINT=http://127.0.0.1:9 NEURON_COMPILE_CACHE_URL=$work/down-cache \
  expect_ok cmake -S "$work/down-src" -B "$work/down-build" -DCMAKE_PREFIX_PATH="$prefix"
expect_in "got=[] missing=[llama3-8b-chat]"
out=$(tr -s ' \n' '  ' <<<"$out")
expect_in "CMake Warning"
expect_in "neuron-cache worked around a problem with the cache (its message is above); the build goes on"
[[ $(grep -o "127.0.0.1:9 could not be reached" <<<"$out" | wc -l) == 1 ]] ||
  { echo "$out"; fail "the unreachable Hub was not named exactly once"; }
run cmake --build "$work/down-build"
[[ $rc != 0 ]] || { echo "$out"; fail "a program linking a missing model built"; }
expect_in "NeuronCache::llama3-8b-chat has no artifacts"

# The same configure against an S3 bucket (s3rver) and a shared folder: only CACHE_REPO changes.
source "$root/tests/tools/s3-env.sh" "$work/s3"
cleanup() { stop_s3; stop_hub; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"; }
start_s3 cmake-cache || { status=$?; [[ $status == 77 ]] && exit 77; fail "s3rver did not start"; }
mkdir -p "$work/shared-folder"
"$NEURON_CACHE_TOOL" create -n "file://$work/shared-folder" >/dev/null || fail "create file://"
for store in s3://cmake-cache/neuron "file://$work/shared-folder"; do
  step "configure examples/cmake against $store"
  seed_hub "$root/examples/neuron-cache.yaml" --config llama3-8b-chat --config qwen2.5-7b-trn2 \
    --repo "$store"
  store_build=$work/store-build-${store%%:*}
  NEURON_COMPILE_CACHE_URL=$work/store-cache-${store%%:*} expect_ok cmake -S "$root/examples/cmake" \
    -B "$store_build" -DCMAKE_PREFIX_PATH="$prefix" -DNEURON_CACHE_REPO="$store"
  from="the shared folder"
  [[ $store == s3://* ]] && from=S3
  expect_in "-- neuron-cache: prefetching 2 configurations from $store - 0 local, 2 from $from ("
  for config in llama3-8b-chat qwen2.5-7b-trn2; do
    n=$(find -L "$store_build/neuron-cache/neuron-cache/$config" -name model.neff | wc -l)
    [[ $n -gt 0 ]] || fail "no model.neff under $store_build for $config from $store"
  done
  expect_ok cmake --build "$store_build"
done
! grep -qF "$AWS_SECRET_ACCESS_KEY" "$log" || fail "the S3 secret is in the output"
stop_s3

step "the token is nowhere"
token=$HF_TOKEN
! grep -rqF "$token" "$consumer" "$compile_build" "$subdir_build" "$work/offline-build" || fail "the token is in a build tree"
! grep -qF "$token" "$log" || fail "the token is in the output"
echo "PASS"
