#!/usr/bin/env bash
# The release on a machine with nothing installed: the demo's pipeline run from the unpacked
# tarball inside a minimal Debian root (debootstrap --variant=minbase, Debian's packages only),
# where none of the libraries the build linked (libcurl, OpenSSL, libgit2, yaml-cpp, libssh2,
# nghttp2, Kerberos, LDAP, mbedTLS...) is installed. Machine 1 runs `ci` (the compile command is
# the project's stand-in compiler, borrowed from the host with the host's own loader, since the
# chroot has no Python) and pushes to the loopback Hub, which runs outside the chroot; machine 2
# runs `prefetch`, compiles nothing and gets the same bytes. Also checks, inside the chroot, that
# every library the executables load comes from the release's lib/ or the chroot's glibc.
#   chroot-test.sh TARBALL BUILD_DIR      (needs root, debootstrap and a Debian mirror)
# NEURON_CACHE_MINBASE=FILE keeps the debootstrapped root as a tarball there and reuses it
# (default /var/tmp/neuron-cache-minbase-bookworm.tar; a fresh CI machine makes it once, about a
# minute); DEBIAN_MIRROR overrides http://deb.debian.org/debian.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tarball=$(readlink -f "${1:?usage: chroot-test.sh TARBALL BUILD_DIR}")
build=$(cd "${2:?usage: chroot-test.sh TARBALL BUILD_DIR}" && pwd)
minbase=${NEURON_CACHE_MINBASE:-/var/tmp/neuron-cache-minbase-bookworm.tar}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || fail "the chroot test needs root (chroot, mount), and there is no sudo"
  exec sudo --preserve-env=NEURON_CACHE_MINBASE,DEBIAN_MIRROR,KEEP_WORK bash "$0" "$@"
fi
command -v debootstrap >/dev/null || fail "debootstrap is not installed (.ci/install-deps --tests)"

work=$(mktemp -d /var/tmp/neuron-cache-chroot.XXXXXX)
jail=$work/root
server_pid=
mounted=()
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work"; return; fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
step() { echo "== $*"; }

step "a minimal Debian root (debootstrap --variant=minbase bookworm)"
mkdir -p "$jail"
if [[ -s "$minbase" ]]; then
  tar -xf "$minbase" -C "$jail"
else
  debootstrap --variant=minbase bookworm "$jail" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
  tar -cf "$minbase.partial" -C "$jail" . && mv "$minbase.partial" "$minbase"
fi
for lib in libcurl.so.4 libssl.so.3 libcrypto.so.3 libgit2.so.1.5 libyaml-cpp.so.0.7 \
  libssh2.so.1 libnghttp2.so.14 libpsl.so.5 libgssapi_krb5.so.2 libldap-2.5.so.0 librtmp.so.1 \
  libmbedtls.so.14 libhttp_parser.so.2.9 libbrotlidec.so.1 libstdc++.so.6.0.30x; do
  found=$(find "$jail/usr/lib" "$jail/lib" -name "$lib*" 2>/dev/null | head -1)
  [[ -z "$found" || $lib == libstdc++* ]] || fail "the chroot has $lib (${found#"$jail"}): not a bare machine"
done
echo "none of libcurl, OpenSSL, libgit2, yaml-cpp, libssh2, nghttp2, psl, Kerberos, LDAP, rtmp, mbedTLS is installed"

# /proc as on any running system: the loader finds $ORIGIN through /proc/self/exe.
mkdir -p "$jail/proc"
mount -t proc proc "$jail/proc" && mounted+=("$jail/proc")

step "the release unpacked in /opt, checked against its SHA256SUMS"
mkdir -p "$jail/opt"
tar -xzf "$tarball" -C "$jail/opt"
release=$(cd "$jail/opt" && ls -d neuron-cache-*)
chroot "$jail" /bin/sh -c "cd /opt/$release && sha256sum --quiet -c SHA256SUMS" ||
  fail "SHA256SUMS does not match inside the chroot"
in_jail() {
  chroot "$jail" /usr/bin/env -i PATH="/opt/$release/bin:/usr/local/bin:/usr/bin:/bin" \
    HOME=/root LANG=C.UTF-8 "$@"
}
for exe in neuron-cache neuron-cache-action; do
  in_jail /usr/bin/env LD_TRACE_LOADED_OBJECTS=1 "/opt/$release/bin/$exe" >"$work/$exe.libs" ||
    fail "$exe does not load in the chroot"
  outside=$(awk '$2 == "=>" {print $3}' "$work/$exe.libs" |
    grep -vE "^/opt/$release/(bin/\.\./)?lib/" | grep -vE '/lib(c|m|resolv|pthread|dl|rt|gcc_s)\.so\.[0-9]+$' || true)
  [[ -z "$outside" ]] || fail "$exe loads libraries from outside the release: $outside"
  ! grep -q 'not found' "$work/$exe.libs" || fail "$exe: $(grep 'not found' "$work/$exe.libs")"
done
in_jail neuron-cache --version | grep -q '^neuron-cache ' || fail "neuron-cache --version"
echo "both executables load only the release's lib/ and glibc; $(in_jail neuron-cache --version)"

step "the loopback Hub (outside the chroot; same network)"
"$build/tests/hub_server/hub-server" --data "$work/hub" --config "$root/examples/demo-hub.json" \
  --ready-file "$work/hub.json" >"$work/hub.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [[ -s "$work/hub.json" ]] && break; sleep 0.1; done
endpoint=$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$work/hub.json")
[[ -n "$endpoint" ]] || fail "the Hub did not start: $(cat "$work/hub.log")"

# The compiler: the host's Python, run by the host's loader from a read-only view of the host, so
# nothing of it is installed in the chroot.
mkdir -p "$jail/host"
mount --bind / "$jail/host" && mounted+=("$jail/host")
mount -o remount,bind,ro "$jail/host"
python=$(readlink -f /usr/bin/python3)  # Debian's, whatever python3 PATH finds first
cat >"$jail/usr/local/bin/optimum-cli" <<SH
#!/bin/sh
[ "\$1 \$2" = "export neuron" ] && shift 2
PYTHONHOME=/host/usr exec /host/lib64/ld-linux-x86-64.so.2 \\
  --library-path /host/usr/lib/x86_64-linux-gnu:/host/lib/x86_64-linux-gnu \\
  /host$python /host$root/tests/tools/stand-in-export "\$@"
SH
chmod +x "$jail/usr/local/bin/optimum-cli"
mkdir -p "$jail/work"
cp "$root/examples/neuron-cache.yaml" "$jail/work/"
configs=(--config llama3-8b-chat --config qwen2.5-7b-trn2)
machine() {
  local n=$1
  shift
  in_jail HF_ENDPOINT="$endpoint" HF_TOKEN=hf_alice_write HF_HOME="/work/hf-home-$n" \
    NEURON_COMPILE_CACHE_URL="/work/machine-$n" STAND_IN_DELAY=0 \
    STAND_IN_CALL_LOG="/work/compiler-calls-$n.jsonl" STAND_IN_HASHED_DICTS="/host$root/tests/data/vectors/arch-digest/stand-in-models.json" \
    neuron-cache "$@"
}

step "machine 1: ci compiles both configurations and pushes them"
machine 1 ci /work/neuron-cache.yaml "${configs[@]}" --output-dir /work/out-1 --report /work/report-1.json ||
  fail "ci on machine 1"
[[ $(wc -l <"$jail/work/compiler-calls-1.jsonl") -eq 2 ]] || fail "machine 1 did not compile twice"

step "machine 2: prefetch fetches both, ci then compiles nothing"
machine 2 prefetch /work/neuron-cache.yaml "${configs[@]}" || fail "prefetch on machine 2"
machine 2 ci /work/neuron-cache.yaml "${configs[@]}" --output-dir /work/out-2 --report /work/report-2.json ||
  fail "ci on machine 2"
[[ ! -e "$jail/work/compiler-calls-2.jsonl" ]] || fail "machine 2 compiled"
(cd "$jail/work/machine-1" && find neuronxcc-* -path '*MODULE_*' -type f -name '*.neff' | sort) >"$work/neffs-1"
(cd "$jail/work/machine-2" && find neuronxcc-* -path '*MODULE_*' -type f -name '*.neff' | sort) >"$work/neffs-2"
[[ -s "$work/neffs-1" ]] && cmp -s "$work/neffs-1" "$work/neffs-2" || fail "machine 2 lacks NEFFs of machine 1"
while read -r neff; do
  cmp -s "$jail/work/machine-1/$neff" "$jail/work/machine-2/$neff" || fail "$neff differs"
done <"$work/neffs-1"
echo "PASS: $(wc -l <"$work/neffs-1") NEFFs compiled on machine 1, fetched byte for byte on machine 2, from the release in a bare Debian root"
