#!/usr/bin/env bash
# Runs Swift's own functional test suite (test/functional of the Debian source package of the
# installed Swift, fetched by fetch_suite.sh) against an Apus all-in-one cluster, and compares
# the failures with tests/functional/known_failures.txt: any failure not listed there fails.
#   tests/functional/run_functional.sh BUILD_DIR [pytest args...]
# APUS_FUNCTIONAL_MIX runs a mixed cluster instead, on the core tests (account, container,
# object): "swift-proxy" puts stock swift-proxy-server in front of the Apus storage servers,
# "swift-storage" the Apus proxy in front of stock Swift storage servers.
# Prints the counts (passed, failed, skipped) and ends with "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build_dir=$(cd "${1:?usage: run_functional.sh BUILD_DIR}" && pwd)
shift
suite=$("$here/fetch_suite.sh") || { echo "cannot fetch Swift's functional tests"; echo "0 passed, 1 failed"; exit 1; }

export APUS_SAIO_DIR=$(mktemp -d /tmp/apus-functional.XXXXXX)
export APUS_SAIO_PORT=${APUS_SAIO_PORT:-8080}
export APUS_BUILD_DIR="$build_dir"
export APUS_SAIO_MEMCACHED_PORT=${APUS_SAIO_MEMCACHED_PORT:-$((20000 + RANDOM % 20000))}
cleanup() { "$top/scripts/saio" down >/dev/null 2>&1; rm -rf "$APUS_SAIO_DIR"; }
trap cleanup EXIT
"$top/scripts/saio" up >/dev/null || { echo "saio up failed"; echo "0 passed, 1 failed"; exit 1; }
mix="${APUS_FUNCTIONAL_MIX:-}"
tests=(test/functional)
compare_args=()
# Replaces the Apus server of pid file $1 by stock Swift's $2 server on the same config.
swap_to_swift() {
  local pidfile="$APUS_SAIO_DIR/run/$1.pid" conf="$APUS_SAIO_DIR/etc/$1.conf"
  kill -TERM "$(cat "$pidfile")" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
  sed 's/^\[DEFAULT\]$/[DEFAULT]\nuser = root/' "$conf" >"$conf.swift"
  setsid /usr/bin/python3 "$top/tests/support/run_swift_server.py" "$APUS_SAIO_DIR/etc" "$2" \
    "$conf.swift" >>"$APUS_SAIO_DIR/log/$1.swift.out" 2>&1 &
  echo $! >"$pidfile"
}
if [ -n "$mix" ]; then
  tests=(test/functional/test_account.py test/functional/test_container.py
         test/functional/test_object.py)
  compare_args=(--mixed)
  if [ "$mix" = swift-proxy ]; then
    swap_to_swift proxy-server proxy
  elif [ "$mix" = swift-storage ]; then
    for n in 1 2 3 4; do
      for kind in object container account; do swap_to_swift "$kind-server-$n" "$kind"; done
    done
  else
    echo "unknown APUS_FUNCTIONAL_MIX=$mix"; echo "0 passed, 1 failed"; exit 1
  fi
  sleep 2
fi
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$APUS_SAIO_PORT/healthcheck" && break
  sleep 0.1
done

conf="$APUS_SAIO_DIR/func-test.conf"
sed -e "s#http://127.0.0.1:8080#http://127.0.0.1:$APUS_SAIO_PORT#g" "$suite/test/sample.conf" >"$conf"
export SWIFT_TEST_CONFIG_FILE="$conf"
junit="$APUS_SAIO_DIR/junit.xml"
(cd "$suite" && /usr/bin/python3 -m pytest -q -p no:cacheprovider -o python_files='test_*.py tests.py' \
  --junitxml="$junit" "${tests[@]}" "$@" >"$APUS_SAIO_DIR/pytest.log" 2>&1)
tail -n 3 "$APUS_SAIO_DIR/pytest.log"
[ -n "${APUS_FUNCTIONAL_KEEP:-}" ] && cp "$junit" "$APUS_FUNCTIONAL_KEEP" && cp "$APUS_SAIO_DIR/pytest.log" "$APUS_FUNCTIONAL_KEEP.log"
[ -n "${APUS_FUNCTIONAL_KEEP:-}" ] && cp -r "$APUS_SAIO_DIR/log" "$APUS_FUNCTIONAL_KEEP.servers"
/usr/bin/python3 "$here/compare_failures.py" "${compare_args[@]}" "$junit" "$here/known_failures.txt"
rc=$?
if [ $rc -ne 0 ]; then
  # What the servers said, for a failure seen only in CI: their errors and the proxy's 5xx.
  echo "--- server errors (last 40)"
  grep -h -i 'error\|failed\|timeout' "$APUS_SAIO_DIR"/log/*.log 2>/dev/null | tail -n 40
fi
exit $rc
