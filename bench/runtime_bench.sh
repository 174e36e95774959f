#!/usr/bin/env bash
# Runtime micro-benchmark: the Apus runtime serving GET /healthcheck against nginx (Debian's
# nginx-light) serving a 2-byte static file, on this machine, with the same client
# (apus-http-load), alternating A and B in every round. Reports requests/s, p50 and p99 per side
# (medians over the rounds), the ratio Apus/nginx, and each side's server CPU per request.
#
#   bench/runtime_bench.sh            # 3 rounds, 5 s windows
#   ROUNDS=5 WINDOW=10 bench/runtime_bench.sh
#
# Both servers get the same resources: 2 worker threads (Apus) and 2 worker processes (nginx),
# the machine's two cores. Results go to stdout and bench/results/runtime-<UTC time>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build_dir="${APUS_BUILD_DIR:-$top/build}"
rounds="${ROUNDS:-3}"
window="${WINDOW:-5}"
warmup="${WARMUP:-1}"
load="$build_dir/bin/apus-http-load"
apus_server="$build_dir/bin/apus-healthcheck-server"
[ -x "$load" ] && [ -x "$apus_server" ] || { echo "build first: scripts/build" >&2; exit 2; }
command -v nginx >/dev/null || { echo "nginx missing: scripts/install-deps" >&2; exit 2; }

work=$(mktemp -d /tmp/apus-runtime-bench.XXXXXX)
chmod 755 "$work"  # nginx workers run as www-data
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
apus_port=$(free_port)
nginx_port=$(free_port)

mkdir -p "$work/www" "$work/logs"
printf 'OK' >"$work/www/healthcheck"
cat >"$work/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  default_type text/plain;
  server {
    listen 127.0.0.1:$nginx_port reuseport;
    root $work/www;
  }
}
CONF

"$apus_server" --port "$apus_port" --workers 2 >"$work/logs/apus.log" 2>&1 &
pids+=($!)
apus_pid=$!
nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' &
pids+=($!)
nginx_pid=$!
up() { curl -sf "http://127.0.0.1:$1/healthcheck" >/dev/null; }
for _ in $(seq 50); do
  up "$apus_port" && up "$nginx_port" && break
  sleep 0.1
done
if ! up "$apus_port" || ! up "$nginx_port"; then
  echo "a server did not come up:" >&2
  cat "$work"/logs/* >&2
  exit 1
fi

# CPU ticks of a process and its children (nginx's workers).
cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}

results="$work/results.jsonl"
run_one() {  # side port fresh concurrency round
  local side=$1 port=$2 fresh=$3 conc=$4 round=$5 pid flags=()
  [ "$side" = apus ] && pid=$apus_pid || pid=$nginx_pid
  [ "$fresh" = 1 ] && flags+=(--fresh)
  local before after out
  before=$(cpu_ticks "$pid")
  out=$("$load" --port "$port" --concurrency "$conc" --seconds "$window" --warmup "$warmup" "${flags[@]}")
  after=$(cpu_ticks "$pid")
  echo "{\"side\": \"$side\", \"round\": $round, \"server_cpu_ticks\": $((after - before)), \"load\": $out}" >>"$results"
}

echo "rounds=$rounds window=${window}s warmup=${warmup}s; apus pid $apus_pid port $apus_port, nginx pid $nginx_pid port $nginx_port"
for fresh in 1 0; do
  for conc in 1 32 256; do
    for round in $(seq "$rounds"); do
      # Alternate which side goes first, so neither always runs on a warmer machine.
      if ((round % 2)); then
        run_one apus "$apus_port" $fresh $conc "$round"; run_one nginx "$nginx_port" $fresh $conc "$round"
      else
        run_one nginx "$nginx_port" $fresh $conc "$round"; run_one apus "$apus_port" $fresh $conc "$round"
      fi
    done
  done
done

mkdir -p "$top/bench/results"
out="$top/bench/results/runtime-$(date -u +%Y%m%dT%H%M%SZ).json"
/usr/bin/python3 - "$results" "$out" "$window" <<'PY'
import json, statistics, sys, os
rows = [json.loads(l) for l in open(sys.argv[1])]
window = float(sys.argv[3])
hz = os.sysconf("SC_CLK_TCK")
summary = []
print(f"{'mode':10} {'conc':>5} | {'apus req/s':>11} {'nginx req/s':>11} {'ratio':>6} | "
      f"{'apus p50 ms':>11} {'nginx p50':>9} | {'apus p99 ms':>11} {'nginx p99':>9} | "
      f"{'apus us cpu/req':>15} {'nginx':>6} | errors")
for fresh in (True, False):
    for conc in (1, 32, 256):
        sel = {s: [r for r in rows if r["side"] == s and r["load"]["fresh"] == fresh
                   and r["load"]["concurrency"] == conc] for s in ("apus", "nginx")}
        med = lambda s, k: statistics.median(r["load"][k] for r in sel[s])
        cpu = lambda s: statistics.median(r["server_cpu_ticks"] / hz / max(r["load"]["requests"], 1) * 1e6
                                           for r in sel[s])
        errs = sum(r["load"]["errors"] for s in sel for r in sel[s])
        ratios = [a["load"]["rps"] / b["load"]["rps"] for a, b in zip(sel["apus"], sel["nginx"])
                  if b["load"]["rps"]]
        row = {"mode": "fresh" if fresh else "keepalive", "concurrency": conc,
               "apus_rps": med("apus", "rps"), "nginx_rps": med("nginx", "rps"),
               "rps_ratio_median": statistics.median(ratios) if ratios else None,
               "apus_p50_ms": med("apus", "p50_ms"), "nginx_p50_ms": med("nginx", "p50_ms"),
               "apus_p99_ms": med("apus", "p99_ms"), "nginx_p99_ms": med("nginx", "p99_ms"),
               "apus_cpu_us_per_req": cpu("apus"), "nginx_cpu_us_per_req": cpu("nginx"),
               "client_cpu_share": statistics.median(r["load"]["client_cpu_s"] / (window + r["load"]["warmup_s"]) / 2
                                                     for s in sel for r in sel[s]),
               "littles_law_concurrency": statistics.median(r["load"]["littles_law_concurrency"]
                                                            for r in sel["apus"]),
               "errors": errs}
        summary.append(row)
        print(f"{row['mode']:10} {conc:5} | {row['apus_rps']:11.0f} {row['nginx_rps']:11.0f} "
              f"{row['rps_ratio_median'] or 0:6.2f} | {row['apus_p50_ms']:11.3f} {row['nginx_p50_ms']:9.3f} | "
              f"{row['apus_p99_ms']:11.3f} {row['nginx_p99_ms']:9.3f} | "
              f"{row['apus_cpu_us_per_req']:15.1f} {row['nginx_cpu_us_per_req']:6.1f} | {errs}")
json.dump({"window_s": window, "summary": summary, "runs": rows}, open(sys.argv[2], "w"), indent=1)
print("client CPU share of the machine (median): %.2f" % statistics.median(r["client_cpu_share"] for r in summary))
print("written", sys.argv[2])
PY
