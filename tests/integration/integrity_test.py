#!/usr/bin/env python3
"""Integrity is not traded for speed: bits flipped on the way from the proxy to an object
server, and on disk, are caught, on Apus's fast path and on Swift's.

An object PUT goes from Apus's proxy to each replica as a MIME body whose footer holds the
body's ETag, MD5 and CRC32C. An Apus object server checks the CRC32C and takes the proxy's
MD5; Swift's checks the MD5 of what it got against the footer's ETag. A relay on one primary's
ring port flips one bit of the body on its way in:

1. fast path (Apus object server behind the relay), for a 4 KiB and a 3 MiB body: that replica
   answers 422 and stores nothing, the client gets 201 and the right ETag, every GET returns
   the body byte for byte, and the good replicas store the body's CRC32C (computed here).
2. Swift's path (Swift's object server behind the relay): the same, refused by Swift's MD5
   check. Swift's own proxy sends a plain body without an ETag, so that replica would keep
   the damaged bytes under an ETag to match: the footer is what makes this one safe.
3. on disk: one bit flipped in a stored .data file (and, apart, an ETag changed on disk). A whole-object GET of an Apus-written
   object (checked by its stored CRC32C) and of a Swift-written one (no CRC32C: checked by
   MD5) quarantines the file, the proxy still serves the object from another replica, and a
   verified read ends short instead of sending the last chunk; the object auditor, which
   checks the MD5 at rest, quarantines a damaged CRC32C-bearing file too.

usage: integrity_test.py <build-dir>
"""
import hashlib
import http.client
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from crc32c import crc32c_hex  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def body_of(size, seed):
    """Lowercase letters with one 'Z' in the middle: the byte the relay flips."""
    letters = bytes(ord("a") + i % 26 for i in range(256))
    body = bytearray(random.Random(seed).randbytes(size).translate(letters))
    body[size // 2] = ord("Z")
    return bytes(body)


class FlippingRelay:
    """Listens on `port` and relays every connection to `target`. When armed, it flips the
    lowest bit of the first 'Z' a request body brings (after the end of a request head), once.
    The bodies of these tests hold no other 'Z'; heads are skipped."""

    def __init__(self, port, target):
        self.target = target
        self.armed = False
        self.flips = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def close(self):
        """Stops listening before it returns. A bare close() does not: the accept() blocked in
        the other thread keeps the socket listening until a client comes, so a test's wait for
        the server that takes the port back was answered by the relay, and the next request
        found the port closed."""
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() with an error
        self.acceptor.join(timeout=10)
        self.sock.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, src, dst, inbound):
        tail = b""  # the last bytes seen, to find a head's end split across reads
        in_body = False
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if inbound:
                    seen = tail + data
                    if not in_body and b"\r\n\r\n" in seen:
                        in_body = True
                    tail = seen[-3:]
                    with self.lock:
                        if self.armed and in_body:
                            at = data.find(b"Z")
                            if at >= 0:
                                data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
                                self.armed = False
                                self.flips += 1
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def behind_relay(cluster, n, swift_server=False):
    """Moves node n's object server to a port of its own (Swift's when `swift_server`) and
    puts a FlippingRelay on its ring port. Returns the relay."""
    ring_port = cluster.ports["object"][n]
    if ("object", n) in cluster.procs:
        cluster.stop("object", n)
    inner = procs.free_port()
    cluster.ports["object"][n] = inner
    try:
        cluster.start("object", n)
        if swift_server:
            start_swift_object(cluster, n)
    finally:
        cluster.ports["object"][n] = ring_port
    relay = FlippingRelay(ring_port, inner)
    relay.inner = inner
    return relay


def start_swift_object(cluster, n):
    """Swift's object server for node n, on the port node n's config has now."""
    conf = os.path.join(cluster.etc, "object-%d.conf.swift" % n)
    if os.path.exists(conf):
        os.unlink(conf)  # start_swift writes it again from the Apus server's config
    cluster.start_swift("object", n)


def unrelay(cluster, n, relay):
    """Node n's Apus object server back on its ring port."""
    relay.close()
    cluster.stop("object", n)
    cluster.start("object", n)


def data_files(cluster, n, container, obj):
    """The .data files of an object on node n."""
    from swift.common import utils
    utils.set_swift_dir(cluster.etc)
    part, _ = cluster.placement(container, obj)
    digest = utils.hash_path("AUTH_test", container, obj)
    d = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects", str(part), digest[-3:],
                     digest)
    if not os.path.isdir(d):
        return []
    return [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".data")]


def settled_data_files(cluster, n, container, obj, timeout=15):
    """The .data files of an object on node n once one is there (or `timeout` has passed): the
    proxy answers a PUT once a quorum has stored it and waits only post_quorum_timeout for the
    last replica, which a slow (sanitized, shared) machine may not commit in that time."""
    deadline = time.monotonic() + timeout
    while True:
        files = data_files(cluster, n, container, obj)
        if files or time.monotonic() > deadline:
            return files
        time.sleep(0.05)


def stored_metadata(path):
    from swift.obj.diskfile import read_metadata
    with open(path, "rb") as f:
        return read_metadata(f)


def quarantined(cluster, n):
    d = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "quarantined", "objects")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def direct_get(cluster, n, container, obj, port=None, headers=None):
    """GET from node n's object server: (status, body read until the server stopped)."""
    part, _ = cluster.placement(container, obj)
    conn = http.client.HTTPConnection("127.0.0.1", port or cluster.ports["object"][n], timeout=20)
    conn.request("GET", "/sd%d/%d/AUTH_test/%s/%s" % (n, part, container, obj),
                 headers=headers or {})
    resp = conn.getresponse()
    body = b""
    try:
        body = resp.read()
    except http.client.IncompleteRead as e:
        body = e.partial
    conn.close()
    return resp.status, body


def logged(cluster, n, text):
    """Whether node n's object server logs `text` within a few seconds."""
    return text in procs.wait_for_text(os.path.join(cluster.root, "object-%d.log" % n), text)


def flip_in_transit(cluster, swift_server):
    url, token = cluster.connect()
    container = "transit-swift" if swift_server else "transit-apus"
    swift.put_container(url, token, container)
    kind = "Swift's" if swift_server else "Apus's"
    for size in (4096, 3 << 20):
        name = "o%d" % size
        body = body_of(size, size)
        n = cluster.primaries(container, name)[0]
        relay = behind_relay(cluster, n, swift_server)
        want_crc = crc32c_hex(body)
        try:
            relay.armed = True
            etag = swift.put_object(url, token, container, name, body)
            check(relay.flips == 1, "%s, %d B: the relay flipped a bit" % (kind, size))
            check(etag == hashlib.md5(body).hexdigest(),
                  "%s, %d B: the client's ETag is the body's: %s" % (kind, size, etag))
            status, _ = direct_get(cluster, n, container, name, port=relay.inner)
            check(status == 404, "%s, %d B: the damaged replica was not stored (GET %d)"
                  % (kind, size, status))
            check(not data_files(cluster, n, container, name),
                  "%s, %d B: no .data on the damaged replica" % (kind, size))
            for _ in range(4):
                _, got = swift.get_object(url, token, container, name)
                check(got == body, "%s, %d B: GET through the proxy returns the body"
                      % (kind, size))
            if not swift_server:
                check(logged(cluster, n, "does not match the proxy's"),
                      "the object server logged the CRC32C mismatch")
            for good in cluster.primaries(container, name)[1:]:
                files = settled_data_files(cluster, good, container, name)
                check(len(files) == 1, "node %d holds the object" % good)
                if files:
                    md = stored_metadata(files[0])
                    check(md.get("ETag") == hashlib.md5(body).hexdigest(),
                          "node %d stored the body's ETag" % good)
                    want = want_crc + " " + hashlib.md5(body).hexdigest()
                    check(md.get("X-Apus-Crc32C") == want,
                          "node %d stored the body's CRC32C and ETag: %r, want %s"
                          % (good, md.get("X-Apus-Crc32C"), want))
        finally:
            unrelay(cluster, n, relay)


def flip_bit_in_file(path):
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 3)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))


def flip_on_disk(cluster):
    url, token = cluster.connect()
    swift.put_container(url, token, "rot")
    size = 3 << 20  # several disk chunks: the check spans reads
    cases = []
    # An object an Apus object server wrote (CRC32C stored) and one Swift's wrote (MD5 only).
    for name, swift_written in (("apus-written", False), ("swift-written", True)):
        body = body_of(size, name)
        n = cluster.primaries("rot", name)[0]
        if swift_written:
            start_swift_object(cluster, n)
        try:
            swift.put_object(url, token, "rot", name, body)
            files = settled_data_files(cluster, n, "rot", name)  # before Swift's server stops
        finally:
            if swift_written:
                cluster.stop("object", n)
                cluster.start("object", n)
        check(len(files) == 1, "%s: one .data on node %d" % (name, n))
        if not files:
            return  # the rest needs both objects
        has_crc = "X-Apus-Crc32C" in stored_metadata(files[0])
        check(has_crc != swift_written, "%s: CRC32C stored: %s" % (name, has_crc))
        cases.append((name, body, n, files[0]))
    for name, body, n, path in cases:
        before = quarantined(cluster, n)
        flip_bit_in_file(path)
        # A verified read (what Apus's proxy asks for segments) ends short of the last chunk.
        status, got = direct_get(cluster, n, "rot", name,
                                 headers={"X-Backend-Apus-Verified-Read": "yes"})
        check(status == 200 and len(got) < len(body),
              "%s: the verified read of a damaged file ends short (%d of %d bytes)"
              % (name, len(got), len(body)))
        check(len(quarantined(cluster, n)) == len(before) + 1,
              "%s: the damaged file went to quarantine" % name)
        check(not os.path.exists(path), "%s: the damaged file is gone" % name)
        status, _ = direct_get(cluster, n, "rot", name)
        check(status == 404, "%s: the replica is gone after the read (GET %d)" % (name, status))
        _, got = swift.get_object(url, token, "rot", name)
        check(got == body, "%s: the proxy serves the object from another replica" % name)
        want = "stored CRC32C" if name == "apus-written" else "ETag and file's md5"
        check(logged(cluster, n, want), "%s: the quarantine names the check (%s)" % (name, want))
    # A plain whole GET of a damaged file (the client reads the damage once, as in Swift, but the
    # file goes): here by the stored CRC32C of the second replica.
    name, body, _, _ = cases[0]
    n = cluster.primaries("rot", name)[1]
    path = settled_data_files(cluster, n, "rot", name)[0]
    flip_bit_in_file(path)
    status, got = direct_get(cluster, n, "rot", name)
    check(status == 200 and len(got) == len(body) and got != body,
          "a plain GET of a damaged file sends it whole")
    check(not os.path.exists(path), "and the file went to quarantine")
    # The auditor checks the MD5 at rest: the third replica, damaged, goes by its hand.
    n = cluster.primaries("rot", name)[2]
    path = settled_data_files(cluster, n, "rot", name)[0]
    flip_bit_in_file(path)
    cluster.audit(n)
    check(not os.path.exists(path), "the auditor quarantined a damaged CRC32C-bearing file")
    # The stored CRC32C vouches only for the ETag it was stored with: a file whose ETag changed
    # on disk (Swift's probe test_object_failures does this) is checked by MD5 and quarantined.
    from swift.obj.diskfile import write_metadata
    swift.put_object(url, token, "rot", "etag-changed", b"VERIFY")
    n = cluster.primaries("rot", "etag-changed")[0]
    path = settled_data_files(cluster, n, "rot", "etag-changed")[0]
    md = stored_metadata(path)
    md["ETag"] = "badetag"
    with open(path, "r+b") as f:
        write_metadata(f, md)
    status, got = direct_get(cluster, n, "rot", "etag-changed")
    check(status == 200 and got == b"VERIFY", "a file with a changed ETag is read (%d)" % status)
    check(not os.path.exists(path), "and quarantined, its MD5 checked against the new ETag")
    check(logged(cluster, n, "ETag and file's md5"), "the quarantine names the MD5 check")


def main():
    with procs.TempDir("apus-integrity-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        for step in (lambda c: flip_in_transit(c, False), lambda c: flip_in_transit(c, True),
                     flip_on_disk):
            try:
                step(cluster)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                check(False, "step raised %r" % e)
    print("integrity:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
