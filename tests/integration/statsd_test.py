#!/usr/bin/env python3
"""StatsD metrics (issue 18) on a 4-node Apus cluster, received on a loopback UDP socket:

- the proxy's proxy_logging sends Swift's names: proxy-server.<type>.<method>.<status>.timing
  and .xfer (the bytes in and out), .first-byte.timing for a GET, the object.policy.<index>.
  forms, BAD_METHOD for a method outside the valid ones, and S3 requests under the type of the
  Swift path behind them; log_statsd_metric_prefix goes first;
- the storage servers send <server>.<METHOD>.timing, and .errors.timing for a 5xx (a 507 from
  a missing device); object servers count async_pendings and quarantines as Swift's diskfile;
- log_statsd_sample_rate_factor = 0 silences a server; a rate below 1 goes with "|@<rate>";
- the proxy counts handoff_count when a request uses more handoffs than planned;
- the daemons send Swift's metrics under their log_name (object updater, replicator, auditor,
  container replicator), and apus-recon-cron and the updater count async pendings into
  object.recon for swift-recon.

usage: statsd_test.py <build-dir>
"""
import glob
import json
import os
import re
import socket
import subprocess
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
DATAGRAM = re.compile(r"^([A-Za-z0-9_.\-]+):(-?[0-9.e+\-]+)\|(ms|c)(\|@([0-9.]+))?$")

# One UDP socket for every server; the servers are told its port through their configs.
listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
listener.bind(("127.0.0.1", 0))
STATSD = "log_statsd_host = 127.0.0.1\nlog_statsd_port = %d\n" % listener.getsockname()[1]


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


class StatsdCluster(Cluster):
    app_options = {
        "object": STATSD,
        "container": STATSD,
        # The account servers send nothing: a factor of 0 samples every metric out.
        "account": STATSD + "log_statsd_sample_rate_factor = 0\n",
    }


def drain(settle=0.5, expect=None):
    """Every datagram received until none came for `settle` seconds: {name: [(value, rate)]}.
    `expect` ({name: count}): keeps listening past a quiet `settle` (for at most 15 s) until
    each name came at least that often; a replica may answer after the proxy's quorum did, and
    a loaded machine may be quiet for longer than `settle` in between."""
    got = {}
    listener.settimeout(settle)
    deadline = time.monotonic() + 15
    while True:
        try:
            data = listener.recv(65536).decode()
        except socket.timeout:
            missing = [n for n, c in (expect or {}).items() if len(got.get(n, [])) < c]
            if not missing or time.monotonic() > deadline:
                return got
            continue
        m = DATAGRAM.match(data)
        if not check(m, "a datagram in Swift's format: %r" % data):
            continue
        got.setdefault(m.group(1), []).append((float(m.group(2)), m.group(5)))


def recon_value(recon_dir, key):
    try:
        with open(os.path.join(recon_dir, "object.recon")) as f:
            return json.load(f).get(key)
    except (OSError, ValueError):
        return None


def names(got, prefix):
    return sorted(n for n in got if n.startswith(prefix))


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = StatsdCluster(BIN, root, ps)
        port = cluster.start_proxy(
            "proxy-statsd", defaults=STATSD + "log_statsd_metric_prefix = apus\n",
            pipeline="catch_errors gatekeeper healthcheck proxy-logging cache listing_formats "
                     "s3api tempauth proxy-server",
            filters="[filter:s3api]\nuse = egg:swift#s3api\n")
        url, token = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % port, "test:tester",
                                    "testing")
        drain()

        swift.put_container(url, token, "c")
        swift.put_object(url, token, "c", "o", b"x" * 1000)
        got = drain(expect={"object-server.PUT.timing": 3, "container-server.PUT.timing": 1})
        check("apus.proxy-server.container.PUT.201.timing" in got,
              "container PUT timing: %r" % names(got, "apus.proxy-server.container"))
        check("apus.proxy-server.object.PUT.201.timing" in got and
              "apus.proxy-server.object.policy.0.PUT.201.timing" in got,
              "object PUT timings, also per policy: %r" % names(got, "apus.proxy-server.object"))
        xfer = got.get("apus.proxy-server.object.PUT.201.xfer", [])
        check(len(xfer) == 1 and xfer[0][0] >= 1000 and xfer[0][1] is None,
              "object PUT xfer counts the body, sent unsampled: %r" % xfer)
        check(len(got.get("object-server.PUT.timing", [])) == 3,
              "object-server.PUT.timing from each replica: %r" % names(got, "object-server"))
        check("container-server.PUT.timing" in got,
              "container-server.PUT.timing: %r" % names(got, "container-server"))
        check(not names(got, "account-server"),
              "sample rate factor 0 silences the account servers: %r"
              % names(got, "account-server"))
        check(not names(got, "proxy-server"),
              "the proxy's names take its metric prefix: %r" % names(got, "proxy-server"))

        swift.get_object(url, token, "c", "o")
        swift.head_object(url, token, "c", "o")
        got = drain()
        for name in ("apus.proxy-server.object.GET.200.first-byte.timing",
                     "apus.proxy-server.object.GET.200.timing",
                     "apus.proxy-server.object.policy.0.GET.200.first-byte.timing",
                     "apus.proxy-server.object.HEAD.200.timing"):
            check(name in got, "%s: %r" % (name, names(got, "apus.proxy-server.object")))
        check("apus.proxy-server.object.HEAD.200.first-byte.timing" not in got,
              "no first-byte timing for a HEAD")
        first = got.get("apus.proxy-server.object.GET.200.first-byte.timing", [(0, None)])[0][0]
        whole = got.get("apus.proxy-server.object.GET.200.timing", [(0, None)])[0][0]
        check(0 < first <= whole, "first byte %.3f ms <= whole GET %.3f ms" % (first, whole))
        xfer = got.get("apus.proxy-server.object.GET.200.xfer", [(0, None)])[0][0]
        check(xfer >= 1000, "GET xfer counts the body: %r" % xfer)
        gets = got.get("object-server.GET.timing", [])
        check(len(gets) == 1 and gets[0][1] is None, "object-server.GET.timing: %r" % gets)
        # Swift times an object HEAD at a rate of 0.8: sent with "|@0.8" when sampled in.
        heads = got.get("object-server.HEAD.timing", [])
        check(all(rate == "0.8" for _, rate in heads), "object HEAD rate 0.8: %r" % heads)

        status, _, _ = procs.request(port, "FROB", "/v1/AUTH_test/c/o",
                                     headers={"X-Auth-Token": token})
        got = drain()
        check("apus.proxy-server.object.BAD_METHOD.%d.timing" % status in got,
              "a method Swift does not know is BAD_METHOD: %r"
              % names(got, "apus.proxy-server"))

        # The proxy app's own counters: a path it cannot route, a client that hangs up.
        procs.request(port, "GET", "/v1/", headers={"X-Auth-Token": token})
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"PUT /v1/AUTH_test/c/cut HTTP/1.1\r\nHost: x\r\nX-Auth-Token: " +
                     token.encode() + b"\r\nContent-Length: 1000\r\n\r\n0123456789")
        time.sleep(0.5)
        sock.close()
        got = drain(1.0)
        check("apus.proxy-server.errors" in got, "proxy-server.errors for an unroutable path: %r"
              % names(got, "apus.proxy-server"))
        check("apus.proxy-server.object.client_disconnects" in got,
              "proxy-server.object.client_disconnects: %r" % names(got, "apus.proxy-server"))

        swift.delete_object(url, token, "c", "o")
        swift.get_account(url, token)
        got = drain(expect={"object-server.DELETE.timing": 3})
        check("apus.proxy-server.object.DELETE.204.timing" in got, "object DELETE timing")
        check("apus.proxy-server.account.GET.200.timing" in got, "account GET timing")
        check(len(got.get("object-server.DELETE.timing", [])) == 3, "object-server DELETEs")

        # A 507 (no such device) is the server's fault: .errors.timing.
        status, _, _ = procs.request(cluster.ports["object"][0], "PUT", "/nodev/1/a/c/o",
                                     headers={"X-Timestamp": "%.5f" % time.time(),
                                              "Content-Type": "text/plain"}, body=b"x")
        got = drain()
        check(status == 507 and "object-server.PUT.errors.timing" in got and
              "object-server.PUT.timing" not in got,
              "a 507 PUT is an error timing: %d %r" % (status, names(got, "object-server")))

        # Swift's diskfile counters: an async pending per replica when no container server
        # answers, and a quarantine when an object's metadata is unreadable.
        for n in range(4):
            cluster.stop("container", n)
        swift.put_object(url, token, "c", "pending", b"p")
        got = drain(expect={"object-server.async_pendings": 3})
        check(len(got.get("object-server.async_pendings", [])) == 3,
              "object-server.async_pendings from each replica: %r"
              % names(got, "object-server"))
        for n in range(4):
            cluster.start("container", n)
        part, nodes = cluster.placement("c", "pending")
        n = nodes[0]
        data = glob.glob(os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects",
                                      str(part), "*", "*", "*.data"))
        check(len(data) == 1, "the object's file on node %d: %r" % (n, data))
        if data:
            os.setxattr(data[0], "user.swift.metadata", b"not a pickle")
            status, _, _ = procs.request(cluster.ports["object"][n], "HEAD",
                                         "/sd%d/%d/AUTH_test/c/pending" % (n, part),
                                         headers={"X-Backend-Storage-Policy-Index": "0"})
            got = drain()
            check(status == 404 and "object-server.quarantines" in got,
                  "a quarantine is counted: %d %r" % (status, names(got, "object-server")))

        # An S3 request is counted under the Swift path it was served by.
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port,
                          aws_access_key_id="test:tester", aws_secret_access_key="testing",
                          region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="s3-bucket")
        drain()
        s3.put_object(Bucket="s3-bucket", Key="s3-key", Body=b"hello")
        got = drain()
        check("apus.proxy-server.object.PUT.200.timing" in got,
              "S3 PUT object as an object PUT: %r" % names(got, "apus.proxy-server"))

        # Swift's log_handoffs: with request_node_count = replicas a request plans no handoff,
        # so a write that must use one counts handoff_count; log_handoffs = false counts
        # nothing. A primary is down: the first PUT's error limits it (error_suppression_limit
        # 0), the second PUT skips it and takes a handoff. (The first takes one only when the
        # down node was the last of its three, as with Swift's node iterator.)
        part, nodes = cluster.placement("c", "handoff")
        cluster.stop("object", nodes[0])
        for name, log_handoffs in (("proxy-handoffs", "true"), ("proxy-no-handoffs", "false")):
            p = cluster.start_proxy(
                name, defaults=STATSD,
                app_options="request_node_count = 3\nerror_suppression_limit = 0\n"
                            "log_handoffs = %s\n" % log_handoffs)
            purl, ptoken = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % p, "test:tester",
                                          "testing")
            drain()
            swift.put_object(purl, ptoken, "c", "handoff", b"h")
            swift.put_object(purl, ptoken, "c", "handoff", b"h")
            got = drain()
            counted = got.get("proxy-server.handoff_count", [])
            if log_handoffs == "true":
                check(len(counted) in (1, 2) and "proxy-server.handoff_all_count" not in got,
                      "a handoff beyond request_node_count is counted: %r"
                      % names(got, "proxy-server"))
            else:
                check(not counted, "log_handoffs = false counts no handoff: %r" % counted)
        cluster.start("object", nodes[0])

        # The daemons, each under its log_name: the object updater delivers the async pending
        # left above (and writes what is left to object.recon, as swift-recon-cron would), the
        # replicator, the auditor (which quarantines a changed file) and the container
        # replicator.
        part, nodes = cluster.placement("c", "pending")
        n = nodes[1]
        recon = os.path.join(cluster.root, "recon-%d" % n)
        os.makedirs(recon, exist_ok=True)
        cron_conf = os.path.join(cluster.etc, "recon-cron-%d.conf" % n)
        with open(cron_conf, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nlog_file = %s/recon-cron.log\n\n"
                    "[filter:recon]\nrecon_cache_path = %s\n"
                    % (os.path.join(cluster.root, "node%d" % n), cluster.root, recon))
        subprocess.run([os.path.join(BIN, "apus-recon-cron"), cron_conf], check=True)
        check(recon_value(recon, "async_pending") == 1,
              "apus-recon-cron counts node %d's async pending" % n)
        drain()
        status, out, _ = cluster.daemon_once("updater", "object-updater", n, STATSD)
        got = drain()
        check(status == 0 and "object-updater.successes" in got and
              "object-updater.unlinks" in got and "object-updater.timing" in got,
              "object-updater metrics: %d %r %s" % (status, names(got, "object-updater"), out))
        check(recon_value(recon, "async_pending") == 0 and
              recon_value(recon, "async_pending_last") > time.time() - 60,
              "the updater's pass leaves async_pending = 0 in object.recon")

        status, out, _ = cluster.daemon_once(
            "replicator", "object-replicator", n, "sync_method = ssync\n" + STATSD)
        got = drain()
        check(status == 0 and "object-replicator.partition.update.count.sd%d" % n in got and
              "object-replicator.partition.update.timing" in got,
              "object-replicator metrics: %d %r %s"
              % (status, names(got, "object-replicator"), out))

        swift.put_object(url, token, "c", "audited", b"a" * 100)
        part, nodes = cluster.placement("c", "audited")
        n = nodes[0]
        data = glob.glob(os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects",
                                      str(part), "*", "*", "*.data"))
        if check(len(data) == 1, "the audited object's file: %r" % data):
            with open(data[0], "r+b") as f:
                f.write(b"b")  # same size, another MD5
        drain()
        status, out, _ = cluster.daemon_once(
            "auditor", "object-auditor", n,
            "files_per_second = 0\nbytes_per_second = 0\n" + STATSD)
        got = drain()
        check(status == 0 and "object-auditor.quarantines" in got and
              "object-auditor.timing" in got,
              "object-auditor metrics: %d %r %s" % (status, names(got, "object-auditor"), out))

        # A node that holds the container's database (one in four holds none, and a replicator
        # with nothing to replicate sends no metrics).
        holder = cluster.ring_nodes("container", "AUTH_test", "c")[1][0]
        status, out, _ = cluster.daemon_once("replicator", "container-replicator", holder,
                                             STATSD, kind="container")
        got = drain()
        check(status == 0 and "container-replicator.attempts" in got and
              "container-replicator.timing" in got and
              any(k in got for k in ("container-replicator.no_changes",
                                     "container-replicator.hashmatches",
                                     "container-replicator.diffs")),
              "container-replicator metrics: %d %r %s"
              % (status, names(got, "container-replicator"), out))

    listener.close()
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("statsd: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
