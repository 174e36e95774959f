#!/usr/bin/env python3
"""The small middlewares of issue 14 (proxy/limits.h) on a real cluster (tests/support/cluster.py):
an Apus proxy and a stock swift-proxy-server on the same config and storage get the same
requests and must give the same answers (status, the headers that matter, body):

1. container_quotas and account_quotas: quota headers (validation, reseller only), uploads over
   a quota, and the ways around it that Swift closes: COPY, PUT with X-Copy-From, a COPY of a
   large object (SLO) whose manifest is small; resellers are not limited, and a user who may not
   write gets the auth answer, not 413. Nothing refused is stored.
2. name_check, read_only (an account marked read only on the account servers themselves),
   etag_quoter (the flags on account and container), domain_remap (hosts for an account and a
   container, a bad host), list_endpoints (v1, v2, errors), and the /info sections.
3. cname_lookup, Apus only (stock Swift's needs dnspython, which Debian's swift does not pull
   in): hosts resolved through a DNS server this test runs on a 127.0.0.x address, named in the
   middleware's `nameservers` option; CNAME chains, names without one, caching in memcached.

usage: limits_test.py <build-dir>
"""
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck name_check proxy-logging cache list-endpoints "
            "domain_remap listing_formats bulk tempauth read_only copy container-quotas "
            "account-quotas etag-quoter slo dlo proxy-logging proxy-server")
# More tempauth users (these lines land in [filter:tempauth]), then the filters.
FILTERS = ("user_admin_admin = admin .admin .reseller_admin\n"
           "user_test_tester3 = testing3\n"
           "user_test2_tester2 = testing2 .admin\n"
           "user_ro_tester = testing .admin\n"
           "[filter:bulk]\nuse = egg:swift#bulk\n"
           "[filter:name_check]\nuse = egg:swift#name_check\n"
           "[filter:list-endpoints]\nuse = egg:swift#list_endpoints\n"
           "[filter:domain_remap]\nuse = egg:swift#domain_remap\nstorage_domain = example.net\n"
           "[filter:read_only]\nuse = egg:swift#read_only\n"
           "[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:container-quotas]\nuse = egg:swift#container_quotas\n"
           "[filter:account-quotas]\nuse = egg:swift#account_quotas\n"
           "[filter:etag-quoter]\nuse = egg:swift#etag_quoter\n"
           "[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:dlo]\nuse = egg:swift#dlo\n")
COMPARED = ("content-type", "etag", "location", "allow", "x-container-meta-quota-bytes",
            "x-container-meta-quota-count", "x-account-meta-quota-bytes",
            "x-container-rfc-compliant-etags", "x-account-rfc-compliant-etags",
            "x-copied-from")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def request(port, method, path, headers=None, body=b"", chunked=False):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest(method, path, skip_host="Host" in (headers or {}),
                        skip_accept_encoding=True)
        headers = dict(headers or {})
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
        elif body or method in ("PUT", "POST"):
            headers.setdefault("Content-Length", str(len(body)))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        if chunked:
            conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        elif body:
            conn.send(body)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def token(port, user, key):
    _, h, _ = request(port, "GET", "/auth/v1.0", {"X-Auth-User": user, "X-Auth-Key": key})
    return h.get("x-auth-token", "")


class Pair:
    USERS = {"tester": ("test:tester", "testing"), "tester3": ("test:tester3", "testing3"),
             "tester2": ("test2:tester2", "testing2"), "admin": ("admin:admin", "admin"),
             "ro": ("ro:tester", "testing")}

    def __init__(self, ports):
        self.ports = ports
        self.tokens = {(side, u): token(port, *cred) for side, port in ports.items()
                       for u, cred in self.USERS.items()}

    def send(self, side, method, path, headers=None, body=b"", user="tester", chunked=False):
        h = {k: v.replace("{side}", side) for k, v in (headers or {}).items()}
        if user:
            h["X-Auth-Token"] = self.tokens[(side, user)]
        return request(self.ports[side], method, path.replace("{side}", side), h, body, chunked)

    def compare(self, what, method, path, headers=None, body=b"", expect=None, user="tester",
                chunked=False, compare_body=True):
        got = {side: self.send(side, method, path, headers, body, user, chunked)
               for side in self.ports}
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        label = "%s (%s %s)" % (what, method, path)
        check(sa == ss, "%s: status swift %d, apus %d: %r / %r" % (label, ss, sa, bs[:200],
                                                                  ba[:200]))
        if expect is not None:
            check(ss == expect, "%s: swift answers %d, the test expects %d" % (label, ss, expect))
        sided = "{side}" in path + "".join((headers or {}).values())
        for name in COMPARED:
            va, vs = ha.get(name) or "", hs.get(name) or ""
            if sided:
                va, vs = va.replace("apus", "{side}"), vs.replace("swift", "{side}")
            check(va == vs, "%s: header %s: swift %r, apus %r" % (label, name, vs, va))
        if compare_body and method != "HEAD":
            if sided:
                ba, bs = ba.replace(b"apus", b"{side}"), bs.replace(b"swift", b"{side}")
            check(ba == bs, "%s: body swift %r, apus %r" % (label, bs[:300], ba[:300]))
        return got


def object_missing(pair, path, user="tester"):
    for side in pair.ports:
        s, _, _ = pair.send(side, "HEAD", path, user=user)
        check(s == 404, "%s: %s was stored: HEAD %d" % (side, path.replace("{side}", side), s))


def container_quotas(pair):
    base = "/v1/AUTH_test/{side}-q"
    for c in ("{side}-q", "{side}-free", "{side}-segs"):
        pair.compare("container PUT", "PUT", "/v1/AUTH_test/" + c, expect=201, compare_body=False)
    pair.compare("bad bytes quota", "POST", base, {"X-Container-Meta-Quota-Bytes": "ten"},
                 expect=400)
    pair.compare("bad count quota", "PUT", base, {"X-Container-Meta-Quota-Count": "-1"},
                 expect=400)
    pair.compare("quota set", "POST", base, {"X-Container-Meta-Quota-Bytes": "10",
                                             "X-Container-Meta-Quota-Count": "3"}, expect=204)
    pair.compare("quota shown", "HEAD", base, expect=204)
    pair.compare("11 bytes", "PUT", base + "/big", body=b"01234567890", expect=413)
    object_missing(pair, base + "/big")
    pair.compare("a stranger over quota", "PUT", base + "/big", body=b"01234567890",
                 user="tester3", expect=403)
    pair.compare("10 bytes", "PUT", base + "/fits", body=b"0123456789", expect=201)
    # The container's bytes now count, once the object servers' container updates are in (a
    # container HEAD also refreshes the info cache the proxies share).
    for side in pair.ports:
        for _ in range(100):
            _, h, _ = pair.send(side, "HEAD", base)
            if h.get("x-container-bytes-used") == "10":
                break
            time.sleep(0.1)
        check(h.get("x-container-bytes-used") == "10", "%s: container bytes %r" % (side, h))
        # A POST drops the cached info in both proxies (Swift's proxy also refreshes it on a
        # container HEAD; Apus's does not yet).
        pair.send(side, "POST", base, {"X-Container-Meta-Quota-Bytes": "10"})
    pair.compare("1 more byte", "PUT", base + "/one", body=b"x", expect=413)
    pair.compare("a chunked upload counts as 0 bytes", "PUT", base + "/chunked", body=b"y",
                 chunked=True, expect=201, compare_body=False)
    # Copies into the full container.
    pair.compare("source", "PUT", "/v1/AUTH_test/{side}-free/src", body=b"12345", expect=201)
    pair.compare("COPY into it", "COPY", "/v1/AUTH_test/{side}-free/src",
                 {"Destination": "{side}-q/copied"}, expect=413)
    pair.compare("X-Copy-From into it", "PUT", base + "/copied",
                 {"X-Copy-From": "{side}-free/src"}, expect=413)
    object_missing(pair, base + "/copied")
    # A large object: segments elsewhere, a small manifest (allowed, as in Swift), then a COPY
    # of the whole object into the container, which the quota sees at its full size.
    pair.compare("count quota raised", "POST", base, {"X-Container-Meta-Quota-Bytes": "100000",
                                                      "X-Container-Meta-Quota-Count": "10"},
                 expect=204)
    seg = b"s" * 1024 * 1024
    for n in (1, 2):
        pair.compare("segment", "PUT", "/v1/AUTH_test/{side}-segs/%d" % n, body=seg, expect=201)
    manifest = json.dumps([{"path": "/{side}-segs/1"}, {"path": "/{side}-segs/2"}])
    for side in pair.ports:
        s, _, b = pair.send(side, "PUT", "/v1/AUTH_test/%s-free/slo?multipart-manifest=put" % side,
                            body=manifest.replace("{side}", side).encode())
        check(s == 201, "%s: SLO manifest PUT: %d %r" % (side, s, b[:200]))
    pair.compare("COPY of a large object into the quota", "COPY", "/v1/AUTH_test/{side}-free/slo",
                 {"Destination": "{side}-q/large"}, expect=413)
    object_missing(pair, base + "/large")
    pair.compare("the manifest itself fits", "COPY",
                 "/v1/AUTH_test/{side}-free/slo?multipart-manifest=get",
                 {"Destination": "{side}-q/manifest"}, expect=201, compare_body=False)
    pair.compare("count: the 10th", "POST", base, {"X-Container-Meta-Quota-Count": "1"},
                 expect=204)
    pair.compare("count over", "PUT", base + "/more", body=b"", expect=413)


def account_quotas(pair):
    acct = "/v1/AUTH_test2"
    pair.compare("account quota by its owner", "POST", acct,
                 {"X-Account-Meta-Quota-Bytes": "10"}, user="tester2", expect=403)
    pair.compare("account quota removed by its owner", "POST", acct,
                 {"X-Remove-Account-Meta-Quota-Bytes": "x"}, user="tester2", expect=403)
    pair.compare("bad account quota by a reseller", "POST", acct,
                 {"X-Account-Meta-Quota-Bytes": "ten"}, user="admin", expect=400)
    pair.compare("container", "PUT", acct + "/{side}", user="tester2", expect=201,
                 compare_body=False)
    pair.compare("account quota by a reseller", "POST", acct,
                 {"X-Account-Meta-Quota-Bytes": "10"}, user="admin", expect=204)
    pair.compare("account quota shown", "HEAD", acct, user="tester2", expect=204)
    pair.compare("over the account quota", "PUT", acct + "/{side}/big", body=b"x" * 11,
                 user="tester2", expect=413)
    object_missing(pair, acct + "/{side}/big", user="tester2")
    pair.compare("a stranger over the account quota", "PUT", acct + "/{side}/big",
                 body=b"x" * 11, user="tester3", expect=403)
    pair.compare("within the account quota", "PUT", acct + "/{side}/ok", body=b"x" * 10,
                 user="tester2", expect=201)
    pair.compare("COPY within the account quota", "COPY", acct + "/{side}/ok",
                 {"Destination": "{side}/copy"}, user="tester2", expect=201)
    pair.compare("quota lowered", "POST", acct, {"X-Account-Meta-Quota-Bytes": "5"},
                 user="admin", expect=204)
    pair.compare("COPY past the account quota", "COPY", acct + "/{side}/ok",
                 {"Destination": "{side}/copy2"}, user="tester2", expect=413)
    pair.compare("X-Copy-From past the account quota", "PUT", acct + "/{side}/copy3",
                 {"X-Copy-From": "{side}/ok"}, user="tester2", expect=413)
    object_missing(pair, acct + "/{side}/copy2", user="tester2")
    object_missing(pair, acct + "/{side}/copy3", user="tester2")
    pair.compare("a reseller's upload", "PUT", acct + "/{side}/by-reseller", body=b"x" * 11,
                 user="admin", expect=201)
    pair.compare("a reseller's COPY", "COPY", acct + "/{side}/ok",
                 {"Destination": "{side}/reseller-copy"}, user="admin", expect=201)
    pair.compare("quota removed", "POST", acct, {"X-Remove-Account-Meta-Quota-Bytes": "1"},
                 user="admin", expect=204)
    pair.compare("after removal", "PUT", acct + "/{side}/big", body=b"x" * 11, user="tester2",
                 expect=201)


def names_and_flags(pair, cluster):
    pair.compare("forbidden char", "PUT", "/v1/AUTH_test/{side}-free/a%3Cb", body=b"x",
                 expect=400)
    pair.compare("too long", "PUT", "/v1/AUTH_test/{side}-free/" + "x" * 250, body=b"x",
                 expect=400)
    pair.compare("dot segment", "GET", "/v1/AUTH_test/{side}-free/./x", expect=400)
    # etag_quoter
    pair.compare("plain etag", "HEAD", "/v1/AUTH_test/{side}-free/src", expect=200)
    pair.compare("container flag", "POST", "/v1/AUTH_test/{side}-free",
                 {"X-Container-Rfc-Compliant-Etags": "yes"}, expect=204)
    pair.compare("container flag shown", "HEAD", "/v1/AUTH_test/{side}-free", expect=204)
    pair.compare("quoted etag", "HEAD", "/v1/AUTH_test/{side}-free/src", expect=200)
    pair.compare("quoted etag", "GET", "/v1/AUTH_test/{side}-free/src", expect=200)
    pair.compare("container flag off", "POST", "/v1/AUTH_test/{side}-free",
                 {"X-Container-Rfc-Compliant-Etags": "no"}, expect=204)
    pair.compare("etag again", "HEAD", "/v1/AUTH_test/{side}-free/src", expect=200)
    pair.compare("container flag cleared", "POST", "/v1/AUTH_test/{side}-free",
                 {"X-Remove-Container-Rfc-Compliant-Etags": "x"}, expect=204)
    # domain_remap
    for host in ("AUTH_test.example.net", "auth-test.example.net:8080"):
        pair.compare("account by host", "GET", "/", {"Host": host}, expect=200)
        pair.compare("object by host", "GET", "/{side}-free/src", {"Host": host}, expect=200)
    pair.compare("container by host", "GET", "/src", {"Host": "{side}-free.AUTH-test.example.net"},
                 expect=200)
    pair.compare("container listing by host", "GET", "/",
                 {"Host": "{side}-free.AUTH_test.example.net"}, expect=200)
    pair.compare("bad host", "GET", "/", {"Host": "a.b.AUTH_test.example.net"}, expect=400)
    pair.compare("other prefix", "GET", "/", {"Host": "bob.example.net"})
    # list_endpoints
    for path in ("/endpoints/AUTH_test", "/endpoints/AUTH_test/c", "/endpoints/AUTH_test/c/o%20x",
                 "/endpoints/v1/AUTH_test/c/o", "/endpoints/v2/AUTH_test/c",
                 "/endpoints/v2/AUTH_test/apus-free/o/x", "/endpoints/v3/AUTH_test",
                 "/endpoints/", "/endpoints/v2"):
        pair.compare("endpoints", "GET", path, user=None)
    pair.compare("endpoints", "PUT", "/endpoints/AUTH_test", user=None, expect=405)
    # read_only: the "ro" account is marked on the account servers themselves (only an
    # operator can), before any proxy saw it.
    pair.compare("read only account", "PUT", "/v1/AUTH_ro/{side}", user="ro", expect=405)
    pair.compare("read only account", "POST", "/v1/AUTH_ro", {"X-Account-Meta-A": "b"}, user="ro",
                 expect=405)
    pair.compare("read only account", "GET", "/v1/AUTH_ro", user="ro", expect=204,
                 compare_body=False)
    pair.compare("read only destination", "COPY", "/v1/AUTH_test/{side}-free/src",
                 {"Destination": "c/o", "Destination-Account": "AUTH_ro"}, expect=405)
    pair.compare("empty destination account", "COPY", "/v1/AUTH_test/{side}-free/src",
                 {"Destination": "c/o", "Destination-Account": ""}, expect=412)
    got = pair.compare("info", "GET", "/info", user=None, compare_body=False)
    infos = {side: json.loads(got[side][2]) for side in got}
    for key in ("container_quotas", "account_quotas", "name_check", "etag_quoter",
                "domain_remap"):
        check(infos["apus"].get(key) == infos["swift"].get(key) and key in infos["apus"],
              "/info %s: swift %r, apus %r" % (key, infos["swift"].get(key),
                                               infos["apus"].get(key)))
    for key in ("read_only", "list_endpoints"):
        check(key not in infos["apus"] and key not in infos["swift"],
              "/info %s should be absent" % key)


def mark_read_only(cluster):
    """Creates account AUTH_ro on every account server with X-Account-Sysmeta-Read-Only."""
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    part, devs = Ring(os.path.join(cluster.etc, "account.ring.gz")).get_nodes("AUTH_ro")
    ts = "%.5f" % time.time()
    for d in devs:
        s, _, _ = request(d["port"], "PUT", "/%s/%d/AUTH_ro" % (d["device"], part),
                          {"X-Timestamp": ts, "X-Account-Sysmeta-Read-Only": "true"})
        check(s in (201, 202), "account server PUT of AUTH_ro: %d" % s)


# ---- cname_lookup ----------------------------------------------------------------------------

class TinyDns:
    """A DNS server on a 127.0.0.x UDP port answering CNAME queries from `records`
    (name -> target, or None for NXDOMAIN; a name not listed exists without a CNAME)."""

    def __init__(self, records):
        self.records = {k.lower(): v for k, v in records.items()}
        self.queries = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ip = "127.0.0.%d" % random.randint(2, 250)
        self.sock.bind((self.ip, 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @staticmethod
    def encode(name):
        return b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p) + b"\0"

    def serve(self):
        while self.running:
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            qid, _, qd = struct.unpack("!HHH", data[:6])
            pos, labels = 12, []
            while data[pos]:
                n = data[pos]
                labels.append(data[pos + 1:pos + 1 + n].decode())
                pos += 1 + n
            question = data[12:pos + 5]
            qname = ".".join(labels).lower()
            self.queries.append(qname)
            target = self.records.get(qname, "")
            if target is None:
                flags, answers = 0x8183, b""
            elif target == "":
                flags, answers = 0x8180, b""
            else:
                rdata = self.encode(target)
                flags = 0x8180
                answers = b"\xc0\x0c" + struct.pack("!HHIH", 5, 1, 120, len(rdata)) + rdata
            head = struct.pack("!HHHHHH", qid, flags, 1, 1 if answers else 0, 0, 0)
            self.sock.sendto(head + question + answers, peer)

    def stop(self):
        self.running = False
        self.thread.join()
        self.sock.close()


def cname(cluster):
    dns = TinyDns({"www.customer.org": "AUTH_test.example.net",
                   "files.customer.org": "cq.AUTH_test.example.net",
                   "chain.customer.org": "www.customer.org",
                   "loop.customer.org": "loop.customer.org",
                   "nx.customer.org": None})
    try:
        port = cluster.start_proxy(
            "proxy-cname",
            pipeline="catch_errors gatekeeper healthcheck proxy-logging cache cname_lookup "
                     "domain_remap listing_formats tempauth proxy-server",
            filters="[filter:cname_lookup]\nuse = egg:swift#cname_lookup\n"
                    "storage_domain = example.net\nnameservers = %s:%d\n"
                    "[filter:domain_remap]\nuse = egg:swift#domain_remap\n"
                    "storage_domain = example.net\n" % (dns.ip, dns.port))
        tok = token(port, "test:tester", "testing")
        s, _, _ = request(port, "PUT", "/v1/AUTH_test/cq", {"X-Auth-Token": tok})
        check(s in (201, 202), "cname: container PUT %d" % s)
        s, _, _ = request(port, "PUT", "/v1/AUTH_test/cq/hello", {"X-Auth-Token": tok}, b"hi")
        check(s == 201, "cname: object PUT %d" % s)
        s, _, body = request(port, "GET", "/", {"Host": "www.customer.org:8080",
                                                "X-Auth-Token": tok})
        check(s == 200 and b"cq" in body.split(b"\n"),
              "cname: account through a CNAME: %d %r" % (s, body[:200]))
        s, _, body = request(port, "GET", "/hello", {"Host": "files.customer.org"})
        check(s == 401, "cname: anonymous object through a CNAME to a container: %d" % s)
        s, _, body = request(port, "GET", "/hello", {"Host": "files.customer.org",
                                                     "X-Auth-Token": tok})
        check(s == 200 and body == b"hi", "cname: object through a CNAME: %d %r" % (s, body))
        asked = len(dns.queries)
        s, _, _ = request(port, "GET", "/", {"Host": "www.customer.org", "X-Auth-Token": tok})
        check(s == 200 and len(dns.queries) == asked,
              "cname: the second lookup comes from memcached: %d, queries %r" % (s, dns.queries))
        for host, body in (("chain.customer.org", b"CNAME lookup failed after 1 tries"),
                           ("loop.customer.org",
                            b"CNAME lookup failed to resolve to a valid domain"),
                           ("nx.customer.org", b"CNAME lookup failed to resolve to a valid domain"),
                           ("plain.customer.org",
                            b"CNAME lookup failed to resolve to a valid domain")):
            s, h, b = request(port, "GET", "/", {"Host": host, "X-Auth-Token": tok})
            check(s == 400 and b == body and h.get("content-type") == "text/plain",
                  "cname: %s: %d %r %r" % (host, s, b, h.get("content-type")))
        # lookup_depth 2 follows the chain.
        port2 = cluster.start_proxy(
            "proxy-cname-2",
            pipeline="catch_errors gatekeeper healthcheck proxy-logging cache cname_lookup "
                     "domain_remap listing_formats tempauth proxy-server",
            filters="[filter:cname_lookup]\nuse = egg:swift#cname_lookup\n"
                    "storage_domain = example.net\nlookup_depth = 2\nnameservers = %s:%d\n"
                    "[filter:domain_remap]\nuse = egg:swift#domain_remap\n"
                    "storage_domain = example.net\n" % (dns.ip, dns.port))
        s, _, body = request(port2, "GET", "/", {"Host": "chain.customer.org",
                                                 "X-Auth-Token": tok})
        check(s == 200 and b"cq" in body.split(b"\n"), "cname: a chain of two: %d %r" % (s, body))
        s, _, body = request(port2, "GET", "/info", {"Host": "127.0.0.1"})
        check(json.loads(body).get("cname_lookup") == {"lookup_depth": 2},
              "cname: /info %r" % json.loads(body).get("cname_lookup"))
    finally:
        dns.stop()


def main():
    with procs.TempDir("apus-limits-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        mark_read_only(cluster)
        apus = cluster.start_proxy("proxy-limits", pipeline=PIPELINE, filters=FILTERS)
        swift = cluster.start_stock_proxy("proxy-limits")
        pair = Pair({"apus": apus, "swift": swift})
        container_quotas(pair)
        account_quotas(pair)
        names_and_flags(pair, cluster)
        cname(cluster)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("limits: OK")


if __name__ == "__main__":
    main()
