#!/usr/bin/env python3
"""container_sync, the proxy's half (issue 14), on a real cluster (tests/support/cluster.py): an
Apus proxy and a stock swift-proxy-server on the same config, realms file, storage and memcached
get the same container-sync requests, signed with Swift's own ContainerSyncRealms.get_sig(),
each side writing its own objects, and must give the same answers (status, body, the headers a
client acts on) and store the same things:

- PUTs signed with the realm's key and with key2 store the object with the sync's X-Timestamp;
  a bad signature, an unknown realm, a container without X-Container-Sync-Key, a header of two
  words answer 401 and store nothing;
- a PUT or DELETE older than what is stored, a newer DELETE, a POST;
- an SLO manifest in Swift's stored format PUT raw (X-Static-Large-Object, no
  ?multipart-manifest=put), read back whole once its segment is there;
- a static symlink whose target is not there (stored with the ETag and size sent), and one
  without X-Symlink-Target-Bytes;
- X-Container-Sync-To on a container with object versioning (400), full URLs refused by a pair
  of proxies with allow_full_urls = false, realm values accepted;
- /info's container_sync section, current cluster marked, and read again after the realms
  file changes.

usage: container_sync_proxy_test.py <build-dir>
"""
import hashlib
import http.client
import json
import logging
import os
import sys
import time
import uuid

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402


from swift.common.container_sync_realms import ContainerSyncRealms  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats "
            "container_sync tempauth copy slo dlo versioned_writes symlink proxy-logging "
            "proxy-server")
FILTERS = ("[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:dlo]\nuse = egg:swift#dlo\n"
           "[filter:symlink]\nuse = egg:swift#symlink\n"
           "[filter:versioned_writes]\nuse = egg:swift#versioned_writes\n"
           "allow_object_versioning = true\n")
SYNC_FILTER = "[filter:container_sync]\nuse = egg:swift#container_sync\n"
COMPARED = ("content-type", "content-length", "www-authenticate", "etag", "x-timestamp",
            "x-static-large-object", "x-symlink-target", "x-symlink-target-etag",
            "x-symlink-target-bytes", "x-object-meta-color", "last-modified")
ACCOUNT = "/v1/AUTH_test"
USER_KEY = "user-secret"
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


def write_realms(path, port, extra=""):
    with open(path, "w") as f:
        f.write("[DEFAULT]\nmtime_check_interval = 0\n\n"
                "[realm1]\nkey = realm-key\nkey2 = realm-key-2\n"
                "cluster_c1 = http://127.0.0.1:%d/v1/\ncluster_c2 = http://127.0.0.2/v1/\n\n"
                "[realm2]\nkey = other-key\ncluster_c3 = http://127.0.0.3/v1/\n%s"
                % (port, extra))


class Pair:
    """The same requests to an Apus proxy and a stock Swift one, each on objects named after it
    ("{side}" in a path or header is the side's name)."""

    def __init__(self, ports, realms):
        self.ports = ports
        self.realms = realms
        _, h, _ = request(ports["apus"], "GET", "/auth/v1.0",
                          {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"})
        self.token = h.get("x-auth-token", "")
        check(self.token, "no token")

    def admin(self, method, path, headers=None, body=b""):
        h = dict(headers or {})
        h["X-Auth-Token"] = self.token
        return request(self.ports["apus"], method, path, h, body)

    def signed(self, method, path, timestamp=None, realm="realm1", key="realm-key",
               user_key=USER_KEY, nonce=None, auth=None):
        """Headers of a sync request as Swift's container-sync daemon signs it."""
        nonce = nonce or uuid.uuid4().hex
        h = {}
        if timestamp is not None:
            h["X-Timestamp"] = timestamp
        sig = self.realms.get_sig(method, path.split("?")[0], timestamp or "0", nonce, key,
                                  user_key)
        h["X-Container-Sync-Auth"] = auth if auth is not None else "%s %s %s" % (realm, nonce,
                                                                                 sig)
        return h

    def compare(self, what, method, path, expect, sign=True, headers=None, body=b"",
                skip=(), **sign_args):
        got = {}
        for side in ("apus", "swift"):
            p = path.replace("{side}", side)
            h = self.signed(method, p, **sign_args) if sign else {}
            # Given headers win: a request may carry another X-Timestamp than it was signed for.
            h.update({k: v.replace("{side}", side) for k, v in (headers or {}).items()})
            b = body.replace(b"{side}", side.encode()) if isinstance(body, bytes) else body
            got[side] = request(self.ports[side], method, p, h, b)
        (sa, ha, ba), (ss, hs, bs) = got["apus"], got["swift"]
        check(sa == ss, "%s: status swift %d, apus %d: %r / %r" % (what, ss, sa, bs[:200],
                                                                  ba[:200]))
        check(ss == expect, "%s: swift answers %d, the test expects %d" % (what, ss, expect))
        for name in COMPARED:
            if name in skip:
                continue
            va = (ha.get(name) or "").replace("apus", "{side}")
            vs = (hs.get(name) or "").replace("swift", "{side}")
            check(va == vs, "%s: header %s: swift %r, apus %r" % (what, name, vs, va))
        check(ba.replace(b"apus", b"{side}") == bs.replace(b"swift", b"{side}"),
              "%s: body swift %r, apus %r" % (what, bs[:300], ba[:300]))
        return got



    def stored(self, what, path, expect_status, query="", **expect_headers):
        """What each side's object looks like to the owner (through the Apus proxy)."""
        for side in ("apus", "swift"):
            p = path.replace("{side}", side)
            s, h, b = self.admin("HEAD", p + query)
            check(s == expect_status, "%s (%s): HEAD %s %d, expected %d"
                  % (what, side, p, s, expect_status))
            for name, want in expect_headers.items():
                name = name.replace("_", "-")
                check(h.get(name) == want, "%s (%s): %s is %r, expected %r"
                      % (what, side, name, h.get(name), want))


def ts(offset):
    """A recent timestamp (tombstones of old ones would be reclaimed), as the daemon sends."""
    return "%.5f" % (BASE + offset)


BASE = time.time() - 600


def signatures(pair):
    obj = ACCOUNT + "/sync-{side}/o%20x"
    pair.compare("PUT signed with key", "PUT", obj, 201, timestamp=ts(10),
                 headers={"Content-Type": "text/plain", "X-Object-Meta-Color": "red"},
                 body=b"synced body")
    pair.stored("PUT signed with key", obj, 200, x_timestamp=ts(10))
    s, h, b = pair.admin("GET", obj.replace("{side}", "apus"))
    check(s == 200 and b == b"synced body", "synced object read back: %d %r" % (s, b))
    pair.compare("PUT signed with key2", "PUT", ACCOUNT + "/sync-{side}/k2", 201,
                 timestamp=ts(11), key="realm-key-2", body=b"k2")
    pair.stored("PUT signed with key2", ACCOUNT + "/sync-{side}/k2", 200, x_timestamp=ts(11))
    pair.compare("realm name in another case", "PUT", ACCOUNT + "/sync-{side}/case", 201,
                 timestamp=ts(11), realm="REALM1", body=b"c")
    # Refused: 401, nothing stored.
    bad = ACCOUNT + "/sync-{side}/refused"
    pair.compare("bad signature", "PUT", bad, 401, timestamp=ts(12), key="wrong", body=b"x")
    pair.compare("signed for the other realm's key", "PUT", bad, 401, timestamp=ts(12),
                 realm="realm1", key="other-key", body=b"x")
    pair.compare("unknown realm", "PUT", bad, 401, timestamp=ts(12), realm="nope", body=b"x")
    pair.compare("wrong user key", "PUT", bad, 401, timestamp=ts(12), user_key="nope",
                 body=b"x")
    pair.compare("two words", "PUT", bad, 401, timestamp=ts(12), auth="realm1 nonce",
                 body=b"x")
    pair.compare("four words", "PUT", bad, 401, timestamp=ts(12), auth="realm1 a b c",
                 body=b"x")
    pair.compare("signed for another timestamp", "PUT", bad, 401, timestamp=ts(12),
                 headers={"X-Timestamp": ts(13)}, body=b"x")
    pair.compare("no user key on the container", "PUT", ACCOUNT + "/nokey-{side}/o", 401,
                 timestamp=ts(12), body=b"x")
    pair.compare("no container", "PUT", ACCOUNT + "/none-{side}/o", 401, timestamp=ts(12),
                 body=b"x")
    pair.compare("bad signature, GET", "GET", obj, 401, key="wrong")
    pair.stored("refused PUTs", bad, 404)
    pair.stored("refused PUT, no user key", ACCOUNT + "/nokey-{side}/o", 404)
    # Reads with a good signature (the daemon HEADs what it syncs to).
    pair.compare("HEAD signed", "HEAD", obj, 200)
    pair.compare("GET signed", "GET", obj, 200)


def timestamps(pair):
    obj = ACCOUNT + "/sync-{side}/o%20x"
    pair.compare("PUT older than what is stored", "PUT", obj, 202, timestamp=ts(5),
                 body=b"older")
    pair.compare("PUT with the stored timestamp", "PUT", obj, 202, timestamp=ts(10),
                 body=b"same")
    pair.stored("after older PUTs", obj, 200, x_timestamp=ts(10), content_length="11")
    pair.compare("POST", "POST", obj, 202, timestamp=ts(20),
                 headers={"X-Object-Meta-Color": "blue"})
    pair.stored("after POST", obj, 200, x_object_meta_color="blue")
    pair.compare("DELETE older than the data", "DELETE", obj, 409, timestamp=ts(5))
    pair.stored("after older DELETE", obj, 200, x_timestamp=ts(20), content_length="11")
    pair.compare("DELETE newer", "DELETE", obj, 204, timestamp=ts(30))
    pair.stored("after DELETE", obj, 404)
    pair.compare("PUT older than the tombstone", "PUT", obj, 202, timestamp=ts(25),
                 body=b"late")
    pair.stored("after PUT older than the tombstone", obj, 404)
    pair.compare("DELETE of nothing", "DELETE", ACCOUNT + "/sync-{side}/never", 404,
                 timestamp=ts(31))
    pair.compare("bad X-Timestamp", "PUT", ACCOUNT + "/sync-{side}/badts", 400,
                 timestamp="yesterday", body=b"x")


def slo_and_symlinks(pair):
    seg = ACCOUNT + "/sync-{side}/seg"
    man = ACCOUNT + "/sync-{side}/manifest"
    seg_body = b"segment bytes"
    etag = hashlib.md5(seg_body).hexdigest()
    manifest = json.dumps([{"name": "/sync-{side}/seg", "hash": etag, "bytes": len(seg_body),
                            "content_type": "text/plain",
                            "last_modified": "2026-01-01T00:00:00.000000"}]).encode()
    # The manifest arrives before its segment, as a sync may send it.
    # (The manifests name their side, so their lengths and ETags differ by that.)
    pair.compare("SLO manifest PUT raw", "PUT", man, 201, timestamp=ts(40),
                 headers={"X-Static-Large-Object": "True",
                          "Content-Type": "application/octet-stream"}, body=manifest,
                 skip=("etag",))
    pair.compare("the same without a signature is refused by slo", "PUT", man, 400, sign=False,
                 headers={"X-Static-Large-Object": "True", "X-Auth-Token": pair.token},
                 body=manifest)
    pair.compare("segment PUT", "PUT", seg, 201, timestamp=ts(41), body=seg_body)
    for side in ("apus", "swift"):
        s, h, b = pair.admin("GET", man.replace("{side}", side))
        check(s == 200 and b == seg_body, "SLO read back (%s): %d %r" % (side, s, b[:100]))
        s, h, b = pair.admin("GET", man.replace("{side}", side) + "?multipart-manifest=get")
        check(s == 200 and json.loads(b)[0]["name"] == "/sync-%s/seg" % side,
              "SLO manifest kept raw (%s): %d %r" % (side, s, b[:200]))
    pair.compare("SLO GET signed: the manifest itself", "GET", man, 200,
                 skip=("etag", "content-length"))
    # A static link whose target is not here: stored with the ETag and size sent.
    link = ACCOUNT + "/sync-{side}/link"
    target_etag = "0123456789abcdef0123456789abcdef"
    pair.compare("static symlink PUT", "PUT", link, 201, timestamp=ts(50),
                 headers={"X-Symlink-Target": "sync-{side}/not-here",
                          "X-Symlink-Target-Etag": target_etag,
                          "X-Symlink-Target-Bytes": "777"})
    pair.compare("static symlink read back, signed", "HEAD", link + "?symlink=get", 200)
    pair.compare("static symlink followed, signed", "GET", link, 404)
    for side in ("apus", "swift"):
        s, h, _ = pair.admin("HEAD", link.replace("{side}", side) + "?symlink=get")
        check(h.get("x-symlink-target") == "sync-%s/not-here" % side
              and h.get("x-symlink-target-etag") == target_etag
              and h.get("x-symlink-target-bytes") == "777",
              "static symlink stored (%s): %r" % (side, h))
        s, _, b = pair.admin("GET", "%s/sync-%s?format=json&prefix=link" % (ACCOUNT, side))
        listing = json.loads(b) if s == 200 else []
        check(listing and listing[0].get("symlink_etag") == target_etag
              and listing[0].get("symlink_bytes") == 777,
              "static symlink listed (%s): %r" % (side, listing))
    pair.compare("the same without a signature checks the target", "PUT", link + "2", 409,
                 sign=False,
                 headers={"X-Symlink-Target": "sync-{side}/not-here",
                          "X-Symlink-Target-Etag": target_etag,
                          "X-Symlink-Target-Bytes": "777", "X-Auth-Token": pair.token})
    pair.compare("static symlink without X-Symlink-Target-Bytes", "PUT", link + "3", 500,
                 timestamp=ts(51),
                 headers={"X-Symlink-Target": "sync-{side}/seg",
                          "X-Symlink-Target-Etag": etag})
    pair.stored("static symlink without bytes", link + "3", 404)


def sync_to(pair, full_urls_off):
    ver = ACCOUNT + "/ver-{side}"
    for side in ("apus", "swift"):
        s, _, _ = pair.admin("PUT", ver.replace("{side}", side), {"X-Versions-Enabled": "true"})
        check(s in (201, 202), "versioned container PUT: %d" % s)
    realm_to = "//realm1/c1/AUTH_test/target"
    for method in ("POST", "PUT"):
        pair.compare("sync-to on a versioned container, " + method, method, ver, 400,
                     sign=False, headers={"X-Auth-Token": pair.token,
                                          "X-Container-Sync-To": realm_to,
                                          "X-Container-Sync-Key": "k"})
    pair.compare("sync-to on a plain container", "POST", ACCOUNT + "/sync-{side}", 204,
                 sign=False, headers={"X-Auth-Token": pair.token,
                                      "X-Container-Sync-To": realm_to})
    full = "http://127.0.0.1:%d/v1/AUTH_test/target" % pair.ports["apus"]
    pair.compare("full URL allowed by default", "POST", ACCOUNT + "/sync-{side}", 204,
                 sign=False, headers={"X-Auth-Token": pair.token, "X-Container-Sync-To": full})
    pair.compare("unknown realm in sync-to (the container server's 400)", "POST",
                 ACCOUNT + "/sync-{side}", 400, sign=False,
                 headers={"X-Auth-Token": pair.token,
                          "X-Container-Sync-To": "//nope/c1/AUTH_test/target"})
    full_urls_off.compare("full URL refused", "POST", ACCOUNT + "/sync-{side}", 400, sign=False,
                          headers={"X-Auth-Token": pair.token, "X-Container-Sync-To": full})
    full_urls_off.compare("full URL refused on PUT", "PUT", ACCOUNT + "/new-{side}", 400,
                          sign=False,
                          headers={"X-Auth-Token": pair.token, "X-Container-Sync-To": full})
    full_urls_off.compare("full URL refused on an object, too", "PUT",
                          ACCOUNT + "/sync-{side}/x", 400, sign=False,
                          headers={"X-Auth-Token": pair.token, "X-Container-Sync-To": full})
    full_urls_off.compare("realm value allowed", "POST", ACCOUNT + "/sync-{side}", 204,
                          sign=False,
                          headers={"X-Auth-Token": pair.token, "X-Container-Sync-To": realm_to})
    for side in ("apus", "swift"):
        s, h, _ = pair.admin("HEAD", "%s/sync-%s" % (ACCOUNT, side))
        check(h.get("x-container-sync-to") == realm_to, "sync-to kept (%s): %r" % (side, h))


def info(pair, realms_path, port):
    got = {}
    for side in ("apus", "swift"):
        s, _, b = request(pair.ports[side], "GET", "/info")
        check(s == 200, "/info %s: %d" % (side, s))
        got[side] = json.loads(b).get("container_sync")
    check(got["apus"] == got["swift"], "/info: swift %r, apus %r" % (got["swift"], got["apus"]))
    check(got["apus"] == {"realms": {"REALM1": {"clusters": {"C1": {"current": True},
                                                             "C2": {}}},
                                     "REALM2": {"clusters": {"C3": {}}}}},
          "/info: %r" % got["apus"])
    # Changed realms show on the next /info (mtime_check_interval = 0).
    write_realms(realms_path, port, "\n[realm3]\nkey = k3\ncluster_c9 = http://127.0.0.9/v1/\n")
    st = os.stat(realms_path)
    os.utime(realms_path, (st.st_atime, st.st_mtime + 5))
    for side in ("apus", "swift"):
        s, _, b = request(pair.ports[side], "GET", "/info")
        realms = json.loads(b).get("container_sync", {}).get("realms", {})
        check("REALM3" in realms, "/info after the change (%s): %r" % (side, realms))


class SyncCluster(Cluster):
    """The test cluster with its realms file written before any server starts (the container
    servers read it then, and look again only every mtime_check_interval)."""

    def start(self, kind, n):
        path = os.path.join(self.etc, "container-sync-realms.conf")
        if not os.path.exists(path):
            write_realms(path, 8080)
        super().start(kind, n)


def main():
    with procs.TempDir("apus-container-sync-") as root, procs.Processes() as ps:
        cluster = SyncCluster(BIN, root, ps)
        realms_path = os.path.join(cluster.etc, "container-sync-realms.conf")
        apus = cluster.start_proxy("proxy-cs", pipeline=PIPELINE,
                                   filters=FILTERS + SYNC_FILTER + "current = //realm1/c1\n")
        swift = cluster.start_stock_proxy("proxy-cs")
        apus_off = cluster.start_proxy("proxy-cs-off", pipeline=PIPELINE,
                                       filters=FILTERS + SYNC_FILTER + "allow_full_urls = false\n")
        swift_off = cluster.start_stock_proxy("proxy-cs-off")
        realms = ContainerSyncRealms(realms_path, logging.getLogger("test"))
        pair = Pair({"apus": apus, "swift": swift}, realms)
        full_urls_off = Pair({"apus": apus_off, "swift": swift_off}, realms)
        for side in ("apus", "swift"):
            s, _, _ = pair.admin("PUT", "%s/sync-%s" % (ACCOUNT, side),
                                 {"X-Container-Sync-Key": USER_KEY})
            check(s in (201, 202), "container PUT: %d" % s)
            s, _, _ = pair.admin("PUT", "%s/nokey-%s" % (ACCOUNT, side))
            check(s in (201, 202), "container PUT: %d" % s)
        signatures(pair)
        timestamps(pair)
        slo_and_symlinks(pair)
        sync_to(pair, full_urls_off)
        info(pair, realms_path, cluster.proxy_port)
        # The middleware's verdicts reach the access log's log_info field, as Swift's do.
        for verdict in ("cs:valid", "cs:invalid-sig", "cs:not-3-args"):
            log = procs.wait_for_text(os.path.join(root, "proxy-cs.log"), verdict)
            check(verdict in log, "the access log notes %s" % verdict)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("container_sync (proxy): OK")


if __name__ == "__main__":
    main()
