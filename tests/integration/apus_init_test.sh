#!/usr/bin/env bash
# apus-init starts the servers of a config directory, reports them, and stops every one.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build="$1"
work=$(mktemp -d /tmp/apus-init-test.XXXXXX)
init=(env APUS_BIN="$build/bin" "$top/scripts/apus-init" --swift-dir "$work/etc" --run-dir "$work/run")
fail=0
cleanup() {
  "${init[@]}" all stop >/dev/null 2>&1
  # A server apus-init lost track of (a reload whose successor it did not find) is still this
  # test's: its config file is under $work.
  local f pid cmd
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    cmd=$(tr '\0' ' ' 2>/dev/null <"$f") || continue
    [[ $cmd == *" $work/etc/"* ]] && kill "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
# Running and not a zombie: servers whose apus-init exited are reparented to a pid 1 that may
# not reap them.
running() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/etc/container-server" "$work/dev/sda1"
printf '[swift-hash]\nswift_hash_path_prefix = in\nswift_hash_path_suffix = it\n' >"$work/etc/swift.conf"
conf() {  # kind port file
  cat >"$3" <<CONF
[DEFAULT]
devices = $work/dev
mount_check = false
bind_ip = 127.0.0.1
bind_port = $2
workers = 1
swift_dir = $work/etc
log_file = $work/$1-$2.log

[pipeline:main]
pipeline = $1-server

[app:$1-server]
use = egg:swift#$1

[container-updater]
enabled = false
CONF
}
object_port=$(free_port); c1=$(free_port); c2=$(free_port)
conf object "$object_port" "$work/etc/object-server.conf"
conf container "$c1" "$work/etc/container-server/1.conf"
conf container "$c2" "$work/etc/container-server/2.conf"

"${init[@]}" object container start || { echo "FAIL: start"; fail=1; }
pids=$(cat "$work"/run/*.pid "$work"/run/*/*.pid 2>/dev/null)
[ "$(echo "$pids" | wc -w)" = 3 ] || { echo "FAIL: three pid files: $pids"; fail=1; }
for port in "$object_port" "$c1" "$c2"; do
  code=000
  for _ in $(seq 50); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthcheck")
    [ "$code" = 200 ] && break
    sleep 0.1
  done
  [ "$code" = 200 ] || { echo "FAIL: server on $port: $code"; fail=1; }
done
"${init[@]}" object container status >/dev/null || { echo "FAIL: status while running"; fail=1; }
"${init[@]}" container restart >/dev/null || { echo "FAIL: restart"; fail=1; }

# reload: each container server hands its socket to a new process, named by its pid file.
before=$(cat "$work"/run/container-server/*.pid)
"${init[@]}" container reload || { echo "FAIL: reload"; fail=1; }
after=$(cat "$work"/run/container-server/*.pid)
for pid in $before; do
  if running "$pid"; then echo "FAIL: pid $pid still running after reload"; fail=1; fi
  if echo "$after" | grep -qx "$pid"; then echo "FAIL: pid file still names $pid"; fail=1; fi
done
for port in "$c1" "$c2"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthcheck")
  [ "$code" = 200 ] || { echo "FAIL: reloaded server on $port: $code"; fail=1; }
done
"${init[@]}" container status >/dev/null || { echo "FAIL: status after reload"; fail=1; }

# once: a daemon's single pass in the foreground.
"${init[@]}" object-auditor once >/dev/null || { echo "FAIL: object-auditor once"; fail=1; }

"${init[@]}" all stop || { echo "FAIL: stop"; fail=1; }

# no-daemon: in the foreground until SIGTERM, which stops the server too.
"${init[@]}" object no-daemon >/dev/null &
init_pid=$!
code=000
for _ in $(seq 50); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$object_port/healthcheck")
  [ "$code" = 200 ] && break
  sleep 0.1
done
[ "$code" = 200 ] || { echo "FAIL: no-daemon object server: $code"; fail=1; }
server_pid=$(cat "$work/run/object-server.pid" 2>/dev/null)
kill -TERM "$init_pid"
wait "$init_pid"
if [ -n "$server_pid" ] && running "$server_pid"; then
  echo "FAIL: no-daemon left pid $server_pid running"; fail=1
fi
for pid in $pids $(cat "$work"/run/*.pid "$work"/run/*/*.pid 2>/dev/null); do
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL: pid $pid still running after stop"; fail=1; fi
done
if "${init[@]}" object status >/dev/null; then echo "FAIL: status after stop"; fail=1; fi
[ $fail = 0 ] && echo "apus-init test: ok"
exit $fail
