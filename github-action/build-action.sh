#!/usr/bin/env bash
# The Action's build step: writes path=<neuron-cache-action binary> to $GITHUB_OUTPUT (to stdout
# when that is not set).
#   INPUT_BINARY        a prebuilt binary to use as it is
#   NEURON_CACHE_SOURCE the neuron-cache source tree (the action's checkout)
#   NEURON_CACHE_ACTION_CACHE  where built binaries are kept (default: the runner's tool cache)
# A built binary is kept under a key of the action's sources, the OS release and the
# architecture, so a job on the same runner (or after an actions/cache restore) neither installs
# packages nor builds, and an upgraded action never reuses the old build.
#   build-action.sh --print-key   prints the key and exits
#   build-action.sh --cache-key   writes key=<key> and dir=<its folder> to $GITHUB_OUTPUT (stdout
#                                 when not set): what the action's actions/cache step saves
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
  command -v dpkg-query >/dev/null ||
    fail "neuron-cache-action builds from Debian/Ubuntu packages and this runner has no dpkg: use an Ubuntu or Debian runner, or build neuron-cache-action yourself and pass it as the binary input"
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
  fail "neuron-cache-action builds from the distribution's packages and needs nlohmann-json 3.11 and g++ 12 or newer: Ubuntu 24.04 or Debian 12 and later have them, this runner is $id $version. Use runs-on: ubuntu-24.04, or build neuron-cache-action yourself and pass it as the binary input"
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

main() {
  if [[ -n "${INPUT_BINARY:-}" ]]; then
    [[ -x "$INPUT_BINARY" ]] || fail "input binary: $INPUT_BINARY is not an executable file"
    emit path "$INPUT_BINARY"
    return
  fi
  check_runner
  local key cache
  key=$(build_key)
  if [[ "${1:-}" == --print-key ]]; then
    echo "$key"
    return
  fi
  cache=${NEURON_CACHE_ACTION_CACHE:-${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/neuron-cache-action}
  if [[ "${1:-}" == --cache-key ]]; then
    emit key "$key"
    emit dir "$cache/$key"
    return
  fi
  if [[ -x "$cache/$key/neuron-cache-action" ]]; then
    echo "neuron-cache-action: using the build in $cache/$key (the action's sources, OS and architecture are unchanged)"
  else
    check_release
    install_packages
    build_into "$cache/$key" "$cache/build-$key"
  fi
  emit path "$cache/$key/neuron-cache-action"
}

main "$@"
