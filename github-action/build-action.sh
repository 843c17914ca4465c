#!/usr/bin/env bash
# The Action's setup step: writes path=<neuron-cache-action binary> to $GITHUB_OUTPUT (to stdout
# when that is not set). By default it downloads the release of the action's own version (the
# portable tarball, any x86_64 Linux with glibc 2.34+), checks it against the sha256 action.yml
# pins and keeps it by that sha256; it builds from source only when asked, when the action is
# used at a ref that is not its release tag (a branch or a commit: no release has its code), or
# when no release is pinned yet.
#   INPUT_BINARY        a prebuilt binary to use as it is
#   INPUT_BUILD_FROM_SOURCE  'true': build from the action's sources (Ubuntu 24.04 / Debian 12)
#   NEURON_CACHE_RELEASE     "<version> <sha256>" of the pinned release (action.yml), or empty
#   NEURON_CACHE_RELEASE_URL where releases are (default
#                       https://github.com/$GITHUB_ACTION_REPOSITORY/releases/download); the
#                       tarball is <url>/v<version>/neuron-cache-<version>-linux-x86_64.tar.gz
#   GITHUB_ACTION_REF   the ref the workflow used the action at (empty: the pinned release)
#   NEURON_CACHE_SOURCE the neuron-cache source tree (the action's checkout)
#   NEURON_CACHE_ACTION_CACHE  where releases and built binaries are kept (default: the runner's
#                       tool cache)
# A built binary is kept under a key of the action's sources, the OS release and the
# architecture, so a job on the same runner (or after an actions/cache restore) neither installs
# packages nor builds, and an upgraded action never reuses the old build.
#   build-action.sh --print-key   prints the key and exits
#   build-action.sh --cache-key   writes key=<key> and dir=<its folder> to $GITHUB_OUTPUT (stdout
#                                 when not set): what the action's actions/cache steps keep
#   NEURON_CACHE_OS_RELEASE       the os-release file to read (default /etc/os-release; tests)
set -euo pipefail
source_dir=${NEURON_CACHE_SOURCE:?NEURON_CACHE_SOURCE is not set}

fail() {
  echo "::error title=neuron-cache::$*"
  exit 2
}

check_runner() {
  local os arch
  os=$(uname -s) arch=$(uname -m)
  [[ "${RUNNER_OS:-Linux}" == Linux && $os == Linux ]] ||
    fail "neuron-cache-action runs on Linux runners only (this one: ${RUNNER_OS:-$os} $arch); Trainium and Inferentia hosts are Linux: use runs-on: ubuntu-latest or your self-hosted Linux runner"
  [[ $arch == x86_64 || $arch == aarch64 ]] ||
    fail "neuron-cache-action is built for x86_64 and aarch64 (this runner: $arch): use an x86_64 or arm64 Linux runner"
}

# Only a build from source needs Debian/Ubuntu packages.
check_build_runner() {
  command -v dpkg-query >/dev/null ||
    fail "neuron-cache-action builds from Debian/Ubuntu packages and this runner has no dpkg: use the release (build-from-source: false, at a release tag), an Ubuntu or Debian runner, or pass a binary you built as the binary input"
}

os_release=${NEURON_CACHE_OS_RELEASE:-/etc/os-release}

# Before anything is installed: the distribution must have the library versions the build needs
# (nlohmann-json >= 3.11, g++ >= 12 for C++20): Ubuntu 24.04 or Debian 12, or newer.
check_release() {
  local id version major
  id=$(. "$os_release" 2>/dev/null && echo "${ID:-unknown}")
  version=$(. "$os_release" 2>/dev/null && echo "${VERSION_ID:-0}")
  major=${version%%.*}
  [[ $major =~ ^[0-9]+$ ]] || major=0
  if [[ $id == ubuntu && $major -ge 24 ]] || [[ $id == debian && $major -ge 12 ]]; then
    return 0
  fi
  fail "neuron-cache-action builds from the distribution's packages and needs nlohmann-json 3.11 and g++ 12 or newer: Ubuntu 24.04 or Debian 12 and later have them, this runner is $id $version. Use runs-on: ubuntu-24.04, use the action at a release tag (it then downloads the portable release, which runs here), or build neuron-cache-action yourself and pass it as the binary input"
}

# The sources the binary is built from, the OS release and the architecture.
build_key() {
  local release
  release=$(. "$os_release" 2>/dev/null && echo "${ID:-unknown}-${VERSION_ID:-unknown}")
  {
    echo "$release $(uname -m)"
    cd "$source_dir" &&
      find CMakeLists.txt core github-action cmake-module -type f ! -name '*.md' -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

install_packages() {
  local packages=(build-essential cmake pkg-config libcurl4-openssl-dev libssl-dev
                  nlohmann-json3-dev libyaml-cpp-dev libgit2-dev libcli11-dev)
  local missing=() package status
  for package in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$package")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  echo "::group::installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "::endgroup::"
}

# Builds into <cache>/build-<key>, then places the binary with a rename so a concurrent job
# never runs a half-copied file.
build_into() {  # KEY_DIR BUILD_DIR
  echo "::group::building neuron-cache-action in $2"
  cmake -S "$source_dir" -B "$2" -DCMAKE_BUILD_TYPE=Release -DNEURON_CACHE_BUILD_TESTS=OFF \
    -DNEURON_CACHE_BUILD_ACTION=ON
  cmake --build "$2" --target neuron-cache-action -j "$(nproc)"
  echo "::endgroup::"
  mkdir -p "$1"
  cp "$2/github-action/neuron-cache-action" "$1/.neuron-cache-action.$$"
  mv -f "$1/.neuron-cache-action.$$" "$1/neuron-cache-action"
}

emit() {  # NAME VALUE
  if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
    echo "$1=$2" >>"$GITHUB_OUTPUT"
  else
    echo "$1=$2"
  fi
}

# Whether to use the pinned release: not when asked to build, nor at a ref that is not its tag.
use_release() {
  local version sha
  read -r version sha <<<"${NEURON_CACHE_RELEASE:-}"
  [[ "${INPUT_BUILD_FROM_SOURCE:-false}" != true && -n "${sha:-}" ]] || return 1
  [[ $(uname -m) == x86_64 ]] || return 1
  local ref=${GITHUB_ACTION_REF:-}
  [[ -z "$ref" || "$ref" == "v$version" || "$ref" == "$version" ]] && return 0
  echo "neuron-cache-action: used at $ref, not at the release tag v$version: building from the action's sources"
  return 1
}

# Downloads the pinned release into <cache>/release-<sha256>, checked before anything is unpacked;
# sets release_path to its neuron-cache-action.
fetch_release() {  # CACHE
  local version sha base name dir got tmp
  read -r version sha <<<"$NEURON_CACHE_RELEASE"
  [[ $sha =~ ^[0-9a-f]{64}$ ]] || fail "action.yml pins the release sha256 \`$sha\`, which is not 64 hex digits"
  name=neuron-cache-$version-linux-x86_64
  dir=$1/release-$sha
  if [[ -x "$dir/$name/bin/neuron-cache-action" ]]; then
    echo "neuron-cache-action: using release $version from $dir (sha256 $sha)"
    release_path=$dir/$name/bin/neuron-cache-action
    return
  fi
  base=${NEURON_CACHE_RELEASE_URL:-https://github.com/${GITHUB_ACTION_REPOSITORY:-neuron-cache/neuron-cache}/releases/download}
  mkdir -p "$1"
  tmp=$(mktemp -d "$1/.download.XXXXXX")
  download_tmp=$tmp
  trap 'rm -rf "$download_tmp"' EXIT  # a refused or failed download leaves nothing behind
  echo "neuron-cache-action: downloading release $version from ${base%/}/v$version/$name.tar.gz"
  curl --fail --silent --show-error --location --retry 3 --proto '=https,http' \
    -o "$tmp/$name.tar.gz" "${base%/}/v$version/$name.tar.gz" ||
    fail "could not download release $version from ${base%/}/v$version/$name.tar.gz; set build-from-source: true to build it on this runner instead"
  got=$(sha256sum "$tmp/$name.tar.gz" | cut -d' ' -f1)
  [[ $got == "$sha" ]] ||
    fail "the downloaded release $version has sha256 $got, but action.yml pins $sha: it was refused and nothing of it was used. Check the release assets (or the release-url), or set build-from-source: true"
  tar -xzf "$tmp/$name.tar.gz" -C "$tmp"
  [[ -x "$tmp/$name/bin/neuron-cache-action" ]] || fail "release $version holds no bin/neuron-cache-action"
  rm -rf "$dir"
  mkdir -p "$tmp/unpacked"
  mv "$tmp/$name" "$tmp/unpacked/"
  mv "$tmp/unpacked" "$dir"  # one rename: a concurrent job never sees half a release
  echo "neuron-cache-action: release $version verified (sha256 $sha) and kept in $dir"
  release_path=$dir/$name/bin/neuron-cache-action
}

main() {
  if [[ -n "${INPUT_BINARY:-}" ]]; then
    [[ -x "$INPUT_BINARY" ]] || fail "input binary: $INPUT_BINARY is not an executable file"
    emit path "$INPUT_BINARY"
    return
  fi
  check_runner
  local key cache
  cache=${NEURON_CACHE_ACTION_CACHE:-${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/neuron-cache-action}
  if use_release; then
    local sha
    read -r _ sha <<<"$NEURON_CACHE_RELEASE"
    if [[ "${1:-}" == --cache-key ]]; then
      emit key "release-$sha"
      emit dir "$cache/release-$sha"
      return
    fi
    [[ "${1:-}" == --print-key ]] && { echo "release-$sha"; return; }
    fetch_release "$cache"
    emit path "$release_path"
    return
  fi
  key=$(build_key)
  if [[ "${1:-}" == --print-key ]]; then
    echo "$key"
    return
  fi
  if [[ "${1:-}" == --cache-key ]]; then
    emit key "$key"
    emit dir "$cache/$key"
    return
  fi
  if [[ -x "$cache/$key/neuron-cache-action" ]]; then
    echo "neuron-cache-action: using the build in $cache/$key (the action's sources, OS and architecture are unchanged)"
  else
    check_build_runner
    check_release
    install_packages
    build_into "$cache/$key" "$cache/build-$key"
  fi
  emit path "$cache/$key/neuron-cache-action"
}

main "$@"
