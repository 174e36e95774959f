#!/usr/bin/env python3
"""Static large objects (issue 13) on a real cluster (tests/support/cluster.py), through a proxy
whose pipeline has the slo filter:

1. Debian's `swift` client: `swift upload --use-slo --segment-size 10000000` of a 50 MB file
   makes an SLO (X-Static-Large-Object, segments in <container>_segments), and `swift download`
   gives back the same bytes.
2. The manifest PUT: a missing segment, a wrong etag and size answer 400 with one line per
   problem; a good one 201 with the SLO etag; inline data, ranges in segments, a nested SLO.
   ?heartbeat=on answers 202 and a result in the requested format.
3. The large object's answers: Etag (quoted SLO etag), X-Manifest-Etag, Content-Length on
   HEAD; ranges across segment boundaries (206), several ranges (multipart/byteranges), past the
   end (416), If-None-Match and If-Match against the SLO etag, ?multipart-manifest=get (and
   format=raw), the container listing's slo_etag, a referrer ACL (the segment GETs carry the
   Referer), ?multipart-manifest=delete (segments gone).
4. A segment that is overwritten behind the manifest's back: a GET before any byte went out
   answers 409; the log says why.
5. A segment rotten on every replica (bytes flipped, size kept): the proxy does not hash whole
   segments from Apus object servers, which check them before their last chunk goes out (a
   verified read); the SLO GET ends short, never whole with wrong bytes (nor patched with
   another replica's tail), the rotten file is quarantined, and the logs say why.

usage: slo_test.py <build-dir>
"""
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats tempauth "
            "copy slo dlo proxy-logging proxy-server")
FILTERS = ("[filter:copy]\nuse = egg:swift#copy\n[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:dlo]\nuse = egg:swift#dlo\n")
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


def swift_cli(port, *args, cwd=None):
    auth = ["-A", "http://127.0.0.1:%d/auth/v1.0" % port, "-U", "test:tester", "-K", "testing"]
    return subprocess.run(["/usr/bin/swift"] + auth + list(args), cwd=cwd, capture_output=True,
                          timeout=300)


def client_round_trip(port, work):
    data = os.urandom(50 * 1000 * 1000)
    with open(os.path.join(work, "big.bin"), "wb") as f:
        f.write(data)
    up = swift_cli(port, "upload", "--use-slo", "--segment-size", "10000000", "c", "big.bin",
                   cwd=work)
    check(up.returncode == 0, "swift upload: %r" % (up.stdout + up.stderr))
    st = swift_cli(port, "stat", "c", "big.bin")
    check(b"Content Length: 50000000" in st.stdout, "swift stat: %r" % st.stdout)
    out = os.path.join(work, "out.bin")
    start = time.time()
    down = swift_cli(port, "download", "c", "big.bin", "-o", out, cwd=work)
    took = time.time() - start
    check(down.returncode == 0, "swift download: %r" % (down.stdout + down.stderr))
    with open(out, "rb") as f:
        got = f.read()
    check(hashlib.md5(got).hexdigest() == hashlib.md5(data).hexdigest(),
          "downloaded %d bytes, not the 50 MB uploaded" % len(got))
    print("swift download of a 50 MB SLO (5 segments): %.2f s" % took)


def md5(b):
    return hashlib.md5(b).hexdigest()


def answers(port, auth):
    base = "/v1/AUTH_test"
    check(request(port, "PUT", base + "/s", auth)[0] in (201, 202), "container PUT")
    segs = {}
    for n in range(3):
        data = bytes([ord("a") + n]) * 10
        segs[n] = data
        s, _, _ = request(port, "PUT", base + "/s/seg%d" % n, auth, data)
        check(s == 201, "segment PUT %d" % s)
    # Refusals: one line per problem.
    bad = json.dumps([{"path": "/s/seg0", "etag": "nope"}, {"path": "/s/missing"},
                      {"path": "/s/seg1", "size_bytes": 11}])
    s, h, b = request(port, "PUT", base + "/s/man?multipart-manifest=put", auth, bad)
    check(s == 400 and b == (b"Errors:\n/s/seg0, Etag Mismatch\n/s/missing, 404 Not Found\n"
                             b"/s/seg1, Size Mismatch\n"),
          "bad manifest: %d %r" % (s, b))
    s, _, b = request(port, "PUT", base + "/s/man?multipart-manifest=put", auth, b"[{]")
    check(s == 400 and b == b"Manifest must be valid JSON.\n", "bad JSON: %d %r" % (s, b))
    # A good one: inline data, a ranged segment, a plain one.
    manifest = [{"path": "/s/seg0", "etag": md5(segs[0]), "size_bytes": 10},
                {"data": "WFla"},  # "XYZ"
                {"path": "/s/seg1", "range": "2-5"},
                {"path": "/s/seg2"}]
    whole = segs[0] + b"XYZ" + segs[1][2:6] + segs[2]
    slo_etag = md5((md5(segs[0]) + md5(b"XYZ") + "%s:2-5;" % md5(segs[1]) +
                    md5(segs[2])).encode())
    s, h, _ = request(port, "PUT", base + "/s/man?multipart-manifest=put", auth,
                      json.dumps(manifest))
    check(s == 201 and h.get("etag") == '"%s"' % slo_etag, "manifest PUT: %d %r" % (s, h))
    s, h, _ = request(port, "HEAD", base + "/s/man", auth)
    check(s == 200 and h.get("etag") == '"%s"' % slo_etag and
          h.get("content-length") == str(len(whole)) and "x-manifest-etag" in h and
          h.get("x-static-large-object") == "True", "HEAD: %d %r" % (s, h))
    s, h, b = request(port, "GET", base + "/s/man", auth)
    check(s == 200 and b == whole and h.get("etag") == '"%s"' % slo_etag,
          "GET: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/s/man", dict(auth, Range="bytes=8-15"))
    check(s == 206 and b == whole[8:16] and h.get("content-range") ==
          "bytes 8-15/%d" % len(whole), "one range across segments: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/s/man", dict(auth, Range="bytes=0-1,12-20"))
    check(s == 206 and h.get("content-type", "").startswith("multipart/byteranges") and
          whole[0:2] in b and whole[12:21] in b, "several ranges: %d %r %r" % (s, h, b))
    s, h, _ = request(port, "GET", base + "/s/man", dict(auth, Range="bytes=100-"))
    check(s == 416 and h.get("content-range") == "bytes */%d" % len(whole),
          "range past the end: %d %r" % (s, h))
    s, _, b = request(port, "GET", base + "/s/man", dict(auth, **{"If-None-Match": slo_etag}))
    check(s == 304 and b == b"", "If-None-Match: %d" % s)
    s, _, _ = request(port, "GET", base + "/s/man", dict(auth, **{"If-Match": '"nope"'}))
    check(s == 412, "If-Match: %d" % s)
    s, _, _ = request(port, "GET", base + "/s/man", dict(auth, **{"If-Match": slo_etag}))
    check(s == 200, "If-Match with the SLO etag: %d" % s)
    s, h, b = request(port, "GET", base + "/s/man?multipart-manifest=get", auth)
    stored = json.loads(b) if s == 200 else []
    check(s == 200 and [d.get("name") for d in stored] == ["/s/seg0", None, "/s/seg1", "/s/seg2"]
          and stored[2].get("range") == "2-5" and
          h.get("content-type") == "application/json; charset=utf-8",
          "multipart-manifest=get: %d %r %r" % (s, h, b))
    s, h, b = request(port, "GET", base + "/s/man?multipart-manifest=get&format=raw", auth)
    raw = json.loads(b) if s == 200 else []
    check(s == 200 and raw[0] == {"path": "/s/seg0", "etag": md5(segs[0]), "size_bytes": 10},
          "format=raw: %d %r" % (s, b))
    s, _, b = request(port, "GET", base + "/s?format=json", auth)
    rows = {r["name"]: r for r in json.loads(b)} if s == 200 else {}
    check(rows.get("man", {}).get("slo_etag") == '"%s"' % slo_etag and
          rows.get("man", {}).get("bytes") == len(whole),
          "listing: %r" % rows.get("man"))
    # A referrer ACL grants the segments too: their GETs carry the client's Referer.
    s, _, _ = request(port, "POST", base + "/s",
                      dict(auth, **{"X-Container-Read": ".r:*.example.com,.rlistings"}))
    s, _, b = request(port, "GET", base + "/s/man", {"Referer": "http://www.example.com/"})
    check(s == 200 and b == whole, "GET by referrer: %d %r" % (s, b))
    request(port, "POST", base + "/s", dict(auth, **{"X-Remove-Container-Read": "x"}))
    # A nested SLO and the heartbeat answer.
    s, h, b = request(port, "PUT", base + "/s/outer?multipart-manifest=put&heartbeat=on",
                      dict(auth, Accept="application/json"),
                      json.dumps([{"path": "/s/man"}, {"path": "/s/seg2"}]))
    result = json.loads(b.strip()) if s == 202 else {}
    check(s == 202 and b.startswith(b" ") and result.get("Response Status") == "201 Created" and
          result.get("Errors") == [], "heartbeat PUT: %d %r" % (s, b))
    s, _, b = request(port, "GET", base + "/s/outer", auth)
    check(s == 200 and b == whole + segs[2], "nested GET: %d %r" % (s, b))
    s, _, b = request(port, "GET", base + "/s/outer", dict(auth, Range="bytes=20-23"))
    check(s == 206 and b == (whole + segs[2])[20:24], "nested range: %d %r" % (s, b))
    return whole, segs


def changed_segment(cluster_root, port, auth):
    base = "/v1/AUTH_test"
    s, _, _ = request(port, "PUT", base + "/s/seg0", auth, b"z" * 10)
    s, _, _ = request(port, "GET", base + "/s/man", auth)
    check(s == 409, "a changed first segment: %d" % s)
    want = "Object segment no longer valid"
    log = procs.wait_for_text(os.path.join(cluster_root, "slo-proxy.log"), want)
    check(want in log, "the log says why: %r" % log[-1500:])


def segment_data_file(cluster, n, part, name):
    """The .data file of /AUTH_test/s/<name> on node n, or None."""
    from swift.obj.diskfile import read_metadata
    objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects", str(part))
    for dirpath, _, files in os.walk(objects):
        for f in files:
            path = os.path.join(dirpath, f)
            if f.endswith(".data") and read_metadata(path)["name"] == "/AUTH_test/s/" + name:
                return path
    return None


def rotten_segment(cluster, port, auth):
    base = "/v1/AUTH_test"
    size = 300 * 1024  # several of the object server's chunks
    segs = [bytes([65 + i]) * size for i in range(3)]
    for i, seg in enumerate(segs):
        check(request(port, "PUT", "%s/s/rot%d" % (base, i), auth, seg)[0] == 201,
              "rot segment %d" % i)
    manifest = [{"path": "/s/rot%d" % i, "etag": md5(seg), "size_bytes": size}
                for i, seg in enumerate(segs)]
    s, _, b = request(port, "PUT", base + "/s/rotman?multipart-manifest=put", auth,
                      json.dumps(manifest).encode())
    check(s == 201, "rot manifest: %d %r" % (s, b))
    s, _, b = request(port, "GET", base + "/s/rotman", auth)
    check(s == 200 and b == b"".join(segs), "the SLO whole before the rot: %d %d" % (s, len(b)))
    part, nodes = cluster.placement("s", "rot1")
    rotten = []
    for n in nodes:
        path = segment_data_file(cluster, n, part, "rot1")
        check(path is not None, "rot1's .data on node %d" % n)
        if path:
            with open(path, "r+b") as f:
                f.seek(size // 2)
                f.write(b"x")
            rotten.append(path)
    s, _, b = request(port, "GET", base + "/s/rotman", auth)
    check(s == 200 and len(b) < 3 * size,
          "a rotten segment ends the body short: %d, %d of %d bytes" % (s, len(b), 3 * size))
    check(b[:size] == segs[0], "the good first segment went out whole")
    check(sum(1 for path in rotten if not os.path.exists(path)) == 1,
          "the replica read is quarantined (and only it): %r" %
          [os.path.exists(path) for path in rotten])
    want = "last chunk held back"
    logs = procs.wait_for_text([os.path.join(cluster.root, "object-%d.log" % n) for n in nodes],
                               want)
    check(want in logs, "an object server says why: %r" % logs[-1500:])
    want = "a verified read: not resumed"
    log = procs.wait_for_text(os.path.join(cluster.root, "slo-proxy.log"), want)
    check(want in log, "the proxy says why: %r" % log[-1500:])


def delete(port, auth):
    base = "/v1/AUTH_test"
    s, h, b = request(port, "DELETE", base + "/s/outer?multipart-manifest=delete",
                      dict(auth, Accept="application/json"))
    result = json.loads(b.strip()) if s == 200 else {}
    check(s == 200 and result.get("Number Deleted") == 5 and result.get("Errors") == [],
          "multipart-manifest=delete: %d %r" % (s, b))
    for name in ("outer", "man", "seg0", "seg1", "seg2"):
        check(request(port, "HEAD", base + "/s/" + name, auth)[0] == 404, name + " deleted")


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        port = cluster.start_proxy("slo-proxy", pipeline=PIPELINE, filters=FILTERS)
        _, tok = cluster.connect()
        auth = {"X-Auth-Token": tok}
        s, _, b = request(port, "GET", "/info")
        info = json.loads(b).get("slo", {}) if s == 200 else {}
        check(info == {"max_manifest_segments": 1000, "max_manifest_size": 8388608,
                       "yield_frequency": 10, "min_segment_size": 1,
                       "allow_async_delete": False}, "/info: %r" % info)
        work = os.path.join(root, "work")
        os.makedirs(work)
        client_round_trip(port, work)
        answers(port, auth)
        delete(port, auth)
        # Rebuild the simple manifest for the changed-segment check.
        answers(port, auth)
        changed_segment(root, port, auth)
        rotten_segment(cluster, port, auth)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("slo: all checks passed")


if __name__ == "__main__":
    main()
