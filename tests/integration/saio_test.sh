#!/usr/bin/env bash
# scripts/saio up starts the all-in-one cluster and status reports it; the README's examples
# (swift stat, the curl lines) work on it, as does a directory tree uploaded, listed,
# downloaded and deleted with python-swiftclient's `swift`; swift-recon reads every storage server
# (recon_check.py); down stops every process it started.
# The configs are the etc/ samples with per-node values set, and APUS_SAIO_MAX_FILE_SIZE (what
# the functional runner sets) reaches swift.conf, /info and the proxy's 413.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export APUS_SAIO_DIR=$(mktemp -d /tmp/apus-saio-test.XXXXXX)
export APUS_BUILD_DIR="$1"
# Below the ephemeral ports (32768 and up), so no outgoing connection can hold it.
export APUS_SAIO_MEMCACHED_PORT=$((20000 + RANDOM % 12000))
export APUS_SAIO_MAX_FILE_SIZE=536870912
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
# Every config is its etc/ sample (comments kept) with the per-node values set.
for conf in "$APUS_SAIO_DIR"/etc/*.conf; do
  name=$(basename "$conf" .conf)
  name=${name%-[0-9]}
  sample="$top/etc/$name.conf-sample"
  if ! [ -f "$sample" ] || [ "$(head -n 1 "$conf")" != "$(head -n 1 "$sample")" ]; then
    echo "FAIL: $conf is not made from $sample"; fail=1
  fi
done
grep -qx 'bind_port = 6216' "$APUS_SAIO_DIR/etc/object-server-2.conf" ||
  { echo "FAIL: object-server-2.conf bind_port"; fail=1; }
grep -qx 'max_file_size = 536870912' "$APUS_SAIO_DIR/etc/swift.conf" ||
  { echo "FAIL: APUS_SAIO_MAX_FILE_SIZE not in swift.conf"; fail=1; }
# The account and container servers store and list.
curl -s -o /dev/null -X PUT -H 'X-Timestamp: 1700000000.00000' http://127.0.0.1:6118/sdb1/0/AUTH_t
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'X-Timestamp: 1700000001.00000' \
  -H 'X-Account-Host: 127.0.0.1:6118' -H 'X-Account-Device: sdb1' -H 'X-Account-Partition: 0' \
  http://127.0.0.1:6117/sdb1/0/AUTH_t/c)
[ "$code" = 201 ] || { echo "FAIL: container PUT: $code"; fail=1; }
listing=$(curl -s http://127.0.0.1:6118/sdb1/0/AUTH_t)
[ "$listing" = c ] || { echo "FAIL: account listing: '$listing'"; fail=1; }

# The README's examples, as a user would paste them (cat.jpg is any file).
for _ in $(seq 100); do
  curl -s -o /dev/null http://127.0.0.1:8080/healthcheck && break
  sleep 0.1
done
# Each server's /metrics is on its admin port (its port + 1000, on loopback), never on the
# public one.
# (Bodies are read whole first: under pipefail, `curl | grep -q` fails when grep stops early.)
for port in 6116 6117 6118 8080; do
  body=$(curl -s --max-time 5 "http://127.0.0.1:$((port + 1000))/metrics")
  grep -q '^apus_' <<<"$body" || { echo "FAIL: no /metrics on admin port $((port + 1000))"; fail=1; }
  body=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics")
  ! grep -q '^apus_' <<<"$body" || { echo "FAIL: /metrics served on public port $port"; fail=1; }
done
# The lowered max_file_size is what /info publishes (Swift's functional suite reads it there)
# and what the proxy enforces on a declared length.
info_max=$(curl -s http://127.0.0.1:8080/info |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["swift"]["max_file_size"])')
[ "$info_max" = 536870912 ] || { echo "FAIL: /info max_file_size: $info_max"; fail=1; }
token=$(curl -si -H 'X-Auth-User: test:tester' -H 'X-Auth-Key: testing' \
  http://127.0.0.1:8080/auth/v1.0 | sed -n 's/^X-Auth-Token: \([^\r]*\).*/\1/ip')
curl -s -o /dev/null -X PUT -H "X-Auth-Token: $token" http://127.0.0.1:8080/v1/AUTH_test/limits
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X PUT -H "X-Auth-Token: $token" \
  -H 'Content-Length: 536870913' http://127.0.0.1:8080/v1/AUTH_test/limits/big)
[ "$code" = 413 ] || { echo "FAIL: PUT above max_file_size: $code"; fail=1; }
curl -s -o /dev/null -X DELETE -H "X-Auth-Token: $token" http://127.0.0.1:8080/v1/AUTH_test/limits

work=$(mktemp -d)
readme_block=$(awk '/^```sh$/ {n++; inside = 1; next} /^```$/ {inside = 0; next} inside && n == 2' \
  "$top/README.md")
grep -q '^swift -A' <<<"$readme_block" || { echo "FAIL: README examples not found"; fail=1; }
(
  cd "$work" || exit 1
  head -c 30000 /dev/urandom >cat.jpg
  step=0
  while IFS= read -r line; do
    step=$((step + 1))
    out=$(eval "$line" 2>&1)
    rc=$?
    [ $rc = 0 ] || { echo "FAIL: README line $step exits $rc: $line"; echo "$out"; exit 1; }
    case "$line" in
      swift*stat*) grep -q 'Account: AUTH_test' <<<"$out" || { echo "FAIL: stat: $out"; exit 1; } ;;
      *auth/v1.0*) TOKEN=$(sed -n 's/^X-Auth-Token: \([^\r]*\).*/\1/ip' <<<"$out")
                   [ -n "$TOKEN" ] || { echo "FAIL: no token: $out"; exit 1; } ;;
      *-T\ cat.jpg*|*/photos) grep -q '^HTTP/1.1 201' <<<"$out" || { echo "FAIL: $line: $out"; exit 1; } ;;
      *format=json*) grep -q '"name":"cat.jpg"\|"name": "cat.jpg"' <<<"$out" ||
                       { echo "FAIL: listing: $out"; exit 1; } ;;
    esac
  done <<<"$readme_block"
) || fail=1

# A directory tree through python-swiftclient's command line tool.
auth=(-A http://127.0.0.1:8080/auth/v1.0 -U test:tester -K testing)
(
  cd "$work" || exit 1
  mkdir -p tree/sub/deeper tree/empty-dir-ignored
  echo alpha >tree/a.txt
  head -c 200000 /dev/urandom >tree/sub/b.bin
  : >tree/sub/deeper/zero
  printf 'ünïcödé\n' >"tree/sub/ü.txt"
  swift "${auth[@]}" upload -q trees tree/a.txt tree/sub || { echo "FAIL: swift upload"; exit 1; }
  listed=$(swift "${auth[@]}" list trees | sort)
  expected=$(printf '%s\n' tree/a.txt tree/sub/b.bin tree/sub/deeper/zero "tree/sub/ü.txt" | sort)
  [ "$listed" = "$expected" ] || { echo "FAIL: swift list: '$listed'"; exit 1; }
  mkdir down && cd down || exit 1
  swift "${auth[@]}" download -q trees || { echo "FAIL: swift download"; exit 1; }
  for f in tree/a.txt tree/sub/b.bin tree/sub/deeper/zero "tree/sub/ü.txt"; do
    cmp -s "$f" "../$f" || { echo "FAIL: downloaded $f differs"; exit 1; }
  done
  cd .. || exit 1
  swift "${auth[@]}" delete -q trees || { echo "FAIL: swift delete"; exit 1; }
  ! swift "${auth[@]}" list | grep -qx trees || { echo "FAIL: trees still listed"; exit 1; }
) || fail=1
rm -rf "$work"

# swift-recon works against the all-in-one: the storage servers' recon filter, checked endpoint
# by endpoint, then Debian's swift-recon for each server type.
/usr/bin/python3 "$top/tests/integration/recon_check.py" "$APUS_SAIO_DIR" || fail=1

"$top/scripts/saio" down || { echo "FAIL: saio down"; fail=1; }
for pid in $pids; do
  # Gone, or a zombie (Z, or X while its parent reaps it) with no thread left.
  state=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)
  threads=$(awk '/^Threads:/ {print $2}' /proc/$pid/status 2>/dev/null)
  if kill -0 "$pid" 2>/dev/null && [ -n "$state" ] &&
     { [ "$state" != Z ] && [ "$state" != X ] || [ "${threads:-0}" -gt 1 ]; }; then
    echo "FAIL: pid $pid still running after down"; fail=1
  fi
done
[ $fail = 0 ] && echo "saio test: ok"
exit $fail
