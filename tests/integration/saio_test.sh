#!/usr/bin/env bash
# scripts/saio up starts what exists, status reports it, down stops every process it started.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export APUS_SAIO_DIR=$(mktemp -d /tmp/apus-saio-test.XXXXXX)
export APUS_BUILD_DIR="$1"
export APUS_SAIO_MEMCACHED_PORT=$((20000 + RANDOM % 20000))
fail=0
cleanup() { "$top/scripts/saio" down >/dev/null 2>&1; rm -rf "$APUS_SAIO_DIR"; }
trap cleanup EXIT

"$top/scripts/saio" up || { echo "FAIL: saio up"; fail=1; }
pids=$(cat "$APUS_SAIO_DIR"/run/*.pid 2>/dev/null)
[ -n "$pids" ] || { echo "FAIL: no pid files"; fail=1; }
"$top/scripts/saio" status || { echo "FAIL: saio status"; fail=1; }
# Node 1's object, container and account servers answer on their ports.
for port in 6116 6117 6118; do
  code=000
  for _ in $(seq 50); do
    code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/healthcheck)
    [ "$code" = 200 ] && break
    sleep 0.1
  done
  [ "$code" = 200 ] || { echo "FAIL: node 1 server on $port healthcheck: $code"; fail=1; }
done
# The account and container servers store and list.
curl -s -o /dev/null -X PUT -H 'X-Timestamp: 1700000000.00000' http://127.0.0.1:6118/sdb1/0/AUTH_t
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'X-Timestamp: 1700000001.00000' \
  -H 'X-Account-Host: 127.0.0.1:6118' -H 'X-Account-Device: sdb1' -H 'X-Account-Partition: 0' \
  http://127.0.0.1:6117/sdb1/0/AUTH_t/c)
[ "$code" = 201 ] || { echo "FAIL: container PUT: $code"; fail=1; }
listing=$(curl -s http://127.0.0.1:6118/sdb1/0/AUTH_t)
[ "$listing" = c ] || { echo "FAIL: account listing: '$listing'"; fail=1; }
"$top/scripts/saio" down || { echo "FAIL: saio down"; fail=1; }
for pid in $pids; do
  if kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" != Z ]; then
    echo "FAIL: pid $pid still running after down"; fail=1
  fi
done
[ $fail = 0 ] && echo "saio test: ok"
exit $fail
