#!/usr/bin/env bash
# Runs Swift's own functional test suite (test/functional of the Debian source package of the
# installed Swift, fetched by fetch_suite.sh) against an Apus all-in-one cluster, and compares
# the failures with tests/functional/known_failures.txt: any failure not listed there fails.
#   tests/functional/run_functional.sh BUILD_DIR [pytest args...]
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
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$APUS_SAIO_PORT/healthcheck" && break
  sleep 0.1
done

conf="$APUS_SAIO_DIR/func-test.conf"
sed -e "s#http://127.0.0.1:8080#http://127.0.0.1:$APUS_SAIO_PORT#g" "$suite/test/sample.conf" >"$conf"
export SWIFT_TEST_CONFIG_FILE="$conf"
junit="$APUS_SAIO_DIR/junit.xml"
(cd "$suite" && /usr/bin/python3 -m pytest -q -p no:cacheprovider -o python_files='test_*.py tests.py' \
  --junitxml="$junit" test/functional "$@" >"$APUS_SAIO_DIR/pytest.log" 2>&1)
tail -n 3 "$APUS_SAIO_DIR/pytest.log"
[ -n "${APUS_FUNCTIONAL_KEEP:-}" ] && cp "$junit" "$APUS_FUNCTIONAL_KEEP" && cp "$APUS_SAIO_DIR/pytest.log" "$APUS_FUNCTIONAL_KEEP.log"
/usr/bin/python3 "$here/compare_failures.py" "$junit" "$here/known_failures.txt"
