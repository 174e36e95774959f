#!/usr/bin/env python3
"""Symlinks (issue 13) on a real cluster (tests/support/cluster.py), with the symlink middleware
in an Apus proxy and in a stock swift-proxy-server on the same config and storage:

1. What Apus stores is what Swift stores: a link's sysmeta on the object servers, and the
   container-update override ETag ("<md5>; symlink_target=...") as the container servers keep
   it in their rows (read from a container server directly).
2. Each proxy reads the other's links: GET, HEAD, ranged GET, ?symlink=get, and JSON, XML and
   plain listings, byte for byte the same from both (last_modified left out).
3. The same answers from both to the same requests: loops past symloop_max, static links whose
   target changed, PUTs with bad targets, a body, a wrong ETag, a missing target; POST's 307;
   COPY of a link with and without ?symlink=get; /info's symlink section.

usage: symlink_test.py <build-dir>
"""
import http.client
import json
import os
import re
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats tempauth "
            "copy symlink proxy-logging proxy-server")
FILTERS = ("[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:symlink]\nuse = egg:swift#symlink\n")
EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"
# Headers that must agree between the two proxies whenever either sends them.
COMPARED = ("content-type", "content-length", "etag", "content-location", "location",
            "x-symlink-target", "x-symlink-target-account", "x-symlink-target-etag",
            "x-symlink-target-bytes", "content-range", "x-object-meta-alpha")
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


def normalized(body):
    body = re.sub(rb'"last_modified": "[^"]*"', b'"last_modified": ""', body)
    return re.sub(rb"<last_modified>[^<]*</last_modified>", b"<last_modified/>", body)


class Pair:
    def __init__(self, ports):
        self.ports = ports
        self.tokens = {}
        for side, port in ports.items():
            _, h, _ = request(port, "GET", "/auth/v1.0",
                              {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
            self.tokens[side] = h.get("x-auth-token", "")

    def send(self, side, method, path, headers=None, body=b""):
        h = {k: v.replace("{side}", side) for k, v in (headers or {}).items()}
        h["X-Auth-Token"] = self.tokens[side]
        return request(self.ports[side], method, path.replace("{side}", side), h, body)

    def compare(self, what, method, path, headers=None, body=b"", expect=None,
                compare_body=True, ignore=()):
        """Both proxies get the request ("{side}" names each its own objects); they agree."""
        got = {side: self.send(side, method, path, headers, body) for side in self.ports}
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        label = "%s (%s %s)" % (what, method, path)
        check(sa == ss, "%s: status swift %d, apus %d: %r / %r" % (label, ss, sa, bs, ba))
        if expect is not None:
            check(ss == expect, "%s: swift answers %d, the test expects %d" % (label, ss, expect))
        sided = "{side}" in path + "".join((headers or {}).values())
        for name in COMPARED:
            if (name == "content-length" and not compare_body) or name in ignore:
                continue
            va, vs = ha.get(name) or "", hs.get(name) or ""
            if sided:
                va, vs = va.replace("apus", "{side}"), vs.replace("swift", "{side}")
            check(va == vs, "%s: header %s: swift %r, apus %r" % (label, name, vs, va))
        for side, h in (("apus", ha), ("swift", hs)):
            leaked = [k for k in h if "sysmeta" in k or k.startswith("x-backend")]
            check(not leaked, "%s: %s answers internal headers %r" % (label, side, leaked))
        if compare_body:
            if sided:
                ba, bs = ba.replace(b"apus", b"{side}"), bs.replace(b"swift", b"{side}")
            check(normalized(ba) == normalized(bs),
                  "%s: body swift %r, apus %r" % (label, bs[:300], ba[:300]))
        return got


def direct_container_listing(cluster, container):
    """The JSON listing one container server holds (its rows as they are)."""
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    part, devs = Ring(os.path.join(cluster.etc, "container.ring.gz")).get_nodes(
        "AUTH_test", container)
    d = devs[0]
    s, _, body = request(d["port"], "GET", "/%s/%d/AUTH_test/%s?format=json" % (
        d["device"], part, container))
    return s, json.loads(body or b"[]")


def direct_object_head(cluster, container, obj):
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    part, devs = Ring(os.path.join(cluster.etc, "object.ring.gz")).get_nodes(
        "AUTH_test", container, obj)
    d = devs[0]
    return request(d["port"], "HEAD", "/%s/%d/AUTH_test/%s/%s" % (d["device"], part, container,
                                                                  obj),
                   {"X-Backend-Storage-Policy-Index": "0"})


def storage(cluster, pair):
    """What each proxy stores for the same link, read from the storage servers."""
    for side in ("apus", "swift"):
        s, _, _ = pair.send(side, "PUT", "/v1/AUTH_test/links/stored-%s" % side,
                            {"X-Symlink-Target": "tgt/o x",
                             "X-Symlink-Target-Account": "AUTH_test"})
        check(s == 201, "%s: link PUT: %d" % (side, s))
        s, h, _ = direct_object_head(cluster, "links", "stored-%s" % side)
        check(s == 200, "%s: object server HEAD of the link: %d" % (side, s))
        check(h.get("x-object-sysmeta-symlink-target") == "tgt/o%20x" and
              h.get("x-object-sysmeta-symlink-target-account") == "AUTH_test" and
              h.get("content-length") == "0" and h.get("content-type") == "application/symlink",
              "%s: the link's metadata on an object server: %r" % (side, h))
    s, rows = direct_container_listing(cluster, "links")
    check(s == 200, "container server listing: %d" % s)
    hashes = {r["name"]: r["hash"] for r in rows}
    want = EMPTY_MD5 + "; symlink_target=tgt/o%20x; symlink_target_account=AUTH_test"
    for side in ("apus", "swift"):
        check(hashes.get("stored-%s" % side) == want,
              "%s: the container server's row keeps the override ETag: %r" % (side, hashes))


def reads(pair):
    """Links written by each proxy, read through both."""
    for writer in ("apus", "swift"):
        s, _, _ = pair.send(writer, "PUT", "/v1/AUTH_test/links/by-%s" % writer,
                            {"X-Symlink-Target": "tgt/o x"})
        check(s == 201, "%s: link PUT: %d" % (writer, s))
        s, _, _ = pair.send(writer, "PUT", "/v1/AUTH_test/links/static-by-%s" % writer,
                            {"X-Symlink-Target": "tgt/o x", "X-Symlink-Target-Etag": ETAG})
        check(s == 201, "%s: static link PUT: %d" % (writer, s))
        for name in ("by-%s" % writer, "static-by-%s" % writer):
            path = "/v1/AUTH_test/links/" + name
            pair.compare("read %s" % name, "GET", path, expect=200)
            pair.compare("read %s" % name, "HEAD", path, expect=200)
            pair.compare("ranged read %s" % name, "GET", path, {"Range": "bytes=7-10"},
                         expect=206)
            pair.compare("if-match %s" % name, "GET", path, {"If-Match": ETAG}, expect=200)
            pair.compare("if-match %s" % name, "GET", path, {"If-Match": "nope"}, expect=412)
            pair.compare("the link itself %s" % name, "GET", path + "?symlink=get", expect=200)
            pair.compare("the link itself %s" % name, "HEAD", path + "?symlink=get", expect=200)
    for fmt in ("json", "xml", "plain"):
        got = pair.compare("listing", "GET", "/v1/AUTH_test/links?format=" + fmt, expect=200)
        if fmt == "json":
            rows = {r["name"]: r for r in json.loads(got["apus"][2])}
            check(rows.get("by-apus", {}).get("symlink_path") == "/v1/AUTH_test/tgt/o%20x",
                  "json listing symlink_path: %r" % rows.get("by-apus"))
            check(rows.get("static-by-apus", {}).get("symlink_etag") == ETAG and
                  rows.get("static-by-apus", {}).get("symlink_bytes") == len(BODY),
                  "json listing symlink_etag and symlink_bytes: %r" % rows.get("static-by-apus"))


def answers(pair):
    """The same answers to the same requests, errors included."""
    base = "/v1/AUTH_test/links/"
    pair.compare("chain 1", "PUT", base + "{side}-c1", {"X-Symlink-Target": "tgt/o x"}, expect=201)
    pair.compare("chain 2", "PUT", base + "{side}-c2",
                 {"X-Symlink-Target": "links/{side}-c1"}, expect=201)
    pair.compare("chain 3", "PUT", base + "{side}-c3",
                 {"X-Symlink-Target": "links/{side}-c2"}, expect=201)
    pair.compare("two links", "GET", base + "{side}-c2", expect=200)
    pair.compare("three links", "GET", base + "{side}-c3", expect=409)
    pair.compare("three links", "HEAD", base + "{side}-c3", expect=409)
    for what, headers, body in (
            ("no container", {"X-Symlink-Target": "o"}, b""),
            ("leading slash", {"X-Symlink-Target": "/tgt/o"}, b""),
            ("itself", {"X-Symlink-Target": "links/{side}-bad"}, b""),
            ("empty account", {"X-Symlink-Target": "tgt/o", "X-Symlink-Target-Account": ""}, b""),
            ("account with a slash",
             {"X-Symlink-Target": "tgt/o", "X-Symlink-Target-Account": "a%2Fb"}, b""),
            ("bad etag", {"X-Symlink-Target": "tgt/o", "X-Symlink-Target-Etag": "a;b"}, b""),
            ("a body", {"X-Symlink-Target": "tgt/o x"}, b"non-zero-length"),
            ("wrong etag", {"X-Symlink-Target": "tgt/o x",
                            "X-Symlink-Target-Etag": "not-the-real-etag"}, b""),
            ("missing target", {"X-Symlink-Target": "tgt/none",
                                "X-Symlink-Target-Etag": EMPTY_MD5}, b""),
            ("static to dynamic", {"X-Symlink-Target": "links/{side}-c1",
                                   "X-Symlink-Target-Etag": EMPTY_MD5}, b"")):
        pair.compare("PUT " + what, "PUT", base + "{side}-bad", headers, body)
    pair.compare("POST with a target", "POST", "/v1/AUTH_test/tgt/o%20x",
                 {"X-Symlink-Target": "c/o"}, expect=400)
    pair.compare("POST to a link", "POST", base + "{side}-c1", {"X-Object-Meta-Alpha": "apple"},
                 expect=307)
    pair.compare("POST applied to the link", "HEAD", base + "{side}-c1?symlink=get", expect=200)
    pair.compare("static link", "PUT", base + "{side}-st",
                 {"X-Symlink-Target": "tgt/changing", "X-Symlink-Target-Etag": ETAG}, expect=409)
    s, _, _ = pair.send("apus", "PUT", "/v1/AUTH_test/tgt/changing", {}, BODY)
    check(s == 201, "target PUT: %d" % s)
    pair.compare("static link", "PUT", base + "{side}-st",
                 {"X-Symlink-Target": "tgt/changing", "X-Symlink-Target-Etag": ETAG}, expect=201)
    pair.compare("POST to a static link", "POST", base + "{side}-st", {}, expect=307)
    s, _, _ = pair.send("apus", "PUT", "/v1/AUTH_test/tgt/changing", {}, b"something else")
    check(s == 201, "target overwrite: %d" % s)
    pair.compare("static link, target changed", "GET", base + "{side}-st", expect=409)
    pair.compare("static link, target changed", "HEAD", base + "{side}-st", expect=409)
    pair.compare("COPY the target", "COPY", base + "{side}-c1",
                 {"Destination": "links/{side}-copied-target"}, expect=201)
    pair.compare("copied target", "GET", base + "{side}-copied-target", expect=200)
    # Swift's copy also shows the copied object's metadata in its answer; Apus's copy does not
    # yet (a copy middleware difference, not the link's: the copy itself has it, checked next).
    pair.compare("COPY the link", "COPY", base + "{side}-c1?symlink=get",
                 {"Destination": "links/{side}-copied-link"}, expect=201,
                 ignore=("x-object-meta-alpha",))
    pair.compare("copied link", "GET", base + "{side}-copied-link?symlink=get", expect=200)
    pair.compare("copied link followed", "GET", base + "{side}-copied-link", expect=200)
    pair.compare("DELETE a link", "DELETE", base + "{side}-c1", expect=204)
    pair.compare("the target stays", "GET", "/v1/AUTH_test/tgt/o%20x", expect=200)
    got = pair.compare("info", "GET", "/info", compare_body=False)
    for side in ("apus", "swift"):
        info = json.loads(got[side][2])
        check(info.get("symlink") == {"symloop_max": 2, "static_links": True},
              "%s: /info symlink: %r" % (side, info.get("symlink")))


BODY = b"target body"
ETAG = "ab706c400731332bffa67ed4bc15dcac"


def main():
    with procs.TempDir("apus-symlink-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        apus = cluster.start_proxy("proxy-symlink", pipeline=PIPELINE, filters=FILTERS)
        swift = cluster.start_stock_proxy("proxy-symlink")
        pair = Pair({"apus": apus, "swift": swift})
        for c in ("tgt", "links"):
            s, _, _ = pair.send("apus", "PUT", "/v1/AUTH_test/" + c)
            check(s in (201, 202), "container PUT: %d" % s)
        s, h, _ = pair.send("apus", "PUT", "/v1/AUTH_test/tgt/o%20x",
                            {"Content-Type": "application/target"}, BODY)
        check(s == 201 and h.get("etag") == ETAG, "target PUT: %d %r" % (s, h))
        storage(cluster, pair)
        reads(pair)
        answers(pair)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("symlink: OK")


if __name__ == "__main__":
    main()
