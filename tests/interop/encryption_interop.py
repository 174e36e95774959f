#!/usr/bin/env python3
"""Encryption at rest: apus-proxy-server's keymaster and encryption beside stock
swift-proxy-server's (Debian's 2.30.1), on one cluster with the same root secret.

What one proxy writes the other reads: bodies (whole, ranges, several ranges), ETags, user
metadata (set by PUT and by POST), container listings' hashes, conditional GETs, copies and
non-ASCII names, for both meta versions Swift writes (2, its default, and 3). The storage
servers hold ciphertext and Swift's crypto sysmeta, checked by a direct GET. A PUT whose ETag
does not match its body is refused (422) and stores nothing; a proxy with a different root
secret cannot read the objects (500, as Swift answers).

usage: encryption_interop.py <build-dir>
"""
import base64
import hashlib
import json
import os
import sys
import urllib.parse

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []

SECRET = base64.b64encode(b"0123456789abcdef" * 4).decode()
OTHER_SECRET = base64.b64encode(b"fedcba9876543210" * 4).decode()
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats "
            "tempauth copy slo dlo keymaster encryption proxy-logging proxy-server")


def filters(secret, version, keymaster_extra=""):
    return ("[filter:copy]\nuse = egg:swift#copy\n[filter:slo]\nuse = egg:swift#slo\n"
            "[filter:dlo]\nuse = egg:swift#dlo\n"
            "[filter:keymaster]\nuse = egg:swift#keymaster\nencryption_root_secret = %s\n"
            "meta_version_to_write = %s\n%s"
            "[filter:encryption]\nuse = egg:swift#encryption\n" % (secret, version,
                                                                   keymaster_extra))


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Proxy:
    def __init__(self, name, port):
        self.name, self.port = name, port
        status, headers, _ = procs.request(port, "GET", "/auth/v1.0",
                                           {"X-Auth-User": "test:tester",
                                            "X-Auth-Key": "testing"})
        assert status == 200, status
        self.token = headers["x-auth-token"]

    def send(self, method, path, headers=None, body=None):
        h = {"X-Auth-Token": self.token}
        h.update(headers or {})
        return procs.request(self.port, method, "/v1/AUTH_test" + path, h, body)


def object_node(cluster, container, name):
    """(port, device, partition) of a primary object server of /AUTH_test/container/name."""
    part, nodes = cluster.placement(container, name)
    return cluster.ports["object"][nodes[0]], "sd%d" % nodes[0], part


def round_trip(writer, reader, cluster, container, tag):
    quoted = urllib.parse.quote
    bodies = {"empty": b"", "one": b"x", "odd": os.urandom(17),
              "big": os.urandom(300000), u"caf\u00e9 \u2603/obj": os.urandom(1000)}
    for name, body in bodies.items():
        path = "/%s/%s" % (container, quoted(name))
        what = "%s: %s writes %r, %s reads" % (tag, writer.name, name, reader.name)
        status, headers, _ = writer.send("PUT", path, {"X-Object-Meta-Color": "bl\u00fce".encode(
            "utf-8").decode("latin-1"), "X-Object-Meta-Empty": "", "Content-Type": "a/b"}, body)
        check(status == 201, what + ": PUT " + str(status))
        check(headers.get("etag", "").strip('"') == hashlib.md5(body).hexdigest(),
              what + ": PUT etag " + headers.get("etag", ""))
        status, headers, got = reader.send("GET", path)
        check(status == 200 and got == body, what + ": GET %d, %d bytes" % (status, len(got)))
        check(headers.get("etag", "").strip('"') == hashlib.md5(body).hexdigest(),
              what + ": GET etag")
        check(headers.get("x-object-meta-color", "").encode("latin-1") == "bl\u00fce".encode(),
              what + ": metadata %r" % headers.get("x-object-meta-color"))
        check(not any(k.startswith(("x-object-sysmeta-crypto", "x-object-transient-sysmeta"))
                      for k in headers), what + ": crypto sysmeta shown")
        if len(body) > 20:
            status, headers, got = reader.send("GET", path, {"Range": "bytes=3-19"})
            check(status == 206 and got == body[3:20], what + ": range %d" % status)
            status, headers, got = reader.send("GET", path, {"Range": "bytes=-5"})
            check(status == 206 and got == body[-5:], what + ": suffix range %d" % status)
            status, headers, got = reader.send("GET", path, {"Range": "bytes=1-2,10-15"})
            check(status == 206 and body[1:3] in got and body[10:16] in got and
                  headers.get("content-type", "").startswith("multipart/byteranges"),
                  what + ": two ranges %d" % status)
        etag = hashlib.md5(body).hexdigest()
        status, _, _ = reader.send("GET", path, {"If-Match": '"%s"' % etag})
        check(status == 200, what + ": If-Match %d" % status)
        status, _, _ = reader.send("GET", path, {"If-None-Match": etag})
        check(status == 304, what + ": If-None-Match %d" % status)
        status, _, _ = reader.send("HEAD", path, {"If-Match": "nope"})
        check(status == 412, what + ": If-Match mismatch %d" % status)
        # Metadata set by POST on the other side.
        status, _, _ = reader.send("POST", path, {"X-Object-Meta-Shape": "round"})
        check(status == 202, what + ": POST %d" % status)
        status, headers, _ = writer.send("HEAD", path)
        check(headers.get("x-object-meta-shape") == "round" and
              headers.get("etag", "").strip('"') == etag, what + ": HEAD after POST")
    # Listings: the hash is the plaintext's, on both sides.
    for proxy in (writer, reader):
        status, _, listing = proxy.send("GET", "/%s?format=json" % container)
        items = {i["name"]: i["hash"] for i in json.loads(listing)} if status == 200 else {}
        for name, body in bodies.items():
            check(items.get(name) == hashlib.md5(body).hexdigest(),
                  "%s: %s lists %r with hash %r" % (tag, proxy.name, name, items.get(name)))


def at_rest(cluster, container):
    """A direct GET from an object server: ciphertext and Swift's crypto sysmeta."""
    body = b"plaintext that must not be stored as it is" * 10
    apus = cluster.apus
    apus.send("PUT", "/%s/at-rest" % container, {"X-Object-Meta-Secret": "hidden"}, body)
    port, device, partition = object_node(cluster, container, "at-rest")
    status, headers, stored = procs.request(
        port, "GET", "/%s/%d/AUTH_test/%s/at-rest" % (device, partition, container))
    check(status == 200 and len(stored) == len(body) and stored != body and
          b"plaintext" not in stored, "stored body is ciphertext (%d)" % status)
    check("x-object-sysmeta-crypto-body-meta" in headers and
          "x-object-sysmeta-crypto-etag" in headers and
          "x-object-sysmeta-crypto-etag-mac" in headers, "crypto sysmeta stored")
    check(headers.get("etag", "").strip('"') == hashlib.md5(stored).hexdigest(),
          "object server's etag is the ciphertext's")
    check("x-object-meta-secret" not in headers and
          "x-object-transient-sysmeta-crypto-meta-secret" in headers, "user metadata encrypted")


def refusals(cluster, container):
    apus = cluster.apus
    status, _, _ = apus.send("PUT", "/%s/bad-etag" % container, {"Etag": "0" * 32}, b"data")
    check(status == 422, "PUT with a wrong Etag: %d" % status)
    status, _, _ = apus.send("HEAD", "/%s/bad-etag" % container)
    check(status == 404, "nothing stored after a 422: %d" % status)
    status, _, _ = apus.send("PUT", "/%s/good-etag" % container,
                             {"Etag": hashlib.md5(b"data").hexdigest()}, b"data")
    check(status == 201, "PUT with the right Etag: %d" % status)
    # Another root secret cannot read it: Swift would send garbage, Apus refuses.
    status, _, got = cluster.other.send("GET", "/%s/good-etag" % container)
    check(status == 500, "another root secret cannot read: %d" % status)


def rotation(cluster, container):
    """A new active secret (with an id) beside the old one: objects of either are read; a
    proxy without the new secret cannot read what was written with it (500)."""
    rotated = cluster.rotated
    body = os.urandom(100)
    status, _, _ = rotated.send("PUT", "/%s/rotated" % container, {}, body)
    check(status == 201, "PUT with the new secret: %d" % status)
    for proxy in (rotated, cluster.swift_rotated):
        status, _, got = proxy.send("GET", "/%s/rotated" % container)
        check(status == 200 and got == body, "%s reads the new secret's: %d" % (proxy.name, status))
        status, _, got = proxy.send("GET", "/%s/good-etag" % container)
        check(status == 200 and got == b"data",
              "%s reads the old secret's: %d" % (proxy.name, status))
        status, _, _ = proxy.send("GET", "/%s/good-etag" % container,
                                  {"If-None-Match": hashlib.md5(b"data").hexdigest()})
        check(status == 304, "%s: If-None-Match on the old secret's: %d" % (proxy.name, status))
    for proxy in (cluster.apus, cluster.swift):
        status, _, _ = proxy.send("GET", "/%s/rotated" % container)
        check(status == 500, "%s without the new secret: %d" % (proxy.name, status))


def copies(cluster, container):
    body = os.urandom(5000)
    cluster.swift.send("PUT", "/%s/src" % container, {"X-Object-Meta-K": "v"}, body)
    status, _, _ = cluster.apus.send("PUT", "/%s/dst" % container,
                                     {"X-Copy-From": "/%s/src" % container}, b"")
    check(status == 201, "copy by apus: %d" % status)
    status, headers, got = cluster.swift.send("GET", "/%s/dst" % container)
    check(status == 200 and got == body and headers.get("x-object-meta-k") == "v",
          "copy read by swift: %d" % status)


def main():
    with procs.TempDir("apus-encryption-interop-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        for version in ("2", "3"):
            name = "proxy-enc-v" + version
            apus_port = cluster.start_proxy(name, pipeline=PIPELINE,
                                            filters=filters(SECRET, version))
            cluster.apus = Proxy("apus", apus_port)
            cluster.swift = Proxy("swift", cluster.start_stock_proxy(name))
            container = "enc" + version
            cluster.apus.send("PUT", "/" + container)
            cluster.apus.send("PUT", "/" + container + "b")
            print("--- meta version", version)
            round_trip(cluster.apus, cluster.swift, cluster, container, "v" + version)
            round_trip(cluster.swift, cluster.apus, cluster, container + "b", "v" + version)
        cluster.other = Proxy("other", cluster.start_proxy(
            "proxy-other", pipeline=PIPELINE, filters=filters(OTHER_SECRET, "2")))
        rotated_filters = filters(SECRET, "2", "encryption_root_secret_new = %s\n"
                                  "active_root_secret_id = new\n" % OTHER_SECRET)
        cluster.rotated = Proxy("apus-rotated", cluster.start_proxy(
            "proxy-rotated", pipeline=PIPELINE, filters=rotated_filters))
        cluster.swift_rotated = Proxy("swift-rotated", cluster.start_stock_proxy("proxy-rotated"))
        for step in (at_rest, refusals, rotation, copies):
            print("---", step.__name__)
            try:
                step(cluster, "enc2")
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
    print("encryption interop:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
