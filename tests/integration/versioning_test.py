#!/usr/bin/env python3
"""Object versioning and legacy versioned writes (issue 14) on a real cluster
(tests/support/cluster.py), with the versioned_writes filter in an Apus proxy and in a stock
swift-proxy-server on the same config and storage:

1. Object versioning through Apus: enable it on a container, overwrite an object, list the
   versions (is_latest, version_id), read an old version, delete (a delete marker becomes the
   latest), restore an old version with PUT ?version-id, delete one version.
2. The layout is Swift's: the stock proxy reads what Apus wrote (the same listings, bodies and
   version ids) and Apus reads what the stock proxy wrote.
3. Legacy modes: X-Versions-Location (stack: DELETE brings the previous version back) and
   X-History-Location (history: DELETE leaves a marker), the same through both proxies.

usage: versioning_test.py <build-dir>
"""
import http.client
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
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats tempauth "
            "copy slo dlo versioned_writes symlink proxy-logging proxy-server")
FILTERS = ("[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:dlo]\nuse = egg:swift#dlo\n"
           "[filter:versioned_writes]\nuse = egg:swift#versioned_writes\n"
           "allow_versioned_writes = true\nallow_object_versioning = true\n"
           "[filter:symlink]\nuse = egg:swift#symlink\n")
MARKER = "application/x-deleted;swift_versions_deleted=1"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def request(port, method, path, headers=None, body=b""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        headers = dict(headers or {})
        if body or method in ("PUT", "POST"):
            headers.setdefault("Content-Length", str(len(body)))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body or None)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


class Client:
    def __init__(self, port):
        self.port = port
        _, h, _ = request(port, "GET", "/auth/v1.0",
                          {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
        self.token = h.get("x-auth-token", "")

    def __call__(self, method, path, headers=None, body=b""):
        h = dict(headers or {})
        h["X-Auth-Token"] = self.token
        return request(self.port, method, "/v1/AUTH_test" + path, h, body)

    def versions(self, container, query=""):
        s, _, body = self("GET", "/%s?versions&format=json%s" % (container, query))
        check(s == 200, "versions listing of %s: %d %r" % (container, s, body[:200]))
        return json.loads(body) if s == 200 else []


def normalized(listing):
    return [{k: v for k, v in e.items() if k != "last_modified"} for e in listing]


def object_versioning(apus, swift):
    s, h, _ = apus("PUT", "/ov", {"X-Versions-Enabled": "true"})
    check(s in (201, 202), "container PUT with X-Versions-Enabled: %d" % s)
    s, h, _ = apus("HEAD", "/ov")
    check(h.get("x-versions-enabled") == "True", "X-Versions-Enabled on HEAD: %r" % h)
    s, h1, _ = apus("PUT", "/ov/o", {"Content-Type": "text/one"}, b"one")
    check(s == 201 and h1.get("x-object-version-id"), "first PUT: %d %r" % (s, h1))
    v1 = h1.get("x-object-version-id")
    check(h1.get("etag") == "f97c5d29941bfb1b2fdab0874906ab82", "first PUT etag: %r" % h1)
    s, h2, _ = apus("PUT", "/ov/o", {"Content-Type": "text/two"}, b"two!")
    v2 = h2.get("x-object-version-id")
    check(s == 201 and v2 and v2 > v1, "second PUT: %d %r" % (s, h2))
    s, h, body = apus("GET", "/ov/o")
    check(s == 200 and body == b"two!" and h.get("x-object-version-id") == v2,
          "GET latest: %d %r %r" % (s, body, h))
    check(h.get("content-type") == "text/two", "latest content type: %r" % h)
    s, h, body = apus("GET", "/ov/o?version-id=" + v1)
    check(s == 200 and body == b"one" and h.get("x-object-version-id") == v1,
          "GET old version: %d %r %r" % (s, body, h))
    listing = apus.versions("ov")
    check([(e["name"], e["version_id"], e["is_latest"], e["bytes"]) for e in listing] ==
          [("o", v2, True, 4), ("o", v1, False, 3)], "versions listing: %r" % listing)
    s, _, body = apus("GET", "/ov?format=json")
    plain = json.loads(body) if s == 200 else []
    check(len(plain) == 1 and plain[0]["bytes"] == 4 and plain[0].get("version_symlink") is True
          and plain[0]["symlink_path"] == "/v1/AUTH_test/ov/o?version-id=" + v2,
          "plain listing: %r" % plain)
    # Without a format the answer is JSON too (listing_formats leaves it alone, though SLO runs
    # the listing as a subrequest of its own).
    s, h, body = apus("GET", "/ov?versions")
    check(s == 200 and h.get("content-type", "").startswith("application/json") and
          [e["version_id"] for e in json.loads(body or b"[]")] == [v2, v1] and
          "x-backend-listing-formatted" not in h, "?versions without format: %d %r %r" % (s, h, body))
    s, _, body = apus("GET", "/ov?versions&format=xml")
    check(s == 406, "?versions&format=xml is not acceptable: %d" % s)
    # The stock proxy reads the same versions.
    check(normalized(swift.versions("ov")) == normalized(listing),
          "stock proxy's versions listing: %r" % swift.versions("ov"))
    s, h, body = swift("GET", "/ov/o?version-id=" + v1)
    check(s == 200 and body == b"one", "stock proxy reads Apus's old version: %d %r" % (s, body))
    s, h, body = swift("GET", "/ov/o")
    check(s == 200 and body == b"two!" and h.get("x-object-version-id") == v2,
          "stock proxy reads Apus's latest: %d %r" % (s, h))
    # DELETE: a marker on top, the object gone.
    s, h, _ = apus("DELETE", "/ov/o")
    marker = h.get("x-object-version-id")
    check(s == 204 and marker and marker > v2, "DELETE: %d %r" % (s, h))
    s, _, _ = apus("GET", "/ov/o")
    check(s == 404, "GET after DELETE: %d" % s)
    s, h, _ = apus("HEAD", "/ov/o?version-id=" + marker)
    check(s == 404 and h.get("content-type") == MARKER, "HEAD of the marker: %d %r" % (s, h))
    listing = apus.versions("ov")
    check([(e["version_id"], e["is_latest"], e["content_type"]) for e in listing][0] ==
          (marker, True, MARKER), "marker is latest: %r" % listing)
    check(normalized(swift.versions("ov")) == normalized(listing), "stock listing with marker")
    # Restore v1.
    s, h, _ = apus("PUT", "/ov/o?version-id=" + v1, {}, b"")
    check(s == 201 and h.get("x-object-version-id") == v1, "restore PUT: %d %r" % (s, h))
    s, h, body = apus("GET", "/ov/o")
    check(s == 200 and body == b"one" and h.get("x-object-version-id") == v1,
          "GET restored: %d %r" % (s, body))
    s, h, body = swift("GET", "/ov/o")
    check(s == 200 and body == b"one", "stock GET restored: %d %r" % (s, body))
    # Bad version-ids.
    s, _, _ = apus("GET", "/ov/o?version-id=junk")
    check(s == 400, "junk version-id: %d" % s)
    s, _, _ = apus("POST", "/ov/o?version-id=" + v1)
    check(s == 400, "POST with version-id: %d" % s)
    s, _, _ = apus("PUT", "/ov/o?version-id=" + v1, {}, b"body")
    check(s == 400, "PUT version-id with a body: %d" % s)
    s, _, _ = apus("PUT", "/ov/o?version-id=1234567890.12345", {}, b"")
    check(s == 404, "PUT of a version that does not exist: %d" % s)
    # The stock proxy writes, Apus reads.
    s, h, _ = swift("PUT", "/ov/o", {"Content-Type": "text/three"}, b"three")
    v3 = h.get("x-object-version-id")
    check(s == 201 and v3, "stock PUT: %d %r" % (s, h))
    s, h, body = apus("GET", "/ov/o")
    check(s == 200 and body == b"three" and h.get("x-object-version-id") == v3,
          "Apus reads the stock proxy's version: %d %r %r" % (s, body, h))
    check(normalized(swift.versions("ov")) == normalized(apus.versions("ov")),
          "listings agree after a stock write")
    # Delete one version, then the container refuses to go while versions remain.
    s, h, _ = apus("DELETE", "/ov/o?version-id=" + v2)
    check(s == 204 and h.get("x-object-version-id") == v2, "DELETE of one version: %d %r" % (s, h))
    check(v2 not in [e["version_id"] for e in apus.versions("ov")], "v2 gone")
    s, _, _ = apus("POST", "/ov", {"X-Versions-Enabled": "false"})
    for e in apus.versions("ov"):
        apus("DELETE", "/ov/%s?version-id=%s" % (urllib.parse.quote(e["name"]), e["version_id"]))
    check(apus.versions("ov") == [], "every version deleted: %r" % apus.versions("ov"))
    s, _, _ = apus("DELETE", "/ov")
    check(s == 204, "DELETE of the emptied container: %d" % s)


def legacy(apus, swift):
    for mode, header in (("stack", "X-Versions-Location"), ("history", "X-History-Location")):
        c = "leg-" + mode
        apus("PUT", "/%s-v" % c)
        s, _, _ = apus("PUT", "/" + c, {header: c + "-v"})
        check(s in (201, 202), "%s container PUT: %d" % (mode, s))
        s, h, _ = apus("HEAD", "/" + c)
        check(h.get(header.lower()) == c + "-v", "%s header shown: %r" % (mode, h))
        s, h, _ = swift("HEAD", "/" + c)
        check(h.get(header.lower()) == c + "-v", "%s header shown by stock: %r" % (mode, h))
        apus("PUT", "/%s/o" % c, {}, b"first")
        apus("PUT", "/%s/o" % c, {}, b"second")
        s, _, body = apus("GET", "/%s-v?format=json" % c)
        names = [e["name"] for e in json.loads(body)] if s == 200 else []
        check(len(names) == 1 and names[0].startswith("001o/"), "%s versions: %r" % (mode, names))
        s, _, _ = apus("DELETE", "/%s/o" % c)
        check(s == 204, "%s DELETE: %d" % (mode, s))
        s, _, body = apus("GET", "/%s/o" % c)
        if mode == "stack":
            check(s == 200 and body == b"first", "stack DELETE restores: %d %r" % (s, body))
        else:
            check(s == 404, "history DELETE removes: %d" % s)
            s, _, body = apus("GET", "/%s-v?format=json" % c)
            types = [e["content_type"] for e in json.loads(body)] if s == 200 else []
            check(types[-1:] == [MARKER] and len(types) == 3, "history marker: %r" % types)
    s, _, body = apus("PUT", "/bad", {"X-Versions-Location": "a", "X-History-Location": "b"})
    check(s == 400, "both locations: %d %r" % (s, body))


def main():
    with procs.TempDir("apus-versioning-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        port = cluster.start_proxy("proxy-versioning", pipeline=PIPELINE, filters=FILTERS)
        stock = cluster.start_stock_proxy("proxy-versioning")
        apus, swift = Client(port), Client(stock)
        s, _, body = request(port, "GET", "/info")
        info = json.loads(body)
        check(info.get("object_versioning") == {} and info.get("versioned_writes") ==
              {"allowed_flags": ["x-versions-location", "x-history-location"]},
              "/info: %r" % {k: info.get(k) for k in ("object_versioning", "versioned_writes")})
        object_versioning(apus, swift)
        legacy(apus, swift)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("versioning: OK")


if __name__ == "__main__":
    main()
