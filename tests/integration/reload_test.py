#!/usr/bin/env python3
"""Seamless reload (issue 18): SIGUSR1 to a proxy under load, twice, and to an object server.

Four clients keep GETs and PUTs going on keep-alive connections straight to the proxy while
it reloads; every request gets its answer. As for any HTTP/1.1 server closing an idle
keep-alive connection, a request sent on a reused connection that closes before any byte of an
answer is sent again on a new connection (RFC 9112 9.3.1; HAProxy, urllib3 and the AWS SDKs do
so); a request on a new connection that fails, or any 5xx, is a failure. Then through HAProxy
in front of both proxies, each proxy reloaded in turn: no request fails and the clients resend
nothing. Also: each reload's process is a new one, the old one exits once drained, the
reloaded proxy reads its config again (a changed option takes effect), a successor that cannot
start (a broken config) leaves the old process serving, and under systemd (NOTIFY_SOCKET) each
process says it is ready and the main one.

usage: reload_test.py <build-dir>
"""
import http.client
import os
import signal
import socket
import sys
import tempfile
import threading
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
HAPROXY = "/usr/sbin/haproxy"
HAPROXY_CFG = """global
    maxconn 2000
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
    http-reuse safe
    retries 3
    option redispatch
    retry-on conn-failure empty-response response-timeout
frontend swift
    bind 127.0.0.1:%d
    default_backend proxies
backend proxies
    balance roundrobin
    option httpchk GET /healthcheck
    server p1 127.0.0.1:%d check inter 500ms
    server p2 127.0.0.1:%d check inter 500ms
"""
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def successors(pid, command):
    """Pids of the processes other than `pid` running `command` (a reload's successor runs its
    predecessor's command line; the predecessor may have exited before we look)."""
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and int(e) != pid and cmdline(int(e)) == command]


alive = procs.Processes._running


def processes_using(root):
    """Pids whose command line names a path under `root`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            command = cmdline(int(entry))
            if command and root.encode() in command:
                found.append(int(entry))
    return found


class Load:
    """Clients sending requests on keep-alive connections until stopped."""

    def __init__(self, port, token, clients=4, resend=True):
        """`resend`: send a request again once on a new connection when a reused keep-alive
        connection closed before any answer (a client's job; HAProxy does it for us)."""
        self.port, self.token, self.resend = port, token, resend
        self.stop = threading.Event()
        self.done = 0
        self.retried = 0
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(clients)]

    def request(self, conn, method, path, body):
        conn.request(method, path, body=body, headers={"X-Auth-Token": self.token})
        resp = conn.getresponse()
        resp.read()
        return resp

    def run(self, n):
        conn, reused = None, False
        i = 0
        while not self.stop.is_set():
            i += 1
            method = "PUT" if i % 3 == 0 else "GET"
            path = "/v1/AUTH_test/c/%s" % ("load-%d-%d" % (n, i) if method == "PUT" else "o")
            body = b"x" * 100 if method == "PUT" else None
            for attempt in (0, 1):
                if conn is None:
                    conn, reused = http.client.HTTPConnection("127.0.0.1", self.port,
                                                              timeout=20), False
                try:
                    resp = self.request(conn, method, path, body)
                except (http.client.HTTPException, OSError) as e:
                    conn.close()
                    conn = None
                    if self.resend and reused and attempt == 0:
                        with self.lock:
                            self.retried += 1
                        continue
                    with self.lock:
                        self.errors.append("%s %s: %r" % (method, path, e))
                    break
                reused = True
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
                with self.lock:
                    self.done += 1
                    if resp.status >= 500:
                        self.errors.append("%s %s: %d" % (method, path, resp.status))
                break
        if conn:
            conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def reload(pid, ps, timeout=30):
    """SIGUSR1 to `pid`; returns the successor's pid once `pid` has exited."""
    command = cmdline(pid)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    successor = None
    while time.monotonic() < deadline:
        found = successors(pid, command)
        if found and successor is None:
            successor = found[0]
            ps.adopt(successor)  # stopped at the end of the test whatever happens
        if successor and not alive(pid):
            return successor
        time.sleep(0.05)
    return None


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        try:
            cluster = Cluster(BIN, root, ps)
            url, token = cluster.connect()
            swift.put_container(url, token, "c")
            swift.put_object(url, token, "c", "o", b"hello")
            port = cluster.proxy_port
            pid = cluster.procs[("proxy", "proxy-server")].pid

            with Load(port, token) as load:
                time.sleep(1)
                first = reload(pid, ps)
                check(first is not None, "the first reload: a new process took over")
                time.sleep(1)
                second = reload(first, ps) if first else None
                check(second is not None, "the second reload: a new process took over")
                time.sleep(1)
            check(not load.errors, "requests failed during reloads: %r" % load.errors[:5])
            check(load.done > 100, "requests answered during the reloads: %d" % load.done)
            print("reload under load: %d requests, %d resent after a keep-alive close, %d failed"
                  % (load.done, load.retried, len(load.errors)))

            # Through HAProxy, as an operator runs it (keep-alive to the proxies, health checks,
            # retries on a closed idle connection), every proxy reloaded under load: the clients
            # see no failure and resend nothing themselves.
            if os.path.exists(HAPROXY):
                front = procs.free_port()
                cfg = os.path.join(root, "haproxy.cfg")
                with open(cfg, "w") as f:
                    f.write(HAPROXY_CFG % (front, port, cluster.second_proxy_port))
                log = os.path.join(root, "haproxy.out")
                haproxy = ps.start([HAPROXY, "-db", "-f", cfg], log)
                procs.wait_for_port(front, proc=haproxy, log_path=log)
                other = cluster.procs[("proxy", "proxy-server-2")].pid
                with Load(front, token, resend=False) as load:
                    time.sleep(1)
                    second = reload(second, ps) if second else None
                    time.sleep(1)
                    other = reload(other, ps)
                    time.sleep(1)
                check(second is not None and other is not None, "both proxies reloaded")
                check(not load.errors, "requests through HAProxy failed during reloads: %r"
                      % load.errors[:5])
                print("reload through HAProxy: %d requests, %d failed"
                      % (load.done, len(load.errors)))
            else:
                print("no %s: the HAProxy part is skipped" % HAPROXY)

            # The successor read its config again: a new option takes effect.
            conf, _ = cluster.proxies["proxy-server"]
            with open(conf) as f:
                text = f.read()
            with open(conf, "w") as f:
                f.write(text.replace("[app:proxy-server]\n",
                                     "[app:proxy-server]\nmax_containers_per_account = 1\n", 1))
            third = reload(second, ps) if second else None
            if not check(third is not None, "the third reload: a new process took over"):
                print(tail(os.path.join(root, "proxy-server.out")))
                print(tail(os.path.join(root, "proxy-server.log")))
            status, _, _ = procs.request(port, "PUT", "/v1/AUTH_test/c2",
                                         headers={"X-Auth-Token": token})
            check(status == 403, "the reloaded proxy reads its changed config: PUT %d" % status)

            # A successor that cannot start (a broken config) leaves this one serving.
            with open(conf, "w") as f:
                f.write(text.replace("[app:proxy-server]\n",
                                     "[app:proxy-server]\nnode_timeout = soon\n", 1))
            if third:
                os.kill(third, signal.SIGUSR1)
                time.sleep(2)
                check(alive(third), "a failed reload leaves the old process running")
                status, _, _ = procs.request(port, "GET", "/healthcheck")
                check(status == 200, "and serving: %d" % status)

            # A storage server reloads the same way; under systemd (NOTIFY_SOCKET) each process
            # says when it serves and that it is the main one.
            notify_path = os.path.join(root, "notify.sock")
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            notify.bind(notify_path)
            notify.settimeout(10)
            cluster.stop("object", 0)
            log = os.path.join(root, "object-0.out")
            proc = ps.start([os.path.join(BIN, "apus-object-server"),
                             os.path.join(cluster.etc, "object-0.conf")], log,
                            env=dict(os.environ, NOTIFY_SOCKET=notify_path))
            procs.wait_for_port(cluster.ports["object"][0], proc=proc, log_path=log)
            obj = proc.pid
            ready = notify.recv(4096).decode()
            check(ready == "READY=1\nMAINPID=%d" % obj,
                  "systemd told the server is ready: %r" % ready)
            successor = reload(obj, ps)
            if not check(successor is not None, "the object server reloaded"):
                print(tail(os.path.join(root, "object-0.out")))
                print(tail(os.path.join(root, "object-0.log")))
            status, _, _ = procs.request(cluster.ports["object"][0], "GET", "/healthcheck")
            check(status == 200, "the reloaded object server answers: %d" % status)
            try:
                ready = notify.recv(4096).decode()
            except socket.timeout:
                ready = ""
            check(ready == "READY=1\nMAINPID=%s" % successor,
                  "the successor told systemd it is the main process: %r" % ready)
            notify.close()
        finally:
            # Whatever a failed check left behind: every process running on this test's
            # files (a successor the test did not see) is stopped too.
            for pid in processes_using(root):
                ps.adopt(pid)

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("reload: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
