#!/usr/bin/env python3
"""apus-bench against a small in-memory Swift look-alike on a loopback port (tempauth v1.0,
containers, objects): the counts and byte totals it reports are the requests the server saw,
its latency figures are ordered, and it counts errors when the server answers 5xx, lies about
an object's size or gives wrong bytes.

usage: apus_bench_test.py <build-dir>
"""
import hashlib
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

BENCH = os.path.join(os.path.abspath(sys.argv[1]), "bin", "apus-bench")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class FakeSwift(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.objects = {}
        self.lock = threading.Lock()
        self.counts = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.mode = "honest"  # or "fail-gets" (every 4th GET: 503), "short", "corrupt"
        self.gets = 0

    def count(self, method):
        with self.lock:
            self.counts[method] = self.counts.get(method, 0) + 1


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=None, length=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status not in (204, 304):
            self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        if self.path == "/auth/v1.0":
            port = srv.server_address[1]
            return self.reply(200, headers={
                "X-Storage-Url": "http://127.0.0.1:%d/v1/AUTH_test" % port,
                "X-Auth-Token": "AUTH_tk0123", "X-Storage-Token": "AUTH_tk0123"})
        if self.headers.get("X-Auth-Token") != "AUTH_tk0123":
            return self.reply(401)
        parts = self.path.split("?")[0].split("/")
        if len(parts) == 4:  # a container listing
            srv.count("LIST")
            names = sorted(k.split("/")[-1] for k in srv.objects if k.startswith(self.path.split("?")[0] + "/"))
            return self.reply(200, json.dumps([{"name": n} for n in names]).encode(),
                              {"Content-Type": "application/json"})
        srv.count(self.command)
        with srv.lock:
            body = srv.objects.get(self.path)
            srv.gets += 1
            n = srv.gets
        if body is None:
            return self.reply(404)
        etag = hashlib.md5(body).hexdigest()
        if self.command == "GET":
            if srv.mode == "fail-gets" and n % 4 == 0:
                return self.reply(503, b"busy")
            if srv.mode == "short":  # says the object is one byte shorter than it is
                return self.reply(200, body[:-1], {"Etag": etag})
            if srv.mode == "corrupt":  # right length and ETag, wrong bytes
                body = bytes([body[0] ^ 1]) + body[1:]
            with srv.lock:
                srv.bytes_out += len(body)
        self.reply(200, body, {"Etag": etag, "Content-Type": "application/octet-stream"})

    do_HEAD = do_GET

    def do_PUT(self):
        srv = self.server
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        if len(self.path.split("/")) == 4:
            return self.reply(201)
        srv.count("PUT")
        with srv.lock:
            srv.objects[self.path] = body
            srv.bytes_in += len(body)
        self.reply(201, headers={"Etag": hashlib.md5(body).hexdigest()})

    def do_POST(self):
        self.server.count("POST")
        self.reply(202 if self.path in self.server.objects else 404)

    def do_DELETE(self):
        self.server.count("DELETE")
        with self.server.lock:
            existed = self.server.objects.pop(self.path, None) is not None
        self.reply(204 if existed else 404)


def bench(server, *args):
    port = server.server_address[1]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.run([BENCH, "--auth", "http://127.0.0.1:%d/auth/v1.0" % port,
                               "--json", out.name] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        try:
            with open(out.name) as f:
                result = json.load(f)
        except ValueError:
            result = None
    return proc.returncode, result, proc.stdout.decode(errors="replace")


def ordered(latency):
    keys = ["p50", "p90", "p99", "p99_9", "max"]
    return all(latency[a] <= latency[b] for a, b in zip(keys, keys[1:])) and latency["p50"] > 0


def main():
    server = FakeSwift()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # PUTs: the count asked for, each size byte counted, ETags checked.
        rc, r, out = bench(server, "--workload", "put", "--size", "10KiB", "--count", "300",
                           "--concurrency", "4", "--containers", "3")
        check(rc == 0 and r is not None, "PUT run: rc %d\n%s" % (rc, out))
        if r:
            check(r["totals"]["ops"] == 300 and server.counts.get("PUT") == 300,
                  "300 PUTs counted and sent: %s / %s" % (r["totals"]["ops"], server.counts))
            check(r["totals"]["bytes"] == 300 * 10240 == server.bytes_in,
                  "PUT bytes %d, server saw %d" % (r["totals"]["bytes"], server.bytes_in))
            check(ordered(r["totals"]["latency_ms"]), "latency ordered: %r" % r["totals"]["latency_ms"])
            check(r["totals"]["errors"] == 0, "no PUT errors: %r" % r["totals"])
            check(len(r["timeline"]) >= 1 and sum(s["ops"] for s in r["timeline"]) == 300,
                  "the timeline adds up: %r" % r["timeline"])
            check(set(r["wall_clock_s"]) >= {"auth", "setup", "warmup", "window", "total"},
                  "wall clock explained: %r" % r["wall_clock_s"])
            check(0 < r["littles_law_concurrency"] <= 4.2, "Little's law: %r" % r["littles_law_concurrency"])

        # GETs: setup uploads the population first (not counted), reads are verified.
        server.counts.clear()
        server.bytes_out = 0
        rc, r, out = bench(server, "--workload", "get", "--sizes", "1KiB:1,64KiB:1", "--count",
                           "200", "--concurrency", "4", "--objects", "8")
        check(rc == 0 and r is not None, "GET run: rc %d\n%s" % (rc, out))
        if r:
            check(r["by_op"]["GET"]["ops"] == 200 and server.counts.get("GET") == 200,
                  "200 GETs: %s / %s" % (r["by_op"]["GET"]["ops"], server.counts))
            check(server.counts.get("PUT") == 8 and "PUT" not in r["by_op"],
                  "the 8 setup PUTs are not measured: %s, %r" % (server.counts, list(r["by_op"])))
            check(r["totals"]["bytes"] == server.bytes_out,
                  "GET bytes %d, server sent %d" % (r["totals"]["bytes"], server.bytes_out))

        # Mixed 80/20 with HEAD and POST and listings spread over two endpoints of one server.
        port = server.server_address[1]
        rc, r, out = bench(server, "--mix", "get=5,put=2,head=1,post=1,list=1", "--count", "400",
                           "--concurrency", "6", "--threads", "2",
                           "--endpoints", "127.0.0.1:%d,127.0.0.1:%d" % (port, port))
        check(rc == 0 and r is not None, "mixed run: rc %d\n%s" % (rc, out))
        if r:
            check(sum(v["ops"] for v in r["by_op"].values()) == 400,
                  "mixed ops add up: %r" % {k: v["ops"] for k, v in r["by_op"].items()})
            check(set(r["by_op"]) == {"GET", "PUT", "HEAD", "POST", "LIST"},
                  "every operation of the mix ran: %r" % list(r["by_op"]))

        # The server fails every 4th GET: those are errors with their status, not fast answers.
        server.mode = "fail-gets"
        rc, r, out = bench(server, "--workload", "get", "--count", "200", "--concurrency", "2",
                           "--objects", "4")
        check(rc == 3 and r is not None, "a run with errors exits 3: %d\n%s" % (rc, out))
        if r:
            errors = r["totals"]["errors_by_cause"]
            check(40 <= errors.get("503", 0) <= 60 and r["totals"]["ops"] + errors["503"] == 200,
                  "503s counted by status: %r, ops %d" % (errors, r["totals"]["ops"]))

        for mode, cause in (("short", "size mismatch"), ("corrupt", "body mismatch")):
            server.mode = mode
            rc, r, out = bench(server, "--workload", "get", "--count", "50", "--concurrency", "2",
                               "--objects", "4")
            check(rc == 3 and r is not None and r["totals"]["ops"] == 0 and
                  r["totals"]["errors_by_cause"].get(cause) == 50,
                  "%s answers are all errors (%s): %s" % (mode, cause, r and r["totals"]))
        # With --verify headers the corrupt bytes pass (the ETag header is right): the flag works.
        server.mode = "corrupt"
        rc, r, out = bench(server, "--workload", "get", "--count", "20", "--objects", "2",
                           "--verify", "headers")
        check(rc == 0 and r is not None and r["totals"]["ops"] == 20,
              "--verify headers checks only headers: %s" % (r and r["totals"]))
        # --verify headers: PUT bodies come from a few variants whose MD5 is computed once; the
        # server's ETags (MD5 of what it received) must still match them.
        server.mode = "honest"
        rc, r, out = bench(server, "--workload", "put", "--sizes", "3KiB,100KiB", "--count", "60",
                           "--verify", "headers", "--concurrency", "3")
        check(rc == 0 and r is not None and r["totals"]["ops"] == 60 and r["totals"]["errors"] == 0,
              "PUTs with --verify headers: %s" % (r and r["totals"]))
        rc, r, out = bench(server, "--workload", "nothing")
        check(rc == 2, "an unknown workload is refused: %d" % rc)
    finally:
        server.shutdown()
        thread.join()
    print("apus-bench test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
