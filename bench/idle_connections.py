#!/usr/bin/python3
"""What idle keep-alive client connections cost a proxy (issue 19's target: 20,000 of them
open cost < 5% of throughput, < 100 MiB of RSS, and a health check answers in < 10 ms p99).

Runs against the all-in-one (`scripts/saio up` first; APUS_SAIO_DIR, default /tmp/apus-saio):
starts one more proxy from its proxy-server.conf on its own port, with max_clients raised so
the idle connections fit (Swift's max_clients counts per worker; at the cap the rest wait in
the listen backlog), and alternates, for --rounds rounds:

  none   apus-bench 4 KiB GET c32 against that proxy for --seconds;
  idle   the same, with --idle connections open that each made one request (GET /healthcheck)
         and now wait for their next one, as a browser's or an SDK's pooled connection does;
  elsewhere  the same, with as many idle connections held open by stand-in servers of this
         script's own (--sink-serve) on other ports: what the sockets and the processes holding
         both ends cost the machine itself, apart from what holding them costs the proxy
         (idle / elsewhere).

During each run a prober opens a new connection every 20 ms for GET /healthcheck (what a load
balancer's check does) and records the time to the whole answer. Reports, per phase, the median
ops/s and the ratios idle / none and elsewhere / none, the proxy's RSS before and with the idle
connections, and the health checks' p50/p99 (JSON to --out).

The idle connections come from 127.0.1.<round> (127.0.2.<round> elsewhere) so each round's
closed ones (TIME_WAIT on this side) do not use up the next round's ephemeral ports, and are
held by helper processes of at most 8,000 each (this script run with --hold), so no process
needs a higher open files limit than a default hard limit allows. The proxy itself needs --idle
plus its backend connections below its limit: where the hard RLIMIT_NOFILE is 20,000 (this
machine, without CAP_SYS_RESOURCE), 18,000 is the most that fits. The whole run stays well
inside the proxy's client_timeout (60 s), after which Swift, and Apus, close an idle
connection.

usage: bench/idle_connections.py [--build build] [--idle 20000] [--rounds 3] [--seconds 10]
                                 [--port 18480] [--out FILE]
"""
HOLD_MAX = 8000  # idle connections per helper process
import argparse
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
from ab import wait_port  # noqa: E402
from procs import cpu_seconds  # noqa: E402


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


HEALTHCHECK = b"GET /healthcheck HTTP/1.1\r\nHost: bench\r\n\r\n"


def read_healthcheck_answer(sock):
    """Reads the whole answer to HEALTHCHECK (Swift's: 200, body "OK")."""
    data = b""
    while b"\r\n\r\nOK" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("closed before the answer")
        data += chunk
    if not data.startswith(b"HTTP/1.1 200"):
        raise OSError("healthcheck answered %r" % data[:40])


def open_idle(port, count, source_ip):
    """`count` connections from `source_ip`, each after one answered request."""
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source_ip, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(HEALTHCHECK)
        socks.append(s)
    # Answers read after all are sent: the proxy works on them while we send the rest.
    for s in socks:
        s.settimeout(30)
        read_healthcheck_answer(s)
    return socks


def hold(port, count, source_ip):
    """Helper process: opens `count` idle connections, says "open" on stdout, waits for stdin
    to close, then prints how many the proxy still held open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
    socks = open_idle(port, count, source_ip)
    print("open", flush=True)
    sys.stdin.read()
    print(sum(is_open(s) for s in socks), flush=True)
    # Closed by reset: no TIME_WAIT left behind for the kernel to keep and expire during the
    # next phases' runs (tens of thousands of them slowed the next "none" run by 10-20%).
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def serve_sink(port):
    """Helper process: a stand-in server on `port` that answers every request as the proxy
    answers HEALTHCHECK, and holds its connections open until the client closes them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    listener = socket.create_server(("127.0.0.1", port), backlog=4096)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    print("listening", flush=True)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                try:
                    while True:
                        conn, _ = listener.accept()
                        conn.setblocking(False)
                        sel.register(conn, selectors.EVENT_READ)
                except BlockingIOError:
                    pass
                continue
            conn = key.fileobj
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(conn)
                conn.close()
                continue
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")


class Sinks:
    """Stand-in servers for the "elsewhere" phase, one per HOLD_MAX connections, on the ports
    after `first_port`."""

    def __init__(self, first_port, count):
        self.ports = [first_port + i for i in range((count + HOLD_MAX - 1) // HOLD_MAX)]
        self.procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                        "--sink-serve", str(port)],
                                       stdout=subprocess.PIPE, text=True)
                      for port in self.ports]
        for p in self.procs:
            if p.stdout.readline().strip() != "listening":
                raise RuntimeError("a stand-in server did not start")

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


class Holders:
    """`count` idle connections from `source_ip` to `ports` (in turn), spread over helper
    processes."""

    def __init__(self, ports, count, source_ip):
        self.procs = []
        for i in range((count + HOLD_MAX - 1) // HOLD_MAX):
            n = min(count - i * HOLD_MAX, HOLD_MAX)
            self.procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--hold", str(n), "--source",
                 source_ip, "--port", str(ports[i % len(ports)])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in self.procs:
            if p.stdout.readline().strip() != "open":
                raise RuntimeError("a helper could not open its idle connections")

    def close(self):
        """Closes them all; how many the proxy still held open."""
        still = 0
        for p in self.procs:
            p.stdin.close()
            still += int(p.stdout.readline() or 0)
            p.wait()
        return still


def is_open(sock):
    """Whether the proxy still holds the connection open (nothing to read, not closed)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


class Prober(threading.Thread):
    """A load balancer's health check: a new connection every `every` seconds."""

    def __init__(self, port, every=0.02):
        super().__init__(daemon=True)
        self.port, self.every = port, every
        self.times, self.errors = [], 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                    s.sendall(HEALTHCHECK)
                    read_healthcheck_answer(s)
                self.times.append(time.perf_counter() - start)
            except OSError:
                self.errors += 1
            self.stop.wait(max(0.0, self.every - (time.perf_counter() - start)))


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))] if values else None


def bench_run(build, port, seconds, tag):
    out = "/tmp/apus-idle-bench-%s.json" % tag
    subprocess.run([os.path.join(build, "bin", "apus-bench"),
                    "--auth", "http://127.0.0.1:%d/auth/v1.0" % port, "--workload", "get",
                    "--size", "4KiB", "--concurrency", "32", "--threads", "2",
                    "--duration", str(seconds), "--objects", "256", "--prefix", "idle-bench",
                    "--json", out], stdout=subprocess.DEVNULL, check=True)
    with open(out) as f:
        result = json.load(f)
    os.remove(out)
    return result["totals"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--idle", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--port", type=int, default=18480)
    ap.add_argument("--out", default="/tmp/apus-idle-connections.json")
    ap.add_argument("--hold", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--source", default="127.0.1.1", help=argparse.SUPPRESS)
    ap.add_argument("--sink-serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hold:
        return hold(args.port, args.hold, args.source)
    if args.sink_serve:
        return serve_sink(args.sink_serve)
    build = os.path.abspath(args.build)
    saio = os.environ.get("APUS_SAIO_DIR", "/tmp/apus-saio")
    base_conf = os.path.join(saio, "etc", "proxy-server.conf")
    if not os.path.exists(base_conf):
        sys.exit("idle_connections.py: no all-in-one at %s (scripts/saio up)" % saio)
    conf = os.path.join(saio, "etc", "proxy-server-idle-bench.conf")
    shutil.copyfile(base_conf, conf)
    workers = 2
    subprocess.run([os.path.join(TOP, "scripts", "saio"), "conf-set", conf, "[DEFAULT]",
                    "bind_port=%d" % args.port, "workers=%d" % workers,
                    "max_clients=%d" % (args.idle // workers + 1024),
                    "log_file=%s" % os.path.join(saio, "log", "proxy-server-idle-bench.log"),
                    "[app:proxy-server]", "metrics_bind_port=%d" % (args.port + 1)],
                   check=True)
    proxy = subprocess.Popen([os.path.join(build, "bin", "apus-proxy-server"), conf],
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    phases = {"none": [], "idle": [], "elsewhere": []}
    sinks = None
    try:
        sinks = Sinks(args.port + 2, args.idle)
        if not wait_port(args.port):
            sys.exit("idle_connections.py: the proxy did not start (see its log)")
        bench_run(build, args.port, 2, "warm")  # objects in place, infos cached
        for rnd in range(args.rounds):
            for phase in ("none", "idle", "elsewhere"):
                holders = None
                rss_before = rss_mib(proxy.pid)
                opened_s = None
                if phase != "none":
                    start = time.monotonic()
                    # Each round and phase from its own source address: the last one's closed
                    # connections (TIME_WAIT) keep their ports a while.
                    source = "127.0.%d.%d" % (1 if phase == "idle" else 2, rnd + 1)
                    holders = Holders([args.port] if phase == "idle" else sinks.ports,
                                      args.idle, source)
                    opened_s = time.monotonic() - start
                    time.sleep(1)
                rss_with = rss_mib(proxy.pid)
                quiet = Prober(args.port)  # health checks with no load but the idle ones
                quiet.start()
                time.sleep(3)
                quiet.stop.set()
                quiet.join()
                prober = Prober(args.port)
                prober.start()
                cpu_before = cpu_seconds(proxy.pid)
                totals = bench_run(build, args.port, args.seconds, "%d-%s" % (rnd, phase))
                cpu_ms = 1e3 * (cpu_seconds(proxy.pid) - cpu_before) / max(1, totals["ops"])
                prober.stop.set()
                prober.join()
                still_open = holders.close() if holders else 0
                run = {"ops_per_s": totals["ops_per_s"], "errors": totals["errors"],
                       "p99_ms": totals["latency_ms"]["p99"],
                       # The proxy's CPU per GET (the health checks' included, the same in
                       # both phases): steadier than ops/s on a shared machine.
                       "proxy_cpu_ms_per_op": round(cpu_ms, 4),
                       "rss_before_mib": round(rss_before, 1), "rss_mib": round(rss_with, 1),
                       "idle_open_after": still_open if phase != "none" else None,
                       "idle_open_seconds": round(opened_s, 2) if opened_s else None,
                       "quiet_health_p50_ms": round(percentile(quiet.times, 50) * 1e3, 2),
                       "quiet_health_p99_ms": round(percentile(quiet.times, 99) * 1e3, 2),
                       "health_p50_ms": round(percentile(prober.times, 50) * 1e3, 2),
                       "health_p99_ms": round(percentile(prober.times, 99) * 1e3, 2),
                       "health_checks": len(prober.times), "health_errors": prober.errors}
                phases[phase].append(run)
                print("round %d %-9s %8.0f ops/s  proxy CPU %.3f ms/op  rss %6.1f MiB  health "
                      "p99 %6.2f ms under load, %5.2f ms quiet%s"
                      % (rnd + 1, phase, run["ops_per_s"], run["proxy_cpu_ms_per_op"],
                         run["rss_mib"], run["health_p99_ms"],
                         run["quiet_health_p99_ms"],
                         "  (%d idle open after the run; opened in %.1f s)"
                         % (still_open, opened_s) if phase != "none" else ""), flush=True)
                time.sleep(1)
    finally:
        if sinks:
            sinks.stop()
        os.killpg(proxy.pid, signal.SIGTERM)
        proxy.wait()
        os.remove(conf)

    def med(phase, key):
        return statistics.median(r[key] for r in phases[phase])
    summary = {
        "idle_connections": args.idle, "rounds": args.rounds, "seconds": args.seconds,
        "ops_per_s": {p: med(p, "ops_per_s") for p in phases},
        "proxy_cpu_ms_per_op": {p: med(p, "proxy_cpu_ms_per_op") for p in phases},
        "throughput_ratio_idle_over_none": round(med("idle", "ops_per_s") /
                                                 med("none", "ops_per_s"), 3),
        "throughput_ratio_elsewhere_over_none": round(med("elsewhere", "ops_per_s") /
                                                      med("none", "ops_per_s"), 3),
        # The first idle round's: later rounds reuse what the allocator kept from it.
        "rss_extra_mib": round(phases["idle"][0]["rss_mib"] -
                               phases["idle"][0]["rss_before_mib"], 1),
        "health_p99_ms": {p: med(p, "health_p99_ms") for p in phases},
        "quiet_health_p99_ms": {p: med(p, "quiet_health_p99_ms") for p in phases},
        "runs": phases}
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print("medians: %(ops)s ops/s; proxy CPU per GET %(cpu)s ms; idle/none %(ratio).3f, "
          "elsewhere/none %(elsewhere).3f; "
          "extra RSS %(rss).1f MiB; health p99 "
          "under load none %(hn).2f ms, idle %(hi).2f ms; quiet none %(qn).2f ms, idle %(qi).2f "
          "ms  (%(out)s)"
          % {"ops": summary["ops_per_s"], "cpu": summary["proxy_cpu_ms_per_op"],
             "ratio": summary["throughput_ratio_idle_over_none"],
             "elsewhere": summary["throughput_ratio_elsewhere_over_none"],
             "rss": summary["rss_extra_mib"], "hn": summary["health_p99_ms"]["none"],
             "hi": summary["health_p99_ms"]["idle"],
             "qn": summary["quiet_health_p99_ms"]["none"],
             "qi": summary["quiet_health_p99_ms"]["idle"], "out": args.out})


if __name__ == "__main__":
    main()
