#!/usr/bin/env bash
# bounded-run.sh MEASURE_EXEC MAX_SECONDS MAX_RSS_MIB COMMAND [ARGS...]
# Runs COMMAND (a test program with a --gtest_filter) and fails when it fails, runs longer than
# MAX_SECONDS or peaks above MAX_RSS_MIB of resident memory: the time and memory bounds of the
# hostile cases, as checks of their own beside the assertions inside the tests.
set -euo pipefail
measure=$1 max_seconds=$2 max_mib=$3
shift 3
result=$(mktemp)
trap 'rm -f "$result"' EXIT
"$measure" "$result" "$@"
read -r seconds kib code _ <"$result"
echo "bounded-run: exit $code, ${seconds} s, peak RSS $((kib / 1024)) MiB" \
  "(bounds: ${max_seconds} s, ${max_mib} MiB)"
[[ $code == 0 ]] || exit "$code"
if ! awk -v s="$seconds" -v m="$max_seconds" 'BEGIN { exit !(s <= m) }'; then
  echo "bounded-run: over time: ${seconds} s > ${max_seconds} s" >&2
  exit 1
fi
if ((kib > max_mib * 1024)); then
  echo "bounded-run: over memory: $((kib / 1024)) MiB > ${max_mib} MiB" >&2
  exit 1
fi
