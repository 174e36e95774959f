#!/usr/bin/env python3
"""What a client may not say to the proxy (issue 12), on a real cluster (tests/support/cluster.py):

1. A proxy whose pipeline has no gatekeeper: a client's X-Timestamp does not choose the write's
   timestamp (a PUT at 9999999999 can be deleted), and its X-Backend-*, sysmeta and transient
   sysmeta headers never reach the storage servers (checked with HEADs on the storage servers
   themselves, and a listing ETag that X-Backend-Container-Update-Override-Etag and
   X-Object-Sysmeta-Container-Update-Override-Etag cannot forge).
   Swift's required filters are added to that pipeline (dlo and versioned_writes).
2. Owners cannot delete system metadata: X-Remove-Account-Sysmeta-*, X-Remove-Container-Sysmeta-*
   (and their '_' spellings) leave the sysmeta the storage servers hold, while
   X-Remove-<Type>-Meta-* and X-Remove-Container-Read still remove.
3. gatekeeper's allow_reserved_names_header: X-Allow-Reserved-Names is honoured only with it.

usage: gatekeeper_test.py <build-dir>
"""
import hashlib
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def request(port, method, path, headers=None, body=b""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def token(cluster, port):
    _, h, _ = request(port, "GET", "/auth/v1.0",
                      {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
    return h["x-auth-token"]


def nodes(cluster, kind, *names):
    """(port, device, partition) of the primaries of an account, container or object."""
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    part, devs = Ring(os.path.join(cluster.etc, kind + ".ring.gz")).get_nodes(*names)
    return [(d["port"], d["device"], part) for d in devs]


def direct(cluster, kind, method, names, headers=None):
    """The same backend request to every primary; their answers."""
    from urllib.parse import quote
    out = []
    for port, device, part in nodes(cluster, kind, *names):
        path = "/%s/%d/%s" % (device, part, "/".join(quote(n) for n in names))
        out.append(request(port, method, path, headers))
    return out


def no_gatekeeper(cluster):
    port = cluster.start_proxy(
        "proxy-no-gatekeeper",
        pipeline="catch_errors proxy-logging cache tempauth proxy-server")
    paths = [os.path.join(cluster.root, "proxy-no-gatekeeper" + suffix)
             for suffix in (".log", ".out")]
    for middleware in ("dlo", "versioned_writes"):
        want = "Adding required filter %s to pipeline" % middleware
        logs = procs.wait_for_text(paths, want)
        check(want in logs, "the proxy adds %s as Swift does: %r" % (middleware, logs[-2000:]))
    tok = token(cluster, port)
    auth = {"X-Auth-Token": tok}
    base = "/v1/AUTH_test"
    s, _, _ = request(port, "PUT", base + "/gk", auth)
    check(s in (201, 202), "container PUT: %d" % s)
    forged = {"X-Container-Sysmeta-Evil": "1", "X-Backend-Storage-Policy-Index": "7"}
    s, _, _ = request(port, "PUT", base + "/gk-forged", dict(auth, **forged))
    check(s in (201, 202), "container PUT with forged headers: %d" % s)
    for st, h, _ in direct(cluster, "container", "HEAD", ("AUTH_test", "gk-forged")):
        check("x-container-sysmeta-evil" not in h,
              "client container sysmeta reached a container server: %r" % h)
        check(h.get("x-backend-storage-policy-index") == "0",
              "client policy index reached a container server: %r" % h)
    s, _, _ = request(port, "POST", base, dict(auth, **{"X-Account-Sysmeta-Evil": "1"}))
    check(s == 204, "account POST: %d" % s)
    for st, h, _ in direct(cluster, "account", "HEAD", ("AUTH_test",)):
        check("x-account-sysmeta-evil" not in h,
              "client account sysmeta reached an account server: %r" % h)

    body = b"the real body"
    headers = dict(auth, **{
        "X-Timestamp": "9999999999.00000",
        "X-Object-Sysmeta-Evil": "1",
        "X-Object-Transient-Sysmeta-Evil": "1",
        "X_Object_Sysmeta_Underscore": "1",
        "X-Backend-Container-Update-Override-Etag": "forged-backend",
        "X-Object-Sysmeta-Container-Update-Override-Etag": "forged-sysmeta",
        "X-Backend-Container-Update-Override-Size": "12345",
        "Content-Type": "text/plain"})
    s, h, _ = request(port, "PUT", base + "/gk/o", headers, body)
    check(s == 201, "object PUT with forged headers: %d" % s)
    now = time.time()
    for st, h, _ in direct(cluster, "object", "HEAD", ("AUTH_test", "gk", "o"),
                           {"X-Backend-Storage-Policy-Index": "0"}):
        check(st == 200, "object server HEAD: %d" % st)
        ts = float(h.get("x-timestamp", "0"))
        check(abs(ts - now) < 60, "stored timestamp is the proxy's, not the client's: %s" % ts)
        leaked = [k for k in h if "sysmeta" in k]
        check(not leaked, "client sysmeta reached an object server: %r" % leaked)
    s, _, listing = request(port, "GET", base + "/gk?format=json", auth)
    rows = json.loads(listing or b"[]")
    check(len(rows) == 1 and rows[0]["hash"] == hashlib.md5(body).hexdigest()
          and rows[0]["bytes"] == len(body),
          "listing ETag and size are the object's, not forged: %r" % rows)
    s, _, _ = request(port, "DELETE", base + "/gk/o", auth)
    check(s == 204, "DELETE of the object PUT with X-Timestamp 9999999999: %d" % s)
    s, _, _ = request(port, "GET", base + "/gk/o", auth)
    check(s == 404, "the object is gone after the DELETE: %d" % s)
    # The client's X-Timestamp is shunted, not honoured, on a DELETE too.
    request(port, "PUT", base + "/gk/o2", dict(auth, **{"Content-Type": "text/plain"}), b"x")
    s, _, _ = request(port, "DELETE", base + "/gk/o2", dict(auth, **{"X-Timestamp": "1.00000"}))
    check(s == 204, "DELETE with an old X-Timestamp still deletes: %d" % s)
    s, _, _ = request(port, "HEAD", base + "/gk/o2", auth)
    check(s == 404, "the object is gone after a DELETE with an old X-Timestamp: %d" % s)


def remove_sysmeta(cluster):
    tok = token(cluster, cluster.proxy_port)
    auth = {"X-Auth-Token": tok}
    port = cluster.proxy_port
    base = "/v1/AUTH_test"
    s, _, _ = request(port, "PUT", base + "/rm", auth)
    check(s in (201, 202), "container PUT: %d" % s)
    # Sysmeta only a middleware could write, put straight on the storage servers.
    ts = "%.5f" % time.time()
    direct(cluster, "account", "POST", ("AUTH_test",),
           {"X-Timestamp": ts, "X-Account-Sysmeta-Keep": "a", "X-Account-Meta-Gone": "m"})
    direct(cluster, "container", "POST", ("AUTH_test", "rm"),
           {"X-Timestamp": ts, "X-Container-Sysmeta-Keep": "c", "X-Container-Meta-Gone": "m",
            "X-Container-Read": ".r:*"})
    request(port, "POST", base, dict(auth, **{
        "X-Remove-Account-Sysmeta-Keep": "x", "X_Remove_Account_Sysmeta_Keep": "x",
        "X-Remove-Account-Meta-Gone": "x"}))
    request(port, "POST", base + "/rm", dict(auth, **{
        "X-Remove-Container-Sysmeta-Keep": "x", "X-Remove-Container-Meta-Gone": "x",
        "X-Remove-Container-Read": "x"}))
    for st, h, _ in direct(cluster, "account", "HEAD", ("AUTH_test",)):
        check(h.get("x-account-sysmeta-keep") == "a",
              "X-Remove-Account-Sysmeta- deleted account sysmeta: %r" % h)
        check("x-account-meta-gone" not in h, "X-Remove-Account-Meta- removes: %r" % h)
    for st, h, _ in direct(cluster, "container", "HEAD", ("AUTH_test", "rm")):
        check(h.get("x-container-sysmeta-keep") == "c",
              "X-Remove-Container-Sysmeta- deleted container sysmeta: %r" % h)
        check("x-container-meta-gone" not in h, "X-Remove-Container-Meta- removes: %r" % h)
        check("x-container-read" not in h, "X-Remove-Container-Read removes: %r" % h)


def reserved_names(cluster):
    """Swift's allow_reserved_names_header: only with it does a client's X-Allow-Reserved-Names
    reach the app (as X-Backend-Allow-Reserved-Names); X-Backend-Allow-Reserved-Names itself
    never does."""
    port = cluster.start_proxy(
        "proxy-reserved",
        pipeline="catch_errors gk-reserved proxy-logging cache tempauth proxy-server",
        filters="[filter:gk-reserved]\nuse = egg:swift#gatekeeper\n"
                "allow_reserved_names_header = true\n")
    auth = {"X-Auth-Token": token(cluster, port)}
    s, _, _ = request(port, "PUT", "/v1/AUTH_test/%00reserved",
                      dict(auth, **{"X-Allow-Reserved-Names": "true"}))
    check(s in (201, 202), "reserved container name with allow_reserved_names_header: %d" % s)
    s, _, _ = request(port, "HEAD", "/v1/AUTH_test/%00reserved",
                      dict(auth, **{"X-Backend-Allow-Reserved-Names": "true"}))
    check(s == 412, "X-Backend-Allow-Reserved-Names from a client counts: %d" % s)
    main_auth = {"X-Auth-Token": token(cluster, cluster.proxy_port)}
    s, _, _ = request(cluster.proxy_port, "HEAD", "/v1/AUTH_test/%00reserved",
                      dict(main_auth, **{"X-Allow-Reserved-Names": "true"}))
    check(s == 412, "X-Allow-Reserved-Names counts without allow_reserved_names_header: %d" % s)


def private_methods(cluster):
    """UPDATE (rows merged straight into a container's DB) is for requests made inside the
    proxy, with X-Backend-Allow-Private-Methods; a client sending that header is stripped of it
    by gatekeeper and gets a 405, and no row is merged."""
    port = cluster.proxy_port
    auth = {"X-Auth-Token": token(cluster, port)}
    s, _, _ = request(port, "PUT", "/v1/AUTH_test/private", auth)
    check(s in (201, 202), "container PUT: %d" % s)
    rows = ('[{"name": "forged", "created_at": "1700000000.00000", "size": 0, '
            '"content_type": "text/plain", "etag": "d41d8cd98f00b204e9800998ecf8427e", '
            '"deleted": 0, "storage_policy_index": 0}]').encode()
    for extra in ({}, {"X-Backend-Allow-Private-Methods": "true",
                       "X-Backend-Storage-Policy-Index": "0"}):
        s, h, _ = request(port, "UPDATE", "/v1/AUTH_test/private",
                          dict(auth, **extra, **{"Content-Type": "application/json"}), rows)
        check(s == 405, "client UPDATE %r: %d" % (sorted(extra), s))
        check("UPDATE" not in h.get("allow", ""), "client UPDATE: Allow %r" % h.get("allow"))
    s, _, body = request(port, "GET", "/v1/AUTH_test/private?format=json", auth)
    check(s == 200 and b"forged" not in body, "a client's UPDATE merged rows: %d %r" % (s, body))


def main():
    with procs.TempDir("apus-gatekeeper-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        for step in (no_gatekeeper, remove_sysmeta, reserved_names, private_methods):
            print("---", step.__name__)
            try:
                step(cluster)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
    print("gatekeeper:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
