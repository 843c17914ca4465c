#!/usr/bin/env bash
# ctest settings_only: one resolution (core/neuron_cache/config/settings.cpp). Library code reads no process
# environment and re-applies no precedence: it uses the Settings it was given. Fails when
#  - core/ outside neuron_cache/config/ and neuron_cache/cli/ (the CLI's main hands the process environment to Settings)
#    calls getenv, secure_getenv or Environment::from_process, or reads environ; the two
#    exceptions are core/neuron_cache/compile/runner.cpp, which copies environ into a child's environment, and
#    process::spawn (core/neuron_cache/process/process.cpp), which hands environ to a child given no
#    environment of its own (what the child inherits, not a setting);
#  - code outside core/neuron_cache/config compares a Setting's origin (precedence decided a second time);
#  - the Action reads a settings variable itself instead of through Settings (its GITHUB_*,
#    RUNNER_* and INPUT_* variables are the runner's protocol; the token input goes to Settings
#    as HF_TOKEN).
#   tests/packaging/settings-only.sh SOURCE_DIR
set -euo pipefail
root=$1
fail=0
code_lines() {  # grep -rn output without comment lines
  grep -vE '^[^:]+:[0-9]+:\s*//'
}
reads=$(grep -rnwE --include='*.cpp' --include='*.h' 'getenv|secure_getenv|environ|from_process' \
  "$root/core" | grep -vE "^$root/core/neuron_cache/(config|cli)/" |
  grep -vE "^$root/core/neuron_cache/compile/runner\.cpp:[0-9]+:(extern char\*\* environ;|  for \(char\*\* item = environ;)" |
  grep -vE "^$root/core/neuron_cache/process/process\.cpp:[0-9]+:(extern char\*\* environ;|    char\*\* env = request\.env \? envp\.data\(\) : environ;)" |
  code_lines || true)
if [[ -n $reads ]]; then
  echo "$reads" >&2
  echo "FAIL: library code reads the process environment: add the variable to Settings" \
    "(core/neuron_cache/config/settings.h) and read the field" >&2
  fail=1
fi
origins=$(grep -rnE --include='*.cpp' --include='*.h' \
  '\.origin\s*[!=]=|[!=]=\s*[A-Za-z_.>-]*\.origin\b' "$root/core" "$root/github-action" |
  grep -vE "^$root/core/neuron_cache/config/" | code_lines || true)
if [[ -n $origins ]]; then
  echo "$origins" >&2
  echo "FAIL: an origin is compared outside core/neuron_cache/config: resolve the precedence in" \
    "Settings::resolve (a layer of its own) instead" >&2
  fail=1
fi
action=$(grep -rnE --include='*.cpp' --include='*.h' \
  '"(HF_|HUGGING|NEURON_|CUSTOM_CACHE_REPO|XDG_CACHE_HOME)' "$root/github-action" |
  grep -vF 'env.set("HF_TOKEN", in.token);' | code_lines || true)
if [[ -n $action ]]; then
  echo "$action" >&2
  echo "FAIL: the Action names a settings variable: give it to Settings (overrides or the" \
    "Environment it resolves from) instead" >&2
  fail=1
fi
[[ $fail == 0 ]] && echo "settings are read through Settings only"
exit $fail
