#!/usr/bin/env python3
"""apus-account-reaper on a 4-node Apus cluster (issue 16): a reseller admin deletes an
account holding containers and objects; with delay_reaping not yet passed nothing is touched;
then one pass on every node deletes every replica of every object (tombstones, so replication
cannot bring them back) and every container, each container by exactly one of the account's
primaries, while another account stays whole; a second pass finds nothing left to do.

usage: account_reaper_test.py <build-dir>
"""
import os
import re
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
failures = []
CONTAINERS = {"alpha": 4, "beta": 3, "gamma \u00e9t\u00e9": 5, "empty": 0}


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Reaper:
    """Runs the reaper on every node; returns the log lines of that run."""

    def __init__(self, cluster):
        self.cluster, self.seen = cluster, {n: 0 for n in range(4)}

    def run_all(self, options=""):
        lines = []
        for n in range(4):
            status, output, log = self.cluster.reap(n, options)
            check(status == 0, "reaper on node %d: %d %s" % (n, status, output))
            lines += log[self.seen[n]:].splitlines()
            self.seen[n] = len(log)
        return lines


def placement(cluster, kind, account, container, obj=None):
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    ring = Ring(os.path.join(cluster.etc, kind + ".ring.gz"))
    args = (account, container) + ((obj,) if obj else ())
    part, nodes = ring.get_nodes(*args)
    return part, [cluster.ports[kind].index(n["port"]) for n in nodes]


def direct_head(cluster, kind, n, part, path):
    from urllib.parse import quote
    status, headers, _ = procs.request(cluster.ports[kind][n], "HEAD",
                                       "/sd%d/%d%s" % (n, part, quote(path)))
    return status, headers


def replicas(cluster, account, container, obj=None):
    """(kind, node, status, headers) of every primary replica."""
    kind = "object" if obj else "container"
    part, nodes = placement(cluster, kind, account, container, obj)
    path = "/%s/%s" % (account, container) + ("/" + obj if obj else "")
    return [(n,) + direct_head(cluster, kind, n, part, path) for n in nodes]


def counted(lines, what):
    total = 0
    for line in lines:
        if "Completed pass on account AUTH_victim" in line:
            m = re.search(r"(\d+) %s" % what, line)
            total += int(m.group(1)) if m else 0
    return total


def main():
    with procs.TempDir("apus-reaper-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        port = cluster.start_proxy(
            "reseller-proxy", app_options="allow_account_management = true\n",
            users="user_victim_owner = secret .admin\n"
                  "user_admin_admin = admin .admin .reseller_admin\n")
        auth = "http://127.0.0.1:%d/auth/v1.0" % port
        url, token = swift.get_auth(auth, "victim:owner", "secret")
        for container, count in CONTAINERS.items():
            swift.put_container(url, token, container)
            for i in range(count):
                swift.put_object(url, token, container, "o%d/\u00fc" % i, b"x" * (i + 1))
        keep_url, keep_token = cluster.connect()
        swift.put_container(keep_url, keep_token, "kept")
        swift.put_object(keep_url, keep_token, "kept", "o", b"stays")

        admin_url, admin_token = swift.get_auth(auth, "admin:admin", "admin")
        status, _, _ = procs.request(port, "DELETE", "/v1/AUTH_victim",
                                     headers={"X-Auth-Token": admin_token})
        check(status == 204, "the reseller admin deletes AUTH_victim: %d" % status)

        reaper = Reaper(cluster)
        # 1. delay_reaping not yet passed: everything stays.
        lines = reaper.run_all("delay_reaping = 3600\n")
        check(not any("Beginning pass" in l for l in lines),
              "nothing reaped within delay_reaping: %r" % lines)
        for i in range(CONTAINERS["alpha"]):
            for n, status, _ in replicas(cluster, "AUTH_victim", "alpha", "o%d/\u00fc" % i):
                check(status == 200, "o%d still on node %d within the delay: %d" % (i, n, status))

        # 2. Reaped: every replica of every object is a tombstone, every container gone.
        lines = reaper.run_all()
        for container, count in CONTAINERS.items():
            for i in range(count):
                for n, status, headers in replicas(cluster, "AUTH_victim", container,
                                                   "o%d/\u00fc" % i):
                    check(status == 404 and "x-backend-timestamp" in headers,
                          "%s/o%d deleted on node %d: %d %r" % (container, i, n, status, headers))
            for n, status, headers in replicas(cluster, "AUTH_victim", container):
                check(status == 404, "container %s deleted on node %d: %d" % (container, n, status))
        objects = sum(CONTAINERS.values())
        check(counted(lines, "containers deleted") == len(CONTAINERS),
              "each container deleted by one node: %r" % lines)
        check(counted(lines, "objects deleted") == objects,
              "each object deleted once: %r" % lines)
        check(any("Devices pass completed" in l for l in lines), "pass lines: %r" % lines)

        # The other account is whole.
        _, body = swift.get_object(keep_url, keep_token, "kept", "o")
        check(body == b"stays", "AUTH_test's object survives")

        # 3. The account databases list no container now: a second pass has nothing to do.
        lines = reaper.run_all()
        check(not any("Beginning pass" in l for l in lines),
              "a second pass finds nothing to reap: %r" % lines)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("account reaper: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
