#!/usr/bin/env python3
"""Logging options (issue 18) on a 4-node Apus cluster:

- log_udp_host / log_udp_port: a proxy's lines arrive as syslog datagrams "<PRI>name: line\\0"
  (log_facility and log_name as set);
- log_address: an object server's lines arrive on a unix datagram socket;
- the proxy's log_msg_template, access_log_headers and access_log_headers_only shape its
  access line, and signatures and tokens are cut to reveal_sensitive_prefix;
- a log destination that stops reading (a unix stream socket never read: a stuck syslog
  daemon, or a slow log disk) does not slow requests: lines are written by a thread of their
  own, and dropped once its queue is full.

usage: logging_test.py <build-dir>
"""
import os
import socket
import sys
import tempfile
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def udp_listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def drain(sock, settle=0.5):
    """The datagrams received until none came for `settle` seconds, decoded."""
    got = []
    sock.settimeout(settle)
    while True:
        try:
            got.append(sock.recv(65536).decode("utf-8", "replace"))
        except socket.timeout:
            return got


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        object_log = os.path.join(root, "object-log.sock")
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        unix.bind(object_log)

        cluster = Cluster(BIN, root, ps)
        # Node 0's object server again, on syslog at log_address, logging each request.
        cluster.stop("object", 0)
        conf = os.path.join(cluster.etc, "object-0.conf")
        with open(conf) as f:
            text = f.read()
        text = text.replace("log_file = ", "# log_file = ").replace(
            "[DEFAULT]\n", "[DEFAULT]\nlog_address = %s\nlog_name = obj-zero\n" % object_log, 1)
        with open(conf, "w") as f:
            f.write(text)
        log = os.path.join(root, "object-0-syslog.out")
        proc = ps.start([os.path.join(BIN, "apus-object-server"), conf], log)
        procs.wait_for_port(cluster.ports["object"][0], proc=proc, log_path=log)
        cluster.procs[("object", 0)] = proc

        syslog = udp_listener()
        port = cluster.start_proxy(
            "proxy-syslog",
            defaults="log_file =\nlog_udp_host = 127.0.0.1\nlog_udp_port = %d\n"
                     "log_facility = LOG_LOCAL3\nlog_name = front\n" % syslog.getsockname()[1],
            pipeline="catch_errors gatekeeper healthcheck access-log cache listing_formats "
                     "tempauth proxy-server",
            filters="[filter:access-log]\nuse = egg:swift#proxy_logging\n"
                    "log_msg_template = {method} {path} {status_int} {headers} "
                    "{client_ip.anonymized} {auth_token} {{x}}\n"
                    "access_log_headers = true\n"
                    "access_log_headers_only = user-agent, X-Auth-Token\n"
                    "reveal_sensitive_prefix = 8\nlog_anonymization_method = sha256\n")
        url, token = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % port, "test:tester",
                                    "testing")
        swift.put_container(url, token, "c")
        # An object that node 0's object server holds.
        name = next("o%d" % n for n in range(100) if 0 in cluster.primaries("c", "o%d" % n))
        drain(syslog)
        drain(unix)
        swift.put_object(url, token, "c", name, b"data")
        status, _, _ = procs.request(
            port, "GET", "/v1/AUTH_test/c/%s?temp_url_sig=0123456789abcdef&temp_url_expires=1"
            % name, headers={"X-Auth-Token": token, "User-Agent": "agent 7"})
        lines = drain(syslog)
        check(lines and all(x.startswith("<") and x.endswith("\0") for x in lines),
              "syslog datagrams end with NUL: %r" % lines[:3])
        # LOG_LOCAL3 (19 << 3) | LOG_INFO (6) = 158; the query's signature cut to 8 bytes.
        want = ("<158>front: GET /v1/AUTH_test/c/%s%%3Ftemp_url_sig%%3D01234567...%%26"
                "temp_url_expires%%3D1 %d " % (name, status))
        access = [x for x in lines if x.startswith(want)]
        check(len(access) == 1, "one access line by log_msg_template: %r" % lines)
        line = access[0] if access else ""
        check("X-Auth-Token:%20" + token[:8] + "...%0AUser-Agent:%20agent%207 " in line,
              "only the listed headers, title-cased, the token cut: %r" % line)
        check(line.endswith(" {SHA256}12ca17b49af2289436f303e0166030a21e525d266e209267433801a8f"
                            "d4071a0 " + token[:8] + "... {x}\0"),
              "client_ip anonymized by sha256, the token field cut: %r" % line)

        objects = drain(unix)
        check(any(x.startswith("<134>obj-zero: ") and '"PUT /sd0/' in x for x in objects),
              "node 0's object server logs its PUT at log_address: %r" % objects[:3])

        # A syslog that stops reading: requests go on at their pace.
        stuck = os.path.join(root, "stuck.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(stuck)
        listener.listen(1)
        slow = cluster.start_proxy(
            "proxy-stuck", defaults="log_file =\nlog_address = %s\n" % stuck,
            pipeline="catch_errors gatekeeper healthcheck access-log cache listing_formats "
                     "tempauth proxy-server",
            filters="[filter:access-log]\nuse = egg:swift#proxy_logging\n"
                    "access_log_headers = true\n")
        conn, _ = listener.accept()  # accepted, never read
        big = "x" * 4000
        took = []
        for n in range(300):
            began = time.monotonic()
            status, _, _ = procs.request(slow, "GET", "/healthcheck", headers={"X-Big": big})
            took.append(time.monotonic() - began)
            if status != 200:
                break
        took.sort()
        check(status == 200, "requests answered with the log stuck: %d" % status)
        check(took[len(took) // 2] < 0.05 and took[-1] < 1.0,
              "request times with the log stuck: median %.3f s, max %.3f s"
              % (took[len(took) // 2], took[-1]))
        conn.close()
        listener.close()
        unix.close()
        syslog.close()

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("logging: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
