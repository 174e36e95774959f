#!/usr/bin/env bash
# Object server A/B: apus-object-server against stock swift-object-server (Debian's 2.30.1),
# driven directly (no proxy) by the same client, apus-http-load, alternating A and B in every
# round. PUT and GET at 4 KiB and 1 MiB, concurrency 1 and 64. Both sides: same swift.conf,
# their own device directory on the same filesystem, 2 workers, fsync before answering (Swift
# always fsyncs; Apus with fsync_on_close = true). An extra Apus-only row shows
# fsync_on_close = false. No container updates (the requests name no container server).
#
#   bench/object_server_bench.sh          # 3 rounds, 5 s windows
#   ROUNDS=5 WINDOW=10 bench/object_server_bench.sh
#
# Prints medians and ratios, then where Apus's time went (its phase histograms), and writes
# bench/results/object-server-<UTC time>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build_dir="${APUS_BUILD_DIR:-$top/build}"
rounds="${ROUNDS:-3}"
window="${WINDOW:-5}"
warmup="${WARMUP:-1}"
load="$build_dir/bin/apus-http-load"
work=$(mktemp -d /tmp/apus-object-bench.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  # On failure, show what the servers said before their logs go.
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
for side in swift apus apus-nofsync; do
  port[$side]=$(free_port)
  mkdir -p "$work/$side/sda1"
  fsync=true; [ "$side" = apus-nofsync ] && fsync=false
  cat >"$work/etc/$side-object-server.conf" <<CONF
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
# Swift drops privileges to 'user' (default swift) in its workers; run both sides as root.
user = root

[pipeline:main]
pipeline = object-server

[app:object-server]
use = egg:swift#object
fsync_on_close = $fsync
CONF
done
setsid /usr/bin/python3 "$top/tests/support/run_swift_server.py" "$work/etc" object \
  "$work/etc/swift-object-server.conf" >"$work/swift.out" 2>&1 &
pids+=($!)
swift_pid=$!
for side in apus apus-nofsync; do
  setsid "$build_dir/bin/apus-object-server" "$work/etc/$side-object-server.conf" >"$work/$side.out" 2>&1 &
  pids+=($!)
done
apus_pid=${pids[1]}
nofsync_pid=${pids[2]}
for side in swift apus apus-nofsync; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:${port[$side]}/sda1/0/a/c/o" -X HEAD && break
    sleep 0.1
  done
done

# CPU ticks of a process and its children (Swift's workers).
cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

results="$work/results.jsonl"
run_one() {  # side method size concurrency round
  local side=$1 method=$2 size=$3 conc=$4 round=$5 pid
  case $side in swift) pid=$swift_pid ;; apus) pid=$apus_pid ;; *) pid=$nofsync_pid ;; esac
  local before after out
  before=$(cpu_ticks "$pid")
  out=$("$load" --port "${port[$side]}" --path "/sda1/0/AUTH_bench/c$size" --objects 1000 \
        --method "$method" --size "$size" --backend --concurrency "$conc" \
        --seconds "$window" --warmup "$warmup")
  after=$(cpu_ticks "$pid")
  echo "{\"side\": \"$side\", \"method\": \"$method\", \"size\": $size, \"round\": $round, \"server_cpu_ticks\": $((after - before)), \"load\": $out}" >>"$results"
}

echo "rounds=$rounds window=${window}s; swift pid $swift_pid, apus pid $apus_pid"
for size in 4096 1048576; do
  # Every object GET will ask for exists on every side.
  for side in swift apus; do
    "$load" --port "${port[$side]}" --path "/sda1/0/AUTH_bench/c$size" --objects 1000 --count 1000 \
      --method PUT --size "$size" --backend --concurrency 8 --seconds 600 --warmup 0 >/dev/null
  done
  for method in PUT GET; do
    for conc in 1 64; do
      for round in $(seq "$rounds"); do
        if ((round % 2)); then order=(apus swift apus-nofsync); else order=(swift apus apus-nofsync); fi
        for side in "${order[@]}"; do
          [ "$side" = apus-nofsync ] && [ "$method" = GET ] && continue
          run_one "$side" "$method" "$size" "$conc" "$round"
        done
      done
    done
  done
done
curl -s "http://127.0.0.1:${port[apus]}/metrics" >"$work/apus-metrics.txt"

mkdir -p "$top/bench/results"
out="$top/bench/results/object-server-$(date -u +%Y%m%dT%H%M%SZ).json"
/usr/bin/python3 - "$results" "$out" "$work/apus-metrics.txt" <<'PY'
import json, os, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
hz = os.sysconf("SC_CLK_TCK")
summary = []
print("%-4s %8s %4s | %10s %10s %6s | %9s %9s | %9s %9s | %8s %8s | %10s | errors" % (
    "op", "size", "conc", "apus op/s", "swift op/s", "ratio", "apus p50", "swift p50",
    "apus p99", "swift p99", "apus cpu", "swift", "no-fsync"))
for size in (4096, 1048576):
    for method in ("PUT", "GET"):
        for conc in (1, 64):
            sel = lambda side: [r for r in rows if r["side"] == side and r["method"] == method
                                and r["size"] == size and r["load"]["concurrency"] == conc]
            a, s, n = sel("apus"), sel("swift"), sel("apus-nofsync")
            med = lambda rs, k: statistics.median(r["load"][k] for r in rs) if rs else 0
            cpu = lambda rs: statistics.median(r["server_cpu_ticks"] / hz / max(r["load"]["requests"], 1) * 1e6
                                               for r in rs) if rs else 0
            ratios = [x["load"]["rps"] / y["load"]["rps"] for x, y in zip(a, s) if y["load"]["rps"]]
            errors = sum(r["load"]["errors"] for r in a + s + n)
            row = {"method": method, "size": size, "concurrency": conc,
                   "apus_ops": med(a, "rps"), "swift_ops": med(s, "rps"),
                   "ratio_median": statistics.median(ratios) if ratios else None,
                   "apus_p50_ms": med(a, "p50_ms"), "swift_p50_ms": med(s, "p50_ms"),
                   "apus_p99_ms": med(a, "p99_ms"), "swift_p99_ms": med(s, "p99_ms"),
                   "apus_cpu_us_per_op": cpu(a), "swift_cpu_us_per_op": cpu(s),
                   "apus_nofsync_ops": med(n, "rps") if n else None, "errors": errors}
            summary.append(row)
            print("%-4s %8d %4d | %10.0f %10.0f %6.2f | %9.3f %9.3f | %9.3f %9.3f | %8.0f %8.0f | %10s | %d" % (
                method, size, conc, row["apus_ops"], row["swift_ops"], row["ratio_median"] or 0,
                row["apus_p50_ms"], row["swift_p50_ms"], row["apus_p99_ms"], row["swift_p99_ms"],
                row["apus_cpu_us_per_op"], row["swift_cpu_us_per_op"],
                "%.0f" % row["apus_nofsync_ops"] if row["apus_nofsync_ops"] else "-", errors))
phases = {}
for line in open(sys.argv[3]):
    m = re.match(r'apus_object_phase_seconds_(sum|count)\{phase="([a-z_]+)"', line)
    if m:
        phases.setdefault(m.group(2), {})[m.group(1)] = float(line.split()[-1])
print("\nwhere Apus's time went (all requests, mean per request that had the phase):")
for phase, v in phases.items():
    if v.get("count"):
        print("  %-17s %8.3f ms over %d requests" % (phase, v["sum"] / v["count"] * 1e3, v["count"]))
json.dump({"summary": summary, "phases": phases, "runs": rows}, open(sys.argv[2], "w"), indent=1)
print("written", sys.argv[2])
PY
