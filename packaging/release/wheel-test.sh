#!/usr/bin/env bash
# The wheel as a pip user gets it: `pip install --no-index` of the built wheel into a fresh venv
# puts neuron-cache and neuron-cache-action on the venv's PATH, and both run.
#   wheel-test.sh WHEEL VERSION
set -euo pipefail
wheel=$(readlink -f "${1:?usage: wheel-test.sh WHEEL VERSION}")
version=${2:?usage: wheel-test.sh WHEEL VERSION}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/venv" || fail "python3 -m venv (Debian: python3-venv)"
"$work/venv/bin/pip" install --no-index --no-cache-dir --quiet "$wheel" ||
  fail "pip install --no-index $wheel"
answer=$(env -i PATH="$work/venv/bin:/usr/bin:/bin" neuron-cache --version) || fail "neuron-cache --version"
[[ $answer == "neuron-cache $version"* ]] || fail "neuron-cache --version said: $answer"
[[ $(command -v "$work/venv/bin/neuron-cache-action") ]] || fail "no neuron-cache-action on the venv's PATH"
# The executables keep their bundled libraries: nothing is taken from the host but glibc's.
exe=$(find "$work/venv" -path '*/neuron_cache/data/bin/neuron-cache' | head -1)
[[ -x "$exe" ]] || fail "the wheel's executable is not executable"
outside=$(ldd "$exe" | awk '$2 == "=>" {print $3}' | grep -v '/neuron_cache/data/bin/../lib/' |
  grep -vE '/lib(c|m|resolv|pthread|dl|rt|gcc_s)\.so\.[0-9]+$' || true)
[[ -z "$outside" ]] || fail "the installed executable loads $outside"
"$work/venv/bin/pip" uninstall --yes --quiet neuron-cache || fail "pip uninstall"
[[ ! -e "$work/venv/bin/neuron-cache" ]] || fail "pip uninstall left neuron-cache behind"
echo "PASS: pip installed $(basename "$wheel") into a fresh venv; $answer; uninstalled cleanly"
