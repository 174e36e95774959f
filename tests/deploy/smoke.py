#!/usr/bin/env python3
"""The compose cluster's smoke set, through its front (HAProxy), called by compose_test.sh.

  smoke.py FRONT PROMETHEUS STATE write   auth; PUT, GET, HEAD, DELETE; container and account
                                          listings; a 1 GiB SLO (10 segments of 100 MiB) read
                                          back whole and checked; Prometheus scraping every
                                          server; what was stored goes to STATE
  smoke.py FRONT PROMETHEUS STATE read    (one storage node down) every object in STATE reads
                                          back as written, and listings answer
"""
import hashlib
import json
import os
import sys
import time
import urllib.request

from swiftclient import client as swift

FRONT, PROMETHEUS, STATE, MODE = sys.argv[1:5]
SEGMENT = 100 << 20
SEGMENTS = 10
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def pattern(n, size):
    """`size` bytes of a pattern of segment n, in 1 MiB chunks (not all equal: a misplaced
    chunk would show)."""
    for i in range(size >> 20):
        yield (b"%08d:%08d;" % (n, i)) * ((1 << 20) // 18) + b"." * ((1 << 20) % 18)


class PatternReader:
    """A file-like view of pattern(n, size), for a PUT of known length."""

    def __init__(self, n, size):
        self.chunks = pattern(n, size)
        self.pending = b""

    def read(self, size=-1):
        while size < 0 or len(self.pending) < size:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            self.pending += chunk
        if size < 0:
            size = len(self.pending)
        out, self.pending = self.pending[:size], self.pending[size:]
        return out


def md5_of(chunks):
    h = hashlib.md5()
    for c in chunks:
        h.update(c)
    return h.hexdigest()


def connect():
    return swift.get_auth(FRONT + "/auth/v1.0", "test:tester", "testing")


def write():
    url, token = connect()
    state = {"objects": {}}
    swift.put_container(url, token, "smoke")
    for i in range(20):
        body = os.urandom(1000 + i)
        swift.put_object(url, token, "smoke", "small-%02d" % i, body)
        state["objects"]["small-%02d" % i] = hashlib.md5(body).hexdigest()
    headers, body = swift.get_object(url, token, "smoke", "small-00")
    check(hashlib.md5(body).hexdigest() == state["objects"]["small-00"], "GET what was PUT")
    check(swift.head_object(url, token, "smoke", "small-01")["content-length"] == "1001",
          "HEAD")
    swift.put_object(url, token, "smoke", "doomed", b"x")
    swift.delete_object(url, token, "smoke", "doomed")
    names = [o["name"] for o in swift.get_container(url, token, "smoke")[1]]
    check(names == sorted(state["objects"]), "container listing: %r" % names[:5])
    check("smoke" in [c["name"] for c in swift.get_account(url, token)[1]], "account listing")

    # A 1 GiB SLO: its segments, then the manifest; read back whole through the front.
    began = time.monotonic()
    swift.put_container(url, token, "smoke_segments")
    manifest = []
    for n in range(SEGMENTS):
        etag = swift.put_object(url, token, "smoke_segments", "big/%02d" % n,
                                contents=PatternReader(n, SEGMENT),
                                content_length=SEGMENT, chunk_size=1 << 20)
        manifest.append({"path": "/smoke_segments/big/%02d" % n, "etag": etag,
                         "size_bytes": SEGMENT})
    swift.put_object(url, token, "smoke", "big", json.dumps(manifest),
                     query_string="multipart-manifest=put")
    put_seconds = time.monotonic() - began
    expected = md5_of(c for n in range(SEGMENTS) for c in pattern(n, SEGMENT))
    began = time.monotonic()
    headers, body = swift.get_object(url, token, "smoke", "big", resp_chunk_size=1 << 20)
    got = md5_of(body)
    get_seconds = time.monotonic() - began
    check(headers.get("content-length") == str(SEGMENT * SEGMENTS), "SLO length: %r"
          % headers.get("content-length"))
    check(got == expected, "the 1 GiB SLO reads back as written")
    state["slo_md5"] = expected
    print("1 GiB SLO: PUT %.1f s, GET %.1f s (%.0f MiB/s)"
          % (put_seconds, get_seconds, 1024 / get_seconds))

    # Prometheus scrapes every server (2 proxies, 4 x 3 storage servers) and sees the requests.
    up = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(PROMETHEUS + "/api/v1/query?query=up", timeout=5) as r:
                up = json.load(r)["data"]["result"]
        except OSError:
            up = []
        if len(up) == 14 and all(s["value"][1] == "1" for s in up):
            break
        time.sleep(2)
    check(len(up) == 14 and all(s["value"][1] == "1" for s in up),
          "Prometheus scrapes 14 servers, all up: %r"
          % [(s["metric"].get("instance"), s["value"][1]) for s in up])
    query = "sum(increase(apus_http_requests_total{server=%22proxy%22}[5m]))"
    try:
        with urllib.request.urlopen(PROMETHEUS + "/api/v1/query?query=" + query,
                                    timeout=5) as r:
            result = json.load(r)["data"]["result"]
        rate = float(result[0]["value"][1]) if result else 0
    except OSError as e:
        rate = 0
        print("prometheus query:", e)
    check(rate > 0, "Prometheus counts the proxies' requests: %r" % rate)
    with open(STATE, "w") as f:
        json.dump(state, f)


def read():
    with open(STATE) as f:
        state = json.load(f)
    url, token = connect()
    for name, md5 in sorted(state["objects"].items()):
        headers, body = swift.get_object(url, token, "smoke", name)
        check(hashlib.md5(body).hexdigest() == md5, "%s reads back with a node down" % name)
    headers, body = swift.get_object(url, token, "smoke", "big", resp_chunk_size=1 << 20)
    check(md5_of(body) == state["slo_md5"], "the SLO reads back with a node down")
    names = [o["name"] for o in swift.get_container(url, token, "smoke")[1]]
    check("big" in names, "the listing answers with a node down")
    swift.put_object(url, token, "smoke", "after", b"written with a node down")
    check(swift.get_object(url, token, "smoke", "after")[1] == b"written with a node down",
          "a write with a node down")


def main():
    write() if MODE == "write" else read()
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("smoke (%s): all checks passed" % MODE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
