#!/usr/bin/env bash
# Pins a release in github-action/action.yml, which then downloads it by default and refuses any
# other bytes: NEURON_CACHE_RELEASE: '<version> <sha256>' in each step that reads it.
#   pin-action.sh OUTDIR     (where packaging/release/build.sh wrote the tarball and its .sha256)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:?usage: pin-action.sh OUTDIR}
version=$(sed -n 's/^project(neuron_cache VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
file=$out/neuron-cache-$version-linux-x86_64.tar.gz.sha256
[[ -f "$file" ]] || { echo "no $file: run packaging/release/build.sh $out first" >&2; exit 1; }
sha=$(cut -d' ' -f1 "$file")
[[ $sha =~ ^[0-9a-f]{64}$ ]] || { echo "$file holds no sha256" >&2; exit 1; }
sed -i "s|^\(        NEURON_CACHE_RELEASE: \)'[^']*'|\1'$version $sha'|" "$root/github-action/action.yml"
[[ $(grep -c "NEURON_CACHE_RELEASE: '$version $sha'" "$root/github-action/action.yml") -eq 2 ]] ||
  { echo "github-action/action.yml: not both NEURON_CACHE_RELEASE lines were pinned" >&2; exit 1; }
echo "github-action/action.yml pins neuron-cache $version, sha256 $sha"
