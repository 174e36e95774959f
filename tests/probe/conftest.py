"""What Swift's probe tests read of Swift's own storage, adapted to Apus (run_probe.sh puts this
file in a copy of the suite; the upstream tests are not edited).

Apus keeps container and account listings in one RocksDB store per device, not one SQLite file
per database. So:
 - test_object_metadata_replication compares each container primary's listing (direct GETs:
   name, etag, size, content type, last-modified) where it compared the SQLite files' row hash
   (the XOR of the rows' MD5s: the same row set);
 - test_account_reaper's in-process Swift reaper (it walks SQLite files) runs
   `swift-account-reaper <config> once` instead, that is apus-account-reaper with the same
   delay_reaping;
 - test_replication_servers_working wipes a node and expects every file back under its old
   name: it leaves the RocksDB stores (apus-containers/, apus-accounts/) alone, which no
   replicator could bring back file for file;
 - test_orphan_container reads each container replica's info (put and reported put timestamps)
   with Swift's ContainerBroker on the SQLite file, and destroys the account by unlinking its
   files: the "files" here name the replicas on their servers, the info is a REPLICATE "sync"
   answer (Swift's replication info, reported timestamps included), a file exists while that
   answer is not 404, and unlinking removes the replica with Apus's own REPLICATE
   "apus_remove_db" (what a replicator does to a handoff it moved home); for a server that is
   down the removal waits for the test to start it again.
"""
import glob
import os
import shutil
import subprocess
import tempfile
import types
from configparser import ConfigParser

import pytest

APUS_STORES = ("apus-containers", "apus-accounts")


def _container_listings(test):
    """Each container primary's listing of the test's container (direct GETs)."""
    from swift.common import direct_client
    from test.probe.common import _retry_timeout
    cpart, cnodes = test.container_ring.get_nodes(test.account, test.container_name)
    listings = []
    for cnode in cnodes:
        # A server the test's brain just started may not listen yet.
        _, objs = _retry_timeout(direct_client.direct_get_container,
                                 args=(cnode, cpart, test.account, test.container_name))
        listings.append(sorted((o["name"], o["hash"], o["bytes"], o["content_type"],
                                o["last_modified"]) for o in objs))
    return listings


def _assert_consistent_container_dbs(self):
    listings = _container_listings(self)
    self.assertGreater(len(listings), 1)
    for other in listings[1:]:
        self.assertEqual(listings[0], other)


class ApusAccountReaper(object):
    """Stands in for swift.account.reaper.AccountReaper(conf): conf is a node's
    [account-reaper] with conf['__file__'] its account-server config."""

    def __init__(self, conf, logger=None):
        self.conf = conf

    def run_once(self, *args, **kwargs):
        parser = ConfigParser(interpolation=None)
        parser.read(self.conf["__file__"])
        if not parser.has_section("account-reaper"):
            parser.add_section("account-reaper")
        parser.set("account-reaper", "delay_reaping", str(self.conf.get("delay_reaping", "0")))
        fd, path = tempfile.mkstemp(suffix=".conf")
        with os.fdopen(fd, "w") as f:
            parser.write(f)
        try:
            subprocess.check_call(["swift-account-reaper", path, "once"])
        finally:
            os.unlink(path)


class ApusDbReplica(object):
    """Stands for a replica's database file: its server, partition and hash."""

    def __init__(self, node, part, hash_str):
        self.node, self.part, self.hash = node, part, hash_str

    def __str__(self):
        return "%s:%s/%s/%s/%s" % (self.node["ip"], self.node["port"], self.node["device"],
                                   self.part, self.hash)

    __repr__ = __str__

    def replicate(self, *args):
        """(status, decoded JSON answer or None) of a REPLICATE request with `args`."""
        import json
        from http.client import HTTPConnection
        conn = HTTPConnection(self.node["ip"], self.node["port"], timeout=10)
        try:
            conn.request("REPLICATE", "/%s/%s/%s" % (self.node["device"], self.part, self.hash),
                         json.dumps(list(args)), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        return resp.status, (json.loads(body) if resp.status == 200 and body else None)

    def info(self):
        """The replica's replication info; None when it does not exist."""
        status, info = self.replicate("sync", -1, "0" * 32, "probe-conftest", "0", "0", "0",
                                      None)
        if status == 404:
            return None
        if status != 200:
            raise AssertionError("REPLICATE sync to %s: %s" % (self, status))
        return info

    def remove(self):
        info = self.info()
        if info is None:
            raise FileNotFoundError(str(self))
        status, _ = self.replicate("apus_remove_db", info["id"], info["max_row"])
        if status // 100 != 2:
            raise AssertionError("REPLICATE apus_remove_db to %s: %s" % (self, status))


class ApusContainerBroker(object):
    """ContainerBroker(db_file).get_info() for an ApusDbReplica."""

    def __init__(self, replica, *args, **kwargs):
        self.replica = replica

    def get_info(self):
        info = self.replica.info()
        if info is None:
            raise AssertionError("no database %s" % self.replica)
        return info


def _replicas(ring, hash_str, *names):
    part, nodes = ring.get_nodes(*names)
    return [ApusDbReplica(node, part, hash_str) for node in nodes]


def _orphan_container_module(module):
    """test_orphan_container on Apus replicas (see the module docstring)."""
    from swift.common.utils import hash_path
    pending = []  # replicas to remove once their server is back

    def get_container_db_files(self, container):
        return _replicas(self.container_ring, hash_path(self.account, container),
                         self.account, container)

    def get_account_db_files(self, account):
        return _replicas(self.account_ring, hash_path(account), account)

    def unlink(path):
        if not isinstance(path, ApusDbReplica):
            return os.unlink(path)
        try:
            path.remove()
        except ConnectionRefusedError:
            pending.append(path)

    def exists(path):
        if not isinstance(path, ApusDbReplica):
            return os.path.exists(path)
        return path.info() is not None

    def start_server(ipport, ipport2server):
        result = real_start_server(ipport, ipport2server)
        for replica in [r for r in pending if (r.node["ip"], r.node["port"]) == ipport]:
            pending.remove(replica)
            replica.remove()
        return result

    real_start_server = module.start_server
    module.TestOrphanContainer.get_container_db_files = get_container_db_files
    module.TestOrphanContainer.get_account_db_files = get_account_db_files
    module.ContainerBroker = ApusContainerBroker
    module.start_server = start_server
    view = types.ModuleType("os")
    view.__dict__.update(os.__dict__)
    view.path = types.ModuleType("os.path")
    view.path.__dict__.update(os.path.__dict__)
    view.unlink = unlink
    view.path.exists = exists
    module.os = view


def _without_stores(names):
    return [n for n in names if n not in APUS_STORES]


def _os_without_stores():
    """The os module as test_replication_servers_working sees it: walk() and listdir() skip
    the RocksDB stores."""
    view = types.ModuleType("os")
    view.__dict__.update(os.__dict__)

    def walk(top, *args, **kwargs):
        for root, dirs, files in os.walk(top, *args, **kwargs):
            dirs[:] = _without_stores(dirs)
            yield root, dirs, files

    view.walk = walk
    view.listdir = lambda path=".": _without_stores(os.listdir(path))
    return view


def _shutil_without_stores():
    view = types.ModuleType("shutil")
    view.__dict__.update(shutil.__dict__)

    def rmtree(path, *args, **kwargs):
        if os.path.basename(os.path.normpath(path)) in APUS_STORES:
            return  # the listing server keeps its store open: never pulled away under it
        return shutil.rmtree(path, *args, **kwargs)

    view.rmtree = rmtree
    return view


def _time_manager_calls():
    """Each Manager command a test runs, with how long it took, in log/manager.log (where a
    probe run's time goes)."""
    import time
    from swift.common import manager
    log_path = os.path.join(os.environ.get("APUS_PROBE_DIR", "/tmp"), "log", "manager.log")

    def timed(name, real):
        def call(self, *args, **kwargs):
            began = time.time()
            try:
                return real(self, *args, **kwargs)
            finally:
                with open(log_path, "a") as log:
                    log.write("%s %s %s: %.2fs\n" % (
                        time.strftime("%H:%M:%S", time.localtime(began)), name,
                        " ".join(sorted(s.server for s in self.servers)),
                        time.time() - began))
        return call

    for name in ("once", "start", "stop", "kill", "restart", "status"):
        setattr(manager.Manager, name, timed(name, getattr(manager.Manager, name)))


def pytest_collection_modifyitems(session, config, items):
    _time_manager_calls()
    try:
        from test.probe import test_object_metadata_replication as metadata
        metadata.Test._assert_consistent_container_dbs = _assert_consistent_container_dbs
    except ImportError:
        pass
    try:
        from test.probe import test_account_reaper as reaper
        reaper.reaper.AccountReaper = ApusAccountReaper
    except ImportError:
        pass
    try:
        from test.probe import test_orphan_container as orphan
        _orphan_container_module(orphan)
    except ImportError:
        pass
    try:
        from test.probe import test_replication_servers_working as servers
        servers.os = _os_without_stores()
        servers.shutil = _shutil_without_stores()
    except ImportError:
        pass


def _failure_clues(log_dir, limit=3):
    """A few lines that say what the servers did in a failed test, short enough for CI's digest
    of a failure (which shows a handful of lines): the proxy's last answers of 400 and above,
    the last errors any server logged, the reconciler's last stats."""
    answers, errors, stats = [], [], []
    for path in sorted(glob.glob(os.path.join(log_dir, "*.log"))):
        server = os.path.basename(path)[:-len(".log")]
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                head, _, rest = line.partition(" INFO: ")
                fields = rest.split(" ")
                if server.startswith("proxy-server") and len(fields) > 6 \
                        and fields[6].isdigit() and int(fields[6]) >= 400:
                    answers.append("proxy %s %s %s" % (fields[6], fields[3], fields[4]))
                elif "Reconciler Stats" in rest:
                    stats.append("reconciler: " + rest)
                elif any(level in line for level in (" ERROR: ", " CRITICAL: ")):
                    errors.append(line.partition("Z ")[2] or line)
    return [c[:200] for c in answers[-limit:] + errors[-limit:] + stats[-1:]]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's server logs are kept (resetswift wipes them before the next test), in
    failed/<test id>/ of the probe directory, with clues.txt for compare_failures.py."""
    outcome = yield
    report = outcome.get_result()
    probe_dir = os.environ.get("APUS_PROBE_DIR")
    if report.when != "call" or not report.failed or not probe_dir:
        return
    path, _, names = item.nodeid.partition("::")
    test_id = ".".join([path[:-len(".py")].replace("/", ".")] + names.split("::"))
    kept = os.path.join(probe_dir, "failed", test_id)
    shutil.copytree(os.path.join(probe_dir, "log"), kept, dirs_exist_ok=True)
    with open(os.path.join(kept, "clues.txt"), "w") as clues:
        clues.write("".join(line + "\n" for line in _failure_clues(kept)))
