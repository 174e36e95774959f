#!/usr/bin/env python3
"""Object expiry end to end on a real Apus cluster (4 nodes, 3 replicas): the Apus proxy queues
objects with X-Delete-At/X-Delete-After in Swift's `.expiring_objects` layout, POST moves or
removes their queue rows (through the object updater, as in Swift), apus-object-expirer --once
deletes what is due and removes its rows, leaves an object overwritten since it was queued
alone (and gives its row up after reclaim_age). Then, in a mixed cluster: Swift 2.30.1's own
expirer (Debian's python3-swift, its in-process proxy on the Apus storage servers) expires a row
the Apus proxy queued, and apus-object-expirer expires a row a stock Swift proxy queued.

usage: object_expirer_test.py <build-dir>
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
QUEUE = ".expiring_objects"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


class ExpiringCluster(Cluster):
    # The queue account must list its containers for an expirer to find them: the container
    # servers report to the accounts every second here (Swift relies on its container-updater).
    container_updater = "interval = 1\n"


class Queue:
    """Reads the queue straight from the container and account servers (Swift's direct
    client and Ring on the cluster's ring files)."""

    def __init__(self, cluster):
        from swift.common import utils
        from swift.common.ring import Ring
        utils.set_swift_dir(cluster.etc)
        self.utils = utils
        self.containers = Ring(os.path.join(cluster.etc, "container.ring.gz"))
        self.accounts = Ring(os.path.join(cluster.etc, "account.ring.gz"))

    def container_of(self, delete_at, obj, container="c", account="AUTH_test"):
        return self.utils.get_expirer_container(delete_at, 86400, account, container, obj)

    def rows(self, queue_container):
        """The rows of a queue container on each of its replicas (a missing one has none)."""
        from swift.common import direct_client
        from swift.common.exceptions import ClientException
        part, nodes = self.containers.get_nodes(QUEUE, queue_container)
        out = []
        for node in nodes:
            try:
                _, rows = direct_client.direct_get_container(node, part, QUEUE, queue_container)
                out.append(sorted(r["name"] for r in rows))
            except ClientException as e:
                if e.http_status != 404:
                    raise
                out.append([])
        return out

    def has_row(self, delete_at, obj, container="c", account="AUTH_test"):
        """How many replicas of its queue container hold the object's row."""
        name = "%010d-%s/%s/%s" % (delete_at, account, container, obj)
        return sum(name in rows for rows in self.rows(
            self.container_of(delete_at, obj, container, account)))

    def wait_listed(self, containers, timeout=30):
        """Waits until every replica of the queue account lists `containers` (the container
        servers' updaters report them)."""
        from swift.common import direct_client
        from swift.common.exceptions import ClientException
        part, nodes = self.accounts.get_nodes(QUEUE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = 0
            for node in nodes:
                try:
                    names = {c["name"] for c in
                             direct_client.direct_get_account(node, part, QUEUE)[1]}
                    listed += set(containers) <= names
                except ClientException:
                    pass
            if listed == len(nodes):
                return True
            time.sleep(0.3)
        return False


def expirer_conf(cluster, name="object-expirer.conf", options=""):
    path = os.path.join(cluster.etc, name)
    with open(path, "w") as f:
        f.write("[DEFAULT]\nswift_dir = %s\nlog_file = %s/expirer.log\nlog_level = DEBUG\n\n"
                "[object-expirer]\ntasks_per_second = 0\n%s\n"
                "[pipeline:main]\npipeline = catch_errors cache proxy-server\n\n"
                "[app:proxy-server]\nuse = egg:swift#proxy\nnode_timeout = 3\n\n"
                "[filter:cache]\nuse = egg:swift#memcache\nmemcache_servers = 127.0.0.1:%d\n\n"
                "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                % (cluster.etc, cluster.root, options, cluster.memcached_port))
    return path


def run_expirer(cluster, conf, *args):
    r = subprocess.run([os.path.join(BUILD, "bin", "apus-object-expirer"), conf, "--once"] +
                       list(args), timeout=120, capture_output=True, text=True)
    check(r.returncode == 0, "apus-object-expirer exit %d: %s" % (r.returncode, r.stderr))


def run_updaters(cluster):
    for n in range(len(cluster.ports["object"])):
        conf = os.path.join(cluster.etc, "object-%d.conf" % n)
        r = subprocess.run([os.path.join(BUILD, "bin", "apus-object-updater"), conf, "--once"],
                           timeout=120, capture_output=True, text=True)
        check(r.returncode == 0, "apus-object-updater exit %d: %s" % (r.returncode, r.stderr))


def exists(url, token, name, container="c"):
    try:
        swift.head_object(url, token, container, name)
        return True
    except swift.ClientException as e:
        if e.http_status != 404:
            raise
        return False


def listed(url, token, name, container="c"):
    return name in [o["name"] for o in swift.get_container(url, token, container)[1]]


def wait_until(when):
    while time.time() < when:
        time.sleep(0.1)


def start_stock_proxy(cluster):
    """A stock swift-proxy-server on the cluster's proxy config (another port)."""
    port = procs.free_port()
    with open(os.path.join(cluster.etc, "proxy-server.conf")) as f:
        lines = []
        for line in f.read().splitlines():
            if line.startswith("bind_port"):
                line = "bind_port = %d" % port
            lines.append(line)
            if line == "[DEFAULT]":
                lines.append("user = root")
    path = os.path.join(cluster.etc, "stock-proxy-server.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    log = os.path.join(cluster.root, "stock-proxy.out")
    proc = cluster.ps.start(["/usr/bin/python3", os.path.join(HERE, "..", "support",
                                                              "run_swift_server.py"),
                             cluster.etc, "proxy", path], log)
    procs.wait_for_port(port, timeout=60, proc=proc, log_path=log)
    return port


SWIFT_EXPIRER = """
import sys
from swift.common import storage_policy, utils
utils.set_swift_dir(sys.argv[1])
storage_policy.reload_storage_policies()
from swift.obj.expirer import ObjectExpirer
conf = utils.readconf(sys.argv[2], "object-expirer")
ObjectExpirer(conf, logger=utils.get_logger(conf, log_route="object-expirer")).run_once()
"""


def slo_async_delete(cluster, queue, conf, token):
    """SLO's allow_async_delete: DELETE ?multipart-manifest=delete&async=yes deletes the
    manifest at once and queues its segments as application/async-deleted rows, which the
    expirer deletes unconditionally."""
    port = cluster.start_proxy(
        "slo-async", pipeline="catch_errors gatekeeper healthcheck proxy-logging cache "
        "listing_formats tempauth slo proxy-server",
        filters="[filter:slo]\nuse = egg:swift#slo\nallow_async_delete = true\n")
    url = "http://127.0.0.1:%d/v1/AUTH_test" % port
    swift.put_container(url, token, "segs")
    swift.put_container(url, token, "segs2")
    for i in range(3):
        swift.put_object(url, token, "segs", "s%d" % i, b"%d" % i * 10)
    swift.put_object(url, token, "segs2", "t0", b"t" * 10)
    manifest = json.dumps([{"path": "/segs/s%d" % i} for i in range(3)] + [{"data": "ZGF0YQ=="}])
    swift.put_object(url, token, "c", "big", manifest, query_string="multipart-manifest=put")
    spread = json.dumps([{"path": "/segs/s0"}, {"path": "/segs2/t0"}])
    swift.put_object(url, token, "c", "spread", spread, query_string="multipart-manifest=put")

    def delete(name):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("DELETE", "/v1/AUTH_test/c/%s?multipart-manifest=delete&async=yes" % name,
                     headers={"X-Auth-Token": token})
        r = conn.getresponse()
        return r.status, r.read()

    status, body = delete("spread")
    check(status == 400 and b"All segments must be in one container" in body,
          "async delete of segments in two containers: %d %r" % (status, body))
    before = int(time.time())
    status, body = delete("big")
    after = int(time.time())
    check(status == 204, "async delete: %d %r" % (status, body))
    check(not exists(url, token, "big"), "the manifest is gone at once")
    segs = [o["name"] for o in swift.get_container(url, token, "segs")[1]]
    check(segs == ["s0", "s1", "s2"], "the segments stay until the expirer runs: %r" % segs)
    queued = set()
    for at in {before, after}:
        for rows in queue.rows(queue.container_of(at, "big")):
            queued |= {r.split("-", 1)[1] for r in rows if "AUTH_test/segs/" in r}
    check(queued == {"AUTH_test/segs/s%d" % i for i in range(3)},
          "the segments are queued: %r" % sorted(queued))
    check(queue.wait_listed({queue.container_of(before, "big")}), "the queue lists them")
    run_expirer(cluster, conf)
    segs = [o["name"] for o in swift.get_container(url, token, "segs")[1]]
    check(segs == [], "the expirer deleted the segments: %r" % segs)


def main():
    with procs.TempDir("apus-expirer-") as root, procs.Processes() as ps:
        cluster = ExpiringCluster(os.path.join(BUILD, "bin"), root, ps)
        queue = Queue(cluster)
        url, token = cluster.connect()
        swift.put_container(url, token, "c")
        # Swift's expirer metrics go to a loopback UDP socket (StatsD).
        statsd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        statsd.bind(("127.0.0.1", 0))
        statsd.settimeout(0.5)
        conf = expirer_conf(cluster, options="log_statsd_host = 127.0.0.1\n"
                                             "log_statsd_port = %d\n" % statsd.getsockname()[1])

        # -- POST moves or removes the queue row (the old one through the updater). --
        now = int(time.time())
        swift.put_object(url, token, "c", "moved", b"m", headers={"X-Delete-At": str(now + 3600)})
        swift.put_object(url, token, "c", "unset", b"u", headers={"X-Delete-At": str(now + 3600)})
        check(queue.has_row(now + 3600, "moved") == 3, "PUT queued 'moved' on 3 replicas")
        check(queue.has_row(now + 3600, "unset") == 3, "PUT queued 'unset' on 3 replicas")
        swift.post_object(url, token, "c", "moved", headers={"X-Delete-At": str(now + 7200)})
        swift.post_object(url, token, "c", "unset", headers={"X-Object-Meta-Color": "red"})
        check(queue.has_row(now + 7200, "moved") == 3, "POST queued 'moved' again, at +7200")
        check("x-delete-at" not in swift.head_object(url, token, "c", "unset"),
              "POST without X-Delete-At removed it from 'unset'")
        run_updaters(cluster)
        check(queue.has_row(now + 3600, "moved") == 0,
              "the old row of 'moved' is gone after the updaters ran")
        check(queue.has_row(now + 3600, "unset") == 0,
              "the row of 'unset' is gone after the updaters ran")
        check(queue.has_row(now + 7200, "moved") == 3, "the new row of 'moved' stays")

        # -- X-Delete-After 1: the expirer deletes the object and its row. --
        swift.put_object(url, token, "c", "gone", b"g", headers={"X-Delete-After": "3"})
        gone_at = int(swift.head_object(url, token, "c", "gone")["x-delete-at"])
        check(queue.has_row(gone_at, "gone") == 3, "X-Delete-After queued 'gone' on 3 replicas")
        # Overwritten without X-Delete-At after it was queued: its row stays (the updaters do
        # not run again here) and must not get it deleted.
        swift.put_object(url, token, "c", "over", b"first", headers={"X-Delete-After": "3"})
        over_at = int(swift.head_object(url, token, "c", "over")["x-delete-at"])
        swift.put_object(url, token, "c", "over", b"second")
        check(queue.has_row(over_at, "over") == 3, "the overwritten object's row is still there")
        check(queue.wait_listed({queue.container_of(gone_at, "gone"),
                                 queue.container_of(over_at, "over")}),
              "the queue account lists its containers")
        wait_until(max(gone_at, over_at) + 1.1)
        check(listed(url, token, "gone"), "an expired object stays listed until the expirer runs")
        run_expirer(cluster, conf)
        metrics = []
        try:
            while True:
                metrics.append(statsd.recv(4096).decode().split("|")[0])
        except socket.timeout:
            pass
        check("object-expirer.objects:1" in metrics and "object-expirer.errors:1" in metrics and
              sum(m.startswith("object-expirer.timing:") for m in metrics) == 2,
              "StatsD: one object expired, one error (412), a timing each: %r" % metrics)
        check(not exists(url, token, "gone"), "'gone' is gone")
        check(not listed(url, token, "gone"), "and out of its container's listing")
        check(queue.has_row(gone_at, "gone") == 0, "and its queue row is removed everywhere")
        got = swift.get_object(url, token, "c", "over")[1]
        check(got == b"second", "the overwritten object was not deleted: %r" % got)
        check(queue.has_row(over_at, "over") == 3,
              "its row stays (412), to be tried again until reclaim_age")
        check(queue.has_row(now + 7200, "moved") == 3, "a row not due yet stays")
        check(exists(url, token, "moved"), "and its object too")
        # Past reclaim_age the row is given up; the object still stays.
        run_expirer(cluster, expirer_conf(cluster, "reclaim-expirer.conf", "reclaim_age = 0\n"))
        check(queue.has_row(over_at, "over") == 0, "past reclaim_age the stale row is removed")
        check(swift.get_object(url, token, "c", "over")[1] == b"second", "and 'over' stays")

        # -- processes/process: each row is handled by exactly one of the processes. --
        swift.put_object(url, token, "c", "p1", b"1", headers={"X-Delete-After": "3"})
        swift.put_object(url, token, "c", "p2", b"2", headers={"X-Delete-After": "3"})
        swift.put_object(url, token, "c", "p3", b"3", headers={"X-Delete-After": "3"})
        ats = {o: int(swift.head_object(url, token, "c", o)["x-delete-at"])
               for o in ("p1", "p2", "p3")}
        wait_until(max(ats.values()) + 1.1)
        check(queue.wait_listed({queue.container_of(t, o) for o, t in ats.items()}),
              "the queue account lists the new containers")
        run_expirer(cluster, conf, "--processes", "2", "--process", "0")
        left = {o for o in ats if exists(url, token, o)}
        run_expirer(cluster, conf, "--processes", "2", "--process", "1")
        check(not any(exists(url, token, o) for o in ats),
              "the two processes together expired all three (the first left %r)" % left)

        # -- The daemon: a pass within every `interval`; SIGTERM ends it promptly. --
        daemon = ps.start([os.path.join(BUILD, "bin", "apus-object-expirer"),
                           expirer_conf(cluster, "daemon-expirer.conf", "interval = 1\n")],
                          os.path.join(root, "daemon-expirer.out"))
        swift.put_object(url, token, "c", "by-daemon", b"d", headers={"X-Delete-After": "3"})
        # An expired object answers 404 at once; only the expirer takes it out of the listing.
        deadline = time.monotonic() + 60
        while listed(url, token, "by-daemon") and time.monotonic() < deadline:
            time.sleep(0.3)
        check(not listed(url, token, "by-daemon"), "the running expirer deleted 'by-daemon'")
        check(daemon.poll() is None, "the expirer daemon keeps running between passes")
        started = time.monotonic()
        ps.stop(daemon)
        check(daemon.returncode == 0 and time.monotonic() - started < 5,
              "the daemon stopped on SIGTERM within seconds, exit %r" % daemon.returncode)

        # -- Mixed cluster: Swift's expirer expires what the Apus proxy queued. --
        swift.put_object(url, token, "c", "by-swift", b"s", headers={"X-Delete-After": "3"})
        swift_at = int(swift.head_object(url, token, "c", "by-swift")["x-delete-at"])
        check(queue.wait_listed({queue.container_of(swift_at, "by-swift")}), "queue listed")
        wait_until(swift_at + 1.1)
        r = subprocess.run(["/usr/bin/python3", "-c", SWIFT_EXPIRER, cluster.etc,
                            expirer_conf(cluster, "swift-object-expirer.conf")],
                           timeout=180, capture_output=True, text=True)
        check(r.returncode == 0, "Swift's expirer ran: %s" % r.stderr[-2000:])
        check(not exists(url, token, "by-swift"), "Swift's expirer deleted an Apus-queued object")
        check(queue.has_row(swift_at, "by-swift") == 0, "and removed its row")

        # -- ... and apus-object-expirer expires what a stock Swift proxy queued. --
        stock = start_stock_proxy(cluster)
        s_url, s_token = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % stock,
                                        "test:tester", "testing")
        swift.put_object(s_url, s_token, "c", "from-swift", b"f",
                         headers={"X-Delete-After": "3"})
        from_at = int(swift.head_object(url, token, "c", "from-swift")["x-delete-at"])
        check(queue.has_row(from_at, "from-swift") == 3,
              "the Swift proxy queued its row where Apus looks for it")
        check(queue.wait_listed({queue.container_of(from_at, "from-swift")}), "queue listed")
        wait_until(from_at + 1.1)
        run_expirer(cluster, conf)
        check(not exists(url, token, "from-swift"), "Apus's expirer deleted a Swift-queued object")
        check(queue.has_row(from_at, "from-swift") == 0, "and removed its row")
        slo_async_delete(cluster, queue, conf, token)
        if failures:
            for name in sorted(os.listdir(root)):
                if name.endswith(".log") and "expirer" in name:
                    print(open(os.path.join(root, name), errors="replace").read()[-4000:])
    print("object expirer test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
