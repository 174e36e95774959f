#!/usr/bin/env python3
"""apus-object-server under faults with real processes:
- kill -9 in the middle of a PUT leaves the previous object intact (or none), never a partial one,
  and no temp file;
- concurrent PUTs of one object with different timestamps: the newest wins, whatever the order;
- the page cache as Swift leaves it: out after a PUT, kept after a GET only without a token;
- Swift's `slow` (PUT and DELETE answers wait) and `log_requests = false` (no access lines);
- issue 12: a chunked PUT over max_file_size gets 413 while streaming and leaves nothing; requests
  for devices that do not exist get 507 without creating threads; bad X-Delete-At/-After and
  X-Delete-At-Container values get answers (400, or the object queued by a best guess) instead
  of a dead session.

usage: object_faults_test.py <build-dir>
"""
import ctypes
import hashlib
import http.client
import mmap
import os
import pickle
import random
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def resident_pages(path):
    """(pages of the file in the page cache, pages of the file), by mincore(2)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    with open(path, "rb") as f:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(v & 1 for v in vec), pages
        finally:
            libc.munmap(addr, size)


def thread_count(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def chunked_put(port, path, headers, total, chunk=65536):
    """A chunked PUT of `total` bytes sent by a second thread while this one reads the answer
    (the server may answer, and close, before the body ends). (status, body)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    lines = ["PUT %s HTTP/1.1" % path, "Host: x", "Transfer-Encoding: chunked"] + \
        ["%s: %s" % kv for kv in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send():
        try:
            sent = 0
            while sent < total:
                n = min(chunk, total - sent)
                sock.sendall(b"%x\r\n%s\r\n" % (n, b"z" * n))
                sent += n
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed first
    sender = threading.Thread(target=send)
    sender.start()
    try:
        f = sock.makefile("rb")
        status = int(f.readline().split()[1])
        length = 0
        while True:
            line = f.readline().decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        body = f.read(length)
    finally:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # ends a sender still blocked in sendall
        except OSError:
            pass  # reset by the server already
        sender.join()
        sock.close()
    return status, body


def files_under(path):
    return [os.path.join(d, f) for d, _, files in os.walk(path) for f in files]


def issue_12(ps, root):
    """A server with max_file_size = 1 MiB in its swift.conf."""
    etc = os.path.join(root, "etc12")
    os.makedirs(etc)
    os.makedirs(os.path.join(root, "dev12", "sda1"))
    port = procs.free_port()
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = fa\nswift_hash_path_suffix = ults\n\n"
                "[swift-constraints]\nmax_file_size = 1048576\n")
    with open(os.path.join(etc, "object-server.conf"), "w") as f:
        f.write("[DEFAULT]\ndevices = %s/dev12\nmount_check = false\nbind_ip = 127.0.0.1\n"
                "bind_port = %d\nswift_dir = %s\nworkers = 2\nlog_file = %s/log12\n"
                "fallocate_reserve = 0\n\n[pipeline:main]\npipeline = object-server\n\n"
                "[app:object-server]\nuse = egg:swift#object\n" % (root, port, etc, root))
    server = ps.start([os.path.join(BUILD, "bin", "apus-object-server"),
                       os.path.join(etc, "object-server.conf")], os.path.join(root, "server12.out"))
    procs.wait_for_port(port, proc=server, log_path=os.path.join(root, "server12.out"))
    device = os.path.join(root, "dev12", "sda1")

    # max_file_size on a chunked PUT: 413 while streaming, nothing left behind.
    big = "/sda1/0/acc/cont/too-big"
    status, body = chunked_put(port, big, {"X-Timestamp": "1700000400.00000",
                                           "Content-Type": "a/b"}, 3 * 1048576)
    check(status == 413 and body == b"Your request is too large.",
          "chunked PUT over max_file_size: %d %r" % (status, body[:100]))
    status = procs.request(port, "GET", big)[0]
    check(status == 404, "nothing of the refused PUT is visible: %d" % status)
    check(files_under(os.path.join(device, "tmp")) == [] and
          files_under(os.path.join(device, "objects")) == [],
          "no file of the refused PUT is left: %r" % files_under(device))
    status, body = chunked_put(port, "/sda1/0/acc/cont/just-fits",
                               {"X-Timestamp": "1700000401.00000", "Content-Type": "a/b"}, 1048576)
    check(status == 201, "a chunked PUT of exactly max_file_size: %d %r" % (status, body[:100]))

    # Device names from requests never make threads: 507 for each, thread count flat.
    procs.request(port, "GET", "/sda1/0/acc/cont/just-fits")  # warm every worker
    before = thread_count(server.pid)
    rng = random.Random(12)
    statuses = {}
    lock = threading.Lock()

    def hammer(n):
        for i in range(n):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            dev = "nodev%08x" % rng.getrandbits(32)
            method = ("GET", "PUT", "POST", "DELETE", "HEAD", "REPLICATE")[i % 6]
            path = "/%s/0" % dev if method == "REPLICATE" else "/%s/0/a/c/o" % dev
            headers = {"X-Timestamp": "1700000500.00000", "Content-Type": "a/b",
                       "Content-Length": "1" if method == "PUT" else "0"}
            conn.request(method, path, body=b"x" if method == "PUT" else None, headers=headers)
            resp = conn.getresponse()
            resp.read()
            conn.close()
            with lock:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
    workers = [threading.Thread(target=hammer, args=(500,)) for _ in range(6)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    after = thread_count(server.pid)
    check(statuses == {507: 3000}, "requests for devices that do not exist: %r" % statuses)
    check(after <= before + 2, "threads before %d, after 3000 unknown devices %d" %
          (before, after))

    # Delete-at values from requests: no parser throws, Swift's answers.
    path = "/sda1/0/acc/cont/expiring"
    base = {"X-Timestamp": "1700000600.00000", "Content-Type": "a/b"}
    for extra, want in ((("X-Delete-At", "abc"), (400, b"Non-integer X-Delete-At")),
                        (("X-Delete-After", "abc"), (400, b"Non-integer X-Delete-After")),
                        (("X-Delete-After", "-5"), (400, b"X-Delete-After in past")),
                        (("X-Delete-At", "1600000000"), (400, b"X-Delete-At in past"))):
        got = procs.request(port, "PUT", path, dict(base, **dict([extra])), b"e")
        check((got[0], got[2]) == want, "PUT with %s: %r" % (extra, got[::2]))
    # now + a huge X-Delete-After: clamped as Swift does (no double-to-int overflow).
    status = procs.request(port, "PUT", path,
                           dict(base, **{"X-Delete-After": "99999999999999999999"}), b"e")[0]
    check(status == 201, "PUT with a huge X-Delete-After: %d" % status)
    h = procs.request(port, "HEAD", path)[1]
    check(h.get("x-delete-at") == "9999999999", "huge X-Delete-After stored as %r" %
          h.get("x-delete-at"))
    # A bad X-Delete-At-Container (the queue row) killed the session after storing the object.
    try:
        got = procs.request(port, "PUT", path, dict(base, **{
            "X-Timestamp": "1700000601.00000", "X-Delete-At": "1900000000",
            "X-Delete-At-Host": "127.0.0.1:%d" % procs.free_port(), "X-Delete-At-Device": "sdq",
            "X-Delete-At-Partition": "1", "X-Delete-At-Container": "abc"}), b"e", timeout=8)
    except OSError as e:
        got = (0, {}, repr(e).encode())
    check(got[0] == 201, "PUT with X-Delete-At-Container: abc is answered: %r" % (got[::2],))
    rows = []
    for pending in files_under(os.path.join(device, "async_pending")):
        with open(pending, "rb") as f:
            update = pickle.load(f)
        rows.append((update["op"], update["account"], update["obj"]))
    check(("PUT", ".expiring_objects", "1900000000-acc/cont/expiring") in rows,
          "its queue row is saved for later: %r" % rows)
    got = procs.request(port, "POST", path, {"X-Timestamp": "1700000602.00000",
                                             "X-Delete-At": "abc"})
    check((got[0], got[2]) == (400, b"Non-integer X-Delete-At"), "POST with X-Delete-At: abc: %r"
          % (got[::2],))
    check(procs.request(port, "HEAD", path)[0] == 200, "the server still answers")
    check(server.poll() is None, "the server is still running")


def start_server(ps, root, port):
    proc = ps.start([os.path.join(BUILD, "bin", "apus-object-server"),
                     os.path.join(root, "etc", "object-server.conf")],
                    os.path.join(root, "server.out"))
    procs.wait_for_port(port, proc=proc, log_path=os.path.join(root, "server.out"))
    return proc


def main():
    with procs.TempDir("apus-faults-") as root, procs.Processes() as ps:
        etc = os.path.join(root, "etc")
        os.makedirs(etc)
        os.makedirs(os.path.join(root, "dev", "sda1"))
        port = procs.free_port()
        with open(os.path.join(etc, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = fa\nswift_hash_path_suffix = ults\n")
        with open(os.path.join(etc, "object-server.conf"), "w") as f:
            f.write("[DEFAULT]\ndevices = %s/dev\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nworkers = 2\nlog_file = %s/log\n"
                    "fallocate_reserve = 0\n\n[pipeline:main]\npipeline = object-server\n\n"
                    "[app:object-server]\nuse = egg:swift#object\n" % (root, port, etc, root))
        server = start_server(ps, root, port)
        path = "/sda1/0/acc/cont/victim"
        v1 = b"version one " * 1000
        status, _, _ = procs.request(port, "PUT", path, {"X-Timestamp": "1700000001.00000",
                                                         "Content-Type": "text/plain"}, v1)
        check(status == 201, "PUT v1: %d" % status)

        # kill -9 while v2's body is half sent.
        v2_len = 10 * 1024 * 1024
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nX-Timestamp: 1700000002.00000\r\n"
                      "Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                      % (path, v2_len)).encode())
        sock.sendall(b"x" * (v2_len // 2))
        time.sleep(0.3)
        ps.stop(server, sig=signal.SIGKILL)
        sock.close()
        server = start_server(ps, root, port)
        status, h, body = procs.request(port, "GET", path)
        check(status == 200 and body == v1,
              "after kill -9 mid-PUT the old object is served intact: %d, %d bytes" %
              (status, len(body)))
        check(h.get("etag") == '"%s"' % hashlib.md5(v1).hexdigest(), "old ETag kept")
        # A new object killed mid-PUT is not visible at all.
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(("PUT /sda1/0/acc/cont/never HTTP/1.1\r\nHost: x\r\n"
                      "X-Timestamp: 1700000003.00000\r\nContent-Type: a/b\r\n"
                      "Content-Length: 1000000\r\n\r\n").encode() + b"y" * 1000)
        time.sleep(0.3)
        ps.stop(server, sig=signal.SIGKILL)
        sock.close()
        server = start_server(ps, root, port)
        status, _, _ = procs.request(port, "GET", "/sda1/0/acc/cont/never")
        check(status == 404, "an object killed mid-PUT is not visible: %d" % status)
        # Nor is anything of either killed upload left on disk: their temp files had no name
        # (O_TMPFILE, as Swift where the filesystem has it), so the kernel freed them.
        leftovers = files_under(os.path.join(root, "dev", "sda1", "tmp"))
        check(leftovers == [], "the killed uploads left no temp file: %r" % leftovers)

        # Concurrent PUTs with different timestamps: the newest wins whatever the order.
        stamps = ["1700000100.%05d" % i for i in range(1, 21)]
        random.Random(7).shuffle(stamps)
        results = {}

        def put(ts):
            body = ("body for %s " % ts).encode() * 500
            results[ts] = procs.request(port, "PUT", "/sda1/0/acc/cont/race",
                                        {"X-Timestamp": ts, "Content-Type": "text/plain"},
                                        body)[0]
        threads = [threading.Thread(target=put, args=(ts,)) for ts in stamps]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(all(s in (201, 409) for s in results.values()),
              "each racing PUT is 201 or 409: %r" % sorted(set(results.values())))
        newest = max(stamps)
        status, h, body = procs.request(port, "GET", "/sda1/0/acc/cont/race")
        check(status == 200 and body == ("body for %s " % newest).encode() * 500,
              "the newest PUT wins: %d %r" % (status, h.get("x-timestamp")))
        check(h.get("x-timestamp") == newest, "X-Timestamp is the newest: %r" %
              h.get("x-timestamp"))
        hash_dirs = []
        for dirpath, dirs, files in os.walk(os.path.join(root, "dev", "sda1", "objects")):
            if any(f.endswith(".data") for f in files):
                hash_dirs.append((dirpath, sorted(files)))
        race = [files for d, files in hash_dirs if any("1700000100" in f for f in files)]
        check(race and race[0] == [newest + ".data"],
              "only the newest .data is left: %r" % race)

        # The page cache, as Swift keeps it: a PUT's pages leave once on disk; a GET keeps what
        # it read only for a small object read without a token (keep_cache_size, 5 MiB).
        cached = "/sda1/0/acc/cont/cached"
        status = procs.request(port, "PUT", cached, {"X-Timestamp": "1700000200.00000",
                                                     "Content-Type": "a/b"}, b"c" * 262144)[0]
        check(status == 201, "PUT for the page cache: %d" % status)
        data_file = [os.path.join(d, f) for d, _, files in
                     os.walk(os.path.join(root, "dev", "sda1", "objects"))
                     for f in files if f == "1700000200.00000.data"][0]
        check(resident_pages(data_file)[0] == 0,
              "a PUT leaves no pages cached: %r" % (resident_pages(data_file),))
        procs.request(port, "GET", cached, {"X-Auth-Token": "AUTH_tk"})
        check(resident_pages(data_file)[0] == 0,
              "a GET with a token leaves no pages cached: %r" % (resident_pages(data_file),))
        procs.request(port, "GET", cached)
        got, pages = resident_pages(data_file)
        check(got == pages, "a GET without a token keeps the pages: %d of %d" % (got, pages))

        # A second server with `slow = 0.4` and `log_requests = false`.
        slow_port = procs.free_port()
        os.makedirs(os.path.join(root, "dev2", "sda1"))
        with open(os.path.join(etc, "slow-object-server.conf"), "w") as f:
            f.write("[DEFAULT]\ndevices = %s/dev2\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nworkers = 1\nlog_file = %s/slow.log\n"
                    "fallocate_reserve = 0\n\n[pipeline:main]\npipeline = object-server\n\n"
                    "[app:object-server]\nuse = egg:swift#object\nslow = 0.4\n"
                    "log_requests = false\n" % (root, slow_port, etc, root))
        slow = ps.start([os.path.join(BUILD, "bin", "apus-object-server"),
                         os.path.join(etc, "slow-object-server.conf")],
                        os.path.join(root, "slow.out"))
        procs.wait_for_port(slow_port, proc=slow, log_path=os.path.join(root, "slow.out"))
        timings = {}
        for method, ts, body in (("PUT", "1700000300.00000", b"s"), ("GET", None, None),
                                 ("DELETE", "1700000301.00000", None)):
            headers = {"X-Timestamp": ts, "Content-Type": "a/b"} if ts else {}
            t0 = time.monotonic()
            status = procs.request(slow_port, method, "/sda1/0/acc/cont/slow", headers, body)[0]
            timings[method] = (status, time.monotonic() - t0)
        check(timings["PUT"][0] == 201 and timings["PUT"][1] >= 0.4, "slow PUT: %r" % (timings,))
        check(timings["DELETE"][0] == 204 and timings["DELETE"][1] >= 0.4,
              "slow DELETE: %r" % (timings,))
        check(timings["GET"][0] == 200 and timings["GET"][1] < 0.3, "GET is not slowed: %r" %
              (timings,))
        ps.stop(slow)  # a server writes every queued log line before it exits
        logged = open(os.path.join(root, "slow.log")).read() if os.path.exists(
            os.path.join(root, "slow.log")) else ""
        check('"PUT /sda1' not in logged, "log_requests = false writes no access lines")

        issue_12(ps, root)
    print("object faults test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
