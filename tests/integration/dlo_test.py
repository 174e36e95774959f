#!/usr/bin/env python3
"""Dynamic large objects (issue 13) on a real cluster (tests/support/cluster.py), whose proxies
get Swift's required dlo filter:

1. Debian's `swift` client: `swift upload --segment-size 10000000` of a 50 MB file makes a DLO
   (segments in <container>_segments, an X-Object-Manifest object), and `swift download` gives
   back the same bytes.
2. The large object's answers: Etag (quoted md5 of the segment etags) and Content-Length on
   HEAD, X-Object-Manifest kept, one range across segment boundaries (206), several ranges
   (the whole object, 200), a range past the end (416 with bytes */length), If-None-Match and
   If-Match against the large object's etag, ?multipart-manifest=get, COPY (the concatenated
   data; with ?multipart-manifest=get the manifest itself), a PUT with a bad X-Object-Manifest
   (400). The object servers honour X-Backend-Ignore-Range-If-Metadata-Present.
3. A segment that disappears (deleted on the object servers behind the listing's back): the GET
   ends short of its Content-Length and the proxy log says why; no other bytes are served.

usage: dlo_test.py <build-dir>
"""
import hashlib
import http.client
import os
import subprocess
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
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        try:
            data = r.read()
        except http.client.IncompleteRead as e:
            data = e.partial
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def swift_cli(cluster, *args, cwd=None):
    auth = ["-A", "http://127.0.0.1:%d/auth/v1.0" % cluster.proxy_port, "-U", "test:tester",
            "-K", "testing"]
    return subprocess.run(["/usr/bin/swift"] + auth + list(args), cwd=cwd, capture_output=True,
                          timeout=300)


def client_round_trip(cluster, work):
    data = os.urandom(50 * 1000 * 1000)
    with open(os.path.join(work, "big.bin"), "wb") as f:
        f.write(data)
    up = swift_cli(cluster, "upload", "--segment-size", "10000000", "c", "big.bin", cwd=work)
    check(up.returncode == 0, "swift upload: %r" % (up.stdout + up.stderr))
    st = swift_cli(cluster, "stat", "c", "big.bin")
    check(b"Manifest: c_segments/big.bin/" in st.stdout, "swift stat shows the manifest: %r"
          % st.stdout)
    out = os.path.join(work, "out.bin")
    start = time.time()
    down = swift_cli(cluster, "download", "c", "big.bin", "-o", out, cwd=work)
    took = time.time() - start
    check(down.returncode == 0, "swift download: %r" % (down.stdout + down.stderr))
    with open(out, "rb") as f:
        got = f.read()
    check(hashlib.md5(got).hexdigest() == hashlib.md5(data).hexdigest(),
          "downloaded %d bytes, not the 50 MB uploaded" % len(got))
    print("swift download of a 50 MB DLO (5 segments): %.2f s" % took)


def answers(cluster, auth):
    port, base = cluster.proxy_port, "/v1/AUTH_test"
    s, _, _ = request(port, "PUT", base + "/d", auth)
    check(s in (201, 202), "container PUT: %d" % s)
    etags = ""
    for n, letter in enumerate("abcde"):
        body = letter.encode() * 10
        s, _, _ = request(port, "PUT", base + "/d/seg/%02d" % n, auth, body)
        check(s == 201, "segment PUT: %d" % s)
        etags += hashlib.md5(body).hexdigest()
    whole = b"".join(c.encode() * 10 for c in "abcde")
    dlo_etag = '"%s"' % hashlib.md5(etags.encode()).hexdigest()
    s, _, _ = request(port, "PUT", base + "/d/man", dict(auth, **{"X-Object-Manifest": "d/seg/"}),
                      b"manifest")
    check(s == 201, "manifest PUT: %d" % s)

    s, h, _ = request(port, "HEAD", base + "/d/man", auth)
    check(s == 200 and h.get("etag") == dlo_etag and h.get("content-length") == "50",
          "HEAD: %d %r" % (s, h))
    check(h.get("x-object-manifest") == "d/seg/", "X-Object-Manifest kept: %r" % h)
    s, h, b = request(port, "GET", base + "/d/man", auth)
    check(s == 200 and b == whole and h.get("etag") == dlo_etag, "GET: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/d/man", dict(auth, Range="bytes=8-32"))
    check(s == 206 and b == whole[8:33] and h.get("content-range") == "bytes 8-32/50",
          "one range: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/d/man", dict(auth, Range="bytes=0-4,10-14"))
    check(s == 200 and b == whole, "several ranges: %d %r" % (s, b))
    s, h, _ = request(port, "GET", base + "/d/man", dict(auth, Range="bytes=50-56"))
    check(s == 416 and h.get("content-range") == "bytes */50", "range past the end: %d %r"
          % (s, h))
    s, _, b = request(port, "GET", base + "/d/man", dict(auth, **{"If-None-Match": dlo_etag}))
    check(s == 304 and b == b"", "If-None-Match: %d" % s)
    s, _, _ = request(port, "GET", base + "/d/man", dict(auth, **{"If-Match": '"nope"'}))
    check(s == 412, "If-Match: %d" % s)
    s, _, b = request(port, "GET", base + "/d/man?multipart-manifest=get", auth)
    check(s == 200 and b == b"manifest", "multipart-manifest=get: %d %r" % (s, b))
    s, _, _ = request(port, "COPY", base + "/d/man", dict(auth, Destination="d/copied"))
    check(s == 201, "COPY: %d" % s)
    s, h, b = request(port, "GET", base + "/d/copied", auth)
    check(s == 200 and b == whole and "x-object-manifest" not in h,
          "the copy holds the data: %d %r" % (s, h))
    s, _, _ = request(port, "COPY", base + "/d/man?multipart-manifest=get",
                      dict(auth, Destination="d/copied2"))
    check(s == 201, "COPY ?multipart-manifest=get: %d" % s)
    s, h, b = request(port, "GET", base + "/d/copied2?multipart-manifest=get", auth)
    check(s == 200 and b == b"manifest" and h.get("x-object-manifest") == "d/seg/",
          "the copy is the manifest: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/d/copied2", auth)
    check(s == 200 and b == whole, "the copied manifest reads the segments: %d %r" % (s, b))
    s, _, b = request(port, "PUT", base + "/d/bad", dict(auth, **{"X-Object-Manifest": "d"}))
    check(s == 400 and b == b"X-Object-Manifest must be in the format container/prefix",
          "bad manifest PUT: %d %r" % (s, b))
    return whole


def object_server_ignores_range(cluster, whole):
    """Swift's X-Backend-Ignore-Range-If-Metadata-Present, which dlo sends: an object server
    answers a manifest whole (200, its own Content-Type) whatever the Range, so that a
    multi-range GET of a DLO does not come back as multipart/byteranges."""
    for port, device, part in nodes(cluster, "AUTH_test", "d", "man"):
        path = "/%s/%d/AUTH_test/d/man" % (device, part)
        hdrs = {"Range": "bytes=0-1,3-4",
                "X-Backend-Ignore-Range-If-Metadata-Present": "X-Static-Large-Object, "
                                                              "x-object-manifest"}
        s, h, b = request(port, "GET", path, hdrs)
        check(s == 200 and b == b"manifest" and "multipart" not in h.get("content-type", ""),
              "object server with Ignore-Range: %d %r %r" % (s, h, b))
        s, h, _ = request(port, "GET", path, {"Range": "bytes=0-1,3-4"})
        check(s == 206, "object server without it: %d" % s)


def nodes(cluster, *names):
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    part, devs = Ring(os.path.join(cluster.etc, "object.ring.gz")).get_nodes(*names)
    return [(d["port"], d["device"], part) for d in devs]


def vanished_segment(cluster, auth, whole):
    """Deletes segment 02 on its object servers only: the listing still names it."""
    from urllib.parse import quote
    ts = "%.5f" % time.time()
    for port, device, part in nodes(cluster, "AUTH_test", "d", "seg/02"):
        s, _, _ = request(port, "DELETE", "/%s/%d/AUTH_test/d/%s" % (
            device, part, quote("seg/02")), {"X-Timestamp": ts})
        check(s in (204, 404), "direct DELETE: %d" % s)
    s, h, b = request(cluster.proxy_port, "GET", "/v1/AUTH_test/d/man", auth)
    check(s == 200 and h.get("content-length") == "50", "GET still announces 50 bytes: %d %r"
          % (s, h))
    check(b == whole[:20], "the body ends before the missing segment: %r" % b)
    want = "While processing manifest /v1/AUTH_test/d/man, got 404"
    log = procs.wait_for_text(os.path.join(cluster.root, "proxy-server.log"), want)
    check(want in log, "the log says which segment was missing: %r" % log[-1500:])
    # A missing first segment, before any byte went out: 409.
    s, _, _ = request(cluster.proxy_port, "PUT", "/v1/AUTH_test/d/man2",
                      dict(auth, **{"X-Object-Manifest": "d/seg/02"}))
    s, _, _ = request(cluster.proxy_port, "GET", "/v1/AUTH_test/d/man2", auth)
    check(s == 409, "a missing first segment: %d" % s)


def main():
    with procs.TempDir("apus-dlo-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        _, tok = cluster.connect()
        auth = {"X-Auth-Token": tok}
        work = os.path.join(root, "work")
        os.makedirs(work)
        client_round_trip(cluster, work)
        whole = answers(cluster, auth)
        object_server_ignores_range(cluster, whole)
        vanished_segment(cluster, auth, whole)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("dlo: all checks passed")


if __name__ == "__main__":
    main()
