#!/usr/bin/env bash
# Proves a release runs with glibc MAX (default 2.34: Amazon Linux 2023; Ubuntu 22.04 has 2.35)
# and nothing else installed: no ELF file in it needs a glibc symbol version newer than MAX, none
# needs libstdc++ (GLIBCXX_/CXXABI_: the release links its own), libgcc_s only at GCC_7.0.0 at
# most (gcc 7, 2017), and every library a file needs is glibc's, libgcc_s or in the release's
# lib/. Reads the ELF version needs with readelf.
#   packaging/release/check-glibc.sh TARBALL|FOLDER [MAX]
set -euo pipefail
input=${1:?usage: check-glibc.sh TARBALL|FOLDER [MAX]}
max=${2:-2.34}
if [[ -d "$input" ]]; then
  top=$input
else
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  tar -xzf "$input" -C "$scratch"
  top=$(find "$scratch" -mindepth 1 -maxdepth 1 -type d | head -1)
fi
system='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64|libgcc_s)\.so\.[0-9]+$'
bundled=$(find "$top/lib" -maxdepth 1 -name '*.so*' -printf '%f\n' 2>/dev/null | sort)
problems=0
elves=0
while read -r file; do
  [[ $(head -c 4 "$file" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]] || continue
  elves=$((elves + 1))
  name=${file#"$top"/}
  newest=$(readelf -V --wide "$file" | { grep -o 'Name: GLIBC_[0-9][0-9.]*' || true; } |
    sed 's/.*GLIBC_//' | sort -uV | tail -1)
  if [[ -n "$newest" && $(printf '%s\n%s\n' "$newest" "$max" | sort -V | tail -1) != "$max" ]]; then
    echo "FAIL: $name needs GLIBC_$newest (newer than $max):" >&2
    readelf -V --wide "$file" | grep -o 'Name: GLIBC_[0-9.]*' | sort -uV | tail -3 | sed 's/^/  /' >&2
    problems=$((problems + 1))
  fi
  gcc=$(readelf -V --wide "$file" | { grep -o 'Name: GCC_[0-9][0-9.]*' || true; } |
    sed 's/.*GCC_//' | sort -uV | tail -1)
  if [[ -n "$gcc" && $(printf '%s\n%s\n' "$gcc" 7.0.0 | sort -V | tail -1) != 7.0.0 ]]; then
    echo "FAIL: $name needs libgcc_s's GCC_$gcc (newer than GCC_7.0.0)" >&2
    problems=$((problems + 1))
  fi
  if readelf -V --wide "$file" | grep -qE 'Name: (GLIBCXX|CXXABI)_'; then
    echo "FAIL: $name needs the system's libstdc++" >&2
    problems=$((problems + 1))
  fi
  while read -r needed; do
    [[ $needed =~ $system ]] && continue
    grep -qxF "$needed" <<<"$bundled" && continue
    echo "FAIL: $name needs $needed, which is neither glibc's nor in lib/" >&2
    problems=$((problems + 1))
  done < <(readelf -d --wide "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  printf '%-48s newest glibc symbol %s\n' "$name" "${newest:-none}"
done < <(find "$top" -type f | LC_ALL=C sort)
[[ $elves -gt 0 ]] || { echo "FAIL: no ELF file in $input" >&2; exit 1; }
if [[ $problems -gt 0 ]]; then
  echo "FAIL: $problems problems in $elves ELF files of $input" >&2
  exit 1
fi
echo "PASS: $elves ELF files need glibc $max at most, no system libstdc++, no library outside lib/ but glibc's and libgcc_s"
