#!/usr/bin/env python3
"""Container sync end to end (issue 14): the container servers of an Apus cluster (4 nodes, 3
replicas, [container-sync] every second) push the rows of a container with
X-Container-Sync-To / X-Container-Sync-Key to the container it names.

A. Apus to stock Swift: the realm's cluster is a stock swift-proxy-server (Swift 2.30.1's own
   container_sync middleware, the same container-sync-realms.conf) on the same storage. Objects
   with metadata and content types, a 0-byte one, a 3 MiB one, a symlink and a name that needs
   quoting arrive with the source's bytes, headers and X-Timestamp; then a DELETE and a POST
   arrive too. Swift's middleware accepting our X-Container-Sync-Auth is the interop proof.
B. Apus to Apus: the same through an Apus proxy with its container_sync middleware (skipped, with
   a message, when apus-proxy-server has none).
C. A destination without the key (or with another one) takes nothing: its Unauth answers count
   as failures in the pass summary.
D. The sync points persist: a container server restarted after a pass resumes where it was
   (nothing is sent again).

usage: container_sync_test.py <build-dir>
"""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
KEY = "sync-secret"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


class SyncCluster(Cluster):
    # Text appended to each storage server's config after its [container-updater] header.
    container_updater = ("enabled = false\n\n[container-sync]\ninterval = 1\n"
                         "container_time = 30\nconn_timeout = 5\n")

    def __init__(self, bin_dir, root, ps):
        self.stock_port = procs.free_port()
        self.apus_sync_port = None
        self.realms_written = False
        super().__init__(bin_dir, root, ps)

    def write_realms(self):
        """container-sync-realms.conf, reread by every server within a second of a change."""
        clusters = "cluster_swift = http://127.0.0.1:%d/v1/\n" % self.stock_port
        if self.apus_sync_port:
            clusters += "cluster_apus = http://127.0.0.1:%d/v1/\n" % self.apus_sync_port
        path = os.path.join(self.etc, "container-sync-realms.conf")
        with open(path + ".tmp", "w") as f:
            f.write("[DEFAULT]\nmtime_check_interval = 1\n\n[realm1]\nkey = realmkey1\n"
                    "key2 = realmkey2\n" + clusters)
        os.rename(path + ".tmp", path)
        self.realms_written = True

    def start(self, kind, n):
        if not self.realms_written:
            self.write_realms()
        super().start(kind, n)


def start_stock_proxy(cluster):
    """A stock swift-proxy-server with Swift's container_sync and symlink middlewares."""
    port = cluster.stock_port
    path = os.path.join(cluster.etc, "stock-proxy-server.conf")
    with open(path, "w") as f:
        f.write("[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %d\nworkers = 1\nuser = root\n"
                "swift_dir = %s\nlog_file = %s/stock-proxy.log\n\n"
                "[pipeline:main]\npipeline = catch_errors gatekeeper healthcheck proxy-logging "
                "cache listing_formats container_sync tempauth slo symlink proxy-logging "
                "proxy-server\n\n"
                "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n"
                "node_timeout = 3\nconn_timeout = 0.5\n\n"
                "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n"
                "[filter:healthcheck]\nuse = egg:swift#healthcheck\n"
                "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
                "[filter:cache]\nuse = egg:swift#memcache\nmemcache_servers = 127.0.0.1:%d\n"
                "[filter:listing_formats]\nuse = egg:swift#listing_formats\n"
                "[filter:container_sync]\nuse = egg:swift#container_sync\n"
                "[filter:symlink]\nuse = egg:swift#symlink\n"
                "[filter:slo]\nuse = egg:swift#slo\n"
                "[filter:tempauth]\nuse = egg:swift#tempauth\n"
                "user_test_tester = testing .admin\n"
                % (port, cluster.etc, cluster.root, cluster.memcached_port))
    log = os.path.join(cluster.root, "stock-proxy.out")
    proc = cluster.ps.start(["/usr/bin/python3", os.path.join(HERE, "..", "support",
                                                              "run_swift_server.py"),
                             cluster.etc, "proxy", path], log)
    procs.wait_for_port(port, timeout=60, proc=proc, log_path=log)
    return port


def auth(port):
    return swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % port, "test:tester", "testing")


def names(url, token, container):
    return sorted(o["name"] for o in swift.get_container(url, token, container,
                                                         full_listing=True)[1])


def head(url, token, container, name, symlink_get=True):
    return swift.head_object(url, token, container, name,
                             query_string="symlink=get" if symlink_get else None)


# What must be equal between a source object and its copy.
COMPARED = ("x-timestamp", "etag", "content-length", "content-type", "x-symlink-target",
            "content-disposition")


def summary(h):
    out = {k: h.get(k) for k in COMPARED}
    out.update({k: v for k, v in h.items() if k.startswith("x-object-meta-")})
    return out


def wait_synced(src, dst, src_container, dst_container, timeout=90, skip=()):
    """Waits until dst lists exactly src's objects, each with src's headers but those named
    in `skip`; returns the differences left (empty when synced)."""
    deadline = time.monotonic() + timeout
    while True:
        diffs = []
        want = names(*src, src_container)
        have = names(*dst, dst_container)
        if want != have:
            diffs.append("listing %r != %r" % (have, want))
        else:
            for n in want:
                if n in skip:
                    continue
                a = summary(head(*src, src_container, n))
                b = summary(head(*dst, dst_container, n))
                if a != b:
                    diffs.append("%r: %r != %r" % (n, b, a))
        if not diffs or time.monotonic() > deadline:
            return diffs
        time.sleep(0.5)


def body(url, token, container, name):
    return swift.get_object(url, token, container, name)[1]


def sync_case(label, cluster, writer, reader, cluster_name):
    """PUTs, a DELETE and a POST in an Apus container synced to `cluster_name`'s dst, checked
    through `reader` (the destination cluster's proxy)."""
    src_c, dst_c = "src-" + label, "dst-" + label
    swift.put_container(*reader, dst_c, headers={"X-Container-Sync-Key": KEY})
    swift.put_container(*writer, src_c, headers={
        "X-Container-Sync-To": "//realm1/%s/AUTH_test/%s" % (cluster_name, dst_c),
        "X-Container-Sync-Key": KEY})
    big = os.urandom(3 * 1024 * 1024 + 17)
    objects = {
        "plain": (b"hello world", "text/plain", {"X-Object-Meta-Color": "blue",
                                                 "Content-Disposition": "inline"}),
        "empty": (b"", "application/x-empty", {}),
        "big": (big, "application/octet-stream", {"X-Object-Meta-Size": "big"}),
        "dir/n\u00e4me with space & 100%?#x": (b"quoted", "text/x-q;charset=utf-8", {}),
    }
    for n, (data, ctype, headers) in objects.items():
        swift.put_object(*writer, src_c, n, data, content_type=ctype, headers=headers)
    # A symlink and an SLO manifest, written through the stock proxy (Swift's middlewares).
    stock = auth(cluster.stock_port)
    swift.put_object(*stock, src_c, "link", b"", headers={
        "X-Symlink-Target": "%s/plain" % src_c})
    swift.put_container(*stock, "segs-" + label)
    seg_etag = swift.put_object(*stock, "segs-" + label, "s1", b"segment body")
    manifest = json.dumps([{"path": "/segs-%s/s1" % label, "etag": seg_etag,
                            "size_bytes": 12}])
    swift.put_object(*stock, src_c, "slo", manifest, headers={"X-Object-Meta-Test": "put"},
                     query_string="multipart-manifest=put")
    # A tombstone of an object the remote never had (its 404 must not hold the rows after
    # it back), and an object the remote has newer (left alone).
    swift.put_object(*writer, src_c, "ghost", b"boo")
    swift.delete_object(*writer, src_c, "ghost")
    swift.put_object(*writer, src_c, "newer", b"old source body")
    swift.put_object(*reader, dst_c, "newer", b"new remote body")
    # The source is read through the stock proxy too: its symlink middleware shows the link.
    diffs = wait_synced(stock, reader, src_c, dst_c, skip={"newer"})
    check(not diffs, "%s: objects synced: %s" % (label, diffs))
    check(body(*reader, dst_c, "newer") == b"new remote body",
          "%s: a newer remote object is left alone" % label)
    get_manifest = {"query_string": "multipart-manifest=get"}
    check(swift.get_object(*reader, dst_c, "slo", **get_manifest)[1] ==
          swift.get_object(*stock, src_c, "slo", **get_manifest)[1],
          "%s: the SLO manifest synced as it is" % label)
    check(body(*reader, dst_c, "slo") == b"segment body", "%s: the SLO's body" % label)
    for n in ("plain", "big", "dir/n\u00e4me with space & 100%?#x"):
        check(body(*reader, dst_c, n) == objects[n][0], "%s: bytes of %r" % (label, n))
    link = head(*reader, dst_c, "link")
    check(link.get("x-symlink-target") == "%s/plain" % src_c,
          "%s: the copy is a symlink: %r" % (label, link))

    # A DELETE and a POST arrive as well.
    swift.delete_object(*writer, src_c, "empty")
    time.sleep(0.02)
    swift.post_object(*writer, src_c, "big", headers={"X-Object-Meta-New": "yes"})
    diffs = wait_synced(stock, reader, src_c, dst_c, skip={"newer"})
    check(not diffs, "%s: DELETE and POST synced: %s" % (label, diffs))
    check("empty" not in names(*reader, dst_c), "%s: deleted object gone" % label)
    check(head(*reader, dst_c, "big").get("x-object-meta-new") == "yes",
          "%s: POSTed metadata" % label)
    check(body(*reader, dst_c, "big") == big, "%s: bytes after POST" % label)
    check(body(*reader, dst_c, "newer") == b"new remote body",
          "%s: the newer remote object is still left alone" % label)


def logs(cluster):
    out = ""
    for n in range(4):
        path = os.path.join(cluster.root, "container-%d.log" % n)
        if os.path.exists(path):
            out += open(path, errors="replace").read()
    return out


def failed_total(cluster):
    return sum(int(m) for m in re.findall(r"Container sync pass completed: .*?(\d+) failed",
                                          logs(cluster)))


def unauth_case(cluster, apus, stock):
    """Destinations without the key or with another: nothing arrives, failures are counted."""
    swift.put_container(*stock, "dst-nokey")
    swift.put_container(*stock, "dst-wrongkey", headers={"X-Container-Sync-Key": "other"})
    before = failed_total(cluster)
    for dst in ("dst-nokey", "dst-wrongkey"):
        src = "src-" + dst[4:]
        swift.put_container(*apus, src, headers={
            "X-Container-Sync-To": "//realm1/swift/AUTH_test/" + dst,
            "X-Container-Sync-Key": KEY})
        swift.put_object(*apus, src, "o", b"data")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and failed_total(cluster) < before + 2:
        time.sleep(0.5)
    check(failed_total(cluster) >= before + 2, "Unauth rows counted as failures (%d -> %d)"
          % (before, failed_total(cluster)))
    check("Unauth AUTH_test/src-nokey" in logs(cluster), "Unauth logged for src-nokey")
    check(names(*stock, "dst-nokey") == [], "nothing pushed without the key")
    check(names(*stock, "dst-wrongkey") == [], "nothing pushed with another key")
    # The failed rows are tried again at every pass: once the key is there, they arrive.
    swift.post_container(*stock, "dst-nokey", headers={"X-Container-Sync-Key": KEY})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and names(*stock, "dst-nokey") != ["o"]:
        time.sleep(0.5)
    check(names(*stock, "dst-nokey") == ["o"], "the row arrives once the key is set")


def restart_case(cluster, apus, stock):
    """The sync points persist: after every row went, the copies are deleted at the
    destination and the container servers restarted; a new row then arrives alone (with the
    points lost, the old rows would be sent again and reappear)."""
    src_c, dst_c = "src-restart", "dst-restart"
    swift.put_container(*stock, dst_c, headers={"X-Container-Sync-Key": KEY})
    swift.put_container(*apus, src_c, headers={
        "X-Container-Sync-To": "//realm1/swift/AUTH_test/" + dst_c,
        "X-Container-Sync-Key": KEY})
    old = ["o%d" % i for i in range(6)]
    for n in old:
        swift.put_object(*apus, src_c, n, n.encode())
    check(not wait_synced(apus, stock, src_c, dst_c), "restart: first rows synced")
    time.sleep(3)  # more passes: both points reach the last row
    for n in old:
        swift.delete_object(*stock, dst_c, n)
    for n in range(4):
        cluster.stop("container", n)
        cluster.start("container", n)
    swift.put_object(*apus, src_c, "after", b"new")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "after" not in names(*stock, dst_c):
        time.sleep(0.5)
    check(names(*stock, dst_c) == ["after"], "restart: the new row arrived alone: %r"
          % names(*stock, dst_c))
    time.sleep(3)
    check(names(*stock, dst_c) == ["after"], "restart: old rows not sent again: %r"
          % names(*stock, dst_c))


def apus_sync_proxy(cluster):
    """An Apus proxy with the container_sync middleware, or None when it has none."""
    try:
        return cluster.start_proxy(
            "proxy-sync", pipeline="catch_errors gatekeeper healthcheck proxy-logging cache "
            "listing_formats container_sync tempauth slo symlink proxy-server",
            filters="[filter:container_sync]\nuse = egg:swift#container_sync\n"
                    "[filter:slo]\nuse = egg:swift#slo\n"
                    "[filter:symlink]\nuse = egg:swift#symlink\n")
    except RuntimeError as e:
        print("SKIP Apus to Apus: apus-proxy-server has no container_sync middleware (%s)"
              % str(e).splitlines()[-1:])
        return None


def main():
    with procs.TempDir("apus-csync-") as root, procs.Processes() as ps:
        cluster = SyncCluster(BIN, root, ps)
        start_stock_proxy(cluster)
        apus = cluster.connect()
        stock = auth(cluster.stock_port)
        sync_case("a", cluster, apus, stock, "swift")
        unauth_case(cluster, apus, stock)
        port = apus_sync_proxy(cluster)
        if port:
            info = procs.request(port, "GET", "/info")
            if check(b"container_sync" in info[2], "/info of the sync proxy names container_sync"):
                cluster.apus_sync_port = port
                cluster.write_realms()
                time.sleep(2.5)  # every server rereads the realms
                sync_case("b", cluster, apus, auth(port), "apus")
        restart_case(cluster, apus, stock)
        if failures:
            print(logs(cluster)[-6000:])
    print("container sync test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
