"""Test support for Python-driven integration and interop tests: free loopback ports, server
processes that are always stopped (by pid, even when a test fails), and small HTTP helpers.

Only /usr/bin/python3 runs these (Debian's python3-swift lives there).
"""
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


_given_ports = set()


def free_port():
    """A free loopback port, never one this process was given before: the kernel may hand the
    same ephemeral port out twice before anything binds it (cluster.py picks all its storage
    ports first; a container ring entry once pointed at an object server)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _given_ports:
            _given_ports.add(port)
            return port


class Processes:
    """Starts server processes and stops every one of them on exit, by pid."""

    def __init__(self):
        self.procs = []
        self.adopted = []  # pids of processes ours started (a reload's successors)

    def start(self, argv, log_path, env=None):
        log = open(log_path, "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        self.procs.append((proc, log))
        return proc

    def stop(self, proc, sig=signal.SIGTERM, timeout=10):
        if proc.poll() is None:
            # Swift's servers fork workers: signal the whole session we created for it.
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def adopt(self, pid):
        """Stops `pid` on exit too: a process one of ours started (not our child)."""
        self.adopted.append(pid)

    @staticmethod
    def _running(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for proc, log in self.procs:
            self.stop(proc)
            log.close()
        for pid in self.adopted:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                if not self._running(pid):
                    break
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while self._running(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)


class TempDir:
    def __init__(self, prefix):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def proc_stat(pid):
    """(name, user + system CPU seconds of all its threads) of a process, from /proc/<pid>/stat.
    OSError when it is gone."""
    with open("/proc/%d/stat" % int(pid)) as f:
        stat = f.read()
    fields = stat.rsplit(")", 1)[1].split()
    return (stat[stat.index("(") + 1:stat.rindex(")")],
            (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))


def cpu_seconds(pid):
    """User + system CPU seconds of a process (all its threads), from /proc/<pid>/stat."""
    return proc_stat(pid)[1]


def wait_for_text(paths, text, timeout=5.0):
    """The text of the files at `paths` (a path or a list of them; missing ones read as empty),
    once it holds `text` or `timeout` seconds have passed. Servers write their log lines from a
    thread of their own, in batches under load: a line may reach its file some milliseconds
    after the answer it tells of. The caller checks `text in` the result."""
    if isinstance(paths, str):
        paths = [paths]
    deadline = time.monotonic() + timeout
    while True:
        got = ""
        for path in paths:
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    got += f.read()
        if text in got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def wait_for_port(port, timeout=15.0, proc=None, log_path=None, host="127.0.0.1"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    detail = ""
    if log_path and os.path.exists(log_path):
        detail = open(log_path, errors="replace").read()[-3000:]
    raise RuntimeError("server on port %d did not come up\n%s" % (port, detail))


def request(port, method, path, headers=None, body=None, timeout=10, host="127.0.0.1"):
    """One request on a fresh connection: (status, {lower-case header: value}, body bytes)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
    headers = dict(headers or {})
    if body is not None and "Content-Length" not in headers and \
            headers.get("Transfer-Encoding") != "chunked":
        headers["Content-Length"] = str(len(body))
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    if body:
        conn.send(body)
    resp = conn.getresponse()
    data = resp.read() if method != "HEAD" else b""
    result = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    conn.close()
    return result
