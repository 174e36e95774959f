#!/usr/bin/env python3
"""apus-object-server under faults with real processes:
- kill -9 in the middle of a PUT leaves the previous object intact (or none), never a partial one;
- concurrent PUTs of one object with different timestamps: the newest wins, whatever the order;
- the page cache as Swift leaves it: out after a PUT, kept after a GET only without a token;
- Swift's `slow` (PUT and DELETE answers wait) and `log_requests = false` (no access lines).

usage: object_faults_test.py <build-dir>
"""
import ctypes
import hashlib
import mmap
import os
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
        logged = open(os.path.join(root, "slow.log")).read() if os.path.exists(
            os.path.join(root, "slow.log")) else ""
        check('"PUT /sda1' not in logged, "log_requests = false writes no access lines")
    print("object faults test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
