#!/usr/bin/env python3
"""apus-object-server beside stock swift-object-server (Debian's 2.30.1).

1. Differential: the same sequence of backend requests goes to both servers, each on its own
   device directory; statuses and the headers that matter must match.
2. Container updates: both send theirs to one fake container server; the updates must match.
   With the container server gone, both save async pendings under the same name and content.
3. Cross-reading: Swift's own DiskFile reads what Apus wrote, and Apus serves what Swift wrote.
4. MIME PUTs with metadata footers, as Swift's proxy sends them when encryption is on: the
   same sequence to both servers, statuses, 100 Continue headers, error bodies and the stored
   metadata compared.
5. Partition power increase: PUT, POST and DELETE with X-Backend-Next-Part-Power leave the
   same files, hard-linked the same way, on both servers.
6. Metadata names with underscores: the names both servers store and answer.

usage: object_server_interop.py <build-dir>
"""
import hashlib
import http.server
import json
import os
import pickle
import socket
import sys
import threading
import time
from urllib.parse import quote

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
APUS = os.path.join(BUILD, "bin", "apus-object-server")
failures = []

# Differences we know of and have not closed yet (each is work left in an issue). The test
# prints them when seen, and fails on any difference not listed here.
KNOWN_DIFFERENCES = set()


def check(cond, what):
    if cond:
        return
    if any(known in what for known in KNOWN_DIFFERENCES):
        print("KNOWN DIFFERENCE:", what)
        return
    failures.append(what)
    print("FAIL:", what)


class FakeContainerServer(http.server.ThreadingHTTPServer):
    """Records container updates and answers 201 (or `status`); with `shard` ("a/c") set, an
    update for any other container gets the 301 a sharded Swift root answers, to that shard
    (timestamp `shard_timestamp`)."""
    def __init__(self, port):
        self.updates = []
        self.status = 201
        self.shard = None
        self.shard_timestamp = "1700000000.00000"
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _record(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                server.updates.append((self.command, self.path, dict(self.headers)))
                # /<dev>/<part>/<account>/<container>/<obj>
                _, _, _, account, container, obj = self.path.split("/", 5)
                shard = server.shard
                if shard and "%s/%s" % (account, container) != quote(shard):
                    self.send_response(301)
                    self.send_header("Location", "/%s/%s" % (quote(shard), obj))
                    self.send_header("X-Backend-Location-Is-Quoted", "true")
                    self.send_header("X-Backend-Redirect-Timestamp", server.shard_timestamp)
                else:
                    self.send_response(server.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_DELETE = _record

        super().__init__(("127.0.0.1", port), Handler)


def write_configs(root, swift_port, apus_port, apus_swift_port):
    etc = os.path.join(root, "etc")
    os.makedirs(etc)
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = apus-test\n"
                "swift_hash_path_suffix = interop\n\n"
                "[storage-policy:0]\nname = gold\ndefault = yes\n\n"
                "[storage-policy:1]\nname = silver\n")
    confs = {}
    for name, port, devices, extra in (
            ("swift", swift_port, "swift", "workers = 0\n"),
            ("apus", apus_port, "apus", "workers = 2\nlog_file = %s/apus.log\n" % root),
            ("apus-on-swift", apus_swift_port, "swift",
             "workers = 1\nlog_file = %s/apus2.log\n" % root)):
        os.makedirs(os.path.join(root, devices, "sda1"), exist_ok=True)
        path = os.path.join(etc, name + "-object-server.conf")
        with open(path, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nlog_name = %s\nfallocate_reserve = 0\n%s\n"
                    "[pipeline:main]\npipeline = object-server\n\n"
                    "[app:object-server]\nuse = egg:swift#object\n"
                    "container_update_timeout = 2\n"
                    % (os.path.join(root, devices), port, etc, name, extra))
        confs[name] = path
    return confs


# Headers whose values must be equal on both servers, when either has them.
COMPARED = ["content-type", "content-length", "etag", "last-modified", "x-timestamp",
            "x-backend-timestamp", "x-backend-data-timestamp", "x-backend-durable-timestamp",
            "content-range", "x-object-meta-color", "x-object-meta-size", "x-object-meta-uni",
            "content-encoding", "x-delete-at", "x-object-sysmeta-test", "x-backend-content-type",
            "content-disposition", "x-object-sysmeta-crypto-body-meta", "x-object-meta-footer",
            "x-object-transient-sysmeta-t", "x-object-sysmeta-container-update-override-etag"]


def differential(swift_port, apus_port, container_port):
    cont = {"X-Container-Host": "127.0.0.1:%d" % container_port,
            "X-Container-Device": "sdc1", "X-Container-Partition": "5"}
    body = b"hello, interop world"
    obj = "/sda1/3/AUTH_test/c/o%20bj/with%E2%98%83"
    steps = [
        ("PUT", obj, dict(cont, **{"X-Timestamp": "1700000001.00000",
                                   "Content-Type": "text/plain",
                                   "X-Object-Meta-Color": "blue",
                                   "X-Object-Meta-Uni": "caf\xc3\xa9",
                                   "X-Object-Sysmeta-Test": "sys",
                                   "Content-Disposition": "inline",
                                   "X-Trans-Id": "tx-interop-1"}), body),
        ("PUT", obj, {"X-Timestamp": "1700000001.00000", "Content-Type": "text/plain"}, body),
        ("PUT", obj, {"X-Timestamp": "1700000000.00000", "Content-Type": "text/plain"}, body),
        # The existing object's answers come before the body's, also for a body sent without
        # Expect: 100-continue, which Apus reads before it opens the object.
        ("PUT", obj, {"X-Timestamp": "1700000000.00000", "Content-Type": "text/plain",
                      "Etag": "0123456789abcdef0123456789abcdef"}, body),
        ("PUT", obj, {"X-Timestamp": "1700000009.00000", "Content-Type": "text/plain",
                      "If-None-Match": "*", "Etag": "0123456789abcdef0123456789abcdef"}, body),
        ("GET", obj, {}, None),
        ("HEAD", obj, {}, None),
        ("GET", obj, {"Range": "bytes=1-3"}, None),
        ("GET", obj, {"Range": "bytes=-4"}, None),
        ("GET", obj, {"Range": "bytes=100-200"}, None),
        ("GET", obj, {"Range": "bytes=junk"}, None),
        ("GET", obj, {"If-None-Match": '"c7cd2e4d2d3b38e5b9b10cc5e25ea7e5"'}, None),
        ("GET", obj, {"If-Match": '"nope"'}, None),
        ("GET", obj, {"If-Modified-Since": "Sun, 01 Jan 2040 00:00:00 GMT"}, None),
        ("GET", obj, {"If-Unmodified-Since": "Sun, 01 Jan 2000 00:00:00 GMT"}, None),
        # Which metadata holds the ETag conditions compare (SLO's, symlinks'), in any case:
        # the first listed that is present.
        ("GET", obj, {"If-Match": '"sys"',
                      "X-Backend-Etag-Is-At": " X-Object-Meta-None, x-object-sysmeta-test,"
                                              "X-Object-Meta-Color"}, None),
        ("HEAD", obj, {"If-None-Match": '"blue"',
                       "X-Backend-Etag-Is-At": "X-Object-Meta-None,x-object-meta-color"}, None),
        # A Range ignored when the object holds any listed metadata (DLO's and SLO's manifests).
        ("GET", obj, {"Range": "bytes=1-3",
                      "X-Backend-Ignore-Range-If-Metadata-Present": "X-Object-Meta-None, "
                                                                    "x-object-meta-COLOR"}, None),
        ("GET", obj, {"Range": "bytes=1-3",
                      "X-Backend-Ignore-Range-If-Metadata-Present": ",X-Object-Meta-None,"},
         None),
        ("POST", obj, dict(cont, **{"X-Timestamp": "1700000002.00000",
                                    "X-Object-Meta-Size": "big"}), None),
        ("GET", obj, {}, None),
        ("POST", obj, {"X-Timestamp": "1700000002.00000", "X-Object-Meta-Size": "x"}, None),
        ("POST", obj, dict(cont, **{"X-Timestamp": "1700000003.00000",
                                    "Content-Type": "application/json"}), None),
        ("HEAD", obj, {}, None),
        ("PUT", obj, {"X-Timestamp": "1700000004.00000", "Content-Type": "text/plain",
                      "Etag": "0123456789abcdef0123456789abcdef"}, body),
        ("PUT", obj, {"X-Timestamp": "1700000004.00000"}, body),
        ("PUT", obj, {"Content-Type": "text/plain"}, body),
        ("PUT", obj, {"X-Timestamp": "garbage", "Content-Type": "text/plain"}, body),
        ("DELETE", obj, dict(cont, **{"X-Timestamp": "1700000005.00000"}), None),
        ("GET", obj, {}, None),
        ("HEAD", obj, {}, None),
        ("DELETE", obj, {"X-Timestamp": "1700000006.00000"}, None),
        ("DELETE", obj, {"X-Timestamp": "1700000001.00000"}, None),
        ("POST", obj, {"X-Timestamp": "1700000007.00000"}, None),
        ("DELETE", "/sda1/3/AUTH_test/c/never", {"X-Timestamp": "1700000001.00000"}, None),
        ("GET", "/sda1/3/AUTH_test/c/never", {}, None),
        ("PUT", "/sda1/3/AUTH_test/c/p1", {"X-Timestamp": "1700000001.00000",
                                          "Content-Type": "a/b",
                                          "X-Backend-Storage-Policy-Index": "1"}, b"pol1"),
        ("GET", "/sda1/3/AUTH_test/c/p1", {"X-Backend-Storage-Policy-Index": "1"}, None),
        ("GET", "/sda1/3/AUTH_test/c/p1", {}, None),
        ("GET", "/sda1/3/AUTH_test/c/p1", {"X-Backend-Storage-Policy-Index": "9"}, None),
        ("GET", "/sda1/3/AUTH_test", {}, None),
        ("GET", "/nodev/3/AUTH_test/c/o", {}, None),
        ("PUT", "/sda1/3/AUTH_test/c/expiring", {"X-Timestamp": "1700000001.00000",
                                                "Content-Type": "a/b",
                                                "X-Delete-At": "1700000100"}, b"x"),
        ("GET", "/sda1/3/AUTH_test/c/expiring", {}, None),
        ("GET", "/sda1/3/AUTH_test/c/expiring", {"X-Backend-Replication": "True"}, None),
        # Expiring objects: queue rows sent (PUT) or saved as async pendings (DELETE of the old
        # row, which has no known host).
        ("PUT", "/sda1/3/AUTH_test/c/exp2", dict(cont, **{
            "X-Timestamp": "1700000001.00000", "Content-Type": "a/b",
            "X-Delete-At": "1900000000",
            "X-Delete-At-Host": "127.0.0.1:%d" % container_port,
            "X-Delete-At-Device": "sdq1", "X-Delete-At-Partition": "2",
            "X-Delete-At-Container": "1899964800"}), b"y"),
        ("POST", "/sda1/3/AUTH_test/c/exp2", dict(cont, **{
            "X-Timestamp": "1700000002.00000", "X-Delete-At": "1900086400",
            "X-Delete-At-Host": "127.0.0.1:%d" % container_port,
            "X-Delete-At-Device": "sdq1", "X-Delete-At-Partition": "2",
            "X-Delete-At-Container": "1900051200"}), None),
        ("DELETE", "/sda1/3/AUTH_test/c/exp2", dict(cont, **{
            "X-Timestamp": "1700000003.00000"}), None),
        # Swift's check_delete_headers(), which its object server runs on PUT: answers for bad
        # values, X-Delete-After turned into X-Delete-At, huge values clamped (issue 12).
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b", "X-Delete-At": "abc"}, b"d"),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b", "X-Delete-After": "abc"}, b"d"),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b", "X-Delete-After": "-5"}, b"d"),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b", "X-Delete-At": "1600000000"},
         b"d"),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b",
                                           "X-Delete-After": "99999999999999999999"}, b"d"),
        ("HEAD", "/sda1/3/AUTH_test/c/del", {}, None),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000002.00000",
                                           "Content-Type": "a/b", "X-Delete-After": "100",
                                           "X-Delete-At": "1800000000"}, b"d"),
        ("GET", "/sda1/3/AUTH_test/c/del", {"X-Backend-Replication": "True"}, None),
        ("PUT", "/sda1/3/AUTH_test/c/del", {"X-Timestamp": "1700000003.00000",
                                           "Content-Type": "a/b",
                                           "X-Delete-At": "99999999999999999999"}, b"d"),
        ("HEAD", "/sda1/3/AUTH_test/c/del", {}, None),
        # Bodies sent without Expect around the size Apus reads before the open (below its
        # 1 MiB write batch) and at it.
        ("PUT", "/sda1/3/AUTH_test/c/mib", {"X-Timestamp": "1700000001.00000",
                                           "Content-Type": "a/b"}, b"m" * ((1 << 20) - 1)),
        ("PUT", "/sda1/3/AUTH_test/c/mib", {"X-Timestamp": "1700000002.00000",
                                           "Content-Type": "a/b"}, b"n" * (1 << 20)),
        ("GET", "/sda1/3/AUTH_test/c/mib", {}, None),
        ("OPTIONS", "/sda1/3/AUTH_test/c/o", {}, None),
        ("COPY", "/sda1/3/AUTH_test/c/o", {}, None),
    ]
    for i, (method, path, headers, data) in enumerate(steps):
        results = []
        for port in (swift_port, apus_port):
            results.append(procs.request(port, method, path, headers, data))
        (s_status, s_h, s_body), (a_status, a_h, a_body) = results
        what = "step %d %s %s %r" % (i, method, path, headers)
        check(s_status == a_status, "%s: status swift %d, apus %d (%r)" %
              (what, s_status, a_status, a_body[:200]))
        if s_status >= 400 and method != "HEAD":
            check(s_body == a_body, "%s: error body swift %r, apus %r" % (what, s_body, a_body))
        for h in COMPARED:
            if method == "OPTIONS":
                continue
            if h in s_h or h in a_h:
                check(s_h.get(h) == a_h.get(h), "%s: header %s swift %r, apus %r" %
                      (what, h, s_h.get(h), a_h.get(h)))
        if method == "GET" and "multipart" not in s_h.get("content-type", ""):
            check(s_body == a_body, "%s: body swift %r, apus %r" % (what, s_body[:200],
                                                                     a_body[:200]))
        if method == "OPTIONS":
            check(s_h.get("allow") == a_h.get("allow"), "%s: Allow swift %r, apus %r" %
                  (what, s_h.get("allow"), a_h.get("allow")))


def read_head(f):
    status = int(f.readline().split()[1])
    headers = {}
    while True:
        line = f.readline().decode("latin-1")
        if line in ("\r\n", "\n", ""):
            return status, headers
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()


def mime_put(port, path, headers, parts, then_head=False):
    """A PUT the way Swift's MIMEPutter sends it: chunked, Expect: 100-continue, the body only
    after the 100 Continue. (status, headers, body, headers of the 100 Continue); with
    `then_head`, the status of a HEAD of `path` sent next on the same connection is added (None
    when the server closed it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if then_head:
            answer = mime_put_on(sock, path, headers, parts)
            try:
                sock.sendall(("HEAD %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode())
                head_status, _ = read_head(sock.makefile("rb"))
            except (OSError, IndexError):
                head_status = None
            return answer + (head_status,)
        return mime_put_on(sock, path, headers, parts)
    finally:
        sock.close()


def mime_put_on(sock, path, headers, parts):
    """mime_put() on a connection of the caller's."""
    lines = ["PUT %s HTTP/1.1" % path, "Host: 127.0.0.1", "Transfer-Encoding: chunked",
             "Expect: 100-continue"] + ["%s: %s" % kv for kv in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    f = sock.makefile("rb")
    status, got = read_head(f)
    continue_headers = {}
    if status == 100:
        continue_headers = got
        try:
            for part in parts:
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            # A server refusing the body early (a bad MIME start) answers and closes while
            # the rest is still on its way; its answer is already here to read.
            pass
        status, got = read_head(f)
    return status, got, f.read(int(got.get("content-length", 0))), continue_headers


def mime_parts(boundary, data, footer=None, footer_md5=None, raw_footer=None):
    """The body documents of a footer PUT, as MIMEPutter frames them."""
    b = boundary.encode()
    parts = [b"--%s\r\nX-Document: object body\r\n\r\n" % b, data]
    if footer is None and raw_footer is None:
        parts.append(b"\r\n--%s--\r\n" % b)
        return parts
    body = raw_footer if raw_footer is not None else json.dumps(footer).encode("ascii")
    md5_line = b"" if footer_md5 == "" else b"Content-MD5: %s\r\n" % (
        footer_md5 or hashlib.md5(body).hexdigest()).encode()
    parts.append(b"\r\n--%s\r\nX-Document: object metadata\r\n%s\r\n%s\r\n--%s--\r\n" %
                 (b, md5_line, body, b))
    return parts


def mime_puts(swift_port, apus_port, container_port):
    """Swift's proxy with encryption sends every PUT this way (replicated policies)."""
    cont = {"X-Container-Host": "127.0.0.1:%d" % container_port,
            "X-Container-Device": "sdc1", "X-Container-Partition": "5"}
    data = b"ciphertext, as the proxy would send it" * 100
    etag = hashlib.md5(data).hexdigest()
    boundary = "%064x" % 0xfeed
    good = {"Etag": etag,
            "X-Object-Sysmeta-Crypto-Body-Meta": '{"iv": "abc", "cipher": "AES_CTR_256"}',
            "X-Object-Sysmeta-Container-Update-Override-Etag": "plain; swift_meta=1",
            "X-Object-Meta-Footer": "caf\u00c3\u00a9",  # a WSGI string, as the proxy has it
            "X-Object-Transient-Sysmeta-T": "t",
            "Content-Type": "not/applied"}
    obj = "/sda1/6/AUTH_test/c/mime"

    def headers(ts, container=cont, **extra):
        h = dict(container, **{"X-Timestamp": ts, "Content-Type": "text/plain",
                          "X-Backend-Obj-Content-Length": str(len(data)),
                          "X-Backend-Obj-Metadata-Footer": "yes",
                          "X-Backend-Obj-Multipart-Mime-Boundary": boundary})
        h.update(extra)
        return h

    steps = [
        ("footer", obj, headers("1700000040.00000"), mime_parts(boundary, data, good)),
        ("etag from the footer wins", obj, headers("1700000041.00000", Etag="0" * 32),
         mime_parts(boundary, data, dict(good, Etag=etag))),
        ("footer etag mismatch", obj, headers("1700000042.00000"),
         mime_parts(boundary, data, dict(good, Etag="f" * 32))),
        ("request etag used without a footer one", obj, headers("1700000042.00000", Etag="e" * 32),
         mime_parts(boundary, data, {"X-Object-Meta-Footer": "x"})),
        ("footer MD5 mismatch", obj, headers("1700000043.00000"),
         mime_parts(boundary, data, good, footer_md5="0" * 32)),
        ("no Content-MD5", obj, headers("1700000044.00000"),
         mime_parts(boundary, data, good, footer_md5="")),
        ("no footer document", obj, headers("1700000045.00000"), mime_parts(boundary, data)),
        ("footer not JSON", obj, headers("1700000046.00000"),
         mime_parts(boundary, data, raw_footer=b"{not json")),
        ("no boundary", obj, {k: v for k, v in headers("1700000047.00000").items()
                              if k != "X-Backend-Obj-Multipart-Mime-Boundary"}, []),
        ("short object", obj, headers("1700000048.00000"),
         mime_parts(boundary, data[:-1], good)),
        # Longer than announced: by a few bytes, and by more than the object server reads
        # past a body that fits one write batch.
        ("long object", obj, headers("1700000048.10000"),
         mime_parts(boundary, data + b"xy", good)),
        ("much longer object", obj, headers("1700000048.20000"),
         mime_parts(boundary, data + b"z" * 9000, good)),
        ("numbers and nulls in the footer", obj, headers("1700000049.00000"),
         mime_parts(boundary, data, dict(good, **{"X-Object-Meta-Num": 5,
                                                   "X-Object-Meta-Gone": None}))),
    ]
    for name, path, h, parts in steps:
        results = [mime_put(port, path, h, parts) for port in (swift_port, apus_port)]
        (s_status, _, s_body, s_cont), (a_status, _, a_body, a_cont) = results
        what = "MIME PUT %s" % name
        check(s_status == a_status, "%s: status swift %d, apus %d (%r)" %
              (what, s_status, a_status, a_body[:200]))
        if s_status >= 400:
            check(s_body == a_body, "%s: error body swift %r, apus %r" % (what, s_body, a_body))
        check(s_cont.get("x-obj-metadata-footer") == a_cont.get("x-obj-metadata-footer"),
              "%s: 100 Continue swift %r, apus %r" % (what, s_cont, a_cont))
        got = [procs.request(port, "GET", path) for port in (swift_port, apus_port)]
        check(got[0][0] == got[1][0] and got[0][2] == got[1][2],
              "%s: GET after it swift %d, apus %d" % (what, got[0][0], got[1][0]))
        for hname in COMPARED + ["x-object-meta-num", "x-object-meta-gone"]:
            check(got[0][1].get(hname) == got[1][1].get(hname),
                  "%s: stored %s swift %r, apus %r" % (what, hname, got[0][1].get(hname),
                                                       got[1][1].get(hname)))
    # A MIME PUT read to its end leaves the connection open for the next request (the proxy
    # reuses its connections to object servers; the closing delimiter comes before the chunked
    # body's last chunk, and a server that stopped there had to close). A short epilogue after
    # the delimiter is read too; past 64 KiB more than the read that found the delimiter
    # brought along (at most network_chunk_size), it is not, and the connection closes. (No
    # container server named: the updates of both servers are compared later.)
    keep_cases = (("plain", b"", True), ("an epilogue", b"epilogue\r\n" * 10, True),
                  ("a long epilogue", b"e" * (256 << 10), False))
    for i, (what, extra, keeps) in enumerate(keep_cases):
        status, got, _, _, head_status = mime_put(
            apus_port, obj + "-keep", headers("17000000%d.00000" % (51 + i), {}),
            mime_parts(boundary, data, good) + ([extra] if extra else []), then_head=True)
        check(status == 201 and (got.get("connection") != "close") == keeps
              and (head_status == 200) == keeps,
              "MIME PUT with %s: %d, Connection %r, then HEAD on the same connection %r"
              % (what, status, got.get("connection"), head_status))
    # Apus does not offer multiphase commit (EC only; Apus stores replicated policies), so
    # Swift's proxy gives such a node up instead of expecting EC's durable commit. (Apus-only
    # steps name no container server: the updates of both servers are compared later.)
    _, _, _, a_cont = mime_put(apus_port, obj, headers("1700000050.00000", {}, **{
        "X-Backend-Obj-Multiphase-Commit": "yes"}), mime_parts(boundary, data, good))
    check("x-obj-multiphase-commit" not in a_cont and a_cont.get("x-obj-metadata-footer") == "yes",
          "multiphase commit not offered: %r" % a_cont)
    # A body that does not start with the boundary: Apus answers 400 (Swift: 500 and a traceback).
    status, _, body, _ = mime_put(apus_port, obj, headers("1700000051.00000", {}),
                                  [b"--wrong\r\n\r\n", data])
    check(status == 400 and b"invalid starting boundary" in body,
          "bad starting boundary: %d %r" % (status, body))
    print("compared %d MIME PUTs" % len(steps))


def object_hash(path):
    return hashlib.md5(b"apus-test" + path.encode() + b"interop").hexdigest()


def partition_for(hash_hex, power):
    return int(hash_hex[:8], 16) >> (32 - power)


def part_power_links(root, swift_port, apus_port):
    """X-Backend-Next-Part-Power: the files of each write also appear, hard-linked, in the
    object's partition under the next power; both servers leave the same trees."""
    power, nxt = 8, 9
    names = []
    for name in ("pp1", "pp2"):
        h = object_hash("/AUTH_test/c/" + name)
        names.append((name, h, partition_for(h, power), partition_for(h, nxt)))
    (n1, h1, old1, new1), (n2, h2, old2, new2) = names
    npp = {"X-Backend-Next-Part-Power": str(nxt)}
    # Recent timestamps: a tombstone older than reclaim_age would be reclaimed at once.
    now = int(time.time())
    ts = ["%d.00000" % (now - 100 + i) for i in range(6)]
    steps = [
        ("PUT", "/sda1/%d/AUTH_test/c/%s" % (old1, n1), ts[0], b"one"),
        ("POST", "/sda1/%d/AUTH_test/c/%s" % (old1, n1), ts[1], None),
        ("PUT", "/sda1/%d/AUTH_test/c/%s" % (old1, n1), ts[2], b"two"),
        ("DELETE", "/sda1/%d/AUTH_test/c/%s" % (old1, n1), ts[3], None),
        # The ring has the new power already: writes go to the new partition, and what they
        # make obsolete in the old one (linked there before) goes.
        ("PUT", "/sda1/%d/AUTH_test/c/%s" % (old2, n2), ts[4], b"old"),
        ("PUT", "/sda1/%d/AUTH_test/c/%s" % (new2, n2), ts[5], b"new"),
    ]
    for method, path, ts, body in steps:
        headers = dict(npp, **{"X-Timestamp": ts})
        if method == "PUT":
            headers["Content-Type"] = "text/plain"
        if method == "POST":
            headers["X-Object-Meta-Linked"] = "yes"
        for port in (swift_port, apus_port):
            status = procs.request(port, method, path, headers, body)[0]
            check(status in (201, 202, 204), "%s %s with next part power: %d" %
                  (method, path, status))
    trees = {}
    for side in ("swift", "apus"):
        base = os.path.join(root, side, "sda1", "objects")
        files = {}
        for dirpath, _, fnames in os.walk(base):
            if os.path.basename(dirpath) not in (h1, h2):
                continue
            for f in fnames:
                full = os.path.join(dirpath, f)
                files[os.path.relpath(full, base)] = os.stat(full).st_ino
        # Which names share an inode: the link structure, independent of inode numbers.
        groups = {}
        for rel, ino in files.items():
            groups.setdefault(ino, []).append(rel)
        trees[side] = sorted(sorted(g) for g in groups.values())
    check(trees["swift"] == trees["apus"],
          "part power trees:\n  swift %r\n  apus  %r" % (trees["swift"], trees["apus"]))
    check(any(len(g) == 2 for g in trees["apus"]), "Apus linked something: %r" % trees["apus"])
    print("compared part-power links (%d files)" % sum(len(g) for g in trees["apus"]))


def compare_replicate(root, swift_port, apus_port):
    """REPLICATE answers (suffix hashes) and the hashes.pkl left behind must agree."""
    for path, headers in (("/sda1/3", {}), ("/sda1/3", {"X-Backend-Storage-Policy-Index": "1"}),
                          ("/sda1/77", {}), ("/sda1/3/abc-def-zzz", {}), ("/sda1/3", {}),
                          ("/nodev/3", {})):
        answers = []
        for port in (swift_port, apus_port):
            status, _, body = procs.request(port, "REPLICATE", path, headers)
            answers.append((status, pickle.loads(body) if status == 200 else body))
        check(answers[0] == answers[1], "REPLICATE %s %r: swift %r, apus %r" %
              (path, headers, answers[0], answers[1]))
    print("compared REPLICATE answers")
    pkls = []
    for side in ("swift", "apus"):
        d = pickle.load(open(os.path.join(root, side, "sda1", "objects", "3", "hashes.pkl"), "rb"))
        d.pop("updated", None)
        pkls.append(d)
    check(pkls[0] == pkls[1], "hashes.pkl: swift %r, apus %r" % tuple(pkls))


def large_metadata(swift_port, apus_port):
    """Metadata near max_meta_overall_size: Apus stores it on any filesystem (on ext4 through
    its sidecar), where Swift may answer 507."""
    headers = {"X-Timestamp": "1700000030.00000", "Content-Type": "text/plain"}
    for i in range(30):
        headers["X-Object-Meta-K%02d" % i] = "v" * 120
    path = "/sda1/5/AUTH_test/c/large-metadata"
    s_status = procs.request(swift_port, "PUT", path, headers, b"body")[0]
    a_status = procs.request(apus_port, "PUT", path, headers, b"body")[0]
    print("large metadata PUT: swift %d, apus %d" % (s_status, a_status))
    check(a_status == 201, "Apus stores large metadata: %d" % a_status)
    status, h, body = procs.request(apus_port, "GET", path)
    check(status == 200 and body == b"body" and
          all(h.get("x-object-meta-k%02d" % i) == "v" * 120 for i in range(30)),
          "large metadata reads back: %d" % status)


def compare_updates(container):
    by_agent = {}
    for method, path, headers in container.updates:
        agent = headers.get("User-Agent", "")
        by_agent.setdefault(agent, []).append((method, path, headers))
    streams = list(by_agent.values())
    check(len(streams) == 2, "container updates from two servers, got %d" % len(streams))
    if len(streams) != 2:
        return
    a, b = streams
    check(len(a) == len(b), "same number of container updates: %d vs %d" % (len(a), len(b)))
    print("comparing %d container updates" % len(a))
    ignore = {"user-agent", "referer", "host", "connection", "accept-encoding", "content-length",
              "transfer-encoding", "expect"}
    for (m1, p1, h1), (m2, p2, h2) in zip(a, b):
        check((m1, p1) == (m2, p2), "update %s %s vs %s %s" % (m1, p1, m2, p2))
        l1 = {k.lower(): v for k, v in h1.items() if k.lower() not in ignore}
        l2 = {k.lower(): v for k, v in h2.items() if k.lower() not in ignore}
        check(l1 == l2, "update headers differ for %s %s:\n  %r\n  %r" % (m1, p1, l1, l2))


def compare_async_pendings(root, swift_port, apus_port):
    cont = {"X-Container-Host": "127.0.0.1:%d" % procs.free_port(),  # nobody listens
            "X-Container-Device": "sdc1", "X-Container-Partition": "5",
            "X-Trans-Id": "tx-async"}
    for port in (swift_port, apus_port):
        status, _, _ = procs.request(port, "PUT", "/sda1/4/AUTH_test/c/async",
                                     dict(cont, **{"X-Timestamp": "1700000011.00000",
                                                   "Content-Type": "text/plain"}), b"abc")
        check(status == 201, "PUT with unreachable container server: %d" % status)
    found = {}
    for side in ("swift", "apus"):
        base = os.path.join(root, side, "sda1", "async_pending")
        for dirpath, _, files in os.walk(base):
            for f in files:
                found.setdefault(side, {})[os.path.relpath(os.path.join(dirpath, f), base)] = \
                    os.path.join(dirpath, f)
    check(set(found.get("swift", {})) == set(found.get("apus", {})) and found.get("apus"),
          "async pending names: swift %r apus %r" % (sorted(found.get("swift", {})),
                                                     sorted(found.get("apus", {}))))
    print("comparing %d async pendings" % len(found.get("apus", {})))
    for name in found.get("apus", {}):
        if name not in found.get("swift", {}):
            continue
        s = pickle.load(open(found["swift"][name], "rb"))
        a = pickle.load(open(found["apus"][name], "rb"))
        for d in (s, a):
            d["headers"] = {k: v for k, v in dict(d["headers"]).items()
                            if k not in ("User-Agent", "Referer")}
        check(s == a, "async pending %s differs:\n  swift %r\n  apus  %r" % (name, s, a))


def cross_read(root, apus_port, apus_on_swift_port, swift_port):
    # Swift's DiskFile reads what Apus wrote.
    from swift.common import storage_policy, utils
    utils.set_swift_dir(os.path.join(root, "etc"))
    storage_policy.reload_storage_policies()
    from swift.common.storage_policy import POLICIES
    from swift.obj.diskfile import DiskFileRouter
    from swift.common.utils import get_logger
    body = bytes(range(256)) * 300
    status, h, _ = procs.request(apus_port, "PUT", "/sda1/9/AUTH_test/c/cross%C3%A9",
                                 {"X-Timestamp": "1700000020.00000",
                                  "Content-Type": "image/png",
                                  "X-Object-Meta-Who": "apus \xc3\xa9t\xc3\xa9"}, body)
    check(status == 201, "apus PUT for cross read: %d" % status)
    conf = {"devices": os.path.join(root, "apus"), "mount_check": "false"}
    mgr = DiskFileRouter(conf, get_logger({}))[POLICIES[0]]
    # Swift's object server hands DiskFile real Unicode names (wsgi_to_str of the path).
    df = mgr.get_diskfile("sda1", "9", "AUTH_test", "c", "cross\xe9", policy=POLICIES[0])
    with df.open():
        md = df.get_metadata()
        data = b"".join(df.reader())
    check(data == body, "Swift's DiskFile reads Apus's body")
    check(md.get("ETag") == h.get("etag", "").strip('"'), "ETag as Swift reads it: %r" % md)
    check(md.get("name") == "/AUTH_test/c/cross\xe9", "name as Swift reads it: %r" % md.get("name"))
    check(md.get("X-Object-Meta-Who") == "apus \xc3\xa9t\xc3\xa9",
          "user metadata as Swift reads it: %r" % md.get("X-Object-Meta-Who"))
    check(md.get("Content-Length") == str(len(body)), "Content-Length: %r" % md)

    # Apus serves what Swift wrote (a second Apus server on Swift's device directory).
    status, _, _ = procs.request(swift_port, "PUT", "/sda1/9/AUTH_test/c/from-swift%C3%A9",
                                 {"X-Timestamp": "1700000021.00000",
                                  "Content-Type": "text/x-swift",
                                  "X-Object-Meta-Who": "swift \xc3\xa9"}, body)
    check(status == 201, "swift PUT for cross read: %d" % status)
    got = procs.request(apus_on_swift_port, "GET", "/sda1/9/AUTH_test/c/from-swift%C3%A9")
    want = procs.request(swift_port, "GET", "/sda1/9/AUTH_test/c/from-swift%C3%A9")
    check(got[0] == 200 and got[2] == body, "Apus serves Swift's object: %d" % got[0])
    for hname in ("etag", "content-type", "x-object-meta-who", "x-timestamp", "last-modified"):
        check(got[1].get(hname) == want[1].get(hname),
              "Swift-written object header %s: apus %r swift %r" % (hname, got[1].get(hname),
                                                                    want[1].get(hname)))


def range_quarantine(root, swift_port, apus_port):
    """A rotted file read by ranges: only a range from byte 0 to the end (or past it) checks the
    MD5 and quarantines, on both servers (Swift's reader quarantines any read from 0 to EOF)."""
    seen = {}
    for side, port in (("swift", swift_port), ("apus", apus_port)):
        path = "/sda1/9/AUTH_test/c/rotten-range"
        status, _, _ = procs.request(port, "PUT", path, {"X-Timestamp": "1700000030.00000",
                                                         "Content-Type": "text/plain"}, b"hello")
        check(status == 201, "%s PUT for range rot: %d" % (side, status))
        objects = os.path.join(root, side, "sda1", "objects", "9")
        datas = [os.path.join(d, f) for d, _, fs in os.walk(objects) for f in fs
                 if f.endswith(".data") and "1700000030" in f]
        for data in datas:
            from swift.obj.diskfile import read_metadata
            if read_metadata(data)["name"] == "/AUTH_test/c/rotten-range":
                with open(data, "r+b") as f:
                    f.write(b"HELLO")
        steps = []
        for rng in ("bytes=0-2", "bytes=1-11", "bytes=-5", "bytes=0-11"):
            got = procs.request(port, "GET", path, {"Range": rng})
            steps.append((rng, got[0], got[2], procs.request(port, "HEAD", path)[0]))
        seen[side] = steps
    check(seen["swift"] == seen["apus"],
          "range reads of a rotted file:\n  swift %r\n  apus  %r" % (seen["swift"], seen["apus"]))
    check(seen["apus"][-1][3] == 404, "quarantined after bytes=0-11: %r" % seen["apus"])


def verified_read(root, swift_port, apus_port):
    """X-Backend-Apus-Verified-Read, which Apus's proxy sends for whole segments: Apus's object
    server promises it for whole reads only (Swift's ignores it), and holds back the last chunk
    of a rotten file (the body ends short) where it would otherwise send every byte."""
    import http.client
    hdr = "X-Backend-Apus-Verified-Read"
    body = b"v" * (200 * 1024)  # several chunks
    seen = {}
    for side, port in (("swift", swift_port), ("apus", apus_port)):
        path = "/sda1/11/AUTH_test/c/verified-%s" % side
        status = procs.request(port, "PUT", path, {"X-Timestamp": "1700000040.00000",
                                                   "Content-Type": "text/plain"}, body)[0]
        check(status == 201, "%s PUT for verified read: %d" % (side, status))
        whole = procs.request(port, "GET", path, {hdr: "yes"})
        ranged = procs.request(port, "GET", path, {hdr: "yes", "Range": "bytes=1-"})
        seen[side] = (whole[0], whole[1].get(hdr.lower()), whole[2] == body,
                      ranged[0], ranged[1].get(hdr.lower()))
    check(seen["swift"] == (200, None, True, 206, None), "swift ignores it: %r" % (seen,))
    check(seen["apus"] == (200, "yes", True, 206, None),
          "apus promises whole reads only: %r" % (seen,))
    # A small object too: its body is read with the open, in one chunk, and held back whole.
    small = b"s" * 4096
    status = procs.request(apus_port, "PUT", "/sda1/11/AUTH_test/c/verified-small",
                           {"X-Timestamp": "1700000040.00000", "Content-Type": "text/plain"},
                           small)[0]
    check(status == 201, "PUT of the small verified object: %d" % status)
    for name, length in (("verified-apus", len(body)), ("verified-small", len(small))):
        path = "/sda1/11/AUTH_test/c/" + name
        objects = os.path.join(root, "apus", "sda1", "objects", "11")
        from swift.obj.diskfile import read_metadata
        datas = [os.path.join(d, f) for d, _, fs in os.walk(objects) for f in fs
                 if f.endswith(".data")]
        datas = [d for d in datas if read_metadata(d)["name"] == "/AUTH_test/c/" + name]
        check(len(datas) == 1, "the .data of %s: %r" % (name, datas))
        with open(datas[0], "r+b") as f:
            f.seek(1000)
            f.write(b"V")
        conn = http.client.HTTPConnection("127.0.0.1", apus_port, timeout=10)
        try:
            conn.request("GET", path, headers={hdr: "yes"})
            resp = conn.getresponse()
            try:
                got = resp.read()
            except http.client.IncompleteRead as e:
                got = e.partial
        finally:
            conn.close()
        check(resp.status == 200 and len(got) < length,
              "%s: a rotten file's verified read ends short: %d, %d of %d" %
              (name, resp.status, len(got), length))
        check(procs.request(apus_port, "HEAD", path)[0] == 404, "%s is quarantined" % name)


def head_names(port, path):
    """The metadata header names of a HEAD answer, spelled as sent."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("HEAD", path)
        resp = conn.getresponse()
        return sorted(k for k, _ in resp.getheaders() if k.lower().startswith("x-object-meta-"))
    finally:
        conn.close()


def underscore_names(root, swift_port, apus_port):
    """A metadata name with an underscore: Swift's WSGI layer turns it into a dash
    (X-Object-Meta-Under-Score), in what it stores and what it answers."""
    from swift.common import storage_policy, utils
    utils.set_swift_dir(os.path.join(root, "etc"))
    storage_policy.reload_storage_policies()
    from swift.common.storage_policy import POLICIES
    from swift.obj.diskfile import DiskFileRouter
    from swift.common.utils import get_logger
    path = "/sda1/3/AUTH_test/c/underscore"
    for port in (swift_port, apus_port):
        status = procs.request(port, "PUT", path, {"X-Timestamp": "1700000030.00000",
                                                   "Content-Type": "a/b",
                                                   "X-Object-Meta-under_score": "v",
                                                   "X-Object-Meta-Plain": "p"}, b"u")[0]
        check(status == 201, "PUT with an underscore name on port %d: %d" % (port, status))
    s_names, a_names = head_names(swift_port, path), head_names(apus_port, path)
    check(s_names == a_names, "underscore metadata names answered: swift %r, apus %r" %
          (s_names, a_names))
    stored = []
    for side in ("swift", "apus"):
        conf = {"devices": os.path.join(root, side), "mount_check": "false"}
        mgr = DiskFileRouter(conf, get_logger({}))[POLICIES[0]]
        df = mgr.get_diskfile("sda1", "3", "AUTH_test", "c", "underscore", policy=POLICIES[0])
        with df.open():
            stored.append(sorted(k for k in df.get_metadata() if k.startswith("X-Object-Meta-")))
    check(stored[0] == stored[1], "underscore metadata names stored: swift %r, apus %r" %
          tuple(stored))
    print("underscore metadata names: answered %r, stored %r" % (s_names, stored[0]))


def main():
    with procs.TempDir("apus-obj-interop-") as root, procs.Processes() as ps:
        swift_port, apus_port, apus2_port, cont_port = (procs.free_port() for _ in range(4))
        confs = write_configs(root, swift_port, apus_port, apus2_port)
        container = FakeContainerServer(cont_port)
        threading.Thread(target=container.serve_forever, daemon=True).start()
        swift = ps.start(["/usr/bin/python3", os.path.join(SUPPORT, "run_swift_server.py"),
                          os.path.join(root, "etc"), "object", confs["swift"]],
                         os.path.join(root, "swift.log"))
        apus = ps.start([APUS, confs["apus"]], os.path.join(root, "apus.out"))
        apus2 = ps.start([APUS, confs["apus-on-swift"]], os.path.join(root, "apus2.out"))
        procs.wait_for_port(swift_port, proc=swift, log_path=os.path.join(root, "swift.log"))
        procs.wait_for_port(apus_port, proc=apus, log_path=os.path.join(root, "apus.out"))
        procs.wait_for_port(apus2_port, proc=apus2, log_path=os.path.join(root, "apus2.out"))
        try:
            differential(swift_port, apus_port, cont_port)
            mime_puts(swift_port, apus_port, cont_port)
            part_power_links(root, swift_port, apus_port)
            time.sleep(0.5)
            compare_updates(container)
            compare_replicate(root, swift_port, apus_port)
            large_metadata(swift_port, apus_port)
            compare_async_pendings(root, swift_port, apus_port)
            cross_read(root, apus_port, apus2_port, swift_port)
            underscore_names(root, swift_port, apus_port)
            range_quarantine(root, swift_port, apus_port)
            verified_read(root, swift_port, apus_port)
        finally:
            container.shutdown()
    print("object server interop:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
