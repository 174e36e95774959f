#!/usr/bin/env python3
"""account_update_mode on the container servers (issue 17), on a 4-node Apus cluster:

- async: a container PUT is answered before its account update goes, and the account lists
  the container at once all the same;
- async with every account server hanging: container PUTs are answered at once (sync mode
  would wait node_timeout), and the account lists the container once its servers go on;
- sync (Swift's way) is unchanged: a PUT whose every account replica answers 404 is a 404.

usage: account_update_mode_test.py <build-dir>
"""
import os
import signal
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


def listed(url, token):
    return sorted(c["name"] for c in swift.get_account(url, token)[1])


def wait_listed(url, token, want, timeout=20):
    deadline = time.monotonic() + timeout
    names = None
    while time.monotonic() < deadline:
        names = listed(url, token)
        if names == want:
            return names
        time.sleep(0.3)
    return names


def backend_put(cluster, account, container, statuses=None):
    """Container PUTs on the container's primaries as a proxy sends them (each naming one
    account replica); returns how long each took."""
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    apart, anodes = Ring(os.path.join(cluster.etc, "account.ring.gz")).get_nodes(account)
    cpart, cnodes = Ring(os.path.join(cluster.etc, "container.ring.gz")).get_nodes(
        account, container)
    ts = "%.5f" % time.time()
    took = []
    for cnode, anode in zip(cnodes, anodes):
        n = cluster.ports["container"].index(cnode["port"])
        began = time.monotonic()
        status, _, _ = procs.request(
            cnode["port"], "PUT", "/sd%d/%d/%s/%s" % (n, cpart, account, container),
            headers={"X-Timestamp": ts, "X-Account-Host": "127.0.0.1:%d" % anode["port"],
                     "X-Account-Device": anode["device"], "X-Account-Partition": str(apart)})
        took.append(time.monotonic() - began)
        if statuses is not None:
            statuses.append(status)
    return took


class AsyncCluster(Cluster):
    # No sweep at first: what reaches the account then came from the async sends alone.
    container_updater = "enabled = false\n"
    app_options = {"container": "account_update_mode = async\n"}


def restart_container_servers(cluster):
    for n in range(4):
        cluster.stop("container", n)
    for n in range(4):
        cluster.start("container", n)


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = AsyncCluster(BIN, root, ps)
        url, token = cluster.connect()
        swift.put_container(url, token, "first")
        check(wait_listed(url, token, ["first"], timeout=5) == ["first"],
              "the account lists a container PUT in async mode (no updater sweep running)")

        # From here on the updater sweeps every second: it delivers what a failed send left.
        cluster.container_updater = "interval = 1\n"
        restart_container_servers(cluster)

        # Every account server hangs (SIGSTOP): the container servers answer the PUTs (backend
        # ones, as a proxy sends them) at once, where sync mode would wait node_timeout (3 s).
        for n in range(4):
            os.kill(cluster.procs[("account", n)].pid, signal.SIGSTOP)
        try:
            took = max(backend_put(cluster, "AUTH_test", "while-down") or [0])
        finally:
            for n in range(4):
                os.kill(cluster.procs[("account", n)].pid, signal.SIGCONT)
        check(took < 1.5, "PUTs answered without waiting for accounts: %.2f s" % took)
        names = wait_listed(url, token, ["first", "while-down"])
        check(names == ["first", "while-down"],
              "the updater's sweep told the account: %r" % (names,))

        # Sync mode: a container PUT into an account whose every replica says 404 is a 404.
        cluster.app_options = {"container": ""}
        restart_container_servers(cluster)
        statuses = []
        backend_put(cluster, "AUTH_none", "c", statuses)
        check(statuses == [404, 404, 404],
              "sync mode: PUTs for an account that is nowhere: %r" % (statuses,))

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("account update modes: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
