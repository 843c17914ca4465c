#!/usr/bin/env bash
# The Action's default path on a runner without build tools: github-action/build-action.sh with a
# PATH that has no compiler, no cmake, no pkg-config and no dpkg, and an empty tool cache,
# downloads the release from a loopback server standing in for the release host, checks it
# against the pinned sha256, unpacks it and hands over a neuron-cache-action that runs; a second
# job takes it from the cache without a request; a tarball whose sha256 differs from the pin is
# refused and leaves nothing behind; action.yml pins the same release in every step that reads it.
#   action-release-test.sh TARBALL VERSION
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tarball=$(readlink -f "${1:?usage: action-release-test.sh TARBALL VERSION}")
version=${2:?usage: action-release-test.sh TARBALL VERSION}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The release host: <base>/v<version>/<tarball>, served by a loopback HTTP server.
name=$(basename "$tarball")
mkdir -p "$work/releases/v$version" "$work/bad/v$version"
cp "$tarball" "$work/releases/v$version/"
cp "$tarball" "$work/bad/v$version/" && printf 'x' >>"$work/bad/v$version/$name"
/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory "$work" 0 >"$work/server.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$work/server.log" | head -1)
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || fail "the loopback release host did not start: $(cat "$work/server.log")"
requests() { grep -c '"GET ' "$work/server.log" || true; }

# A runner without build tools: only the commands the download path needs.
mkdir -p "$work/bin"
for command in bash sh env curl sha256sum tar gzip cut mkdir mktemp mv rm uname cat sed grep \
  find sort xargs id head readlink ls; do
  ln -s "$(command -v "$command")" "$work/bin/$command"
done
for missing in cc gcc g++ c++ cmake make pkg-config dpkg-query apt-get; do
  [[ ! -e "$work/bin/$missing" ]] || fail "$missing is on the simulated runner's PATH"
done
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
setup() {  # BASE PIN OUTPUT
  env -i PATH="$work/bin" HOME="$work/home" RUNNER_OS=Linux \
    NEURON_CACHE_SOURCE="$root" NEURON_CACHE_ACTION_CACHE="$work/tool-cache" \
    NEURON_CACHE_RELEASE="$version $2" NEURON_CACHE_RELEASE_URL="$1" GITHUB_ACTION_REF="v$version" \
    GITHUB_OUTPUT="$3" bash "$root/github-action/build-action.sh"
}

echo "== the release, downloaded and verified on a runner without build tools"
: >"$work/out-1"
setup "http://127.0.0.1:$port/releases" "$sha" "$work/out-1" >"$work/setup-1.log" 2>&1 ||
  { cat "$work/setup-1.log" >&2; fail "the download path failed"; }
path=$(sed -n 's/^path=//p' "$work/out-1")
[[ "$path" == "$work/tool-cache/release-$sha/"*/bin/neuron-cache-action ]] ||
  fail "path=$path is not the verified release's"
answer=$(env -i PATH=/usr/bin:/bin "$path" --version) || fail "the release's neuron-cache-action does not run"
[[ $answer == *"$version"* ]] || fail "--version said: $answer"
grep -q 'verified (sha256' "$work/setup-1.log" || { cat "$work/setup-1.log" >&2; fail "no word of the check"; }
[[ $(requests) -eq 1 ]] || fail "$(requests) requests to the release host, not 1"
echo "downloaded once, verified, runs: $answer"

echo "== a second job on the runner takes it from the cache"
: >"$work/out-2"
setup "http://127.0.0.1:$port/releases" "$sha" "$work/out-2" >"$work/setup-2.log" 2>&1 ||
  { cat "$work/setup-2.log" >&2; fail "the cached path failed"; }
[[ $(sed -n 's/^path=//p' "$work/out-2") == "$path" ]] || fail "the second job got another binary"
[[ $(requests) -eq 1 ]] || fail "the second job downloaded again"

echo "== a tarball whose sha256 differs from the pin is refused and leaves nothing"
rm -rf "$work/tool-cache"
: >"$work/out-3"
if setup "http://127.0.0.1:$port/bad" "$sha" "$work/out-3" >"$work/setup-3.log" 2>&1; then
  fail "a tarball of other bytes was accepted"
fi
grep -q "but action.yml pins $sha: it was refused" "$work/setup-3.log" ||
  { cat "$work/setup-3.log" >&2; fail "no clear refusal"; }
[[ ! -s "$work/out-3" ]] || fail "the refused release was handed over: $(cat "$work/out-3")"
[[ -z $(find "$work/tool-cache" -mindepth 1 2>/dev/null) ]] ||
  { find "$work/tool-cache" >&2; fail "the refused download left files behind"; }

echo "== a wrong pin (not a sha256) and a missing release say what to do"
if setup "http://127.0.0.1:$port/releases" "not-a-sha" "$work/out-4" >"$work/setup-4.log" 2>&1; then
  fail "a malformed pin was accepted"
fi
grep -q 'which is not 64 hex digits' "$work/setup-4.log" || fail "malformed pin: no clear message"
if setup "http://127.0.0.1:$port/nowhere" "$sha" "$work/out-5" >"$work/setup-5.log" 2>&1; then
  fail "a missing release was accepted"
fi
grep -q 'set build-from-source: true' "$work/setup-5.log" || fail "missing release: no next step"

echo "== action.yml: one pin for every step that reads it"
pins=$(grep -o "NEURON_CACHE_RELEASE: '[^']*'" "$root/github-action/action.yml" | sort -u | wc -l)
[[ $(grep -c "NEURON_CACHE_RELEASE: '" "$root/github-action/action.yml") -eq 2 && $pins -eq 1 ]] ||
  fail "action.yml's NEURON_CACHE_RELEASE lines disagree"
echo "PASS"
