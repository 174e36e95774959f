#!/usr/bin/env bash
# Ring lookup benchmark: get_nodes plus the first 3 handoffs per name, Apus (apus-ring-lookup)
# against Swift's Python Ring (python3-swift) on the same ring and the same names, alternating
# in every round. Reports lookups/s per side (median over rounds) and the ratio, and checks both
# sides returned the same devices (sum of ids).
#
#   bench/ring_lookup_bench.sh                     # part power 16, 100 devices, 3 rounds
#   PART_POWER=18 COUNT=500000 ROUNDS=5 bench/ring_lookup_bench.sh
#
# The ring is built with swift-ring-builder: 3 replicas over 2 regions x 5 zones x 5 servers x
# 2 disks. Swift runs COUNT/SWIFT_DIVISOR names (Python is slow; the rate is what counts) unless
# SWIFT_DIVISOR=1. Results go to stdout and bench/results/ring-lookup-<UTC time>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build_dir="${APUS_BUILD_DIR:-$top/build}"
part_power="${PART_POWER:-16}"
count="${COUNT:-500000}"
rounds="${ROUNDS:-3}"
handoffs="${HANDOFFS:-3}"
divisor="${SWIFT_DIVISOR:-10}"
lookup="$build_dir/bin/apus-ring-lookup"
[ -x "$lookup" ] || { echo "build first: scripts/build -- apus-ring-lookup" >&2; exit 2; }
[ -x /usr/bin/swift-ring-builder ] || {
  echo "swift-ring-builder missing (Debian swift)" >&2
  exit 2
}

work=$(mktemp -d /tmp/apus-ring-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/swift.conf" <<CONF
[swift-hash]
swift_hash_path_prefix = bench-prefix
swift_hash_path_suffix = bench-suffix
CONF

devs=()
for r in 1 2; do for z in 1 2 3 4 5; do for s in 1 2 3 4 5; do for d in a b; do
  devs+=("r${r}z${z}-10.${r}.${z}.${s}:6200/sd${d}" 100)
done; done; done; done
(
  cd "$work"
  swift-ring-builder object.builder create "$part_power" 3 1 >/dev/null
  swift-ring-builder object.builder add "${devs[@]}" >/dev/null
  start=$(date +%s.%N)
  swift-ring-builder object.builder rebalance >/dev/null || [ $? -eq 1 ]
  took=$(echo "$(date +%s.%N) - $start" | bc)
  echo "swift-ring-builder rebalance (part power $part_power, 100 devices): $took s" >&2
)
ring="$work/object.ring.gz"

swift_count=$((count / divisor))
swift_run() {
  /usr/bin/python3 - "$work" "$ring" "$swift_count" "$handoffs" <<'PY'
import itertools, json, sys, time
from swift.common import utils
from swift.common.ring import Ring
top, path, count, handoffs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
utils.set_swift_dir(top)
ring = Ring(path)
names = [('AUTH_%d' % (i % 1000), 'c%d' % (i % 97), 'o%d' % i) for i in range(count)]
total = 0
t0 = time.perf_counter()
for a, c, o in names:
    part, nodes = ring.get_nodes(a, c, o)
    for n in nodes:
        total += n['id']
    for n in itertools.islice(ring.get_more_nodes(part), handoffs):
        total += n['id']
secs = time.perf_counter() - t0
print(json.dumps({'impl': 'swift', 'lookups': count, 'threads': 1, 'seconds': round(secs, 4),
                  'per_second': round(count / secs), 'checksum': total}))
PY
}

# The per_second (or checksum) field of a result line.
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

apus_rates=()
swift_rates=()
for round in $(seq "$rounds"); do
  a=$("$lookup" "$ring" "$work/swift.conf" "$count" "$handoffs" 1)
  s=$(swift_run)
  echo "round $round: $a" >&2
  echo "round $round: $s" >&2
  apus_rates+=("$(echo "$a" | field per_second)")
  swift_rates+=("$(echo "$s" | field per_second)")
  # Same answers: compare checksums over the names both ran.
  a_small=$("$lookup" "$ring" "$work/swift.conf" "$swift_count" "$handoffs" 1)
  ca=$(echo "$a_small" | field checksum)
  cs=$(echo "$s" | field checksum)
  [ "$ca" = "$cs" ] || { echo "answers differ: checksum apus $ca swift $cs" >&2; exit 1; }
done
a2=$("$lookup" "$ring" "$work/swift.conf" "$count" "$handoffs" 2)
echo "apus, 2 threads: $a2" >&2

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
apus_med=$(median "${apus_rates[@]}")
swift_med=$(median "${swift_rates[@]}")
a2_rate=$(echo "$a2" | field per_second)
ratio=$(echo "scale=1; $apus_med / $swift_med" | bc)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p bench/results
result="{\"bench\": \"ring_lookup\", \"part_power\": $part_power, \"devices\": 100,"
result+=" \"replicas\": 3, \"handoffs\": $handoffs, \"apus_per_second\": $apus_med,"
result+=" \"apus_2_threads_per_second\": $a2_rate, \"swift_per_second\": $swift_med,"
result+=" \"ratio\": $ratio, \"rounds\": $rounds}"
echo "$result" | tee "bench/results/ring-lookup-$stamp.json"
