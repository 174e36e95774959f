#!/usr/bin/env bash
# Listing A/B: apus-container-server (RocksDB) against stock swift-container-server (SQLite,
# Debian's 2.30.1), driven directly by the same client, alternating A and B in every round.
#
# For containers of 10 thousand and 1 million rows (and 10 million, Apus only, with BIG=1):
#   - fill: the same rows through UPDATE (Swift's merge_items RPC), seconds per side;
#   - row PUT: object-row PUTs into that container (as object servers send them),
#     concurrency 16;
#   - listing latency at concurrency 1: the first page (limit=100), a page deep inside
#     (marker at 90%), a prefix+delimiter page, and a top-level delimiter page (100 subdirs,
#     each a seek).
# Both sides: same swift.conf, their own device directory on the same filesystem, 2 workers.
# Swift's row PUTs go to its .pending file (flushed later), Apus's to RocksDB's WAL; Apus runs
# with db_sync_writes = false here so both keep rows in the page cache before answering (the
# default for object rows since db_sync_object_rows), and a separate row shows
# db_sync_writes = db_sync_object_rows = true (fsync per write batch).
#
#   bench/listing_bench.sh                # 3 rounds, 5 s windows
#   ROUNDS=5 WINDOW=10 BIG=1 bench/listing_bench.sh
#
# Prints medians and ratios and writes bench/results/listing-<UTC time>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build_dir="${APUS_BUILD_DIR:-$top/build}"
rounds="${ROUNDS:-3}"
window="${WINDOW:-5}"
warmup="${WARMUP:-1}"
sizes="${SIZES:-10000 1000000}"
[ "${BIG:-0}" = 1 ] && sizes="$sizes 10000000"
load="$build_dir/bin/apus-http-load"
work=$(mktemp -d /tmp/apus-listing-bench.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  if [ $rc != 0 ]; then tail -n 20 "$work"/*.out >&2 || true; fi
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/etc"
printf '[swift-hash]\nswift_hash_path_prefix = bench\nswift_hash_path_suffix = mark\n' >"$work/etc/swift.conf"
declare -A port
for side in swift apus apus-sync; do
  port[$side]=$(free_port)
  mkdir -p "$work/$side/sda1"
  sync=false; [ "$side" = apus-sync ] && sync=true
  cat >"$work/etc/$side-container-server.conf" <<CONF
[DEFAULT]
devices = $work/$side
mount_check = false
bind_ip = 127.0.0.1
bind_port = ${port[$side]}
workers = 2
swift_dir = $work/etc
log_file = $work/$side.log
log_level = WARNING
fallocate_reserve = 0
user = root

[pipeline:main]
pipeline = container-server

[app:container-server]
use = egg:swift#container
db_sync_writes = $sync
db_sync_object_rows = $sync

[container-updater]
enabled = false
CONF
done
setsid /usr/bin/python3 "$top/tests/support/run_swift_server.py" "$work/etc" container \
  "$work/etc/swift-container-server.conf" >"$work/swift.out" 2>&1 &
pids+=($!)
swift_pid=$!
for side in apus apus-sync; do
  setsid "$build_dir/bin/apus-container-server" "$work/etc/$side-container-server.conf" >"$work/$side.out" 2>&1 &
  pids+=($!)
done
apus_pid=${pids[1]}
sync_pid=${pids[2]}
for side in swift apus apus-sync; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:${port[$side]}/healthcheck" && break
    curl -s -o /dev/null -X HEAD "http://127.0.0.1:${port[$side]}/sda1/0/a/c" && break
    sleep 0.1
  done
done

cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
pid_of() { case $1 in swift) echo $swift_pid ;; apus) echo $apus_pid ;; *) echo $sync_pid ;; esac; }

results="$work/results.jsonl"
measure() {  # side size scenario round load-args...
  local side=$1 size=$2 scenario=$3 round=$4 pid before after out
  shift 4
  pid=$(pid_of "$side")
  before=$(cpu_ticks "$pid")
  out=$("$load" --port "${port[$side]}" --seconds "$window" --warmup "$warmup" "$@")
  after=$(cpu_ticks "$pid")
  echo "{\"side\": \"$side\", \"size\": $size, \"scenario\": \"$scenario\", \"round\": $round, \"server_cpu_ticks\": $((after - before)), \"load\": $out}" >>"$results"
}

echo "rounds=$rounds window=${window}s; swift pid $swift_pid, apus pid $apus_pid"
for size in $sizes; do
  path="/sda1/0/AUTH_bench/c$size"
  sides=(swift apus apus-sync)
  ((size > 1000000)) && sides=(apus)
  for side in "${sides[@]}"; do
    curl -s -o /dev/null -X PUT -H 'X-Timestamp: 1700000000.00000' "http://127.0.0.1:${port[$side]}$path"
  done
  fill_ports=()
  for side in "${sides[@]}"; do [ "$side" = apus-sync ] || fill_ports+=("${port[$side]}"); done
  fill=$(/usr/bin/python3 "$top/bench/listing_populate.py" "$size" "$path" "${fill_ports[@]}")
  echo "filled c$size: $fill (seconds per port: ${fill_ports[*]})"
  echo "{\"fill\": $fill, \"size\": $size, \"ports\": \"${fill_ports[*]}\", \"swift_port\": ${port[swift]}, \"apus_port\": ${port[apus]}}" >>"$results"
  deep=$(printf 'd%03d/o%08d' $(( (size * 9 / 10) % 1000 )) $(( size * 9 / 10 )))
  for round in $(seq "$rounds"); do
    if ((round % 2)); then order=("${sides[@]}"); else order=($(printf '%s\n' "${sides[@]}" | tac)); fi
    for side in "${order[@]}"; do
      measure "$side" "$size" row_put "$round" --path "$path/new" --objects 100000 --method PUT \
        --backend --concurrency 16 --header 'X-Size: 10' --header 'X-Content-Type: a/b' \
        --header 'X-Etag: e'
      [ "$side" = apus-sync ] && continue
      measure "$side" "$size" first_page "$round" --path "$path" --query 'format=json&limit=100'
      measure "$side" "$size" deep_page "$round" --path "$path" \
        --query "format=json&limit=100&marker=$deep"
      measure "$side" "$size" prefix_delimiter "$round" --path "$path" \
        --query 'format=json&limit=100&prefix=d500/&delimiter=/'
      measure "$side" "$size" top_delimiter "$round" --path "$path" \
        --query 'format=json&limit=100&delimiter=/'
    done
  done
done

mkdir -p "$top/bench/results"
out="$top/bench/results/listing-$(date -u +%Y%m%dT%H%M%SZ).json"
/usr/bin/python3 - "$results" "$out" <<'PY'
import json, os, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
fills = [l for l in lines if "fill" in l]
rows = [l for l in lines if "fill" not in l]
hz = os.sysconf("SC_CLK_TCK")
print("\nfill through UPDATE (seconds):")
for f in fills:
    print("  %9d rows: %s" % (f["size"], ", ".join(
        "%s %.1f s" % ("swift" if int(p) == f["swift_port"] else "apus", t)
        for p, t in f["fill"].items())))
summary = []
print("\n%9s %-16s | %10s %10s %6s | %9s %9s | %9s %9s | %8s %8s | %9s | errors" % (
    "rows", "scenario", "apus op/s", "swift op/s", "ratio", "apus p50", "swift p50",
    "apus p99", "swift p99", "apus cpu", "swift", "apus-sync"))
for size in sorted({r["size"] for r in rows}):
    for scenario in ("row_put", "first_page", "deep_page", "prefix_delimiter", "top_delimiter"):
        sel = lambda side: [r for r in rows if r["side"] == side and r["size"] == size
                            and r["scenario"] == scenario]
        a, s, y = sel("apus"), sel("swift"), sel("apus-sync")
        if not a:
            continue
        med = lambda rs, k: statistics.median(r["load"][k] for r in rs) if rs else 0
        cpu = lambda rs: statistics.median(r["server_cpu_ticks"] / hz / max(r["load"]["requests"], 1) * 1e6
                                           for r in rs) if rs else 0
        ratios = [x["load"]["rps"] / z["load"]["rps"] for x, z in zip(a, s) if z["load"]["rps"]]
        row = {"rows": size, "scenario": scenario, "apus_ops": med(a, "rps"),
               "swift_ops": med(s, "rps") if s else None,
               "ratio_median": statistics.median(ratios) if ratios else None,
               "apus_p50_ms": med(a, "p50_ms"), "swift_p50_ms": med(s, "p50_ms") if s else None,
               "apus_p99_ms": med(a, "p99_ms"), "swift_p99_ms": med(s, "p99_ms") if s else None,
               "apus_cpu_us_per_op": cpu(a), "swift_cpu_us_per_op": cpu(s) if s else None,
               "apus_sync_ops": med(y, "rps") if y else None,
               "errors": sum(r["load"]["errors"] for r in a + s + y)}
        summary.append(row)
        f = lambda v, fmt: (fmt % v) if v is not None else "-"
        print("%9d %-16s | %10.0f %10s %6s | %9.3f %9s | %9.3f %9s | %8.0f %8s | %9s | %d" % (
            size, scenario, row["apus_ops"], f(row["swift_ops"], "%.0f"),
            f(row["ratio_median"], "%.2f"), row["apus_p50_ms"], f(row["swift_p50_ms"], "%.3f"),
            row["apus_p99_ms"], f(row["swift_p99_ms"], "%.3f"), row["apus_cpu_us_per_op"],
            f(row["swift_cpu_us_per_op"], "%.0f"), f(row["apus_sync_ops"], "%.0f"), row["errors"]))
json.dump({"summary": summary, "fills": fills, "runs": rows}, open(sys.argv[2], "w"), indent=1)
print("written", sys.argv[2])
PY
