#!/usr/bin/env python3
"""apus-proxy-server in front of real Apus storage servers (4 nodes, 3 replicas, rings built
with apus-ring-builder on free loopback ports), driven with python-swiftclient:

1. A directory tree goes up, is listed, comes back byte for byte and is deleted.
2. One object server stopped during a PUT storm: every write still succeeds (handoffs).
3. Two of the three primaries of an object stopped: its PUT answers 503, and no listing or
   GET shows a half-written object.
4. A storage server that accepts connections but never answers: the proxy gives up after
   node_timeout and answers from the others.
5. Two proxies on one memcached: a token one issued works at the other, and Swift's own
   MemcacheRing reads the token entry as Swift's tempauth stores it.
6. A proxy with sorting_method = affinity reads from the preferred zone every time, and with
   write_affinity writes to the local zones even when they hold no primary.
7. X-Newest: with one replica newer than the others, GET and HEAD with X-Newest always give
   it.
8. A container server down: the proxy logs an ERROR naming the node and the request, as Swift
   does, and answers from the other replicas.
9. An object server that stalls in the middle of a GET: the proxy resumes from another replica
   after recoverable_node_timeout and the client gets the whole object, byte for byte.
10. ratelimit (counters in memcached): object writes in a container slowed to its
    container_ratelimit, 498 past max_sleep_time_seconds, 497 for a blacklisted account, and
    /info lists the limits.
11. Account and container info cached in memcached in Swift's format: an ACL set at one proxy
    counts at the other within local_info_cache_ttl (1 s; at once with 0), a proxy serving one
    container reads its infos from memcached about once a second, not twice a request, and an
    entry Swift's own code wrote is read by Apus.
12. A small PUT (its body sent whole, without Expect: 100-continue): If-None-Match: * on an
    existing object is 412 and changes no replica, a PUT older than every replica or than one
    of them is 202, a wrong ETag is 422 and stores nothing, and a primary that never answers
    is passed for a handoff after node_timeout.

usage: proxy_faults_test.py <build-dir>
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def tree_round_trip(cluster):
    url, token = cluster.connect()
    files = {"a.txt": b"alpha\n", "dir/b.bin": bytes(range(256)) * 1000,
             "dir/sub/c.json": b'{"c": 1}', "empty": b""}
    swift.put_container(url, token, "tree")
    for name, body in files.items():
        etag = swift.put_object(url, token, "tree", name, body)
        check(etag == __import__("hashlib").md5(body).hexdigest(), "etag of %s: %s" % (name, etag))
    _, listing = swift.get_container(url, token, "tree")
    check(sorted(o["name"] for o in listing) == sorted(files), "listing: %r" % listing)
    _, top = swift.get_container(url, token, "tree", delimiter="/")
    check([o.get("name") or o.get("subdir") for o in top] == ["a.txt", "dir/", "empty"],
          "delimiter listing: %r" % top)
    for name, body in files.items():
        _, got = swift.get_object(url, token, "tree", name)
        check(got == body, "GET %s returns what was PUT" % name)
    for name in files:
        swift.delete_object(url, token, "tree", name)
    _, listing = swift.get_container(url, token, "tree")
    check(listing == [], "listing after deletes: %r" % listing)
    swift.delete_container(url, token, "tree")


def put_storm_with_node_down(cluster):
    url, token = cluster.connect()
    swift.put_container(url, token, "storm")
    cluster.stop("object", 0)
    errors = []

    def worker(i):
        for j in range(25):
            try:
                swift.put_object(url, token, "storm", "o-%d-%d" % (i, j), b"x" * 1000)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "every PUT succeeds with one object server down: %s" % errors[:3])
    _, listing = swift.get_container(url, token, "storm")
    check(len(listing) == 100, "100 objects listed, got %d" % len(listing))
    cluster.start("object", 0)


def two_primaries_down(cluster):
    url, token = cluster.connect()
    swift.put_container(url, token, "half")
    name = "victim"
    primaries = cluster.primaries("half", name)
    check(len(primaries) == 3, "three primaries for the victim: %r" % primaries)
    if len(primaries) != 3:
        return
    # With two primaries and the only other node (the handoff) down, one node can take the
    # write: short of a quorum of two.
    handoff = [n for n in range(4) if n not in primaries][0]
    for n in (primaries[0], primaries[1], handoff):
        cluster.stop("object", n)
    try:
        swift.put_object(url, token, "half", name, b"y" * 100)
        check(False, "PUT with one reachable node should fail")
    except swift.ClientException as e:
        check(e.http_status == 503, "PUT answers 503: %s" % e.http_status)
    for n in (primaries[0], primaries[1], handoff):
        cluster.start("object", n)
    # The one replica that took the write may list it (Swift's container update); what must
    # not happen is a reader getting a partial object.
    try:
        _, body = swift.get_object(url, token, "half", name)
        check(body == b"y" * 100, "a replica that took the write has all of it")
    except swift.ClientException as e:
        check(e.http_status == 404, "no half-written object readable: %s" % e.http_status)


def hang_object_server(cluster, n):
    """Stops object server `n` and listens on its port with a socket that accepts connections
    and never answers; close it before starting the server again."""
    cluster.stop("object", n)
    hang = socket.socket()
    hang.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hang.bind(("127.0.0.1", cluster.ports["object"][n]))
    hang.listen(64)
    return hang


def hanging_node(cluster):
    url, token = cluster.connect()
    swift.put_container(url, token, "slow")
    swift.put_object(url, token, "slow", "obj", b"z" * 10)
    primaries = cluster.primaries("slow", "obj")
    # Replace one primary by a socket that accepts and never answers.
    n = primaries[0]
    hang = hang_object_server(cluster, n)
    try:
        started = time.monotonic()
        for _ in range(6):
            _, body = swift.get_object(url, token, "slow", "obj")
            check(body == b"z" * 10, "GET with a hanging node returns the object")
        elapsed = time.monotonic() - started
        print("6 GETs with one hanging primary: %.1f s" % elapsed)
        check(elapsed < 6 * 2.5, "node_timeout (1 s) bounds each GET: %.1f s" % elapsed)
    finally:
        hang.close()
    cluster.start("object", n)


def shared_tokens(cluster):
    url, token = cluster.connect()
    other = url.replace(":%d/" % cluster.proxy_port, ":%d/" % cluster.second_proxy_port)
    headers, _ = swift.get_account(other, token)
    check(headers.get("x-account-container-count") is not None,
          "the second proxy accepts the first one's token")
    from swift.common.memcached import MemcacheRing
    ring = MemcacheRing(["127.0.0.1:%d" % cluster.memcached_port])
    entry = ring.get("AUTH_/token/%s" % token)
    check(isinstance(entry, list) and len(entry) == 2 and entry[0] > time.time() and
          entry[1].startswith("test,test:tester"),
          "Swift's MemcacheRing reads the token as tempauth stores it: %r" % (entry,))
    check(ring.get("AUTH_/user/test:tester") == token, "the user entry names the token")


def backend_requests(cluster, kind, n, method, path, want=1, timeout=5):
    """How many `method` requests for `path` node n's `kind` server logged, once there are
    `want` of them or `timeout` seconds have passed (a server writes its log lines from a
    thread of its own, after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(os.path.join(cluster.root, "%s-%d.log" % (kind, n)), errors="replace") as f:
            count = sum(1 for line in f if '"%s /sd%d/' % (method, n) in line and path in line)
        if count >= want or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def affinity(cluster):
    url, token = cluster.connect()
    # Devices are r1z1..r1z4 (node n in zone n + 1).
    port = cluster.start_proxy("proxy-affinity",
                               "sorting_method = affinity\nread_affinity = r1z1=1\n"
                               "write_affinity = r1z1, r1z2\nwrite_affinity_node_count = 2\n")
    other = url.replace(":%d/" % cluster.proxy_port, ":%d/" % port)
    swift.put_container(url, token, "near")
    name = next("o%d" % i for i in range(1000)
                if 0 in cluster.primaries("near", "o%d" % i) and
                1 not in cluster.primaries("near", "o%d" % i))
    swift.put_object(url, token, "near", name, b"close by")
    for _ in range(10):
        _, body = swift.get_object(other, token, "near", name)
        check(body == b"close by", "read-affinity GET body")
    path = "/AUTH_test/near/" + name
    check(backend_requests(cluster, "object", 0, "GET", path, want=10) == 10,
          "every GET went to the zone read_affinity prefers")
    # Node 1 (zone 2) is local but not a primary: with write affinity it gets the write.
    swift.put_object(other, token, "near", name + "-local", b"written nearby")
    for n in (0, 1):
        # The proxy answers a quorum and post_quorum_timeout later: a slower node may log
        # its PUT after the client has its 201.
        count = backend_requests(cluster, "object", n, "PUT", path + "-local")
        check(count == 1, "the write-affinity PUT went to local node %d: %d PUTs" % (n, count))
    _, body = swift.get_object(url, token, "near", name + "-local")
    check(body == b"written nearby", "an object written with write affinity reads back")


def fresh_proxy_url(cluster, name, app_options=""):
    """A token, and the storage URL at a new proxy: one that has not error-limited the nodes
    the fault steps before stopped."""
    url, token = cluster.connect()
    port = cluster.start_proxy(name, app_options)
    return url.replace(":%d/" % cluster.proxy_port, ":%d/" % port), token, port


def newest(cluster):
    import http.client
    url, token, _ = fresh_proxy_url(cluster, "proxy-newest")
    swift.put_container(url, token, "fresh")
    swift.put_object(url, token, "fresh", "o", b"old version")
    part, primaries = cluster.placement("fresh", "o")
    # One replica gets a newer version straight from a backend PUT.
    n = primaries[1]
    conn = http.client.HTTPConnection("127.0.0.1", cluster.ports["object"][n], timeout=5)
    body = b"the newest version"
    conn.request("PUT", "/sd%d/%d/AUTH_test/fresh/o" % (n, part), body=body,
                 headers={"X-Timestamp": "%.5f" % (time.time() + 10), "Content-Type": "text/x",
                          "Content-Length": str(len(body))})
    check(conn.getresponse().status == 201, "backend PUT of the newer replica")
    conn.close()
    for _ in range(12):
        _, got = swift.get_object(url, token, "fresh", "o", headers={"X-Newest": "true"})
        check(got == body, "GET with X-Newest gives the newest replica: %r" % got)
        headers = swift.head_object(url, token, "fresh", "o", headers={"X-Newest": "true"})
        check(headers.get("content-length") == str(len(body)),
              "HEAD with X-Newest describes the newest replica: %r" % headers)


def small_puts(cluster):
    """A PUT whose body fits in one client chunk goes to each replica whole, without Expect:
    100-continue. What a replica would have answered before the body counts as it did."""
    import hashlib
    md5 = lambda b: hashlib.md5(b).hexdigest()  # noqa: E731
    url, token, _ = fresh_proxy_url(cluster, "proxy-small-puts")
    swift.put_container(url, token, "whole")
    part, primaries = cluster.placement("whole", "o")

    def replica_etags(name="o"):
        out = []
        for n in primaries:
            s, h, _ = procs.request(cluster.ports["object"][n], "HEAD",
                                    "/sd%d/%d/AUTH_test/whole/%s" % (n, part, name))
            out.append(h.get("etag", "").strip('"') if s == 200 else s)
        return out

    def put(name, body, headers):
        rd = {}
        try:
            swift.put_object(url, token, "whole", name, body, headers=headers, response_dict=rd)
        except swift.ClientException as e:
            return e.http_status
        return rd.get("status")

    def backend_put(n, body, ts, name="o"):
        status, _, _ = procs.request(cluster.ports["object"][n], "PUT",
                                     "/sd%d/%d/AUTH_test/whole/%s" % (n, part, name),
                                     {"X-Timestamp": "%.5f" % ts, "Content-Type": "text/x"},
                                     body)
        check(status == 201, "backend PUT on node %d: %d" % (n, status))

    status = put("o", b"first", {})
    check(status == 201 and replica_etags() == [md5(b"first")] * 3,
          "a small PUT reaches every primary: %s %r" % (status, replica_etags()))
    # If-None-Match: * asks before the body, and then no replica stores anything.
    status = put("o", b"second", {"If-None-Match": "*"})
    check(status == 412, "If-None-Match: * on an existing object: %s" % status)
    check(replica_etags() == [md5(b"first")] * 3, "412: every replica keeps the object: %r"
          % replica_etags())
    # One replica alone holds it: If-None-Match: * is 412, and the others store nothing either.
    part, primaries = cluster.placement("whole", "inm")
    backend_put(primaries[0], b"alone", time.time(), "inm")
    status = put("inm", b"more", {"If-None-Match": "*"})
    check(status == 412, "If-None-Match: * with one replica holding the object: %s" % status)
    check(replica_etags("inm") == [md5(b"alone"), 404, 404],
          "412: the replicas without the object stay without: %r" % replica_etags("inm"))
    part, primaries = cluster.placement("whole", "o")
    # One replica holds a newer object: 202 (Swift's answer to a 409 before the body).
    backend_put(primaries[0], b"newer", time.time() + 100)
    status = put("o", b"third", {})
    check(status == 202, "a PUT older than one replica: %s" % status)
    # Every replica holds a newer one: 202, and none changes.
    for n in primaries:
        backend_put(n, b"newest", time.time() + 200)
    status = put("o", b"fourth", {})
    check(status == 202, "a PUT older than every replica: %s" % status)
    check(replica_etags() == [md5(b"newest")] * 3, "202: every replica keeps the object: %r"
          % replica_etags())
    # A body that does not match its ETag: 422, and no replica has it.
    status = put("bad", b"some bytes", {"Etag": "0" * 32})
    check(status == 422, "a PUT with a wrong ETag: %s" % status)
    check(replica_etags("bad") == [404] * 3, "422: no replica stored it: %r"
          % replica_etags("bad"))
    # A primary that accepts and never answers: that replica goes on to a handoff after
    # node_timeout, with the body sent again (the client may have had its answer before,
    # from the two other primaries and post_quorum_timeout).
    part, primaries = cluster.placement("whole", "slow")
    n = primaries[1]
    hang = hang_object_server(cluster, n)
    try:
        started = time.monotonic()
        status = put("slow", b"to a handoff", {})
        took = time.monotonic() - started
        check(status == 201 and took < 5, "a PUT past a hanging primary: %s in %.1f s"
              % (status, took))
    finally:
        hang.close()
    handoff = [m for m in range(4) if m not in primaries][0]
    for _ in range(50):
        s, h, _ = procs.request(cluster.ports["object"][handoff], "HEAD",
                                "/sd%d/%d/AUTH_test/whole/slow" % (handoff, part))
        if s == 200:
            break
        time.sleep(0.1)
    cluster.start("object", n)
    check(s == 200 and h.get("etag", "").strip('"') == md5(b"to a handoff"),
          "the handoff holds the object: %d %r" % (s, h))


def listing_node_down_logged(cluster):
    """A container server that does not answer is an ERROR in the proxy's log, in Swift's words,
    naming the node and the request; the request is still answered by the others."""
    url, token, _ = fresh_proxy_url(cluster, "proxy-listing-down")
    swift.put_container(url, token, "watched")
    _, primaries = cluster.ring_nodes("container", "AUTH_test", "watched")
    n = primaries[0]
    cluster.stop("container", n)
    try:
        # X-Newest asks every primary, the stopped one too.
        headers = swift.head_container(url, token, "watched", headers={"X-Newest": "true"})
        check("x-container-object-count" in headers, "HEAD answered by the other replicas")
        want = "ERROR with Container server 127.0.0.1:%d/sd%d re: Trying to HEAD /" % (
            cluster.ports["container"][n], n)
        log = procs.wait_for_text(os.path.join(cluster.root, "proxy-listing-down.log"), want)
        check(want in log, "the proxy logs the failed node as an error: %r" % want)
        # A listing whose query holds '/' is still a container server's request.
        swift.get_container(url, token, "watched", prefix="a/b/c", headers={"X-Newest": "true"})
        want = "ERROR with Container server 127.0.0.1:%d/sd%d re: Trying to GET /" % (
            cluster.ports["container"][n], n)
        log = procs.wait_for_text(os.path.join(cluster.root, "proxy-listing-down.log"), want)
        check(want in log, "a listing's failure names the container server: %r" % want)
    finally:
        cluster.start("container", n)


def resume_after_stall(cluster):
    import hashlib
    import http.client
    import signal
    # This proxy reads from node 0 first (read affinity); node_timeout (so
    # recoverable_node_timeout) is 1 s.
    url, token, port = fresh_proxy_url(cluster, "proxy-resume", "sorting_method = affinity\n"
                                       "read_affinity = r1z1=1\n")
    swift.put_container(url, token, "stall")
    name = next("o%d" % i for i in range(1000) if 0 in cluster.primaries("stall", "o%d" % i))
    body = os.urandom(1 << 20) * 48  # 48 MiB: far more than the socket buffers hold
    swift.put_object(url, token, "stall", name, body)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/v1/AUTH_test/stall/" + name, headers={"X-Auth-Token": token})
    resp = conn.getresponse()
    check(resp.status == 200, "GET status %d" % resp.status)
    first = resp.read(1 << 20)
    stalled = cluster.procs[("object", 0)]
    stalled.send_signal(signal.SIGSTOP)
    try:
        rest = resp.read()
    finally:
        stalled.send_signal(signal.SIGCONT)
    got = first + rest
    check(len(got) == len(body) and hashlib.md5(got).digest() == hashlib.md5(body).digest(),
          "the stalled GET resumed from another replica: %d of %d bytes" % (len(got), len(body)))
    conn.close()
    log = procs.wait_for_text(os.path.join(cluster.root, "proxy-resume.log"), "resumed at byte")
    check("resumed at byte" in log, "the proxy logged the resume")


def ratelimit(cluster):
    import json
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor
    url, token = cluster.connect()
    port = cluster.start_proxy("proxy-ratelimit", ratelimit="container_ratelimit_1 = 5\n"
                               "container_ratelimit_100 = 1\nmax_sleep_time_seconds = 1\n")
    limited = url.replace(":%d/" % cluster.proxy_port, ":%d/" % port)
    swift.put_container(limited, token, "slow")
    swift.put_object(limited, token, "slow", "o", b"x")
    # The container's cached info said 0 objects (not limited); a container POST drops it.
    swift.post_container(limited, token, "slow", {"X-Container-Meta-A": "b"})
    # One object: 5 writes a second; eleven in a row take two seconds at least.
    start = time.time()
    for _ in range(11):
        swift.post_object(limited, token, "slow", "o", headers={"X-Object-Meta-A": "b"})
    took = time.time() - start
    check(took >= 1.8, "11 POSTs at 5/s took %.2f s" % took)
    # Many at once: those that would wait more than max_sleep_time_seconds get 498.
    def post(_):
        req = urllib.request.Request(limited + "/slow/o", method="POST",
                                     headers={"X-Auth-Token": token})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, b""
        except urllib.error.HTTPError as e:
            return e.code, e.read()
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(post, range(20)))
    statuses = sorted(a[0] for a in answers)
    check(202 in statuses and 498 in statuses, "a burst gets 202s and 498s: %r" % statuses)
    check(all(body == b"Slow down" for status, body in answers if status == 498),
          "498 says Slow down")
    # Listings and container writes are not limited by container_ratelimit.
    swift.get_container(limited, token, "slow")
    with urllib.request.urlopen("http://127.0.0.1:%d/info" % port) as r:
        info = json.loads(r.read())
    check(info.get("ratelimit") == {"account_ratelimit": 0.0, "max_sleep_time_seconds": 1.0,
                                    "container_ratelimits": [[1, 5.0], [100, 1.0]],
                                    "container_listing_ratelimits": []},
          "/info ratelimit: %r" % info.get("ratelimit"))
    black = cluster.start_proxy("proxy-blacklist", ratelimit="account_blacklist = AUTH_test\n")
    try:
        swift.head_account(url.replace(":%d/" % cluster.proxy_port, ":%d/" % black), token)
        check(False, "a blacklisted account is refused")
    except swift.ClientException as e:
        check(e.http_status == 497, "a blacklisted account gets 497: %s" % e.http_status)


def shared_info(cluster):
    import urllib.request
    from swift.common.memcached import MemcacheRing
    from swift.proxy.controllers.base import headers_to_container_info
    url, token = cluster.connect()
    other = url.replace(":%d/" % cluster.proxy_port, ":%d/" % cluster.second_proxy_port)
    swift.put_container(url, token, "shared")
    swift.put_object(url, token, "shared", "o", b"public soon")

    def anonymous_get(base):
        try:
            with urllib.request.urlopen(base + "/shared/o") as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
    check(anonymous_get(other) == 401, "no ACL yet: the second proxy refuses an anonymous GET")
    ring = MemcacheRing(["127.0.0.1:%d" % cluster.memcached_port])
    info = ring.get("container/AUTH_test/shared")
    check(isinstance(info, dict) and info.get("status") == 204 and info.get("read_acl") is None
          and info.get("storage_policy") == "0",
          "the container info in memcached is Swift's dict: %r" % info)
    # The second proxy keeps the info it read for local_info_cache_ttl (1 s): the ACL counts
    # there within that; a proxy with local_info_cache_ttl = 0 sees it at its next request.
    at_once = url.replace(":%d/" % cluster.proxy_port, ":%d/" % cluster.start_proxy(
        "proxy-no-local-info", app_options="local_info_cache_ttl = 0\n"))
    check(anonymous_get(at_once) == 401, "no ACL yet at the proxy without a local info cache")
    swift.post_container(url, token, "shared", {"X-Container-Read": ".r:*"})
    check(anonymous_get(at_once) == 200, "the ACL counts at once without a local info cache")
    start = time.time()
    while anonymous_get(other) != 200 and time.time() - start < 5:
        time.sleep(0.05)
    waited = time.time() - start
    check(waited < 1.5, "the ACL set at the first proxy counts at the second within "
          "local_info_cache_ttl: %.2f s" % waited)

    def memcached_gets():
        with socket.create_connection(("127.0.0.1", cluster.memcached_port), timeout=5) as c:
            c.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                data += c.recv(65536)
        for line in data.decode().splitlines():
            if line.startswith("STAT cmd_get "):
                return int(line.split()[2])
        return -1
    before = memcached_gets()
    for _ in range(40):
        anonymous_get(other)
    reads = memcached_gets() - before
    print("40 anonymous GETs at one proxy: %d memcached reads; the ACL counted there after "
          "%.2f s" % (reads, waited))
    check(0 <= reads < 40, "40 anonymous GETs at one proxy read memcached %d times, not 80 "
          "(the account and container infos kept for a second)" % reads)
    # An entry written by Swift's own code (a Swift proxy on the same memcached).
    swift.put_container(url, token, "swift-cached")
    swift.put_object(url, token, "swift-cached", "o", b"x")
    ring.set("container/AUTH_test/swift-cached",
             headers_to_container_info({"x-container-read": ".r:*", "x-container-object-count": "1",
                                        "x-backend-storage-policy-index": "0"}, 204), time=60)
    try:
        with urllib.request.urlopen(other + "/swift-cached/o") as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    check(status == 200, "Apus honours a container info entry Swift wrote: %d" % status)


def main():
    with procs.TempDir("apus-proxy-faults-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        for step in (tree_round_trip, put_storm_with_node_down, two_primaries_down, hanging_node,
                     shared_tokens, shared_info, affinity, newest, small_puts,
                     listing_node_down_logged,
                     resume_after_stall,
                     ratelimit):
            print("---", step.__name__)
            try:
                step(cluster)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
    print("proxy faults:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
