#!/usr/bin/env bash
# No binary searches a folder that depends on where it is run from: every RPATH and RUNPATH entry
# of the given build-tree binaries, and of the executables `cmake --install` puts into a temporary
# prefix, is absolute or starts with $ORIGIN. An empty entry (CMake pads the build-tree RPATH of an
# installed target with ':' unless it is built with the install RPATH) or a relative one makes the
# loader look in the current folder first: a library planted there would load.
#   tests/packaging/rpath-check.sh BUILD_DIR BINARY...
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: rpath-check.sh BUILD_DIR BINARY..." >&2; exit 2; }
build=$1
shift

# Prints the bad entries of one RPATH/RUNPATH value (colon-separated), nothing when it is sound.
bad_entries() {
  local value=$1 entry
  # A trailing ':' is an empty last entry too (read -a would drop it).
  [[ $value == *: ]] && echo "(empty, at the end)"
  IFS=: read -ra entries <<<"$value"
  for entry in "${entries[@]}"; do
    if [[ -z $entry ]]; then
      echo "(empty)"
    elif [[ $entry != /* && $entry != '$ORIGIN'* && $entry != '${ORIGIN}'* ]]; then
      echo "$entry"
    fi
  done
}

# The check itself must refuse what CMake's padding writes.
for padded in '::::::::::::::' '/usr/lib:' '$ORIGIN/../lib::' 'lib'; do
  [[ -n $(bad_entries "$padded") ]] || { echo "rpath-check.sh accepts '$padded'" >&2; exit 1; }
done
[[ -z $(bad_entries '$ORIGIN/../lib:/opt/x/lib') ]] || { echo "rpath-check.sh refuses a sound path" >&2; exit 1; }

status=0
check() {
  local file=$1 line value bad
  [[ -f $file ]] || { echo "$file: missing" >&2; status=1; return; }
  while IFS= read -r line; do
    # readelf -d: " 0x...0f (RPATH)   Library rpath: [$ORIGIN/../lib]"
    value=${line#*[}
    value=${value%]*}
    bad=$(bad_entries "$value")
    if [[ -n $bad ]]; then
      echo "$file: ${line##*(}: unsafe entries: $(echo "$bad" | tr '\n' ' ')" >&2
      status=1
    fi
  done < <(readelf -d "$file" | grep -E '\((RPATH|RUNPATH)\)' || true)
}

for binary in "$@"; do
  check "$binary"
done
prefix=$(mktemp -d "${TMPDIR:-/tmp}/rpath-check.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
installed=0
for binary in "$prefix"/bin/*; do
  check "$binary"
  installed=$((installed + 1))
done
[[ $installed -gt 0 ]] || { echo "cmake --install put no executable into bin/" >&2; status=1; }
[[ $status -eq 0 ]] && echo "RPATH/RUNPATH sound: $# build-tree binaries, $installed installed"
exit "$status"
