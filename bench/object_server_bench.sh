#!/usr/bin/env bash
# Object server A/B: apus-object-server against stock swift-object-server (Debian's 2.30.1),
# driven directly (no proxy) by the same client, apus-http-load, alternating A and B in every
# round. PUT and GET at 4 KiB and 1 MiB, concurrency 1 and 64. Both sides: same swift.conf,
# their own device directory on the same filesystem, 2 workers, fsync before answering (Swift
# always fsyncs; Apus with fsync_on_close = true), and every PUT tells one container server
# (an apus-container-server, db_sync_writes = false, shared by all sides) about the new row,
# waiting up to container_update_timeout as Swift does (container_update_mode = sync).
# Apus-only PUT columns show the other settings: container_update_mode = async (the update is
# saved as an async pending and the answer goes at once; no updater runs during the bench),
# fsync_on_close = false, and both.
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
declare -A port mport
sides=(swift apus apus-async apus-nofsync apus-nofsync-async)
for side in "${sides[@]}"; do
  port[$side]=$(free_port)
  # Apus serves /metrics only on its admin listener (metrics_bind_port); Swift ignores it.
  mport[$side]=$(free_port)
  mkdir -p "$work/$side/sda1"
  fsync=true; case $side in *nofsync*) fsync=false ;; esac
  mode=sync; case $side in *async) mode=async ;; esac
  cat >"$work/etc/$side-object-server.conf" <<CONF
[DEFAULT]
devices = $work/$side
mount_check = false
bind_ip = 127.0.0.1
bind_port = ${port[$side]}
metrics_bind_port = ${mport[$side]}
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
container_update_mode = $mode
CONF
done
cport=$(free_port)
mkdir -p "$work/containers/sda1"
cat >"$work/etc/container-server.conf" <<CONF
[DEFAULT]
devices = $work/containers
mount_check = false
bind_ip = 127.0.0.1
bind_port = $cport
workers = 2
swift_dir = $work/etc
log_file = $work/container.log
log_level = WARNING

[pipeline:main]
pipeline = container-server

[app:container-server]
use = egg:swift#container
db_sync_writes = false

[container-updater]
enabled = false
CONF
setsid /usr/bin/python3 "$top/tests/support/run_swift_server.py" "$work/etc" object \
  "$work/etc/swift-object-server.conf" >"$work/swift.out" 2>&1 &
pids+=($!)
swift_pid=$!
declare -A pid_of
pid_of[swift]=$swift_pid
for side in "${sides[@]:1}"; do
  setsid "$build_dir/bin/apus-object-server" "$work/etc/$side-object-server.conf" >"$work/$side.out" 2>&1 &
  pids+=($!)
  pid_of[$side]=$!
done
setsid "$build_dir/bin/apus-container-server" "$work/etc/container-server.conf" >"$work/container.out" 2>&1 &
pids+=($!)
for p in "${port[@]}" "$cport"; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$p/sda1/0/a/c/o" -X HEAD && break
    sleep 0.1
  done
done
# The containers every PUT's update names.
for size in 4096 1048576; do
  curl -sf -o /dev/null -X PUT -H "X-Timestamp: 1700000000.00000" \
    "http://127.0.0.1:$cport/sda1/0/AUTH_bench/c$size"
done
update=(--header "X-Container-Host: 127.0.0.1:$cport" --header "X-Container-Device: sda1"
        --header "X-Container-Partition: 0")

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
  local side=$1 method=$2 size=$3 conc=$4 round=$5 pid=${pid_of[$1]}
  local before after out
  before=$(cpu_ticks "$pid")
  out=$("$load" --port "${port[$side]}" --path "/sda1/0/AUTH_bench/c$size" --objects 1000 \
        --method "$method" --size "$size" --backend --concurrency "$conc" \
        --seconds "$window" --warmup "$warmup" "${update[@]}")
  after=$(cpu_ticks "$pid")
  echo "{\"side\": \"$side\", \"method\": \"$method\", \"size\": $size, \"round\": $round, \"server_cpu_ticks\": $((after - before)), \"load\": $out}" >>"$results"
}

echo "rounds=$rounds window=${window}s; swift pid $swift_pid, apus pid ${pid_of[apus]}"
for size in 4096 1048576; do
  # Every object GET will ask for exists on every side.
  for side in swift apus; do
    "$load" --port "${port[$side]}" --path "/sda1/0/AUTH_bench/c$size" --objects 1000 --count 1000 \
      --method PUT --size "$size" --backend --concurrency 8 --seconds 600 --warmup 0 \
      "${update[@]}" >/dev/null
  done
  for method in PUT GET; do
    for conc in 1 64; do
      for round in $(seq "$rounds"); do
        if ((round % 2)); then order=(apus swift "${sides[@]:2}"); else order=("${sides[@]}"); fi
        for side in "${order[@]}"; do
          [ "$method" = GET ] && [ "$side" != apus ] && [ "$side" != swift ] && continue
          run_one "$side" "$method" "$size" "$conc" "$round"
        done
      done
    done
  done
done
for side in apus apus-async; do
  curl -s "http://127.0.0.1:${mport[$side]}/metrics" >"$work/$side-metrics.txt"
done

mkdir -p "$top/bench/results"
out="$top/bench/results/object-server-$(date -u +%Y%m%dT%H%M%SZ).json"
/usr/bin/python3 - "$results" "$out" "$work/apus-metrics.txt" "$work/apus-async-metrics.txt" <<'PY'
import json, os, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
hz = os.sysconf("SC_CLK_TCK")
summary = []
print("Apus and Swift: fsync, sync container updates. Other columns: Apus op/s with async "
      "updates, without fsync, and both.")
print("%-4s %8s %4s | %10s %10s %6s | %9s %9s | %9s %9s | %8s %8s | %7s %8s %9s | errors" % (
    "op", "size", "conc", "apus op/s", "swift op/s", "ratio", "apus p50", "swift p50",
    "apus p99", "swift p99", "apus cpu", "swift", "async", "no-fsync", "nofs+async"))
for size in (4096, 1048576):
    for method in ("PUT", "GET"):
        for conc in (1, 64):
            sel = lambda side: [r for r in rows if r["side"] == side and r["method"] == method
                                and r["size"] == size and r["load"]["concurrency"] == conc]
            a, s = sel("apus"), sel("swift")
            others = {k: sel(k) for k in ("apus-async", "apus-nofsync", "apus-nofsync-async")}
            med = lambda rs, k: statistics.median(r["load"][k] for r in rs) if rs else 0
            cpu = lambda rs: statistics.median(r["server_cpu_ticks"] / hz / max(r["load"]["requests"], 1) * 1e6
                                               for r in rs) if rs else 0
            ratios = [x["load"]["rps"] / y["load"]["rps"] for x, y in zip(a, s) if y["load"]["rps"]]
            errors = sum(r["load"]["errors"] for r in a + s + sum(others.values(), []))
            row = {"method": method, "size": size, "concurrency": conc,
                   "apus_ops": med(a, "rps"), "swift_ops": med(s, "rps"),
                   "ratio_median": statistics.median(ratios) if ratios else None,
                   "apus_p50_ms": med(a, "p50_ms"), "swift_p50_ms": med(s, "p50_ms"),
                   "apus_p99_ms": med(a, "p99_ms"), "swift_p99_ms": med(s, "p99_ms"),
                   "apus_cpu_us_per_op": cpu(a), "swift_cpu_us_per_op": cpu(s),
                   "errors": errors}
            for k, rs in others.items():
                row[k.replace("-", "_") + "_ops"] = med(rs, "rps") if rs else None
                row[k.replace("-", "_") + "_p99_ms"] = med(rs, "p99_ms") if rs else None
            summary.append(row)
            fmt = lambda v: "%.0f" % v if v else "-"
            print("%-4s %8d %4d | %10.0f %10.0f %6.2f | %9.3f %9.3f | %9.3f %9.3f | %8.0f %8.0f | %7s %8s %9s | %d" % (
                method, size, conc, row["apus_ops"], row["swift_ops"], row["ratio_median"] or 0,
                row["apus_p50_ms"], row["swift_p50_ms"], row["apus_p99_ms"], row["swift_p99_ms"],
                row["apus_cpu_us_per_op"], row["swift_cpu_us_per_op"],
                fmt(row["apus_async_ops"]), fmt(row["apus_nofsync_ops"]),
                fmt(row["apus_nofsync_async_ops"]), errors))
phases = {}
for label, path in (("sync", sys.argv[3]), ("async", sys.argv[4])):
    for line in open(path):
        m = re.match(r'apus_object_phase_seconds_(sum|count)\{phase="([a-z_]+)"', line)
        if m:
            phases.setdefault(label, {}).setdefault(m.group(2), {})[m.group(1)] = float(line.split()[-1])
for label, by_phase in phases.items():
    print("\nwhere Apus's time went, %s container updates (mean per request that had the phase):"
          % label)
    for phase, v in by_phase.items():
        if v.get("count"):
            print("  %-17s %8.3f ms over %d requests" % (phase, v["sum"] / v["count"] * 1e3,
                                                       v["count"]))
json.dump({"summary": summary, "phases": phases, "runs": rows}, open(sys.argv[2], "w"), indent=1)
print("written", sys.argv[2])
PY
