#!/usr/bin/env python3
"""tempurl and formpost (issue 14) on a real cluster (tests/support/cluster.py): an Apus proxy
and a stock swift-proxy-server on the same config and storage get the same requests, without a
token, and must give the same answers (status, body, the headers a client acts on):

1. tempurl: signed GET, HEAD and PUT (account and container keys, SHA1/SHA256/SHA512, hex and
   base64, ISO 8601 expiry), HEAD allowed by a GET or PUT signature, expired, wrong method,
   wrong key, another object, prefix signatures, temp_url_ip_range, inline and filename, the
   headers a PUT may not carry, the response headers removed, /info.
2. formpost: a signed form with two files and a redirect (the files stored, read back), without
   a redirect, a file over max_file_size (nothing stored), too many files, a bad signature, an
   expired form, a bad first boundary, /info.

usage: tempurl_test.py <build-dir>
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import sys
import time
import urllib.parse

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats tempurl "
            "formpost tempauth copy slo dlo proxy-logging proxy-server")
FILTERS = ("[filter:tempurl]\nuse = egg:swift#tempurl\n"
           "[filter:formpost]\nuse = egg:swift#formpost\n"
           "[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:dlo]\nuse = egg:swift#dlo\n")
COMPARED = ("content-type", "content-length", "content-disposition", "expires", "location",
            "www-authenticate", "etag", "x-object-meta-secret", "x-object-meta-public-color",
            "access-control-allow-origin")
AKEY, CKEY = "account-key", "container-key"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def request(port, method, path, headers=None, body=b""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
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


def sign(method, expires, path, key, digest="sha256", ip_range=None, encoding="hex"):
    body = "%s\n%s\n%s" % (method, expires, path)
    if ip_range:
        body = "ip=%s\n%s" % (ip_range, body)
    mac = hmac.new(key.encode(), body.encode(), getattr(hashlib, digest))
    if encoding == "hex":
        return mac.hexdigest()
    if encoding == "base64":
        return digest + ":" + base64.b64encode(mac.digest()).decode()
    return digest + ":" + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


class Pair:
    def __init__(self, ports):
        self.ports = ports
        _, h, _ = request(ports["apus"], "GET", "/auth/v1.0",
                          {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
        self.token = h.get("x-auth-token", "")

    def admin(self, method, path, headers=None, body=b""):
        h = dict(headers or {})
        h["X-Auth-Token"] = self.token
        return request(self.ports["apus"], method, path, h, body)

    def compare(self, what, make, expect=None, compare_body=True):
        """make(side) -> (method, path with query, headers, body): the same request for each
        proxy ("side" names its own objects). Both answers must agree."""
        got = {}
        for side in ("apus", "swift"):
            method, path, headers, body = make(side)
            got[side] = request(self.ports[side], method, path, headers, body)
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        check(sa == ss, "%s: status swift %d, apus %d: %r / %r" % (what, ss, sa, bs[:200],
                                                                  ba[:200]))
        if expect is not None:
            check(ss == expect, "%s: swift answers %d, the test expects %d" % (what, ss, expect))
        for name in COMPARED:
            va = (ha.get(name) or "").replace("apus", "{side}")
            vs = (hs.get(name) or "").replace("swift", "{side}")
            if name == "content-length" and not compare_body:
                continue
            check(va == vs, "%s: header %s: swift %r, apus %r" % (what, name, vs, va))
        if compare_body:
            check(ba.replace(b"apus", b"{side}") == bs.replace(b"swift", b"{side}"),
                  "%s: body swift %r, apus %r" % (what, bs[:300], ba[:300]))
        return got


def tempurl(pair):
    now = int(time.time())
    exp = now + 3600
    obj = "/v1/AUTH_test/tu/o%20x.txt"
    raw = urllib.parse.unquote(obj)

    def get(query, method="GET", path=obj, headers=None, body=b""):
        return lambda side: (method, path.replace("{side}", side) + "?" + query, headers or {},
                             body)

    def q(sig, expires=exp, extra=""):
        return "temp_url_sig=%s&temp_url_expires=%s%s" % (urllib.parse.quote(sig, safe=""),
                                                          expires, extra)

    pair.compare("GET, account key", get(q(sign("GET", exp, raw, AKEY))), expect=200)
    pair.compare("HEAD with a GET signature", get(q(sign("GET", exp, raw, AKEY)), "HEAD"),
                 expect=200)
    pair.compare("HEAD with a HEAD signature", get(q(sign("HEAD", exp, raw, AKEY)), "HEAD"),
                 expect=200)
    pair.compare("GET with a HEAD signature", get(q(sign("HEAD", exp, raw, AKEY))), expect=401)
    pair.compare("GET, container key", get(q(sign("GET", exp, raw, CKEY))), expect=200)
    for digest in ("sha1", "sha256", "sha512"):
        for enc in ("hex", "base64", "url-safe"):
            pair.compare("GET %s %s" % (digest, enc),
                         get(q(sign("GET", exp, raw, AKEY, digest, encoding=enc))), expect=200)
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))
    pair.compare("ISO 8601 expiry", get(q(sign("GET", exp, raw, AKEY), iso)), expect=200)
    pair.compare("expired", get(q(sign("GET", now - 10, raw, AKEY), now - 10)), expect=401)
    pair.compare("expired HEAD", get(q(sign("GET", now - 10, raw, AKEY), now - 10), "HEAD"),
                 expect=401)
    pair.compare("wrong key", get(q(sign("GET", exp, raw, "nope"))), expect=401)
    pair.compare("changed expiry", get(q(sign("GET", exp, raw, AKEY), exp + 1)), expect=401)
    pair.compare("another object", get(q(sign("GET", exp, raw, AKEY)),
                                       path="/v1/AUTH_test/tu/other"), expect=401)
    pair.compare("wrong method", get(q(sign("GET", exp, raw, AKEY)), "DELETE"), expect=401)
    pair.compare("no expiry", get("temp_url_sig=abc"), expect=401)
    pair.compare("md5 is no digest", get(q("md5:" + base64.b64encode(b"x" * 16).decode())),
                 expect=401)
    pair.compare("no token, no signature", get("format=json"), expect=401)
    # Prefix signatures.
    pre = "prefix:/v1/AUTH_test/tu/o"
    pair.compare("prefix", get(q(sign("GET", exp, pre, AKEY), extra="&temp_url_prefix=o")),
                 expect=200)
    pair.compare("prefix, other object", get(q(sign("GET", exp, pre, AKEY),
                                               extra="&temp_url_prefix=o"),
                                             path="/v1/AUTH_test/tu/x-other"), expect=401)
    pair.compare("prefix not signed as one", get(q(sign("GET", exp, raw, AKEY),
                                                   extra="&temp_url_prefix=o")), expect=401)
    # temp_url_ip_range.
    for rng, want in (("127.0.0.0/8", 200), ("127.0.0.1", 200), ("10.0.0.0/8", 401),
                      ("127.0.0.1/8", 401), ("127.0.0.0/255.0.0.0", 200), ("::1", 401)):
        pair.compare("ip range %s" % rng,
                     get(q(sign("GET", exp, raw, AKEY, ip_range=rng),
                           extra="&temp_url_ip_range=" + urllib.parse.quote(rng, safe=""))),
                     expect=want)
    # Content-Disposition.
    sig = q(sign("GET", exp, raw, AKEY))
    for extra in ("&inline", "&filename=My+File%20%C3%A9.pdf", "&inline&filename=a%22b",
                  "&filename="):
        pair.compare("disposition %s" % extra, get(sig + extra), expect=200)
    # PUT through a temp URL, and what it may not carry.
    put_path = "/v1/AUTH_test/tu/put-{side}"

    def put(headers=None, body=b"uploaded", method="PUT"):
        def make(side):
            p = put_path.replace("{side}", side)
            return (method, p + "?" + q(sign(method, exp, p, AKEY)), headers or {}, body)
        return make

    pair.compare("PUT", put(), expect=201, compare_body=False)
    for side in ("apus", "swift"):
        s, _, b = pair.admin("GET", put_path.replace("{side}", side))
        check(s == 200 and b == b"uploaded", "%s: object PUT by temp URL: %d %r" % (side, s, b))
    pair.compare("HEAD with a PUT signature",
                 lambda side: ("HEAD", put_path.replace("{side}", side) + "?" +
                               q(sign("PUT", exp, put_path.replace("{side}", side), AKEY)), {},
                               b""), expect=200)
    for h in ("X-Object-Manifest", "X-Symlink-Target", "X-Copy-From"):
        pair.compare("PUT with %s" % h, put({h: "tu/o%20x.txt"}, b""), expect=400)
    pair.compare("POST with X-Object-Manifest", put({"X-Object-Manifest": "tu/x"}, b"", "POST"),
                 expect=400)
    got = pair.compare("info", lambda side: ("GET", "/info", {}, b""), compare_body=False)
    infos = {side: json.loads(got[side][2]) for side in got}
    for section in ("tempurl", "formpost"):
        check(infos["apus"].get(section) == infos["swift"].get(section),
              "/info %s: swift %r, apus %r" % (section, infos["swift"].get(section),
                                               infos["apus"].get(section)))


def form_body(boundary, fields, files):
    out = b""
    for name, value in fields:
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                % (boundary, name.encode(), value.encode()))
    for name, filename, ctype, data in files:
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                % (boundary, name.encode(), filename.encode()))
        if ctype:
            out += b"Content-Type: %s\r\n" % ctype.encode()
        out += b"\r\n" + data + b"\r\n"
    return out + b"--%s--\r\n" % boundary


def formpost(pair):
    boundary = b"----WebKitFormBoundaryAbc123"
    ctype = "multipart/form-data; boundary=%s" % boundary.decode()

    def form(path, redirect="", size="1024", count="2", files=(), key=CKEY, expires=None,
             extra=(), boundary_sent=boundary):
        expires = str(expires or int(time.time()) + 600)
        body = "%s\n%s\n%s\n%s\n%s" % (path, redirect, size, count, expires)
        sig = hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()
        fields = ([("redirect", redirect)] if redirect else []) + [
            ("max_file_size", size), ("max_file_count", count), ("expires", expires),
            ("signature", sig)] + list(extra)
        return form_body(boundary_sent, fields, files)

    def post(path, **kw):
        def make(side):
            p = path.replace("{side}", side)
            return ("POST", urllib.parse.quote(p), {"Content-Type": ctype},
                    form(p, **{k: (v(side) if callable(v) else v) for k, v in kw.items()}))
        return make

    two = lambda side: [("f1", "one.txt", "text/x-one", b"first file " + side.encode()),  # noqa
                        ("f2", "two.bin", "", b"\x00\x01" * 100)]
    pair.compare("form with a redirect", post("/v1/AUTH_test/fp/{side}-", redirect="http://h/ok",
                                              files=two), expect=303)
    for side in ("apus", "swift"):
        s, h, b = pair.admin("GET", "/v1/AUTH_test/fp/%s-one.txt" % side)
        check(s == 200 and b == b"first file " + side.encode() and
              h.get("content-type") == "text/x-one",
              "%s: first file stored: %d %r %r" % (side, s, h.get("content-type"), b))
        s, _, b = pair.admin("GET", "/v1/AUTH_test/fp/%s-two.bin" % side)
        check(s == 200 and b == b"\x00\x01" * 100, "%s: second file stored: %d" % (side, s))
    pair.compare("form without a redirect", post("/v1/AUTH_test/fp/{side}/", files=two,
                                                 extra=[("x_delete_after", "3600")]),
                 expect=201)
    for side in ("apus", "swift"):
        s, h, _ = pair.admin("HEAD", "/v1/AUTH_test/fp/%s/one.txt" % side)
        check(s == 200 and "x-delete-at" in h, "%s: x_delete_after applied: %d %r" % (side, s, h))
    big = lambda side: [("f", "big-%s" % side, "", b"x" * 2000)]  # noqa: E731
    pair.compare("file over max_file_size", post("/v1/AUTH_test/fp/", files=big), expect=400)
    pair.compare("file over max_file_size, redirect",
                 post("/v1/AUTH_test/fp/", redirect="http://h/", files=big), expect=400)
    for side in ("apus", "swift"):
        s, _, _ = pair.admin("HEAD", "/v1/AUTH_test/fp/big-%s" % side)
        check(s == 404, "%s: nothing stored past max_file_size: %d" % (side, s))
    pair.compare("too many files", post("/v1/AUTH_test/fp/{side}-n-", count="1", files=two,
                                        redirect="http://h/r?a=b"), expect=303)
    pair.compare("too many files, no redirect", post("/v1/AUTH_test/fp/{side}-m-", count="1",
                                                     files=two), expect=400)
    pair.compare("no files", post("/v1/AUTH_test/fp/"), expect=400)
    pair.compare("bad signature", post("/v1/AUTH_test/fp/", files=two, key="nope"), expect=401)
    pair.compare("expired", post("/v1/AUTH_test/fp/", files=two, expires=int(time.time()) - 5),
                 expect=401)
    pair.compare("max_file_size not an integer", post("/v1/AUTH_test/fp/", files=two,
                                                      size="big"), expect=400)
    pair.compare("a container that does not exist", post("/v1/AUTH_test/nofp/", files=two),
                 expect=401)
    pair.compare("bad first boundary", lambda side: ("POST", "/v1/AUTH_test/fp/",
                                                     {"Content-Type": ctype}, b"--nope\r\n"),
                 expect=400)
    pair.compare("not a form", lambda side: ("POST", "/v1/AUTH_test/fp/x",
                                             {"Content-Type": "text/plain"}, b"x"), expect=401)


def main():
    with procs.TempDir("apus-tempurl-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        apus = cluster.start_proxy("proxy-tempurl", pipeline=PIPELINE, filters=FILTERS)
        swift = cluster.start_stock_proxy("proxy-tempurl")
        pair = Pair({"apus": apus, "swift": swift})
        s, _, _ = pair.admin("POST", "/v1/AUTH_test", {"X-Account-Meta-Temp-URL-Key": AKEY})
        check(s == 204, "account key POST: %d" % s)
        s, _, _ = pair.admin("PUT", "/v1/AUTH_test/tu", {"X-Container-Meta-Temp-URL-Key": CKEY})
        check(s in (201, 202), "container PUT: %d" % s)
        s, _, _ = pair.admin("PUT", "/v1/AUTH_test/fp", {"X-Container-Meta-Temp-URL-Key-2": CKEY})
        check(s in (201, 202), "container PUT: %d" % s)
        s, _, _ = pair.admin("PUT", "/v1/AUTH_test/tu/o%20x.txt",
                             {"Content-Type": "text/plain", "X-Object-Meta-Secret": "s",
                              "X-Object-Meta-Public-Color": "red"}, b"temp url body")
        check(s == 201, "object PUT: %d" % s)
        # Both proxies cache account info; give the key time to be seen by the stock one too.
        time.sleep(0.5)
        tempurl(pair)
        formpost(pair)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("tempurl and formpost: OK")


if __name__ == "__main__":
    main()
