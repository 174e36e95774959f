#!/usr/bin/env python3
"""apus-proxy-server beside stock swift-proxy-server (Debian's 2.30.1), differential.

Both proxies run on one cluster (tests/support/cluster.py: Apus storage servers, their rings,
memcached), with the same proxy-server.conf and tempauth, and get the same requests; statuses,
the headers that matter and bodies must match. Writes go to names of each side's own (the
side's name in them), which are read back the same way and compared with the name replaced.

Covered (issue 12): Accept-Ranges on account and container GET/HEAD; 405 answers and their
Allow; text/plain error answers (unknown storage policy, invalid UTF-8 in a listing query);
metadata names in error bodies; an empty Content-Type on an object PUT; what gatekeeper keeps
from a client (X-Timestamp, X-Backend-*, sysmeta, X-Remove-*-Sysmeta-*); and the required
filters a pipeline without gatekeeper, listing_formats and copy still gets.
Issue 13: bulk-delete and extract-archive reports (every answer format, partial failures,
bad names, bad archives), SLO manifest PUT errors, GET with ranges, ?multipart-manifest=get
and =delete reports, and DLO GET/HEAD, on a pipeline with bulk, slo, dlo and symlink.

usage: proxy_interop.py <build-dir>
"""
import http.client
import io
import json
import os
import tarfile
import re
import sys
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []

# Differences we know of and have not closed yet, each tied to an open issue.
KNOWN_DIFFERENCES = set()

# Headers compared on every answer when either side sends them.
COMPARED = ("content-type", "accept-ranges", "allow", "content-length", "etag",
            "x-storage-policy", "x-container-object-count", "x-container-bytes-used",
            "x-account-container-count", "x-account-object-count", "x-account-bytes-used",
            "x-static-large-object", "x-object-manifest", "x-copied-from", "www-authenticate")
SIDES = ("apus", "swift")
# A pipeline without gatekeeper, listing_formats and copy: both fill them in.
BARE_PIPELINE = "catch_errors proxy-logging cache tempauth proxy-server"
# Swift's SAIO order for the large-object middlewares.
LO_PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk "
               "tempauth copy slo dlo symlink proxy-logging proxy-server")
LO_FILTERS = ("[filter:bulk]\nuse = egg:swift#bulk\n[filter:copy]\nuse = egg:swift#copy\n"
              "[filter:slo]\nuse = egg:swift#slo\n[filter:dlo]\nuse = egg:swift#dlo\n"
              "[filter:symlink]\nuse = egg:swift#symlink\n")


def check(cond, what):
    if cond:
        return
    if any(known in what for known in KNOWN_DIFFERENCES):
        print("KNOWN DIFFERENCE:", what)
        return
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
    """A listing body with its times left out: each side's objects were written apart."""
    body = re.sub(rb'"last_modified": "[^"]*"', b'"last_modified": ""', body)
    return re.sub(rb"<last_modified>[^<]*</last_modified>", b"<last_modified/>", body)


class Pair:
    """An Apus proxy and a stock Swift proxy on the same config, each with its own token."""

    def __init__(self, cluster, apus_port, swift_port):
        self.ports = {"apus": apus_port, "swift": swift_port}
        self.tokens = {}
        for side, port in self.ports.items():
            _, h, _ = request(port, "GET", "/auth/v1.0",
                              {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
            self.tokens[side] = h.get("x-auth-token", "")

    def send(self, side, method, path, headers=None, body=b"", auth=True):
        h = {k: v.replace("{side}", side) for k, v in (headers or {}).items()}
        if auth:
            h["X-Auth-Token"] = self.tokens[side]
        return request(self.ports[side], method, path.replace("{side}", side), h, body)

    def compare(self, what, method, path, headers=None, body=b"", auth=True,
                compare_body=True, expect=None, compare_etag=True):
        """Sends the request to both; checks they agree (and on `expect`, the status)."""
        got = {side: self.send(side, method, path, headers, body, auth) for side in SIDES}
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        label = "%s (%s %s)" % (what, method, path)
        check(sa == ss, "%s: status swift %d, apus %d" % (label, ss, sa))
        if expect is not None:
            check(ss == expect, "%s: swift answers %d, the test expects %d" % (label, ss, expect))
        for name in COMPARED:
            va, vs = ha.get(name), hs.get(name)
            # Each side's own names (X-Object-Manifest), and a multipart answer's boundary
            # (random), are not differences.
            if va and vs:
                va, vs = va.replace("apus", "{side}"), vs.replace("swift", "{side}")
                va = re.sub(r"boundary=\w+", "boundary=B", va)
                vs = re.sub(r"boundary=\w+", "boundary=B", vs)
            if name == "allow" and va and vs:
                # Swift joins a set: its order changes with every process's hash seed.
                va = sorted(m.strip() for m in va.split(","))
                vs = sorted(m.strip() for m in vs.split(","))
            named = "{side}" in path + "".join((headers or {}).values())
            if name == "content-length" and (not compare_body or named):
                continue  # the bodies are compared instead, each side's name replaced
            if name == "etag" and (not compare_body or not compare_etag):
                continue
            check(va == vs, "%s: header %s: swift %r, apus %r" % (label, name, vs, va))
        for side, h in (("apus", ha), ("swift", hs)):
            leaked = [k for k in h if "sysmeta" in k or k.startswith("x-backend")]
            check(not leaked, "%s: %s answers internal headers %r" % (label, side, leaked))
        if compare_body:
            na = normalized(ba.replace(b"apus", b"{side}"))
            ns = normalized(bs.replace(b"swift", b"{side}"))
            check(na == ns, "%s: body swift %r, apus %r" % (label, bs[:300], ba[:300]))
        return got


def setup(pair):
    s, _, _ = pair.send("apus", "PUT", "/v1/AUTH_test/shared")
    check(s in (201, 202), "setup: container PUT %d" % s)
    s, _, _ = pair.send("apus", "PUT", "/v1/AUTH_test/shared/o",
                        {"Content-Type": "text/plain"}, b"hello")
    check(s == 201, "setup: object PUT %d" % s)


def accept_ranges(pair):
    for method in ("HEAD", "GET"):
        for path in ("/v1/AUTH_test", "/v1/AUTH_test?format=json", "/v1/AUTH_test/shared",
                     "/v1/AUTH_test/shared?format=json", "/v1/AUTH_test/shared?format=xml",
                     "/v1/AUTH_test/shared/o"):
            got = pair.compare("listing", method, path, compare_body=method == "GET"
                               and "AUTH_test/shared" in path)
            check(got["swift"][1].get("accept-ranges") == "bytes",
                  "Swift sends Accept-Ranges on %s %s" % (method, path))
    # No Accept-Ranges on a missing container.
    pair.compare("missing container", "GET", "/v1/AUTH_test/nope", expect=404)


def not_allowed(pair):
    for path in ("/v1/AUTH_test", "/v1/AUTH_test/shared", "/v1/AUTH_test/shared/o"):
        pair.compare("405", "PATCH", path, expect=405)
    # allow_account_management is off: the account takes no PUT or DELETE.
    pair.compare("405 account PUT", "PUT", "/v1/AUTH_test", expect=405)
    pair.compare("405 account DELETE", "DELETE", "/v1/AUTH_test", expect=405)
    pair.compare("405 /info", "POST", "/info", auth=False, expect=405)
    for path in ("/v1/AUTH_test", "/v1/AUTH_test/shared", "/v1/AUTH_test/shared/o"):
        pair.compare("OPTIONS", "OPTIONS", path, compare_body=False, expect=200)


def error_answers(pair):
    pair.compare("unknown policy", "PUT", "/v1/AUTH_test/{side}-pol",
                 {"X-Storage-Policy": "nope"}, expect=400)
    for q in ("prefix=%FF", "marker=%C0%AF", "delimiter=%FF", "end_marker=%ED%A0%80",
              "format=%FF", "path=%FF&prefix=%FF", "limit=10001", "limit=10000&includes=%FE",
              "reverse=%FF", "prefix=%00"):
        pair.compare("bad UTF-8 query", "GET", "/v1/AUTH_test/shared?" + q)
        pair.compare("bad UTF-8 query", "GET", "/v1/AUTH_test?" + q)
    big = "v" * 257
    pair.compare("container meta value", "PUT", "/v1/AUTH_test/{side}-big",
                 {"X-Container-Meta-Big": big}, expect=400)
    pair.compare("container meta value", "POST", "/v1/AUTH_test/shared",
                 {"x-container-meta-big-ONE": big}, expect=400)
    pair.compare("account meta value", "POST", "/v1/AUTH_test",
                 {"X-ACCOUNT-META-BIG": big}, expect=400)
    pair.compare("account meta name", "POST", "/v1/AUTH_test",
                 {"X-Account-Meta-" + "n" * 129: "v"}, expect=400)
    pair.compare("object meta value", "PUT", "/v1/AUTH_test/shared/{side}-big",
                 {"x-object-meta-big": big, "Content-Type": "text/plain"}, b"x", expect=400)
    pair.compare("container meta value, underscores", "POST", "/v1/AUTH_test/shared",
                 {"X-Container-Meta-Big_under_Score": big}, expect=400)
    pair.compare("container listing, limit not a number", "GET",
                 "/v1/AUTH_test/shared?limit=abc&format=json")
    pair.compare("missing container HEAD", "HEAD", "/v1/AUTH_test/nope", expect=404)
    pair.compare("header too long", "PUT", "/v1/AUTH_test/shared/{side}-big",
                 {"x-some-header": "v" * 8193, "Content-Type": "text/plain"}, b"x", expect=400)


def empty_content_type(pair):
    pair.compare("empty Content-Type", "PUT", "/v1/AUTH_test/shared/{side}-e.txt",
                 {"Content-Type": ""}, b"text", expect=201)
    pair.compare("empty Content-Type, read back", "HEAD", "/v1/AUTH_test/shared/{side}-e.txt",
                 compare_body=False, expect=200)
    pair.compare("empty Content-Type, no extension", "PUT", "/v1/AUTH_test/shared/{side}-e",
                 {"Content-Type": ""}, b"x", expect=201)
    pair.compare("empty Content-Type, no extension, read back", "HEAD",
                 "/v1/AUTH_test/shared/{side}-e", compare_body=False, expect=200)


def client_headers(pair, what):
    """What gatekeeper keeps from a client, on the proxies of `pair`."""
    forged = {"X-Timestamp": "9999999999.00000", "X-Object-Sysmeta-Evil": "1",
              "X-Object-Transient-Sysmeta-Evil": "1",
              "X-Backend-Container-Update-Override-Etag": "forged",
              "X-Object-Sysmeta-Container-Update-Override-Etag": "forged",
              "Content-Type": "text/plain"}
    pair.compare(what + ": forged PUT", "PUT", "/v1/AUTH_test/shared/{side}-gk", forged,
                 b"real", expect=201)
    got = pair.compare(what + ": forged PUT, read back", "HEAD",
                       "/v1/AUTH_test/shared/{side}-gk", compare_body=False, expect=200)
    for side in SIDES:
        ts = float(got[side][1].get("x-timestamp", "0"))
        check(abs(ts - time.time()) < 120, "%s: %s stored the client's timestamp %s"
              % (what, side, ts))
    listing = pair.compare(what + ": listing", "GET",
                           "/v1/AUTH_test/shared?format=json&prefix={side}-gk")
    check(b"forged" not in listing["apus"][2], "%s: forged listing ETag" % what)
    pair.compare(what + ": DELETE", "DELETE", "/v1/AUTH_test/shared/{side}-gk", expect=204)
    pair.compare(what + ": gone", "HEAD", "/v1/AUTH_test/shared/{side}-gk", expect=404)
    pair.compare(what + ": container sysmeta", "PUT", "/v1/AUTH_test/{side}-sys",
                 {"X-Container-Sysmeta-Evil": "1", "X-Backend-Storage-Policy-Index": "5"})
    pair.compare(what + ": container sysmeta, read back", "HEAD", "/v1/AUTH_test/{side}-sys",
                 compare_body=False)
    pair.compare(what + ": remove account sysmeta", "POST", "/v1/AUTH_test",
                 {"X-Remove-Account-Sysmeta-Core-Access-Control": "x",
                  "X-Remove-Account-Meta-Nothing": "x"}, expect=204)
    pair.compare(what + ": remove container sysmeta", "POST", "/v1/AUTH_test/{side}-sys",
                 {"X-Remove-Container-Sysmeta-Evil": "x"}, expect=204)


def required_filters(pair):
    """A pipeline without gatekeeper, listing_formats and copy."""
    client_headers(pair, "bare pipeline")
    pair.compare("bare pipeline: COPY", "COPY", "/v1/AUTH_test/shared/o",
                 {"Destination": "shared/{side}-copy"}, expect=201, compare_body=False)
    pair.compare("bare pipeline: copy read back", "GET", "/v1/AUTH_test/shared/{side}-copy",
                 expect=200)
    pair.compare("bare pipeline: X-Copy-From", "PUT", "/v1/AUTH_test/shared/{side}-copy2",
                 {"X-Copy-From": "shared/o"}, expect=201, compare_body=False)
    pair.compare("bare pipeline: xml listing", "GET",
                 "/v1/AUTH_test/shared?format=xml&prefix=o", expect=200)
    pair.compare("bare pipeline: text listing", "GET", "/v1/AUTH_test/shared?prefix=o",
                 expect=200)


def tar_of(files, mode="w"):
    """A tar archive (bytes) of {name: bytes}."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def bulk(pair):
    for fmt in ("application/json", "application/xml", "text/plain"):
        tag = fmt.split("/")[1]
        for side in SIDES:
            c = "/v1/AUTH_test/%s-bd-%s" % (side, tag)
            pair.send(side, "PUT", c)
            for o in ("a", "b", "c d"):
                pair.send(side, "PUT", c + "/" + o.replace(" ", "%20"), {}, b"x")
        body = ("/{side}-bd-%s/a\n/{side}-bd-%s/missing\n/{side}-bd-%s\n"
                "/{side}-bd-%s/c%%20d\n/{side}-bd-%s/b\n" % ((tag,) * 5)).encode()
        pair.compare("bulk delete, " + tag, "POST", "/v1/AUTH_test?bulk-delete",
                     {"Accept": fmt, "Content-Type": "text/plain"},
                     body.replace(b"{side}", b"{side}"), expect=200)
    # A side-specific body: {side} in a body is replaced per side by sending it twice.
    def both(what, method, path, headers, body_of, expect=200):
        got = {side: pair.send(side, method, path, headers, body_of(side)) for side in SIDES}
        (sa, _, ba), (ss, _, bs) = got["apus"], got["swift"]
        check(sa == ss, "%s: status swift %d, apus %d" % (what, ss, sa))
        check(ss == expect, "%s: swift answers %d, the test expects %d" % (what, ss, expect))
        na = normalized(ba.replace(b"apus", b"{side}"))
        ns = normalized(bs.replace(b"swift", b"{side}"))
        check(na == ns, "%s: body swift %r, apus %r" % (what, bs[:400], ba[:400]))
        return got
    both("bulk delete, non-empty container and bad names", "DELETE",
         "/v1/AUTH_test?bulk-delete", {"Accept": "application/json"},
         lambda side: ("/shared\n/%s-nope/%s\n/%s%%FF/x\n\n/shared/%s\n"
                       % (side, "n" * 1100, side, "z" * 10)).encode())
    both("bulk delete, wrong content type", "POST", "/v1/AUTH_test?bulk-delete",
         {"Accept": "application/json", "Content-Type": "application/json"},
         lambda side: b"/shared/x\n")
    both("bulk delete, nothing to delete", "POST", "/v1/AUTH_test?bulk-delete",
         {"Accept": "application/json"}, lambda side: b"\n\n")
    for mode, query in (("w", "tar"), ("w:gz", "tar.gz"), ("w:bz2", "tar.bz2")):
        both("extract %s" % query, "PUT", "/v1/AUTH_test?extract-archive=" + query,
             {"Accept": "application/json"},
             lambda side: tar_of({"%s-ea-%s/x.txt" % (side, query): b"x",
                                  "%s-ea-%s/d/y.txt" % (side, query): b"yy",
                                  "%s-ea-%s/%s" % (side, query, "n" * 1100): b"long",
                                  "%s-ea-%s" % (side, query): b"a container name"}, mode),
             expect=200)
    pair.compare("extract tar, read back", "GET", "/v1/AUTH_test/{side}-ea-tar?format=json")
    both("extract into a container path", "PUT", "/v1/AUTH_test/shared?extract-archive=tar",
         {"Accept": "application/json"},
         lambda side: tar_of({"%s-in/z.txt" % side: b"zz"}))
    both("extract a broken archive", "PUT", "/v1/AUTH_test?extract-archive=tar",
         {"Accept": "application/json"}, lambda side: b"this is not a tar file" * 40)
    pair.compare("extract, unknown format", "PUT", "/v1/AUTH_test?extract-archive=zip",
                 {"Accept": "application/json"}, b"x", expect=400)


def large_objects(pair):
    for side in SIDES:
        pair.send(side, "PUT", "/v1/AUTH_test/%s-lo" % side)
        for i, data in enumerate((b"a" * 1000, b"b" * 1000, b"c" * 500)):
            pair.send(side, "PUT", "/v1/AUTH_test/%s-lo/seg%d" % (side, i), {}, data)
    md5 = {0: "cd6ff23e1f09d6fca48c4e6b2cb1da20", 1: None, 2: None}
    import hashlib
    for i, data in enumerate((b"a" * 1000, b"b" * 1000, b"c" * 500)):
        md5[i] = hashlib.md5(data).hexdigest()
    manifest = json.dumps([
        {"path": "/{side}-lo/seg0", "etag": md5[0], "size_bytes": 1000},
        {"data": "aW5saW5lIGRhdGE="},
        {"path": "/{side}-lo/seg1", "etag": None, "size_bytes": None, "range": "10-509"},
        {"path": "/{side}-lo/seg2"}]).encode()
    def put_manifest(what, path, body, expect, query="multipart-manifest=put", headers=None):
        got = {side: pair.send(side, "PUT", path.replace("{side}", side) + "?" + query,
                               headers or {}, body.replace(b"{side}", side.encode()))
               for side in SIDES}
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        check(sa == ss, "%s: status swift %d, apus %d" % (what, ss, sa))
        check(ss == expect, "%s: swift answers %d, the test expects %d" % (what, ss, expect))
        # Swift lists the problems of segments in the order their HEADs came back (two at a
        # time); Apus in manifest order: the lines are compared as a set.
        def problems(body):
            try:
                doc = json.loads(body)
                doc["Errors"] = sorted(doc.get("Errors", []))
                return doc
            except ValueError:
                return sorted(body.splitlines())
        na = problems(ba.replace(b"apus", b"{side}"))
        ns = problems(bs.replace(b"swift", b"{side}"))
        check(na == ns, "%s: body swift %r, apus %r" % (what, bs[:400], ba[:400]))
        check(ha.get("etag") == hs.get("etag"), "%s: etag swift %r, apus %r"
              % (what, hs.get("etag"), ha.get("etag")))
    put_manifest("SLO PUT", "/v1/AUTH_test/{side}-lo/slo", manifest, 201)
    pair.compare("SLO GET", "GET", "/v1/AUTH_test/{side}-lo/slo", expect=200)
    pair.compare("SLO HEAD", "HEAD", "/v1/AUTH_test/{side}-lo/slo", expect=200,
                 compare_body=False)
    for r in ("bytes=990-1020", "bytes=-300", "bytes=0-0,1000-1012,2400-", "bytes=5000-"):
        pair.compare("SLO GET " + r, "GET", "/v1/AUTH_test/{side}-lo/slo", {"Range": r},
                     compare_body="," not in r)
    # The manifests name each side's own segments: their etags differ with the names.
    pair.compare("SLO manifest", "GET", "/v1/AUTH_test/{side}-lo/slo?multipart-manifest=get",
                 compare_etag=False)
    pair.compare("SLO raw manifest", "GET",
                 "/v1/AUTH_test/{side}-lo/slo?multipart-manifest=get&format=raw",
                 compare_etag=False)
    pair.compare("SLO If-None-Match", "GET", "/v1/AUTH_test/{side}-lo/slo",
                 {"If-None-Match": '"%s"' % hashlib.md5(
                     (md5[0] + "d41d8cd98f00b204e9800998ecf8427e" +
                      md5[1] + ":10-509;" + md5[2]).encode()).hexdigest()},
                 compare_body=False)
    bad = json.dumps([{"path": "/{side}-lo/seg0", "etag": "0" * 32, "size_bytes": 999},
                      {"path": "/{side}-lo/missing"},
                      {"path": "/{side}-lo/seg1", "range": "2000-3000"}]).encode()
    for fmt in ("application/json", "text/plain", "application/xml"):
        put_manifest("SLO PUT with bad segments, " + fmt, "/v1/AUTH_test/{side}-lo/bad", bad,
                     400, headers={"Accept": fmt})
    put_manifest("SLO PUT, not JSON", "/v1/AUTH_test/{side}-lo/bad", b"[{", 400)
    put_manifest("SLO PUT, empty list", "/v1/AUTH_test/{side}-lo/empty", b"[]", 201)
    put_manifest("SLO PUT, unknown key", "/v1/AUTH_test/{side}-lo/bad",
                 b'[{"path": "/{side}-lo/seg0", "colour": "red"}]', 400)
    pair.compare("SLO delete", "DELETE",
                 "/v1/AUTH_test/{side}-lo/slo?multipart-manifest=delete",
                 {"Accept": "application/json"}, expect=200)
    pair.compare("SLO delete, gone", "DELETE",
                 "/v1/AUTH_test/{side}-lo/slo?multipart-manifest=delete",
                 {"Accept": "application/json"}, expect=200)
    pair.compare("SLO delete of a plain object", "DELETE",
                 "/v1/AUTH_test/shared/o?multipart-manifest=delete&x=1",
                 {"Accept": "text/plain"}, expect=200)
    # DLO
    for side in SIDES:
        for i in range(3):
            pair.send(side, "PUT", "/v1/AUTH_test/%s-lo/dseg/%d" % (side, i), {},
                      (b"%d" % i) * 700)
    pair.compare("DLO PUT", "PUT", "/v1/AUTH_test/{side}-lo/dlo",
                 {"X-Object-Manifest": "{side}-lo/dseg/"}, expect=201, compare_body=False)
    pair.compare("DLO GET", "GET", "/v1/AUTH_test/{side}-lo/dlo", expect=200)
    pair.compare("DLO HEAD", "HEAD", "/v1/AUTH_test/{side}-lo/dlo", expect=200,
                 compare_body=False)
    pair.compare("DLO GET range", "GET", "/v1/AUTH_test/{side}-lo/dlo",
                 {"Range": "bytes=650-1450"}, expect=206)
    pair.compare("DLO manifest", "GET", "/v1/AUTH_test/{side}-lo/dlo?multipart-manifest=get",
                 expect=200)
    pair.compare("DLO PUT, bad manifest header", "PUT", "/v1/AUTH_test/{side}-lo/dlo2",
                 {"X-Object-Manifest": "nocontainer"}, expect=400)


def main():
    with procs.TempDir("apus-proxy-interop-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        main_pair = Pair(cluster, cluster.proxy_port, cluster.start_stock_proxy("proxy-server"))
        bare_apus = cluster.start_proxy("proxy-bare", pipeline=BARE_PIPELINE)
        bare_pair = Pair(cluster, bare_apus, cluster.start_stock_proxy("proxy-bare"))
        lo_apus = cluster.start_proxy("proxy-lo", pipeline=LO_PIPELINE, filters=LO_FILTERS)
        lo_pair = Pair(cluster, lo_apus, cluster.start_stock_proxy("proxy-lo"))
        setup(main_pair)
        steps = [(accept_ranges, main_pair), (not_allowed, main_pair),
                 (error_answers, main_pair), (empty_content_type, main_pair),
                 (lambda p: client_headers(p, "stock pipeline"), main_pair),
                 (required_filters, bare_pair), (bulk, lo_pair), (large_objects, lo_pair)]
        for step, pair in steps:
            print("---", getattr(step, "__name__", "step"))
            try:
                step(pair)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step, e))
    print("proxy interop:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
