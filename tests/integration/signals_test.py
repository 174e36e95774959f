#!/usr/bin/env python3
"""A real server process and its signals: SIGHUP reopens the log and it keeps serving; SIGTERM
drains and exits 0. Uses bench's apus-healthcheck-server, the bare runtime.

usage: signals_test.py <build-dir>
"""
import http.client
import os
import signal
import subprocess
import sys
import time

build = sys.argv[1]
proc = subprocess.Popen([os.path.join(build, "bin", "apus-healthcheck-server"), "--port", "0",
                         "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)
failures = []
try:
    line = proc.stdout.readline()  # "listening on 127.0.0.1:PORT"
    port = int(line.rsplit(":", 1)[1])

    def healthcheck():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthcheck")
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return resp.status, body

    if healthcheck() != (200, b"OK"):
        failures.append("healthcheck before signals")
    # A keep-alive connection open across SIGTERM must be closed by the drain, not hang it.
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    idle.request("GET", "/healthcheck")
    idle.getresponse().read()

    proc.send_signal(signal.SIGHUP)
    time.sleep(0.2)
    if proc.poll() is not None:
        failures.append("SIGHUP killed the server")
    elif healthcheck() != (200, b"OK"):
        failures.append("healthcheck after SIGHUP")

    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        failures.append("SIGTERM did not stop the server within 10 s")
        code = None
    if code not in (None, 0):
        failures.append("exit code %r after SIGTERM" % code)
    if code == 0 and time.monotonic() - start > 5:
        failures.append("drain took %.1f s" % (time.monotonic() - start))
    stderr = proc.stderr.read() if code is not None else ""
    if "log reopened" not in stderr:
        failures.append("no log line for SIGHUP: %r" % stderr)
finally:
    if proc.poll() is None:
        proc.kill()
        proc.wait()

for f in failures:
    print("FAIL:", f)
print("signals test:", "failed" if failures else "ok")
sys.exit(1 if failures else 0)
