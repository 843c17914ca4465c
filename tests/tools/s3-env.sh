# Sourced by the shell tests of the front ends and by the demo: an S3-compatible server (s3rver,
# pinned by tests/s3/package-lock.json) and a shared folder, so one test runs against the Hub,
# S3 and a folder with the same commands, only the store URL changing.
#   source tests/tools/s3-env.sh WORK_DIR
#   start_s3 BUCKET     npm ci of tests/s3 into WORK_DIR/s3-npm (once), starts s3rver with BUCKET;
#                       exports AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
#                       AWS_REGION; stopped by stop_s3. Returns 77 (skip) when npm cannot install,
#                       unless NEURON_CACHE_REQUIRE_NPM=1, which makes it a failure.
#   stop_s3
s3_env_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
s3_env_work=$1
s3_env_pid=

s3_env_install() {
  local npm_dir="$s3_env_work/s3-npm"
  mkdir -p "$npm_dir"
  cp "$s3_env_root/tests/s3/package.json" "$s3_env_root/tests/s3/package-lock.json" "$npm_dir/"
  if [[ ! -f "$npm_dir/node_modules/s3rver/bin/s3rver.js" ]] &&
    ! (cd "$npm_dir" && npm ci --no-audit --no-fund >"$npm_dir/npm.log" 2>&1); then
    cat "$npm_dir/npm.log" >&2
    if [[ "${NEURON_CACHE_REQUIRE_NPM:-0}" == 1 ]]; then
      echo "error: npm ci of tests/s3 failed: the S3 store needs s3rver from the npm registry" >&2
      return 1
    fi
    echo "SKIPPED: npm ci of tests/s3 failed (NEURON_CACHE_REQUIRE_NPM=1 makes this a failure)" >&2
    return 77
  fi
  S3_ENV_SCRIPT="$npm_dir/node_modules/s3rver/bin/s3rver.js"
}

start_s3() {
  local bucket=$1 status=0
  s3_env_install || return $?
  mkdir -p "$s3_env_work/s3-data"
  rm -f "$s3_env_work/s3.log"
  # --openssl-legacy-provider: s3rver 3.7.1 makes listing continuation tokens with DES.
  node --openssl-legacy-provider "$S3_ENV_SCRIPT" --directory "$s3_env_work/s3-data" \
    --address 127.0.0.1 --port 0 --configure-bucket "$bucket" >"$s3_env_work/s3.log" 2>&1 &
  s3_env_pid=$!
  local port=
  for _ in $(seq 150); do
    port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$s3_env_work/s3.log" | head -1)
    [[ -n "$port" ]] && break
    sleep 0.1
  done
  [[ -n "$port" ]] || { cat "$s3_env_work/s3.log" >&2; return 1; }
  # s3rver's fixed test credentials: not a secret, but still never printed by neuron-cache.
  export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=S3RVER \
    AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
  return $status
}

stop_s3() {
  if [[ -n "$s3_env_pid" ]]; then
    kill "$s3_env_pid" 2>/dev/null && wait "$s3_env_pid" 2>/dev/null || true
  fi
  s3_env_pid=
  return 0
}
