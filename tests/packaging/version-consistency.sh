#!/usr/bin/env bash
# ctest version_consistency: the version has one source, project() in CMakeLists.txt (the tool
# reads it through core/neuron_cache/version.h.in). Bazel's MODULE.bazel and the docs (README.md, docs/) must
# spell it out; this check fails when one of them is left behind.
#   tests/packaging/version-consistency.sh SOURCE_DIR VERSION
set -euo pipefail
root=$1 version=$2
fail=0
expect() {  # FILE PATTERN
  if ! grep -qF -- "$2" "$root/$1"; then
    echo "FAIL: $1 does not say $2 (the version in CMakeLists.txt is $version)" >&2
    fail=1
  fi
}
expect MODULE.bazel "version = \"$version\","
expect docs/bazel.md "bazel_dep(name = \"neuron_cache\", version = \"$version\")"
expect bazel/extensions.bzl "bazel_dep(name = \"neuron_cache\", version = \"$version\")"
# The Install section's commands and the release file names.
expect README.md "v=$version"
expect README.md "neuron-cache-$version-linux-x86_64.tar.gz"
expect README.md "neuron_cache-$version-py3-none-manylinux_2_34_x86_64.whl"
expect README.md "github-action@v$version"
# The Install section's details and the front ends' pages name the release too.
expect docs/install.md "neuron_cache-$version-py3-none-manylinux_2_34_x86_64.whl"
expect docs/bazel.md "neuron-cache-$version-linux-x86_64.tar.gz"
docs=("$root/README.md" "$root"/docs/*.md)
if grep -oE 'neuron[-_]cache-[0-9]+\.[0-9]+\.[0-9]+' "${docs[@]}" | grep -vF -- "-$version" | grep -q .; then
  echo "FAIL: the docs name a release other than $version:" >&2
  grep -noE 'neuron[-_]cache-[0-9]+\.[0-9]+\.[0-9]+' "${docs[@]}" | grep -vF -- "-$version" >&2
  fail=1
fi
if grep -noE '(github-action|/download/v|--version )@?v?[0-9]+\.[0-9]+\.[0-9]+' "${docs[@]}" | grep -vF -- "$version" | grep -q .; then
  echo "FAIL: the docs name a release tag other than v$version:" >&2
  grep -noE '(github-action|/download/v|--version )@?v?[0-9]+\.[0-9]+\.[0-9]+' "${docs[@]}" | grep -vF -- "$version" >&2
  fail=1
fi
# No source file may carry its own copy.
if grep -rn --include='*.cpp' --include='*.h' -E '"neuron-cache[ /][0-9]+\.[0-9]' "$root/core" "$root/github-action" |
  grep -vE '^[^:]+:[0-9]+:\s*//'; then
  echo "FAIL: a source file spells out the version: use neuron_cache::kVersion (version.h)" >&2
  fail=1
fi
[[ $fail == 0 ]] && echo "version $version everywhere"
exit $fail
