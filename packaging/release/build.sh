#!/usr/bin/env bash
# Makes the release from a checkout: OUTDIR/neuron-cache-<version>-linux-x86_64.tar.gz and its
# .sha256, for any x86_64 Linux with glibc 2.34 or newer and nothing else installed.
#   packaging/release/build.sh OUTDIR
# BUILD_DIR=DIR makes it from that build folder, which must be configured with the release's
# options (tests/run-tests.sh's build is: CI releases the objects it has just tested), else from a
# new one. Needs the Debian 12 build dependencies (.ci/install-deps).
#
# How it is portable: the executables link libstdc++ and yaml-cpp statically (Debian 12's
# libstdc++ needs glibc 2.36) and carry an $ORIGIN/../lib RPATH; every other library they load
# that glibc and libgcc_s (on every glibc system) do not provide (libcurl and its TLS, HTTP/2,
# IDN, Kerberos and LDAP libraries, libgit2, OpenSSL) is copied into lib/. Debian ships no static
# archive of some of them (Kerberos, p11-kit), so bundling is the one way that works with Debian's
# packages alone. check-glibc.sh proves that no file needs a glibc symbol newer than 2.34.
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $# -eq 1 ]] || { echo "usage: packaging/release/build.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
version=$(sed -n 's/^project(neuron_cache VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[[ -n "$version" ]] || { echo "no version in CMakeLists.txt's project()" >&2; exit 1; }
name=neuron-cache-$version-linux-x86_64

scratch=$(mktemp -d "${TMPDIR:-/tmp}/neuron-cache-release.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if [[ -n "${BUILD_DIR:-}" ]]; then
  # A build others may be testing: not configured again, only checked.
  build=$(cd "$BUILD_DIR" && pwd)
  for option in NEURON_CACHE_PORTABLE NEURON_CACHE_INSTALL_ACTION; do
    grep -qE "^$option:BOOL=(ON|TRUE|1)$" "$build/CMakeCache.txt" || {
      echo "$build is not configured with -D$option=ON (tests/run-tests.sh does it)" >&2
      exit 1
    }
  done
else
  build=$scratch/build
  # No path of this machine in the binaries: the same sources give the same tarball elsewhere
  # (the release workflow checks the sha256 action.yml pins).
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEURON_CACHE_PORTABLE=ON \
    -DNEURON_CACHE_INSTALL_ACTION=ON -DNEURON_CACHE_BUILD_TESTS=OFF \
    "-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$root/= -ffile-prefix-map=$build/=" >/dev/null
fi
cmake --build "$build" --target neuron-cache neuron-cache-action -j "$(nproc)" >/dev/null

stage=$scratch/$name
# The tested build, stripped (RelWithDebInfo: the tests ran these objects).
cmake --install "$build" --prefix "$stage" --strip >/dev/null
mkdir -p "$stage/lib" "$stage/share/licenses"

# glibc's own libraries and libgcc_s come from the host; all else the executables load goes in lib/.
system='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnss_.*|ld-linux-x86-64|libgcc_s)\.so'
for exe in "$stage"/bin/*; do
  if LD_LIBRARY_PATH= ldd "$exe" | grep 'not found' >&2; then
    echo "$exe: a library above is missing" >&2
    exit 1
  fi
  LD_LIBRARY_PATH= ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u >"$scratch/libraries"
# The Debian package of a library (dpkg knows some under /lib, some under /usr/lib).
package_of() {
  local real
  real=$(readlink -f "$1")
  dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "$1"
}
packages=()
while read -r soname path; do
  [[ $soname =~ $system ]] && continue
  cp -L "$path" "$stage/lib/$soname"
  chmod 0644 "$stage/lib/$soname"
  packages+=("$(package_of "$path" | head -1 | cut -d: -f1)")
done <"$scratch/libraries"

# License texts: of every Debian package whose code the release carries, bundled or linked in.
packages+=(libstdc++6 libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev)
for package in $(printf '%s\n' "${packages[@]}" | grep . | sort -u); do
  copyright=/usr/share/doc/$package/copyright
  [[ -f "$copyright" ]] || { echo "no license text for $package ($copyright)" >&2; exit 1; }
  mkdir -p "$stage/share/licenses/$package"
  cp "$copyright" "$stage/share/licenses/$package/copyright"
done

# The Bazel rule, loadable from the unpacked archive (http_archive with strip_prefix = "$name"),
# with the executables as labels: tool = "@neuron_cache//:bin/neuron-cache".
mkdir -p "$stage/bazel"
cp "$root"/bazel/*.bzl "$root/bazel/BUILD.bazel" "$stage/bazel/"
cp "$root/MODULE.bazel" "$root/WORKSPACE.bazel" "$stage/"
printf '%s\n' '# The release: its executables as labels for the `tool` attribute.' \
  'exports_files(["bin/neuron-cache", "bin/neuron-cache-action"])' >"$stage/BUILD.bazel"
cp "$root/README.md" "$stage/"
# The README links to docs/: the reference travels with it.
cp -r "$root/docs" "$stage/docs"

(cd "$stage" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort |
  xargs sha256sum >SHA256SUMS)

# Reproducible: names sorted, owners and times fixed (the commit's time), gzip without a name.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
tarball=$out/$name.tar.gz
tar -C "$scratch" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  --format=gnu -cf - "$name" | gzip -n -9 >"$tarball.partial"
mv "$tarball.partial" "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")

if [[ -z "${NO_WHEEL:-}" ]]; then
  python3 "$root/packaging/release/wheel.py" "$stage" "$version" "$out"
fi
echo "$tarball"
