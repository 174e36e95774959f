#!/usr/bin/env python3
"""The proxy's limits and its PUT fan-out (issue 12), against the test cluster of
tests/support/cluster.py (4 Apus storage nodes, 3 replicas, node_timeout 1 s):

1. max_file_size on a chunked PUT: past it the proxy answers 413 while the body streams (as
   Swift does) and no replica keeps any of it; exactly max_file_size is still stored.
2. Listings longer than the old 16 MiB cap (about 850 rows of 7 KB non-ASCII content types):
   every GET is served, and a dozen of them do not error-limit the container servers (a
   HEAD and a small listing still work).
3. X-Delete-After and X-Delete-At as Swift reads them: huge values capped at 9999999999,
   underscores between digits, negative ones "in past", non-integers refused (no int
   overflow).
4. memcache_servers given as a host name without a port works (default 11211 is the only
   other choice, so the test names the port of its own memcached), and a malformed value stops
   the proxy at start with a message naming it.
5. An object GET answer without Content-Length (a fake object server answering chunked and
   pausing midway) is streamed to the client as it comes, not held whole.
6. PUT fan-out: connections to the replicas go out at once (two primaries that never answer
   cost one node_timeout, not two), and the final answers are read at once (a replica that
   never gives its final answer costs post_quorum_timeout, not node_timeout).

usage: proxy_limits_test.py <build-dir>
"""
import http.client
import json
import os
import shutil
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
MAX_FILE_SIZE = 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def auth(port):
    status, headers, _ = procs.request(port, "GET", "/auth/v1.0",
                                       {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"},
                                       timeout=10)
    if status != 200:
        raise RuntimeError("auth at port %d: %d" % (port, status))
    return headers["x-storage-url"].split(":%d" % port, 1)[1], headers["x-auth-token"]


def req(port, token, method, path, headers=None, body=None, timeout=20):
    h = {"X-Auth-Token": token}
    h.update(headers or {})
    return procs.request(port, method, path, h, body, timeout=timeout)


def chunked_put(port, token, path, total, piece=65536):
    """A chunked PUT of `total` bytes; the status, even when the proxy answered before the body
    was all sent (and closed the connection)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.putrequest("PUT", path)
    conn.putheader("X-Auth-Token", token)
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    sent = 0
    try:
        while sent < total:
            n = min(piece, total - sent)
            conn.send(b"%x\r\n" % n + b"x" * n + b"\r\n")
            sent += n
        conn.send(b"0\r\n\r\n")
    except OSError:
        pass  # the proxy refused the rest
    try:
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as e:
        status = "no answer (%r)" % e
    conn.close()
    return status, sent


def fresh_proxy(cluster, name, app_options=""):
    port = cluster.start_proxy(name, app_options)
    path, token = auth(port)
    return port, path, token


def patient_proxy(cluster, name, node_timeout):
    """A proxy like the cluster's own but with another node_timeout (the cluster's 1 s is
    short for a container server building an 18 MB listing on a loaded machine)."""
    with open(os.path.join(cluster.etc, "proxy-server.conf")) as f:
        text = f.read()
    port = procs.free_port()
    text = text.replace("bind_port = %d\n" % cluster.proxy_port, "bind_port = %d\n" % port)
    text = text.replace("/proxy-server.log", "/%s.log" % name)
    text = text.replace("\nnode_timeout = 1\n", "\nnode_timeout = %g\n" % node_timeout)
    conf = os.path.join(cluster.etc, name + ".conf")
    with open(conf, "w") as f:
        f.write(text)
    log = os.path.join(cluster.root, name + ".out")
    proxy = cluster.ps.start([os.path.join(cluster.bin, "apus-proxy-server"), conf], log)
    procs.wait_for_port(port, proc=proxy, log_path=log)
    path, token = auth(port)
    return port, path, token


# ---- 1 ---------------------------------------------------------------------------------------

def max_file_size(cluster):
    port, path, token = fresh_proxy(cluster, "proxy-size")
    req(port, token, "PUT", path + "/sizes")
    status, sent = chunked_put(port, token, path + "/sizes/big", MAX_FILE_SIZE + 200000)
    check(status == 413, "chunked PUT past max_file_size: %r after %d bytes" % (status, sent))
    status, _ = chunked_put(port, token, path + "/sizes/fits", MAX_FILE_SIZE)
    check(status == 201, "chunked PUT of exactly max_file_size: %r" % status)
    time.sleep(0.5)  # let any replica finish what it would do
    status, _, _ = req(port, token, "HEAD", path + "/sizes/big", {"X-Newest": "true"})
    check(status == 404, "no replica keeps the refused upload: HEAD %d" % status)
    status, _, body = req(port, token, "GET", path + "/sizes?format=json")
    names = [o["name"] for o in json.loads(body or b"[]")] if status == 200 else None
    check(names == ["fits"], "the listing shows only the upload that fit: %d %r" % (status, names))


# ---- 2 ---------------------------------------------------------------------------------------

def large_listings(cluster):
    port, path, token = patient_proxy(cluster, "proxy-listing", 10)
    container = path + "/wide"
    check(req(port, token, "PUT", container)[0] in (201, 202), "container PUT")
    # 1750 four-byte characters: 7000 bytes in the header, 21000 once JSON-escaped.
    ctype = ("application/x-" + "\U0001F600" * 1750).encode("utf-8")
    rows = 850

    def put(i):
        return req(port, token, "PUT", "%s/o%04d" % (container, i),
                   {"Content-Type": ctype}, b"")[0]

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(put, range(rows)))
    print("%d PUTs with 7 KB content types: %.1f s" % (rows, time.monotonic() - started))
    check(statuses.count(201) == rows, "PUTs: %r" % sorted(set(statuses)))
    sizes = []
    for i in range(12):
        status, _, body = req(port, token, "GET", container + "?format=json", timeout=60)
        listed = len(json.loads(body)) if status == 200 else None
        sizes.append(len(body))
        check(status == 200 and listed == rows,
              "listing GET %d over 16 MiB: %d, %r rows" % (i, status, listed))
    print("listing sizes: %r" % sorted(set(sizes)))
    check(max(sizes) > 16 << 20, "the listing is over the old 16 MiB cap: %d" % max(sizes))
    # The container servers are not error-limited: ordinary requests still reach them.
    status, _, _ = req(port, token, "HEAD", container)
    check(status == 204, "container HEAD after the large listings: %d" % status)
    status, _, body = req(port, token, "GET", container + "?format=json&limit=1")
    check(status == 200 and len(json.loads(body)) == 1,
          "small listing after the large ones: %d" % status)
    check(req(port, token, "PUT", path + "/other")[0] in (201, 202),
          "another container PUT after the large listings")


# ---- 3 ---------------------------------------------------------------------------------------

def delete_headers(cluster):
    port, path, token = fresh_proxy(cluster, "proxy-expiry")
    req(port, token, "PUT", path + "/expiry")
    obj = path + "/expiry/o"
    now = time.time()
    cases = [
        ("X-Delete-After", "99999999999999999999", 201, "9999999999"),
        ("X-Delete-After", "9" * 200, 201, "9999999999"),
        ("X-Delete-After", " +1_000 ", 201, None),
        ("X-Delete-After", "-5", 400, b"X-Delete-After in past"),
        ("X-Delete-After", "-99999999999999999999", 400, b"X-Delete-After in past"),
        ("X-Delete-After", "abc", 400, b"Non-integer X-Delete-After"),
        ("X-Delete-After", "1e3", 400, b"Non-integer X-Delete-After"),
        ("X-Delete-After", "1__0", 400, b"Non-integer X-Delete-After"),
        ("X-Delete-At", "99999999999999999999999", 201, "9999999999"),
        ("X-Delete-At", "-99999999999999999999999", 400, b"X-Delete-At in past"),
        ("X-Delete-At", "100.0", 400, b"Non-integer X-Delete-At"),
        ("X-Delete-At", "0x10", 400, b"Non-integer X-Delete-At"),
    ]
    for header, value, want, expect in cases:
        status, _, body = req(port, token, "PUT", obj, {header: value}, b"data")
        check(status == want, "PUT %s: %s -> %d (%r), want %d" % (header, value[:30], status,
                                                                  body[:60], want))
        if want == 400:
            check(body == expect, "PUT %s: %s body %r" % (header, value[:30], body[:60]))
            continue
        status, headers, _ = req(port, token, "HEAD", obj)
        at = headers.get("x-delete-at")
        if expect is None:
            ok = at is not None and abs(int(at) - (now + 1000)) < 60
        else:
            ok = at == expect
        check(status == 200 and ok, "HEAD after %s: %s -> X-Delete-At %r" % (header, value[:30],
                                                                              at))
    status, _, _ = req(port, token, "POST", obj, {"X-Delete-After": "9" * 40})
    check(status == 202, "POST with a huge X-Delete-After: %d" % status)
    status, headers, _ = req(port, token, "HEAD", obj)
    check(headers.get("x-delete-at") == "9999999999",
          "X-Delete-At after the POST: %r" % headers.get("x-delete-at"))


# ---- 4 ---------------------------------------------------------------------------------------

CACHE_PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging mc listing_formats "
                  "tempauth proxy-server")


def memcache_servers(cluster):
    port = cluster.start_proxy(
        "proxy-mc-name", pipeline=CACHE_PIPELINE,
        filters="[filter:mc]\nuse = egg:swift#memcache\nmemcache_servers = localhost:%d\n"
        % cluster.memcached_port)
    try:
        path, token = auth(port)
        check(req(port, token, "PUT", path + "/mc")[0] in (201, 202),
              "a container PUT through memcache_servers = localhost:port")
        check(req(port, token, "HEAD", path + "/mc")[0] == 204, "and its HEAD")
    except Exception as e:  # noqa: BLE001
        check(False, "memcache_servers = localhost:port: %r" % e)
    for bad in ("[::1", "127.0.0.1:port", "::1:11211"):
        name = "proxy-mc-bad%d" % abs(hash(bad))
        try:
            cluster.start_proxy(
                name, pipeline=CACHE_PIPELINE,
                filters="[filter:mc]\nuse = egg:swift#memcache\nmemcache_servers = %s\n" % bad)
            check(False, "a proxy with memcache_servers = %s started" % bad)
        except RuntimeError:
            log = open(os.path.join(cluster.root, name + ".out"), errors="replace").read()
            check("memcache_servers" in log and bad in log,
                  "the start-up error names memcache_servers and %s: %r" % (bad, log[-300:]))


# ---- 5 ---------------------------------------------------------------------------------------

class UnsizedObjectServer(BaseHTTPRequestHandler):
    """An object server whose GET answers chunked, without Content-Length: half the body,
    then a pause until the test has seen that half arrive (at most 5 s), then the rest."""
    protocol_version = "HTTP/1.1"
    half = b"h" * (1 << 20)
    seen = threading.Event()

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Timestamp", "1700000000.00000")
        self.send_header("X-Backend-Timestamp", "1700000000.00000")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.wfile.write(b"%x\r\n" % len(self.half) + self.half + b"\r\n")
            self.wfile.flush()
            type(self).seen.wait(5)
            self.wfile.write(b"%x\r\n" % len(self.half) + self.half + b"\r\n0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the proxy gave up on it


def unsized_get(cluster):
    fake = ThreadingHTTPServer(("127.0.0.1", 0), UnsizedObjectServer)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    # A swift_dir of its own: the cluster's swift.conf and account and container rings, and an
    # object ring whose three devices are the fake server.
    etc = os.path.join(cluster.root, "etc-unsized")
    os.makedirs(etc)
    for name in ("swift.conf", "account.ring.gz", "container.ring.gz"):
        shutil.copy(os.path.join(cluster.etc, name), etc)
    builder = os.path.join(etc, "object.builder")
    cluster.ring_builder(builder, "create", "6", "3", "0")
    for n in range(3):
        cluster.ring_builder(builder, "add", "r1z%d-127.0.0.1:%d/fake%d"
                             % (n + 1, fake.server_address[1], n), "100")
    cluster.ring_builder(builder, "rebalance")
    real_etc, cluster.etc = cluster.etc, etc
    try:
        port = cluster.start_proxy("proxy-unsized")
    finally:
        cluster.etc = real_etc
    try:
        path, token = auth(port)
        req(port, token, "PUT", path + "/unsized")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("GET", path + "/unsized/o", headers={"X-Auth-Token": token})
        started = time.monotonic()
        resp = conn.getresponse()
        first = resp.read(len(UnsizedObjectServer.half))
        waited = time.monotonic() - started
        UnsizedObjectServer.seen.set()
        rest = resp.read()
        conn.close()
        print("first half after %.2f s" % waited)
        check(resp.status == 200, "GET of an unsized object: %d" % resp.status)
        check(resp.getheader("Content-Length") is None and
              resp.getheader("Transfer-Encoding") == "chunked",
              "streamed chunked: %r" % resp.getheaders())
        check(len(first) == len(UnsizedObjectServer.half) and waited < 3,
              "the first half arrives before the backend finished: %d bytes after %.2f s"
              % (len(first), waited))
        check(first + rest == UnsizedObjectServer.half * 2,
              "the whole body: %d bytes" % (len(first) + len(rest)))
    finally:
        UnsizedObjectServer.seen.set()
        fake.shutdown()
        fake.server_close()


# ---- 6 ---------------------------------------------------------------------------------------

def hanging_listener(port):
    """A socket on `port` that takes connections (the kernel does) and never answers."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    return s


class SilentAfterBody:
    """An object server on `port` that answers 100 Continue, takes the whole body and then
    never gives its final answer."""

    def __init__(self, port):
        self.sock = hanging_listener(port)
        self.conns = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.take_body, args=(c,), daemon=True).start()

    @staticmethod
    def take_body(c):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                got = c.recv(65536)
                if not got:
                    return
                data += got
            head, rest = data.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            while len(rest) < length:
                got = c.recv(65536)
                if not got:
                    return
                rest += got
        except OSError:
            pass

    def close(self):
        # shutdown() first: a bare close() leaves the socket listening while serve()'s accept()
        # blocks on it, so the port would still take connections.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for c in self.conns:
            c.close()


def timed_put(port, token, obj, body=b"p" * 10):
    started = time.monotonic()
    status, _, _ = req(port, token, "PUT", obj, {}, body)
    return status, time.monotonic() - started


def put_fanout(cluster):
    # node_timeout is 1 s in every proxy of the cluster; post_quorum_timeout is made small
    # so that it stands apart from node_timeout.
    port, path, token = fresh_proxy(cluster, "proxy-fanout", "post_quorum_timeout = 0.1\n")
    req(port, token, "PUT", path + "/fan")
    obj = path + "/fan/o"
    primaries = cluster.primaries("fan", "o")

    # Warm up: connections and info cached.
    status, elapsed = timed_put(port, token, obj)
    check(status == 201, "PUT with every node up: %d" % status)
    print("PUT with every node up: %.2f s" % elapsed)

    n = primaries[0]
    cluster.stop("object", n)
    hang = hanging_listener(cluster.ports["object"][n])
    try:
        status, elapsed = timed_put(port, token, obj)
        print("PUT with one hanging primary: %.2f s" % elapsed)
        check(status == 201, "PUT with one hanging primary: %d" % status)
        check(elapsed < 1.8, "one hanging primary costs one node_timeout: %.2f s" % elapsed)
    finally:
        hang.close()
    cluster.start("object", n)

    # Two hanging primaries: one at a time, that was two node_timeouts before the handoff
    # took over; at once, it is one.
    port, path, token = fresh_proxy(cluster, "proxy-fanout-2", "post_quorum_timeout = 0.1\n")
    two = primaries[:2]
    hangs = []
    for n in two:
        cluster.stop("object", n)
        hangs.append(hanging_listener(cluster.ports["object"][n]))
    try:
        status, elapsed = timed_put(port, token, obj)
        print("PUT with two hanging primaries: %.2f s (%d)" % (elapsed, status))
        check(elapsed < 1.8, "two hanging primaries cost one node_timeout, not two: %.2f s"
              % elapsed)
    finally:
        for h in hangs:
            h.close()
    for n in two:
        cluster.start("object", n)

    # A primary that takes the body and never answers: a quorum answered, so the PUT ends
    # post_quorum_timeout (0.1 s) later, not node_timeout (1 s).
    port, path, token = fresh_proxy(cluster, "proxy-fanout-3", "post_quorum_timeout = 0.1\n")
    n = primaries[0]
    cluster.stop("object", n)
    silent = SilentAfterBody(cluster.ports["object"][n])
    try:
        times = []
        for _ in range(3):
            status, elapsed = timed_put(port, token, obj)
            times.append(elapsed)
            check(status == 201, "PUT with a silent primary: %d" % status)
        times.sort()
        print("PUTs with a primary that never answers after the body: %r" %
              ["%.2f" % t for t in times])
        check(times[1] < 0.8, "a straggler costs post_quorum_timeout, not node_timeout: %.2f s"
              % times[1])
    finally:
        silent.close()
    cluster.start("object", n)


def main():
    with procs.TempDir("apus-proxy-limits-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        # A small max_file_size for the proxies started from here on.
        with open(os.path.join(cluster.etc, "swift.conf"), "a") as f:
            f.write("\n[swift-constraints]\nmax_file_size = %d\n" % MAX_FILE_SIZE)
        steps = (max_file_size, delete_headers, memcache_servers, unsized_get, put_fanout,
                 large_listings)
        only = os.environ.get("APUS_STEPS")
        for step in steps:
            if only and step.__name__ not in only.split(","):
                continue
            print("---", step.__name__)
            try:
                step(cluster)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
    print("proxy limits:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
