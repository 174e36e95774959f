#!/usr/bin/env python3
"""tempauth against attacks and beside stock Swift (issue 12), on a real Apus cluster (4
storage nodes, memcached, proxies on free loopback ports):

1. Response splitting: an account name holding CR LF (in /auth/v1/<account>/auth, and in
   /v1/<account>/... with a bogus token or none) answers a plain 401 whose
   Www-Authenticate realm is percent-encoded: no header line of the attacker's, no CR, LF,
   NUL or quote of theirs inside the challenge. Read with raw sockets, so no client library
   tidies the answer.
2. Unpredictable tokens and transaction ids: tokens have Swift's shape (prefix, "tk",
   uuid4().hex: version nibble 4 and the RFC 4122 variant), are distinct for every user and
   for the same user at two proxies on separate memcacheds, and X-Trans-Id has Swift's
   uuid4().hex[:21] shape. (The old std::mt19937_64 hex matches the uuid4 shape with
   probability 1/64 per value, so this fails on it.)
3. Service tokens (reseller_prefix = AUTH, SERVICE; SERVICE_require_group = service): a user
   alone, or the service user alone, is refused on SERVICE_test; the user's token with the
   service user's X-Service-Token is the owner of SERVICE_test; a service token of a user
   without the group, or a bogus one, grants nothing.
4. Anonymous and bad-token 401s are the same as stock swift-proxy-server's on the same
   cluster: status, body and header names.

usage: auth_security_test.py <build-dir>
"""
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
failures = []

UUID4_HEX = r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}"
TOKEN_RE = re.compile(r"^AUTH_tk" + UUID4_HEX + "$")
TRANS_ID_RE = re.compile(r"^tx[0-9a-f]{12}4[0-9a-f]{8}-[0-9a-f]{10}$")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def raw_request(port, method, path, headers=()):
    """Sends a request as written and returns (status line, [header lines], body bytes), the
    head split only at CRLF, as a browser or cache would split it."""
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % port,
             "Connection: close"] + ["%s: %s" % h for h in headers]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    head_lines = head.decode("latin-1").split("\r\n")
    return head_lines[0], head_lines[1:], body


def get_token(port, user, key):
    status, headers, _ = procs.request(port, "GET", "/auth/v1.0",
                                       {"X-Auth-User": user, "X-Auth-Key": key})
    check(status == 200, "token for %s: %d" % (user, status))
    return headers.get("x-auth-token", ""), headers.get("x-storage-url", "")


# ---- 1. response splitting --------------------------------------------------------------------

def response_splitting(port):
    attacks = [
        # (path, extra headers, the injected header name that must not appear)
        ("/auth/v1/x%0d%0aSet-Cookie:%20pwned=1/auth", [], "set-cookie"),
        ("/auth/v1/x%0aSet-Cookie:%20pwned=1/auth", [], "set-cookie"),
        ("/v1/AUTH_x%0d%0aX-Evil:%201/c", [("X-Auth-Token", "AUTH_tkbogus")], "x-evil"),
        ("/v1/AUTH_x%0d%0aX-Evil:%201/c", [], "x-evil"),
        ("/v1/AUTH_x%22%00%0d%0aX-Evil:%201/c", [("X-Auth-Token", "AUTH_tkbogus")], "x-evil"),
        ("/auth/v1/x%22%00%0d%0aX-Evil:%201/auth", [], "x-evil"),
    ]
    for path, headers, injected in attacks:
        status, lines, _ = raw_request(port, "GET", path, headers)
        what = "%s (headers %r)" % (path, headers)
        check(status.startswith("HTTP/1.1 401 "), "%s: status %r" % (what, status))
        names = [line.split(":", 1)[0].strip().lower() for line in lines]
        check(injected not in names, "%s: injected header line in %r" % (what, lines))
        for line in lines:
            check("\r" not in line and "\n" not in line and "\0" not in line,
                  "%s: control character inside header line %r" % (what, line))
        challenges = [line for line in lines if line.lower().startswith("www-authenticate:")]
        check(len(challenges) == 1, "%s: challenges %r" % (what, challenges))
        if challenges:
            value = challenges[0].split(":", 1)[1].strip()
            check(re.fullmatch(r'Swift realm="[^"\x00-\x1f\x7f-\xff]*"', value) is not None,
                  "%s: challenge not a clean quoted realm: %r" % (what, value))
            check("%0D%0A" in value or "%0A" in value,
                  "%s: the realm lost the account's escaped newline: %r" % (what, value))
    # An ordinary realm is left alone.
    status, lines, _ = raw_request(port, "GET", "/auth/v1/AUTH_test/auth")
    check('Www-Authenticate: Swift realm="AUTH_test"' in lines,
          "plain realm: %r %r" % (status, lines))


# ---- 2. tokens and transaction ids ------------------------------------------------------------

USERS = ["user_test_tester = testing .admin"] + [
    "user_acct%d_u%d = key%d .admin" % (i, i, i) for i in range(12)]


def unpredictable_ids(cluster, port, port_other_memcache):
    tokens = {}
    for i in range(12):
        token, url = get_token(port, "acct%d:u%d" % (i, i), "key%d" % i)
        tokens["acct%d" % i] = token
        check(TOKEN_RE.match(token) is not None, "token shape (uuid4 hex): %r" % token)
        check(url.endswith("/v1/AUTH_acct%d" % i), "storage url %r" % url)
    check(len(set(tokens.values())) == len(tokens), "tokens not distinct: %r" % tokens)
    # The same user at a proxy that shares nothing with the first (its own memcached).
    again, _ = get_token(port_other_memcache, "acct0:u0", "key0")
    check(TOKEN_RE.match(again) is not None and again != tokens["acct0"],
          "second proxy's token %r vs %r" % (again, tokens["acct0"]))
    # A token issued here works here and only for its own account.
    status, _, _ = procs.request(port, "HEAD", "/v1/AUTH_acct1",
                                 {"X-Auth-Token": tokens["acct1"]})
    check(status in (200, 204), "HEAD own account with a fresh token: %d" % status)
    status, _, _ = procs.request(port, "GET", "/v1/AUTH_acct2",
                                 {"X-Auth-Token": tokens["acct1"]})
    check(status == 403, "another account's listing: %d" % status)
    ids = []
    for _ in range(64):
        _, headers, _ = procs.request(port, "GET", "/healthcheck")
        check(headers.get("x-openstack-request-id") == headers.get("x-trans-id"),
              "request id %r" % headers)
        ids.append(headers.get("x-trans-id", ""))
    bad = [tx for tx in ids if not TRANS_ID_RE.match(tx)]
    check(not bad, "%d of 64 trans ids not of uuid4().hex[:21] shape, e.g. %r" % (len(bad), bad[:3]))
    check(len(set(ids)) == 64, "trans ids not distinct: %d of 64" % len(set(ids)))


# ---- 3. service tokens -------------------------------------------------------------------------

SERVICE_FILTER = ("[filter:tempauth-svc]\nuse = egg:swift#tempauth\n"
                  "reseller_prefix = AUTH, SERVICE\nSERVICE_require_group = service\n"
                  "user_test_tester = testing .admin\nuser_test_tester3 = testing3\n"
                  "user_test5_tester5 = testing5 service\n"
                  "user_test6_tester6 = testing6 .admin\n")


SERVICE_PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats "
                    "tempauth-svc proxy-server")


def service_tokens(cluster, ps):
    port = cluster.start_proxy("proxy-service", pipeline=SERVICE_PIPELINE, filters=SERVICE_FILTER)
    user, url = get_token(port, "test:tester", "testing")
    service, _ = get_token(port, "test5:tester5", "testing5")
    plain, _ = get_token(port, "test:tester3", "testing3")
    admin6, _ = get_token(port, "test6:tester6", "testing6")
    check(url.endswith("/v1/AUTH_test"), "storage url %r" % url)

    def req(method, path, auth, service_token=None, body=None):
        headers = {"X-Auth-Token": auth}
        if service_token is not None:
            headers["X-Service-Token"] = service_token
        if body is not None:
            headers["Content-Length"] = str(len(body))
        status, _, _ = procs.request(port, method, path, headers, body)
        return status

    # The user's own AUTH_ account needs no service token (no require_group on AUTH_).
    check(req("HEAD", "/v1/AUTH_test", user) in (200, 204), "user HEAD AUTH_test")
    check(req("HEAD", "/v1/AUTH_test", user, "AUTH_tkbogus") in (200, 204),
          "user HEAD AUTH_test with a bogus service token")
    # Swift's scenario order (tests.py TestServiceToken): PUT, POST, HEAD, GET, OPTIONS on the
    # account, a container, an object; then DELETE object, container, account.
    scenario = []
    for path in ("/v1/SERVICE_test", "/v1/SERVICE_test/c", "/v1/SERVICE_test/c/o"):
        for method in ("PUT", "POST", "HEAD", "GET", "OPTIONS"):
            scenario.append((method, path))
    for path in ("/v1/SERVICE_test/c/o", "/v1/SERVICE_test/c", "/v1/SERVICE_test"):
        scenario.append(("DELETE", path))

    def refused(auth, service_token, who):
        for method, path in scenario:
            status = req(method, path, auth, service_token, b"x" if method == "PUT" else None)
            if method == "OPTIONS":
                check(200 <= status < 300, "%s: OPTIONS %s: %d" % (who, path, status))
            else:
                check(400 <= status < 500 and status != 404,
                      "%s: %s %s not refused: %d" % (who, method, path, status))

    refused(user, None, "user alone")
    refused(service, None, "service user alone")
    refused(service, service, "service user in both headers")
    refused(user, plain, "user with a service token lacking the group")
    refused(user, "AUTH_tkbogus", "user with a bogus service token")
    refused(admin6, service, "another account's admin with the service token")
    def user_plus_service(port):
        # Tokens from this proxy: Swift issues its own unless the shared memcached holds one
        # with the very groups it would give.
        user_token, _ = get_token(port, "test:tester", "testing")
        service_token, _ = get_token(port, "test5:tester5", "testing5")
        statuses = []
        for method, path in scenario:
            status = procs.request(port, method, path,
                                   {"X-Auth-Token": user_token, "X-Service-Token": service_token},
                                   b"x" if method == "PUT" else None)[0]
            statuses.append(status)
            account_level = path == "/v1/SERVICE_test"
            if account_level and method in ("PUT", "DELETE"):
                ok = 400 <= status < 500  # tempauth never lets an owner PUT or DELETE its account
            else:
                ok = 200 <= status < 300
            check(ok, "user + service token at %d: %s %s: %d" % (port, method, path, status))
        return statuses

    apus = user_plus_service(port)
    # Stock Swift with the same tempauth on the same cluster and memcached (so it accepts the
    # tokens Apus issued) answers the same.
    swift_port = start_swift_proxy(cluster, ps, "swift-proxy-service", SERVICE_PIPELINE,
                                   SERVICE_FILTER)
    swift = user_plus_service(swift_port)
    check(apus == swift, "user + service token: Apus %r, Swift %r" % (apus, swift))


# ---- 4. 401s beside stock Swift ----------------------------------------------------------------

IGNORED = {"date", "x-trans-id", "x-openstack-request-id", "connection"}


TEMPAUTH = "[filter:tempauth]\nuse = egg:swift#tempauth\nuser_test_tester = testing .admin\n"


def start_swift_proxy(cluster, ps, name="swift-proxy",
                      pipeline="catch_errors gatekeeper healthcheck proxy-logging cache "
                      "listing_formats tempauth proxy-server", tempauth=TEMPAUTH):
    """Stock swift-proxy-server on the cluster's rings and memcached; returns its port."""
    port = procs.free_port()
    conf = os.path.join(cluster.etc, name + ".conf")
    with open(conf, "w") as f:
        f.write("[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %d\nworkers = 1\nuser = root\n"
                "swift_dir = %s\n\n[pipeline:main]\npipeline = %s\n\n"
                "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n\n"
                "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n"
                "[filter:healthcheck]\nuse = egg:swift#healthcheck\n"
                "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
                "[filter:cache]\nuse = egg:swift#memcache\nmemcache_servers = 127.0.0.1:%d\n"
                "[filter:listing_formats]\nuse = egg:swift#listing_formats\n%s"
                % (port, cluster.etc, pipeline, cluster.memcached_port, tempauth))
    log = os.path.join(cluster.root, name + ".out")
    proc = ps.start(["/usr/bin/python3", os.path.join(TOP, "tests", "support",
                                                        "run_swift_server.py"),
                     cluster.etc, "proxy", conf], log)
    procs.wait_for_port(port, timeout=30, proc=proc, log_path=log)
    return port


def denials_match_swift(cluster, ps):
    swift_port = start_swift_proxy(cluster, ps)
    token, _ = get_token(cluster.proxy_port, "test:tester", "testing")
    procs.request(cluster.proxy_port, "PUT", "/v1/AUTH_test/public", {"X-Auth-Token": token})
    procs.request(cluster.proxy_port, "PUT", "/v1/AUTH_test/public/o",
                  {"X-Auth-Token": token}, b"hello")
    cases = []
    for path in ("/v1/AUTH_test", "/v1/AUTH_test/public", "/v1/AUTH_test/public/o",
                 "/v1/AUTH_test/missing/o", "/v1/AUTH_nobody/c", "/v1/OTHER_x/c"):
        for method in ("GET", "HEAD", "PUT", "POST", "DELETE"):
            cases.append((method, path, {}))
        cases.append(("GET", path, {"X-Auth-Token": "AUTH_tkbogus"}))
    for path, headers in (("/auth/v1.0", {}), ("/auth/v1.0", {"X-Auth-User": "test:tester"}),
                          ("/auth/v1.0", {"X-Auth-User": "test:tester", "X-Auth-Key": "no"}),
                          ("/auth/v1.0", {"X-Auth-User": "test:nobody", "X-Auth-Key": "no"}),
                          ("/auth/v1/test/auth", {"X-Auth-User": "test:tester"}),
                          ("/auth/v1/test/auth", {"X-Storage-User": "tester",
                                                  "X-Storage-Pass": "no"})):
        cases.append(("GET", path, headers))
        cases.append(("HEAD", path, headers))
    for method, path, headers in cases:
        body = b"" if method in ("PUT", "POST") else None
        apus = procs.request(cluster.proxy_port, method, path, headers, body)
        swift = procs.request(swift_port, method, path, headers, body)
        what = "%s %s %r" % (method, path, headers)
        if swift[0] == 405:
            continue  # account PUT and DELETE (allow_account_management off): not auth's answer
        check(apus[0] == swift[0], "%s: status %d, Swift %d" % (what, apus[0], swift[0]))
        check(apus[2] == swift[2], "%s: body %r, Swift %r" % (what, apus[2], swift[2]))
        ah = {k: v for k, v in apus[1].items() if k not in IGNORED}
        sh = {k: v for k, v in swift[1].items() if k not in IGNORED}
        check(ah == sh, "%s: headers %r, Swift %r" % (what, ah, sh))


def main():
    with procs.TempDir("apus-auth-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        steps = [
            ("response splitting", lambda: response_splitting(cluster.proxy_port)),
            ("tokens and trans ids", lambda: unpredictable_ids(
                cluster,
                cluster.start_proxy("proxy-ids", filters="".join(
                    "%s\n" % u for u in USERS[1:])),
                second_memcache_proxy(cluster, ps, root))),
            ("service tokens", lambda: service_tokens(cluster, ps)),
            ("401s beside Swift", lambda: denials_match_swift(cluster, ps)),
        ]
        only = os.environ.get("APUS_AUTH_TEST_ONLY")
        for name, step in steps:
            if only and only not in name:
                continue
            before = len(failures)
            t0 = time.monotonic()
            step()
            print("%s: %s (%.1f s)" % (name, "ok" if len(failures) == before else "FAILED",
                                       time.monotonic() - t0))
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("all passed")


def second_memcache_proxy(cluster, ps, root):
    """A proxy on the same storage nodes with its own memcached, so it shares no token."""
    mc_port = procs.free_port()
    log = os.path.join(root, "memcached-2.out")
    mc = ps.start(["/usr/bin/memcached", "-u", "root", "-l", "127.0.0.1", "-U", "0",
                   "-p", str(mc_port), "-m", "16"], log)
    procs.wait_for_port(mc_port, proc=mc, log_path=log)
    saved = cluster.memcached_port
    cluster.memcached_port = mc_port
    try:
        return cluster.start_proxy("proxy-other-memcache", filters="".join(
            "%s\n" % u for u in USERS[1:]))
    finally:
        cluster.memcached_port = saved


if __name__ == "__main__":
    main()
