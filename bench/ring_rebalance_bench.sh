#!/usr/bin/env bash
# Ring rebalance benchmark: apus-ring-builder against swift-ring-builder on the same builder.
# Times, per tool, the whole command as an operator runs it (start-up, load, rebalance, validate,
# writing the ring and the builder with their backups):
#   1. the first rebalance of a new builder (every partition replica assigned),
#   2. a rebalance after adding one device (pretend_min_part_hours_passed first).
# Both run with the same seed, so the ring files must be byte-identical; the script checks it.
#
#   bench/ring_rebalance_bench.sh                  # part power 18, 100 devices, 3 replicas
#   PART_POWER=16 ROUNDS=3 bench/ring_rebalance_bench.sh
#
# Layout: 2 regions x 5 zones x 5 servers x 2 disks, weight 100 (as bench/ring_lookup_bench.sh).
# Results go to stdout and bench/results/ring-rebalance-<UTC time>.json. Swift takes tens of
# seconds per rebalance at part power 18, so ROUNDS defaults to 1.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build_dir="${APUS_BUILD_DIR:-$top/build}"
part_power="${PART_POWER:-18}"
replicas="${REPLICAS:-3}"
rounds="${ROUNDS:-1}"
seed="${SEED:-1}"
apus="$build_dir/bin/apus-ring-builder"
swift=/usr/bin/swift-ring-builder
[ -x "$apus" ] || { echo "build first: scripts/build -- apus-ring-builder" >&2; exit 2; }
[ -x "$swift" ] || { echo "swift-ring-builder missing (Debian swift)" >&2; exit 2; }

work=$(mktemp -d /tmp/apus-rebalance-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

devs=()
for r in 1 2; do for z in 1 2 3 4 5; do for s in 1 2 3 4 5; do for d in a b; do
  devs+=("r${r}z${z}-10.${r}.${z}.${s}:6200/sd${d}" 100)
done; done; done; done

now() { date +%s.%N; }
# timed TOOL DIR ARGS...: runs TOOL x.builder ARGS in DIR (exit 0 or 1 is fine), prints seconds.
timed() {
  local tool="$1" dir="$2"
  shift 2
  local start rc=0
  start=$(now)
  (cd "$dir" && "$tool" x.builder "$@" >/dev/null) || rc=$?
  [ "$rc" -le 1 ] || { echo "$tool $* failed ($rc)" >&2; exit 1; }
  printf '%.3f' "$(echo "$(now) - $start" | bc)"
}

declare -A first incremental
for tool in apus swift; do first[$tool]=""; incremental[$tool]=""; done
for round in $(seq "$rounds"); do
  for tool in apus swift; do
    bin=$apus
    [ "$tool" = swift ] && bin=$swift
    dir="$work/$tool-$round"
    mkdir -p "$dir"
    (cd "$dir" && "$bin" x.builder create "$part_power" "$replicas" 1 >/dev/null &&
      "$bin" x.builder add "${devs[@]}" >/dev/null)
    t1=$(timed "$bin" "$dir" rebalance "$seed")
    (cd "$dir" && "$bin" x.builder add r1z1-10.1.1.9:6200/sdz 100 >/dev/null &&
      "$bin" x.builder pretend_min_part_hours_passed >/dev/null)
    t2=$(timed "$bin" "$dir" rebalance "$seed")
    echo "round $round $tool: first rebalance $t1 s, after adding a device $t2 s" >&2
    first[$tool]+="$t1 "
    incremental[$tool]+="$t2 "
  done
  cmp -s "$work/apus-$round/x.ring.gz" "$work/swift-$round/x.ring.gz" ||
    { echo "round $round: ring files differ" >&2; exit 1; }
done

median() { printf '%s\n' $1 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a1=$(median "${first[apus]}")
s1=$(median "${first[swift]}")
a2=$(median "${incremental[apus]}")
s2=$(median "${incremental[swift]}")
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p bench/results
result="{\"bench\": \"ring_rebalance\", \"part_power\": $part_power, \"devices\": 100,"
result+=" \"replicas\": $replicas, \"rounds\": $rounds,"
result+=" \"apus_first_seconds\": $a1, \"swift_first_seconds\": $s1,"
result+=" \"apus_add_device_seconds\": $a2, \"swift_add_device_seconds\": $s2,"
result+=" \"speedup_first\": $(printf '%.1f' "$(echo "scale=3; $s1 / $a1" | bc)"),"
result+=" \"speedup_add_device\": $(printf '%.1f' "$(echo "scale=3; $s2 / $a2" | bc)"),"
result+=" \"identical_rings\": true}"
echo "$result" | tee "bench/results/ring-rebalance-$stamp.json"
