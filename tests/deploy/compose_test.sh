#!/usr/bin/env bash
# The docker-compose cluster end to end (issue 18): images from this build (the Dockerfile's
# `prebuilt` target, on scripts/docker-base's base image), `docker-compose up` with the front
# and Prometheus on 127.0.40.1, then tests/deploy/smoke.py: auth, PUT/GET/DELETE, listings, a
# 1 GiB SLO, Prometheus scraping every server, and reads with one storage node killed.
# Everything is torn down at the end (containers, volumes, the test's images).
#
# usage: compose_test.sh <build-dir>
# Exits 77 (skipped) with the reason when no Docker engine can run here.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
project=apusdeploytest
tag=deploy-test
export APUS_IMAGE=apus:$tag APUS_PROMETHEUS_IMAGE=apus-prometheus:$tag
export APUS_FRONT=127.0.40.1:8080 APUS_PROMETHEUS=127.0.40.1:9090
work=$(mktemp -d /tmp/apus-deploy.XXXXXX)
dockerd_pid=""

compose() {
  if command -v docker-compose >/dev/null; then
    docker-compose -p "$project" -f "$top/docker-compose.yml" "$@"
  else
    docker compose -p "$project" -f "$top/docker-compose.yml" "$@"
  fi
}

cleanup() {
  if [ -f "$work/up" ]; then
    compose logs --no-color >"$work/compose.log" 2>&1
    [ -f "$work/failed" ] && tail -n 60 "$work/compose.log"
    compose down -v --remove-orphans >/dev/null 2>&1
  fi
  docker image rm -f "$APUS_IMAGE" "$APUS_PROMETHEUS_IMAGE" >/dev/null 2>&1
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

skip() { echo "SKIPPED: $*"; exit 77; }

# A Docker engine: the one running, else one started here (stopped again at the end).
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || [ -x /usr/sbin/dockerd ] || \
    skip "no Docker engine (scripts/install-deps installs docker.io)"
  # Host networking only: no bridge, no iptables rules on this machine.
  PATH=$PATH:/usr/sbin dockerd --bridge=none --iptables=false >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || skip "dockerd cannot run here: $(tail -n 3 "$work/dockerd.log")"
fi
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || \
  skip "neither docker-compose nor docker compose"

fail() { echo "FAIL: $*"; touch "$work/failed"; exit 1; }
began=$(date +%s)
base=$("$top/scripts/docker-base") || fail "no base image"
echo "base image: $base ($(( $(date +%s) - began )) s)"

# The build context: the Dockerfile, samples and scripts, and this build's programs, stripped.
ctx="$work/context"
mkdir -p "$ctx/bin"
cp -r "$top/Dockerfile" "$top/etc" "$top/scripts" "$ctx/"
cp "$build"/bin/apus-* "$ctx/bin/"
strip --strip-debug "$ctx"/bin/apus-* 2>/dev/null
for target in prebuilt:$APUS_IMAGE prometheus:$APUS_PROMETHEUS_IMAGE; do
  docker build -q --network host --target "${target%%:*}" --build-arg BASE_IMAGE="$base" \
    --build-arg APUS_BIN=bin -t "${target#*:}" "$ctx" >"$work/build.log" 2>&1 || {
      tail -n 30 "$work/build.log"; fail "docker build --target ${target%%:*}"; }
done
echo "images built ($(( $(date +%s) - began )) s)"

touch "$work/up"
compose up -d --no-build >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up"; }
code=000
for _ in $(seq 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://$APUS_FRONT/healthcheck")
  [ "$code" = 200 ] && break
  sleep 1
done
[ "$code" = 200 ] || fail "the front did not answer: $code"
echo "cluster up ($(( $(date +%s) - began )) s)"

smoke=(/usr/bin/python3 "$top/tests/deploy/smoke.py" "http://$APUS_FRONT" "http://$APUS_PROMETHEUS"
       "$work/state.json")
"${smoke[@]}" write || fail "smoke test"
compose kill node2 >/dev/null 2>&1 || fail "killing node2"
echo "node2 killed"
"${smoke[@]}" read || fail "reads with node2 down"
echo "compose test: ok ($(( $(date +%s) - began )) s)"
