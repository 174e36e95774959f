#!/usr/bin/env python3
"""SSYNC receiver (issue 16): Swift's own ssync sender (Debian's 2.30.1, swift.obj.ssync_sender,
run in this process) pushes one source partition to a stock swift-object-server and to an
apus-object-server, side by side.

1. A first sync of a partition holding plain objects, objects with a POST (.meta), a POST that
   changed the Content-Type, tombstones, an empty and a 1 MiB object, non-ASCII names, and
   objects the receivers already hold older or newer: both syncs succeed, the sender sends the
   same updates to both, and the two receivers end with the same files (names, metadata, bytes).
2. A second sync sends nothing; after a POST and a DELETE at the source, a third sends exactly
   one POST and one DELETE, to both.
3. Bad requests: a garbage first line, a bad missing-check line, an update without its headers,
   an unknown device, a bad frag index, replication_server = false: what both receivers answer
   (statuses equal; both write an :ERROR: line where Swift does).
4. A partition whose replication lock is held: the receiver gives up after
   replication_lock_timeout with an :ERROR: line, as Swift's does.

5. Apus's sender (the replicator's part, run once by tests/interop/ssync_send.cpp) does the
   same to device sdb1 of both receivers: the same updates as Swift's sender, and the same
   files as Swift's sender left on sda1; again nothing on a second run, then one POST and one
   DELETE.

6. Apus's replication of one partition (object-server/replicator.h) to device sdc1 of both:
   as a primary, suffix hashes compared by REPLICATE and what differs sent, until both
   peers' hashes equal the partition's; a lost replica refilled; as a handoff, the objects
   removed only once every primary took them (not with a primary unreachable).

usage: ssync_interop.py <build-dir> [ssync_send binary]
"""
import fcntl
import hashlib
import logging
import os
import socket
import sys
import time
import urllib.parse

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from crc32c import crc32c_hex  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
APUS = os.path.join(BUILD, "bin", "apus-object-server")
SSYNC_SEND = sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "tests", "ssync_send")
PART = "77"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write_configs(root, ports):
    etc = os.path.join(root, "etc")
    os.makedirs(etc)
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = apus-test\n"
                "swift_hash_path_suffix = ssync\n\n"
                "[storage-policy:0]\nname = gold\ndefault = yes\n")
    confs = {}
    for name, extra in (("source", "workers = 0\n"), ("swift", "workers = 0\n"),
                        ("apus", "workers = 2\nlog_file = %s/apus.log\n" % root),
                        ("swift-norepl", "workers = 0\nreplication_server = false\n"),
                        ("apus-norepl", "workers = 1\nreplication_server = false\n")):
        devices = os.path.join(root, name.replace("-norepl", ""))
        os.makedirs(os.path.join(devices, "sda1"), exist_ok=True)
        os.makedirs(os.path.join(devices, "sdb1"), exist_ok=True)
        os.makedirs(os.path.join(devices, "sdc1"), exist_ok=True)
        path = os.path.join(etc, name + "-object-server.conf")
        with open(path, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nlog_name = %s\nfallocate_reserve = 0\n%s\n"
                    "[pipeline:main]\npipeline = object-server\n\n"
                    "[app:object-server]\nuse = egg:swift#object\n"
                    "replication_lock_timeout = 1\n"
                    % (devices, ports[name], etc, name, extra))
        confs[name] = path
    return etc, confs


# Recent times: tombstones older than reclaim_age (a week) are removed by the servers at once.
BASE_TIME = int(time.time()) - 3600


def ts(n):
    return "%016.05f" % (BASE_TIME + n)


def obj_path(name, device="sda1"):
    return "/%s/%s/AUTH_test/c/%s" % (device, PART, urllib.parse.quote(name))


def put(port, name, t, body=b"", device="sda1", **headers):
    h = {"X-Timestamp": ts(t), "Content-Type": "application/octet-stream",
         "Content-Length": str(len(body))}
    h.update(headers)
    status = procs.request(port, "PUT", obj_path(name, device), h, body)[0]
    check(status == 201, "PUT %s at %d on port %d: %d" % (name, t, port, status))


def post(port, name, t, **headers):
    h = {"X-Timestamp": ts(t)}
    h.update(headers)
    status = procs.request(port, "POST", obj_path(name), h)[0]
    check(status == 202, "POST %s at %d: %d" % (name, t, status))


def delete(port, name, t):
    status = procs.request(port, "DELETE", obj_path(name), {"X-Timestamp": ts(t)})[0]
    check(status in (204, 404), "DELETE %s at %d: %d" % (name, t, status))


def populate(ports):
    src = ports["source"]
    put(src, "plain", 1, b"hello")
    put(src, "empty", 2, b"")
    put(src, "big", 3, os.urandom(1 << 20), **{"X-Object-Meta-Size": "big"})
    put(src, "caf\u00e9 \u00fc/na\u00efve", 4, b"unicode", **{"X-Object-Meta-Uni": "\u00e9"})
    put(src, "posted", 5, b"p", **{"X-Object-Meta-Color": "red"})
    post(src, "posted", 6, **{"X-Object-Meta-Color": "blue"})
    put(src, "ctype", 7, b"c", **{"X-Object-Meta-A": "1"})
    post(src, "ctype", 8, **{"Content-Type": "text/plain", "X-Object-Meta-A": "2"})
    put(src, "deleted", 9, b"gone")
    delete(src, "deleted", 10)
    put(src, "sysmeta", 11, b"s", **{"X-Object-Sysmeta-Test": "kept",
                                     "X-Object-Transient-Sysmeta-T": "t",
                                     "Content-Disposition": "inline"})
    for i in range(20):
        put(src, "many-%02d" % i, 20 + i, b"x" * i)
    put(src, "newer-here", 50, b"old")
    put(src, "older-here", 60, b"new")
    delete(src, "tomb-only", 61)
    for port in (ports["swift"], ports["apus"]):
        for device in ("sda1", "sdb1"):
            put(port, "newer-here", 70, b"newer on the receiver", device=device)
            put(port, "older-here", 55, b"older on the receiver", device=device)


class CountingSenderFactory:
    """Swift's Sender, counting the updates it sends."""

    def __init__(self):
        from swift.obj import ssync_sender
        self.module = ssync_sender
        self.sent = []

    def make(self, *args, **kwargs):
        sent = self.sent

        class Counting(self.module.Sender):
            def send_put(self, connection, url_path, df, durable=True):
                sent.append(("PUT", url_path))
                return super().send_put(connection, url_path, df, durable=durable)

            def send_post(self, connection, url_path, df):
                sent.append(("POST", url_path))
                return super().send_post(connection, url_path, df)

            def send_delete(self, connection, url_path, timestamp):
                sent.append(("DELETE", url_path))
                return super().send_delete(connection, url_path, timestamp)

        return Counting(*args, **kwargs)


class Daemon:
    """What ssync_sender.Sender needs of an object replicator."""

    def __init__(self, devices):
        from swift.obj.diskfile import DiskFileRouter
        self.logger = logging.getLogger("ssync-sender")
        conf = {"devices": devices, "mount_check": "false"}
        self._df_router = DiskFileRouter(conf, self.logger)
        self.conn_timeout = 5
        self.node_timeout = 10
        self.http_timeout = 30
        self.network_chunk_size = 65536


def sync(daemon, port, suffixes):
    from swift.common.storage_policy import POLICIES
    factory = CountingSenderFactory()
    node = {"replication_ip": "127.0.0.1", "replication_port": port, "device": "sda1",
            "index": 0}
    job = {"device": "sda1", "partition": PART, "policy": POLICIES[0]}
    ok, in_sync = factory.make(daemon, node, job, suffixes)()
    return ok, in_sync, sorted(factory.sent)


def suffixes_of(devices):
    part = os.path.join(devices, "sda1", "objects", PART)
    return sorted(s for s in os.listdir(part) if len(s) == 3)


def tree(devices, device="sda1"):
    """{hash dir: [(file name, metadata, md5 of bytes)]} of the partition. The CRC32C Apus's
    object server stores with a body (Swift's does not) is checked against the bytes and left
    out, so Swift's and Apus's trees compare equal."""
    from swift.obj.diskfile import read_metadata
    out = {}
    part = os.path.join(devices, device, "objects", PART)
    for suffix in sorted(os.listdir(part)):
        sdir = os.path.join(part, suffix)
        if len(suffix) != 3 or not os.path.isdir(sdir):
            continue
        for h in sorted(os.listdir(sdir)):
            files = []
            for name in sorted(os.listdir(os.path.join(sdir, h))):
                path = os.path.join(sdir, h, name)
                with open(path, "rb") as f:
                    md, data = read_metadata(f), f.read()
                crc = md.pop("X-Apus-Crc32C", None)
                if crc is not None:
                    want = crc32c_hex(data) + " " + md.get("ETag", "")
                    check(crc == want, "%s: stored CRC32C %r, want %r" % (path, crc, want))
                files.append((name, md, hashlib.md5(data).hexdigest()))
            out[h] = files
    return out


def apus_sync(root, port, suffixes):
    """Apus's sender from the source to device sdb1 at `port`: (ok, sorted update counts)."""
    import subprocess
    run = subprocess.run([SSYNC_SEND, "ssync", os.path.join(root, "source"), "sda1", PART,
                          ",".join(suffixes), "127.0.0.1", str(port), "sdb1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    words = run.stdout.split()
    if run.returncode != 0 or not words or words[0] != "ok":
        return False, run.stdout
    return True, {"PUT": int(words[1]), "POST": int(words[2]), "DELETE": int(words[3])}


def check_sender_tree(root, name):
    """What Apus's sender left on `name`'s sdb1 is what Swift's left on its sda1, except where
    Swift 2.30.1's sender changed a metadata value: under Python 3 it sends a value's
    WSGI string encoded as UTF-8, so a non-ASCII byte arrives as two (fixed upstream since,
    which sends wsgi_to_bytes()). There, the receiver must hold the source's own metadata."""
    want = tree(os.path.join(root, name), "sda1")
    got = tree(os.path.join(root, name), "sdb1")
    source = tree(os.path.join(root, "source"))
    mangled = 0
    for h in sorted(set(want) | set(got)):
        if want.get(h) == got.get(h):
            continue
        non_ascii = any(any(ord(c) > 127 for c in str(v)) for _, md, _ in want.get(h) or []
                        for k, v in md.items() if k != "name")
        if non_ascii and got.get(h) == source.get(h):
            mangled += 1
            continue
        check(False, "%s, hash %s: Apus's sender left %r, Swift's %r" % (name, h, got.get(h),
                                                                         want.get(h)))
    check(mangled <= 1, "%s: only the non-ASCII metadata object differs (%d)" % (name, mangled))


def counts(sent):
    out = {"PUT": 0, "POST": 0, "DELETE": 0}
    for method, _ in sent:
        out[method] += 1
    return out


def first_sync(root, ports, daemon):
    suffixes = suffixes_of(os.path.join(root, "source"))
    results = {}
    for name in ("swift", "apus"):
        ok, in_sync, sent = sync(daemon, ports[name], suffixes)
        check(ok, "first sync to %s succeeds" % name)
        results[name] = (in_sync, sent)
    check(results["swift"] == results["apus"],
          "first sync: same updates sent to both receivers:\nswift %r\napus  %r"
          % (results["swift"][1], results["apus"][1]))
    sent = results["apus"][1]
    check(("PUT", "/AUTH_test/c/newer-here") not in sent and
          ("PUT", "/AUTH_test/c/older-here") in sent,
          "what a receiver has newer is not sent, what it has older is: %r" % sent)
    swift_tree, apus_tree = tree(os.path.join(root, "swift")), tree(os.path.join(root, "apus"))
    check(sorted(swift_tree) == sorted(apus_tree), "the same hash directories on both receivers")
    for h in swift_tree:
        check(swift_tree[h] == apus_tree.get(h),
              "hash %s: the same files, metadata and bytes:\nswift %r\napus  %r"
              % (h, swift_tree[h], apus_tree.get(h)))
    print("first sync: %d updates, %d hash directories, receivers equal"
          % (len(sent), len(apus_tree)))
    for name in ("swift", "apus"):
        ok, got = apus_sync(root, ports[name], suffixes)
        check(ok and got == counts(sent),
              "Apus's sender to %s: the updates Swift's sent: %r, want %r" % (name, got, counts(sent)))
        check_sender_tree(root, name)


def later_syncs(root, ports, daemon):
    suffixes = suffixes_of(os.path.join(root, "source"))
    for name in ("swift", "apus"):
        ok, _, sent = sync(daemon, ports[name], suffixes)
        check(ok and sent == [], "second sync to %s sends nothing: %r" % (name, sent))
    for name in ("swift", "apus"):
        ok, got = apus_sync(root, ports[name], suffixes)
        check(ok and got == {"PUT": 0, "POST": 0, "DELETE": 0},
              "second sync of Apus's sender to %s sends nothing: %r" % (name, got))
    post(ports["source"], "plain", 100, **{"X-Object-Meta-Later": "yes"})
    delete(ports["source"], "many-03", 101)
    suffixes = suffixes_of(os.path.join(root, "source"))
    for name in ("swift", "apus"):
        ok, _, sent = sync(daemon, ports[name], suffixes)
        check(ok and sent == [("DELETE", "/AUTH_test/c/many-03"), ("POST", "/AUTH_test/c/plain")],
              "third sync to %s: one POST and one DELETE: %r" % (name, sent))
    for name in ("swift", "apus"):
        ok, got = apus_sync(root, ports[name], suffixes)
        check(ok and got == {"PUT": 0, "POST": 1, "DELETE": 1},
              "third sync of Apus's sender to %s: one POST and one DELETE: %r" % (name, got))
    swift_tree, apus_tree = tree(os.path.join(root, "swift")), tree(os.path.join(root, "apus"))
    check(swift_tree == apus_tree, "receivers equal after the meta-only and delete updates")
    for name in ("swift", "apus"):
        check_sender_tree(root, name)
    status, h, _ = procs.request(ports["apus"], "HEAD", obj_path("plain"))
    check(status == 200 and h.get("x-object-meta-later") == "yes",
          "Apus serves the replicated POST: %d %r" % (status, h.get("x-object-meta-later")))


def answer_complete(data):
    """Whether `data` holds a whole response (the servers may keep the connection open)."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        return body.endswith(b"0\r\n\r\n") and (body == b"0\r\n\r\n" or
                                                 body.endswith(b"\r\n0\r\n\r\n"))
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def raw_ssync(port, device, body_lines, headers=None, lock_wait=0):
    """An SSYNC request written by hand: (status, answer body lines)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        head = "SSYNC /%s/%s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" % (device, PART)
        for k, v in (headers or {}).items():
            head += "%s: %s\r\n" % (k, v)
        head += "X-Backend-Storage-Policy-Index: 0\r\n\r\n"
        s.sendall(head.encode())
        try:
            for line in body_lines:
                s.sendall(b"%x\r\n%s\r\n" % (len(line), line))
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            # A receiver that answered a bad line hangs up without reading the rest (Swift's
            # and Apus's both may); its answer is still there to read.
            pass
        data = b""
        while not answer_complete(data):
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    text = b""
    if b"chunked" in head.lower():
        while body:
            size_line, _, rest = body.partition(b"\r\n")
            try:
                size = int(size_line.split(b";")[0], 16)
            except ValueError:
                break
            if size == 0:
                break
            text += rest[:size]
            body = rest[size + 2:]
    else:
        text = body
    return status, [ln.strip() for ln in text.split(b"\n") if ln.strip()]


def bad_requests(ports):
    start = b":MISSING_CHECK: START\r\n"
    end = b":MISSING_CHECK: END\r\n"
    cases = [
        ("garbage first line", "sda1", [b"hello\r\n"], {}),
        ("bad missing check line", "sda1", [start, b"not-a-hash 123\r\n", end], {}),
        ("a path for a hash", "sda1", [start, b"../../../etc/x 123\r\n", end], {}),
        ("update without headers", "sda1",
         [start, end, b":UPDATES: START\r\n", b"PUT /AUTH_test/c/x\r\n"], {}),
        ("update with a bad method", "sda1",
         [start, end, b":UPDATES: START\r\n", b"GET /AUTH_test/c/x\r\n", b"X-Timestamp: 1\r\n",
          b"\r\n", b":UPDATES: END\r\n"], {}),
        ("PUT without Content-Length", "sda1",
         [start, end, b":UPDATES: START\r\n", b"PUT /AUTH_test/c/x\r\n",
          b"X-Timestamp: 1700000000.00000\r\n", b"\r\n", b":UPDATES: END\r\n"], {}),
        ("unknown device", "nodev", [start, end], {}),
        ("bad device name", "..", [start, end], {}),
        ("bad frag index", "sda1", [start, end], {"X-Backend-Ssync-Frag-Index": "x"}),
        ("empty exchange", "sda1", [start, end, b":UPDATES: START\r\n", b":UPDATES: END\r\n"], {}),
    ]
    # Swift looks up whatever a missing check line names (a path, for one); Apus takes only
    # 32 hex digits and a valid timestamp, and ends the request with an :ERROR: line.
    stricter = {"bad missing check line", "a path for a hash"}
    for what, device, lines, headers in cases:
        got = {name: raw_ssync(ports[name], device, lines, headers) for name in ("swift", "apus")}
        s_status, s_lines = got["swift"]
        a_status, a_lines = got["apus"]
        check(s_status == a_status, "%s: status swift %d, apus %d" % (what, s_status, a_status))
        if what in stricter:
            check(len(a_lines) == 1 and a_lines[0].startswith(b":ERROR: 0 "),
                  "%s: Apus refuses the line: %r" % (what, a_lines))
            continue
        s_err = any(ln.startswith(b":ERROR:") for ln in s_lines)
        a_err = any(ln.startswith(b":ERROR:") for ln in a_lines)
        check(s_err == a_err, "%s: an :ERROR: line from swift %s, from apus %s (%r / %r)"
              % (what, s_err, a_err, s_lines, a_lines))
        ok_lines = [ln for ln in a_lines if not ln.startswith(b":ERROR:")]
        check([ln for ln in s_lines if not ln.startswith(b":ERROR:")] == ok_lines,
              "%s: the same protocol lines (%r / %r)" % (what, s_lines, a_lines))
    for name in ("swift-norepl", "apus-norepl"):
        status, _ = raw_ssync(ports[name], "sda1", [start, end])
        check(status == 405, "%s: SSYNC refused with 405, got %d" % (name, status))
    print("bad requests: %d cases compared" % len(cases))


PART2 = "88"


def replicate_hashes(port, device, part=PART2):
    import pickle
    status, _, body = procs.request(port, "REPLICATE", "/%s/%s" % (device, part),
                                    {"X-Backend-Storage-Policy-Index": "0"})
    hashes = pickle.loads(body) if status == 200 else None
    return {k: v for k, v in (hashes or {}).items() if isinstance(k, str) and len(k) == 3}


def apus_replicate(root, mode, nodes):
    import subprocess
    run = subprocess.run([SSYNC_SEND, mode, os.path.join(root, "source"), "sda1", PART2] + nodes,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    words = run.stdout.split()
    check(run.returncode == 0 and words and words[0] == "ok", "replication ran: %r" % run.stdout)
    keys = ("synced", "failed", "hashmatch", "suffixes", "removed", "partition_removed")
    return dict(zip(keys, (int(w) for w in words[1:])))


def partition_replication(root, ports):
    src = ports["source"]
    for i in range(12):
        status = procs.request(src, "PUT", "/sda1/%s/AUTH_test/r/obj-%d" % (PART2, i),
                               {"X-Timestamp": ts(200 + i), "Content-Type": "text/plain",
                                "Content-Length": "3"}, b"r%02d" % i)[0]
        check(status == 201, "PUT obj-%d: %d" % (i, status))
    procs.request(src, "DELETE", "/sda1/%s/AUTH_test/r/obj-0" % PART2, {"X-Timestamp": ts(230)})
    nodes = ["127.0.0.1:%d/sdc1" % ports["swift"], "127.0.0.1:%d/sdc1" % ports["apus"]]
    got = apus_replicate(root, "primary", nodes)
    check(got.get("synced") == 2 and got.get("failed") == 0 and got.get("hashmatch") == 0,
          "primary: both peers synced: %r" % got)
    want = replicate_hashes(src, "sda1")
    for name in ("swift", "apus"):
        check(replicate_hashes(ports[name], "sdc1") == want,
              "%s's suffix hashes equal the partition's after a pass" % name)
    got = apus_replicate(root, "primary", nodes)
    check(got.get("hashmatch") == 2, "a second pass finds both in step: %r" % got)
    # A replica lost on the Apus peer comes back.
    lost = None
    part_dir = os.path.join(root, "apus", "sdc1", "objects", PART2)
    for suffix in sorted(os.listdir(part_dir)):
        if len(suffix) == 3:
            lost = os.path.join(part_dir, suffix)
            break
    import shutil
    shutil.rmtree(lost)
    with open(os.path.join(part_dir, "hashes.invalid"), "a") as f:
        f.write(os.path.basename(lost) + "\n")
    got = apus_replicate(root, "primary", nodes)
    check(got.get("hashmatch") == 1 and got.get("synced") == 2 and got.get("suffixes") == 1,
          "the lost suffix is sent to the Apus peer only: %r" % got)
    check(replicate_hashes(ports["apus"], "sdc1") == want, "the lost replica is back")
    # As a handoff, with a primary unreachable: nothing removed.
    dead = "127.0.0.1:%d/sdc1" % procs.free_port()
    got = apus_replicate(root, "handoff", nodes + [dead])
    check(got.get("failed") == 1 and got.get("removed") == 0 and
          os.path.isdir(os.path.join(root, "source", "sda1", "objects", PART2)),
          "handoff with a primary down keeps its objects: %r" % got)
    got = apus_replicate(root, "handoff", nodes)
    check(got.get("synced") == 2 and got.get("removed") == 12 and got.get("partition_removed") == 1
          and not os.path.exists(os.path.join(root, "source", "sda1", "objects", PART2)),
          "handoff taken by every primary is removed: %r" % got)
    for name in ("swift", "apus"):
        check(replicate_hashes(ports[name], "sdc1") == want,
              "%s still holds the partition after the handoff went" % name)
    print("partition replication: primary, refill and handoff revert checked")


def held_lock(root, ports):
    """Both receivers wait replication_lock_timeout (1 s here) for a held partition lock."""
    for name in ("swift", "apus"):
        part_dir = os.path.join(root, name, "sda1", "objects", PART)
        with open(os.path.join(part_dir, ".lock-replication"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            began = time.time()
            status, lines = raw_ssync(ports[name], "sda1",
                                      [b":MISSING_CHECK: START\r\n", b":MISSING_CHECK: END\r\n"])
            took = time.time() - began
        check(status == 200 and any(ln.startswith(b":ERROR:") for ln in lines) and 0.9 < took < 5,
              "%s with the partition lock held: %d %r after %.1f s" % (name, status, lines, took))


def main():
    names = ("source", "swift", "apus", "swift-norepl", "apus-norepl")
    with procs.TempDir("apus-ssync-interop-") as root, procs.Processes() as ps:
        ports = {name: procs.free_port() for name in names}
        etc, confs = write_configs(root, ports)
        os.environ["APUS_SWIFT_DIR"] = etc  # for ssync_send
        from swift.common import storage_policy, utils
        utils.set_swift_dir(etc)
        storage_policy.reload_storage_policies()
        procs_by_name = {}
        for name in names:
            log = os.path.join(root, name + ".out")
            if name.startswith("apus"):
                procs_by_name[name] = ps.start([APUS, confs[name]], log)
            else:
                procs_by_name[name] = ps.start(
                    ["/usr/bin/python3", os.path.join(SUPPORT, "run_swift_server.py"), etc,
                     "object", confs[name]], log)
        for name in names:
            procs.wait_for_port(ports[name], proc=procs_by_name[name],
                                log_path=os.path.join(root, name + ".out"))
        began = time.time()
        populate(ports)
        print("populated in %.1f s" % (time.time() - began))
        daemon = Daemon(os.path.join(root, "source"))
        first_sync(root, ports, daemon)
        print("first sync done at %.1f s" % (time.time() - began))
        later_syncs(root, ports, daemon)
        print("later syncs done at %.1f s" % (time.time() - began))
        bad_requests(ports)
        partition_replication(root, ports)
        print("bad requests done at %.1f s" % (time.time() - began))
        held_lock(root, ports)
    print("ssync interop:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
