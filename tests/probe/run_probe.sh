#!/usr/bin/env bash
# Swift's probe tests (test/probe of Swift 2.30.1, from Debian's source package like the
# functional suite) against an Apus all-in-one, as Swift's SAIO lays it out for them.
#
#   tests/probe/run_probe.sh BUILD_DIR [test files or pytest args]
#
# The tests read /etc/swift and /var/run/swift and drive servers through Swift's Manager
# (swift-init): `swift-<server> <conf> [once]` found on PATH. So the run happens in namespaces
# of its own (unshare: mounts, network, pids): a generated configuration is bind-mounted on
# /etc/swift and a tmpfs on /run, only its own loopback exists, and every process it starts
# dies with it. Nothing of the host's /etc/swift or network is touched. Inside, PATH starts with
# tests/probe/bin: swift-<server> runs apus-<server> under Swift's name, and the Swift daemons
# Apus does not have (sharder, reconstructor)
# run nothing, so Debian's own never touch Apus's devices. conftest.py adapts the tests'
# direct reads of SQLite databases (see there).
#
# Default tests: the object replication probes issue 16 asks for, and the database probes of
# issue 17. The result is compared with
# tests/probe/known_failures.txt (compare_failures.py, as the functional suite's). Needs root
# (exit 77, a skip, without it).
# APUS_PROBE_KEEP=DIR keeps the JUnit report and logs there (a failed test's logs in
# failed/<test id>/: conftest.py keeps them before the next test wipes them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1:-}" = --inside ]; then
  # ---- inside the namespaces ----------------------------------------------------------------
  shift
  work=$1 build=$2
  shift 2
  ip link set lo up
  mount -t tmpfs tmpfs /run
  mkdir -p /run/swift
  mount --bind "$work/etc" /etc/swift
  export APUS_PROBE_DIR=$work APUS_BIN=$build/bin
  export PATH="$work/bin:/usr/bin:/bin:/usr/sbin:/sbin"
  export SWIFT_TEST_CONFIG_FILE=$work/test.conf
  status=0
  (cd "$work/suite" && /usr/bin/python3 -m pytest -p no:cacheprovider -q \
    --junitxml="$work/junit.xml" "$@" >"$work/pytest.log" 2>&1) || status=$?
  swift-init all kill >/dev/null 2>&1 || true
  [ -f /run/apus-probe-memcached.pid ] && kill "$(cat /run/apus-probe-memcached.pid)" 2>/dev/null
  exit $status
fi

build=$(cd "${1:?usage: run_probe.sh BUILD_DIR [tests...]}" && pwd)
shift
if [ "$(id -u)" != 0 ] || ! unshare --mount --net --pid --fork --mount-proc true 2>/dev/null; then
  echo "probe tests: skipped (they need root and unshare for their mount, network and pid namespaces)"
  exit 77
fi
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  for t in test_object_handoff test_object_failures test_empty_device_handoff \
           test_object_async_update test_object_metadata_replication \
           test_replication_servers_working test_account_reaper \
           test_object_conditional_requests test_db_replicator test_container_failures \
           test_account_failures test_orphan_container test_container_merge_policy_index; do
    tests+=("test/probe/$t.py")
  done
fi
suite=$("$top/tests/functional/fetch_suite.sh")
work=$(mktemp -d /tmp/apus-probe.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The all-in-one's configs and rings, laid out as Swift's SAIO: /etc/swift/<kind>-server/N.conf
# (Manager numbers servers by these files), memcached on its default port (the tests' internal
# client uses it), devices under $work/srv.
APUS_SAIO_DIR="$work/saio" APUS_BUILD_DIR="$build" APUS_SAIO_MEMCACHED_PORT=11211 \
  "$top/scripts/saio" reset >/dev/null
saio="$work/saio/etc"
mkdir -p "$work/etc" "$work/log" "$work/recon" "$work/srv" "$work/bin"
cp "$saio"/swift.conf "$saio"/*.ring.gz "$saio"/container-sync-realms.conf \
  "$saio"/proxy-server.conf "$work/etc/"
for kind in object container account; do
  mkdir -p "$work/etc/$kind-server"
  for n in 1 2 3 4; do
    sed -e "s#$work/saio/srv#$work/srv#g" -e "s#$saio#/etc/swift#g" \
      -e "s#$work/saio/log#$work/log#g" -e "s#$work/saio/run#$work/recon#g" \
      "$saio/$kind-server-$n.conf" >"$work/etc/$kind-server/$n.conf"
  done
done
sed -i -e "s#$saio#/etc/swift#g" -e "s#$work/saio/log#$work/log#g" "$work/etc/proxy-server.conf"
for n in 1 2 3 4; do
  # Container updates when a test asks (`container-updater once` signals the servers), as
  # Swift's probe runs its updater: no pass of its own in a day; replication passes every 5 s
  # when the tests run replicators as daemons.
  "$top/scripts/saio" conf-set "$work/etc/container-server/$n.conf" "[container-updater]" \
    interval=86400 -- "$work/etc/object-server/$n.conf" "[object-replicator]" interval=5
done
rm -rf "$work/saio"
printf '[probe_test]\ncheck_server_timeout = 30\n' >"$work/test.conf"

# The programs Swift's Manager may run.
cp "$here"/bin/* "$work/bin/"
for s in proxy-server object-server container-server account-server object-replicator \
         object-updater object-auditor object-expirer account-reaper account-replicator \
         container-replicator account-auditor container-auditor container-reconciler; do
  ln -s shim "$work/bin/swift-$s"
done
for s in container-sharder container-sync object-reconstructor object-relinker; do
  ln -s noop "$work/bin/swift-$s"
done
# The SAIO's internal-client.conf: some tests make Swift's InternalClient from it (Swift's
# proxy app in-process, on the probe's rings and memcached).
printf '%s\n' '[DEFAULT]' 'swift_dir = /etc/swift' '' \
  '[pipeline:main]' 'pipeline = catch_errors proxy-logging cache symlink proxy-server' '' \
  '[app:proxy-server]' 'use = egg:swift#proxy' 'account_autocreate = true' '' \
  '[filter:symlink]' 'use = egg:swift#symlink' '' \
  '[filter:cache]' 'use = egg:swift#memcache' 'memcache_servers = 127.0.0.1:11211' '' \
  '[filter:proxy-logging]' 'use = egg:swift#proxy_logging' '' \
  '[filter:catch_errors]' 'use = egg:swift#catch_errors' >"$work/etc/internal-client.conf"
# The container reconciler: apus-container-reconciler, its internal client's pipeline in its
# own file, as Swift's SAIO has it. APUS_PROBE_SWIFT_RECONCILER=1 runs Swift's own instead (its
# proxy app in-process), to compare.
if [ -n "${APUS_PROBE_SWIFT_RECONCILER:-}" ]; then
  ln -sf /usr/bin/swift-container-reconciler "$work/bin/swift-container-reconciler"
fi
printf '%s\n' '[DEFAULT]' 'swift_dir = /etc/swift' 'user = root' \
  "log_file = $work/log/container-reconciler.log" '' '[container-reconciler]' '' \
  '[pipeline:main]' 'pipeline = catch_errors cache proxy-server' '' \
  '[app:proxy-server]' 'use = egg:swift#proxy' 'account_autocreate = true' '' \
  '[filter:cache]' 'use = egg:swift#memcache' 'memcache_servers = 127.0.0.1:11211' '' \
  '[filter:catch_errors]' 'use = egg:swift#catch_errors' >"$work/etc/container-reconciler.conf"

# A copy of the suite with conftest.py beside the probe tests.
mkdir -p "$work/suite"
cp -r "$suite/test" "$work/suite/"
cp "$here/conftest.py" "$work/suite/test/probe/conftest.py"

[ -d /etc/swift ] || mkdir -p /etc/swift  # the mount point (Debian's swift package makes it)
status=0
unshare --mount --net --pid --fork --mount-proc "$0" --inside "$work" "$build" "${tests[@]}" ||
  status=$?
if [ -n "${APUS_PROBE_KEEP:-}" ]; then
  mkdir -p "$APUS_PROBE_KEEP"
  cp -r "$work/junit.xml" "$work/pytest.log" "$work/log" "$work/leftovers.txt" "$work/failed" \
    "$APUS_PROBE_KEEP/" 2>/dev/null || true
fi
[ -f "$work/junit.xml" ] || { tail -50 "$work/pytest.log"; exit 1; }
tail -3 "$work/pytest.log"
/usr/bin/python3 "$top/tests/functional/compare_failures.py" --suite="Swift's probe tests" \
  --clues="$work/failed" \
  "$work/junit.xml" "$here/known_failures.txt"
