#!/usr/bin/env python3
"""Reading sharded containers of stock Swift container servers through apus-proxy-server
(issue 17), against stock swift-proxy-server (Debian's 2.30.1) on the same cluster.

Apus does not shard containers itself; a cluster moved from Swift, or one whose container
servers are still Swift's, may hold containers Swift's sharder has split. A proxy reading one
must do what Swift's proxy does: ask the root container for `X-Backend-Record-Type: auto`,
follow the shard ranges it gets back instead of objects, and send object updates to the shard
container that owns the name (X-Backend-Quoted-Container-Path), not to the root.

The setup is Swift's own from end to end, so that what is tested is Apus reading a container
exactly as a Swift cluster leaves it: every node's container server is Swift's (account and
object servers stay Apus's), container `c` is filled through the Apus proxy, then sharded the
way Swift's probe test (test/probe/test_sharder.py, TestManagedContainerSharding) does it:
swift-manage-shard-ranges find_and_replace --enable on one replica, Swift's container
replicator, then Swift's ContainerSharder on every node until every root replica is sharded.
The stock proxy must then list everything (a check of the setup, not of Apus).

Checked of the Apus proxy:
- listings (formats, limit, marker and end_marker on and across shard boundaries, prefix,
  delimiter, reverse) byte for byte as the stock proxy's, with the same status and counts;
- an object PUT and a DELETE through Apus land in the shard containers (the root replicas'
  own object rows do not get the new name; a majority of the shard's replicas list it), and
  both proxies' listings show them;
- HEAD of the container: the same counts through both.

Then a shard shards again (shards of shards, which Swift's proxy follows by asking a shard for
`auto` too: a sharding or sharded shard answers with its own shard ranges). The fullest shard
is split the way Swift's probe tests split a shard (test_sharder.py, _test_sharded_listing and
test_manage_shard_ranges_repair_shard): swift-manage-shard-ranges --force-commits
find_and_replace --enable on one replica of the SHARD's database, Swift's replicator, Swift's
sharder. What Swift does with the root decides what is tested. Once the shard has sharded,
its report to the root carries its own range deleted and the sub-shards active, so the root
lists the sub-shards directly and a proxy reading the root afresh never meets the sharded
shard. Apus's recursion into a shard's shard ranges is therefore checked where a Swift cluster
really makes a proxy take it: half-way, after one sharder pass over the shard's partition
(as the probe runs it) that cleaves one sub-shard on each replica (cleave_batch_size 1). The
root then still lists the shard, active, for its whole range: it knows the sub-shards only as
created (not listed), and 2.30.1 does not report the shard's move to sharding (the replicator
merged the other replicas' older active row into the leader's, and merge_shards kept their
`reported` latch with the newer state). The shard, sharding, answers a listing with its shard
ranges: the cleaved sub-shard, and itself for the rest, whose rows a proxy then reads with
`X-Backend-Record-Type: object`, having been there already. So a listing that reaches the
shard's range goes root -> shard -> sub-shard and shard's own rows. Checked there:
- a PUT through Apus of a name inside the cleaved sub-shard lands in it (a majority of its
  replicas), not in the shard's own rows nor the root's; the listings then show it only if
  they went down into the sub-shard through the shard;
- every listing query byte for byte as the stock proxy's, each as a proxy with nothing cached
  answers it (the root's object count is stale there, and the stock proxy would answer with
  counts it cached from an earlier listing).
Then, once every replica of the shard says it is sharded (the root listing its sub-shards):
every listing query again, and a PUT through Apus of a name inside a sub-shard, which must land
in that sub-shard, not in the sharded shard's own rows nor the root's.

usage: sharded_container_interop.py <build-dir>
"""
import configparser
import json
import os
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
ACCOUNT = "AUTH_test"
SHARDS_ACCOUNT = ".shards_" + ACCOUNT  # Swift's default shards account for AUTH_test
CONTAINER = "c"
ROWS_PER_SHARD = 10
# Each pass runs the sharder once on every node. The first replica sharded normally finishes in
# the first pass and brings the others along in the same one; a few more leave room for a
# slow replica without letting a broken setup loop for long.
MAX_SHARDER_PASSES = 5
# Swift's default (2) would cleave the 4 ranges in two passes per replica; the probe tests keep
# it low to test the batching, which is not what is tested here.
CLEAVE_BATCH_SIZE = 10
# The shard that shards again is split into this many sub-shards (its rows divided evenly).
SUB_SHARDS = 3
failures = []

# Names for listings that cross shard boundaries: 'a/..' spans the first two shards and 'b/..'
# the second and third (with 10 rows a shard), '-' and '.' sort just before the delimiter (a
# subdir must not swallow them), and UTF-8 names, one of them under a delimiter, sort last
# (byte order, as SQLite and Swift's listings sort).
NAMES = (["a/%02d" % i for i in range(1, 13)] +
         ["apple", "b-dash", "b.dot", "b/x/1", "b/x/2", "b/x/3", "b/y/1", "b/y/2", "b/z",
          "banana", "caf\u00e9", "caf\u00e9/cr\u00e8me", "cherry", "date", "elder", "fig",
          "grape", "kiwi", "lemon", "mango", "nectarine", "olive", "pct%20", "peach", "quince",
          "with space", "z/last", "\u00e9t\u00e9/1", "\u65e5\u672c"])


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def body_of(name):
    """Bodies of different sizes, so that bytes used tell objects apart too."""
    return name.encode() * (1 + NAMES.index(name) % 3) if name in NAMES else name.encode()


# --- the nodes' container servers and their files -------------------------------------------

def devices_dir(cluster, n):
    """Node n's devices directory, as its container server's config gives it."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(cluster.etc, "container-%d.conf" % n))
    return parser.defaults()["devices"]


def db_path(cluster, n, part, account, container):
    """Where Swift's container server on node n keeps the replica (before sharding renames it
    <hash>_<epoch>.db)."""
    from swift.common.utils import hash_path
    h = hash_path(account, container)  # cluster.ring_nodes set this cluster's swift dir
    return os.path.join(devices_dir(cluster, n), "sd%d" % n, "containers", str(part), h[-3:],
                        h, h + ".db")


def direct(cluster, n, method, part, account, container, query="", record_type=None):
    """A request straight to node n's container server, as a proxy sends it."""
    headers = {"X-Backend-Record-Type": record_type} if record_type else {}
    path = "/sd%d/%d/%s/%s" % (n, part, quote(account), quote(container))
    return procs.request(cluster.ports["container"][n], method,
                         path + ("?" + query if query else ""), headers)


def sharding_state(cluster, n, part, account=ACCOUNT, container=CONTAINER):
    status, headers, _ = direct(cluster, n, "HEAD", part, account, container)
    return status, headers.get("x-backend-sharding-state")


def listing_ranges(cluster, n, part, account=ACCOUNT, container=CONTAINER):
    """What node n's replica answers a proxy's listing request (`auto`, states=listing):
    (record type, the shard ranges as Swift's dicts) or (record type, None) for objects."""
    status, headers, body = direct(cluster, n, "GET", part, account, container,
                                   "format=json&states=listing", record_type="auto")
    record_type = headers.get("x-backend-record-type")
    return record_type, json.loads(body) if status == 200 and record_type == "shard" else None


def range_view(ranges):
    """A shard range list without the stats that each replica's reports leave different."""
    return [(sr["name"], sr["lower"], sr["upper"], sr["state"]) for sr in ranges or []]


def root_shard_ranges(cluster, n, part):
    """The root replica's shard ranges (Swift's dicts: name, lower, upper, state...), or None."""
    status, _, body = direct(cluster, n, "GET", part, ACCOUNT, CONTAINER, "format=json",
                             record_type="shard")
    return json.loads(body) if status == 200 else None


def object_names(cluster, n, part, account, container):
    """The object rows node n's replica lists itself (never its shards'): None if it fails."""
    status, _, body = direct(cluster, n, "GET", part, account, container, "format=json",
                             record_type="object")
    return [o["name"] for o in json.loads(body)] if status == 200 else None


# --- Swift's sharding tools -----------------------------------------------------------------

def run_swift(cluster, code, *args, log=None):
    """Python code with Swift's modules reading this cluster's swift.conf (hash prefix and
    suffix, policies) rather than /etc/swift's, which tests must not touch."""
    script = ("import sys\n"
              "from swift.common import utils, storage_policy\n"
              "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
              + code)
    run = subprocess.run(["/usr/bin/python3", "-c", script, cluster.etc] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=300)
    if log:
        with open(log, "a") as f:
            f.write(run.stdout)
    return run.returncode, run.stdout


def manage_shard_ranges(cluster, db, *args):
    """swift-manage-shard-ranges, Swift's own CLI (its main()), on one replica's file."""
    return run_swift(cluster, "from swift.cli.manage_shard_ranges import main\n"
                     "sys.exit(main(sys.argv[2:]))\n", db, *args)


def sharder_once(cluster, n, ic_conf, cleave_batch_size=CLEAVE_BATCH_SIZE, partitions=""):
    """Swift 2.30.1's ContainerSharder.run_once() for node n (auto_shard off, as the probe's
    --no-auto-shard: only the container we enabled is sharded). It finds its own replicas by
    bind_ip/bind_port in the ring and pushes shard databases to their primaries by REPLICATE
    and rsync into the nodes' rsync daemon, as the replicator does. `partitions` (comma
    separated) limits it to those, as the probe's --partitions. (exit status, output)."""
    recon = os.path.join(cluster.root, "sharder-recon-%d" % n)
    os.makedirs(recon, exist_ok=True)
    conf = {"devices": devices_dir(cluster, n), "mount_check": "false",
            "swift_dir": cluster.etc, "bind_ip": "127.0.0.1",
            "bind_port": str(cluster.ports["container"][n]), "recon_cache_path": recon,
            "rsync_module": "rsync://{replication_ip}:%d/container{replication_port}"
                            % cluster.rsyncd_port,
            "internal_client_conf_path": ic_conf, "auto_shard": "false",
            "cleave_batch_size": str(cleave_batch_size), "databases_per_second": "1000",
            "log_name": "container-sharder-%d" % n}
    return run_swift(cluster,
                     "import json\n"
                     "from swift.common.utils import get_logger\n"
                     "from swift.container.sharder import ContainerSharder\n"
                     "conf = json.loads(sys.argv[2])\n"
                     "logger = get_logger(conf, log_route='container-sharder',\n"
                     "                    log_to_console=True)\n"
                     "ContainerSharder(conf, logger=logger).run_once(partitions=sys.argv[3])\n",
                     json.dumps(conf), partitions,
                     log=os.path.join(cluster.root, "sharder-%d.log" % n))


def forget_container_info(cluster):
    """Drops `c`'s info from memcached, as if recheck_container_existence had passed since
    sharding: the proxies cached it as unsharded while the objects went in, and a proxy that
    believes a container unsharded rightly sends updates to the root."""
    from swift.common.memcached import MemcacheRing
    from swift.proxy.controllers.base import get_cache_key
    MemcacheRing(["127.0.0.1:%d" % cluster.memcached_port]).delete(
        get_cache_key(ACCOUNT, CONTAINER))


def forget_shard_ranges(cluster):
    """Drops the root's shard ranges that the proxies cached in memcached (Swift's keys):
    the listing ones the stock proxy keeps for recheck_listing_shard_ranges, the updating ones
    both keep for recheck_updating_shard_ranges. Once a shard has sharded they name it, not its
    sub-shards; Swift's probe test kills the updating entry the same way before writing."""
    from swift.common.memcached import MemcacheRing
    from swift.proxy.controllers.base import get_cache_key
    memcache = MemcacheRing(["127.0.0.1:%d" % cluster.memcached_port])
    for kind in ("listing", "updating"):
        memcache.delete(get_cache_key(ACCOUNT, CONTAINER, shard=kind))


def shard(cluster, part, nodes):
    """Shards `c` with Swift's tools until every root replica says it is sharded. Returns the
    root's shard ranges (Swift's dicts), or None when the setup failed."""
    leader = nodes[0]
    db = db_path(cluster, leader, part, ACCOUNT, CONTAINER)
    if not check(os.path.exists(db), "setup: the root's database is at %s" % db):
        return None
    # --force-commits: with 41 objects most rows may still be in the .pending file, which
    # find would otherwise skip (the CLI's own help says so of probe-sized containers).
    # In 2.30.1 find_and_replace prompts only before deleting existing shard ranges (there are
    # none here) and has no --yes; --force answers that prompt, so the run can never hang on
    # stdin. The default --minimum-shard-size (rows_per_shard / 5) folds a last short range
    # into the one before it.
    status, output = manage_shard_ranges(cluster, db, "--force-commits", "find_and_replace",
                                         str(ROWS_PER_SHARD), "--enable", "--force")
    print("swift-manage-shard-ranges:", output.strip().replace("\n", " | ")[-600:])
    if not check(status == 0, "setup: swift-manage-shard-ranges failed (%d): %s"
                 % (status, output[-2000:])):
        return None
    # "Run container-replicator to replicate them to other nodes."
    status, output, stats = cluster.swift_db_replicate("container", leader)
    check(status == 0, "setup: Swift's container replicator on node %d: %s"
          % (leader, output[-2000:]))
    # "Run container-sharder on all nodes to shard the container." The leader first: it
    # creates the shard containers and cleaves its rows into them; the others then cleave
    # theirs into the same shards.
    ic_conf = cluster.internal_client_conf()
    order = [leader] + [n for n in range(len(cluster.ports["container"])) if n != leader]
    started = time.monotonic()
    for attempt in range(1, MAX_SHARDER_PASSES + 1):
        for n in order:
            status, output = sharder_once(cluster, n, ic_conf)
            check(status == 0, "setup: Swift's sharder on node %d: %s" % (n, output[-2000:]))
        states = [sharding_state(cluster, n, part) for n in nodes]
        if all(s == (204, "sharded") for s in states):
            print("sharded in %d sharder pass(es) over the 4 nodes, %.1f s"
                  % (attempt, time.monotonic() - started))
            break
    else:
        check(False, "setup: root replicas not sharded after %d sharder passes: %r (sharder "
              "logs: %s/sharder-*.log)" % (MAX_SHARDER_PASSES, states, cluster.root))
        return None
    ranges = [root_shard_ranges(cluster, n, part) for n in nodes]
    if not check(ranges[0] and all(r == ranges[0] for r in ranges),
                 "setup: every root replica has the same shard ranges: %r" % (ranges,)):
        return None
    return ranges[0]


def sharder_pass(cluster, first, ic_conf, cleave_batch_size=CLEAVE_BATCH_SIZE, nodes=None,
                 partitions=""):
    """Swift's sharder once on every node (or those of `nodes`), node `first` first."""
    nodes = range(len(cluster.ports["container"])) if nodes is None else nodes
    for n in [first] + [n for n in nodes if n != first]:
        status, output = sharder_once(cluster, n, ic_conf, cleave_batch_size, partitions)
        check(status == 0, "setup: Swift's sharder on node %d: %s" % (n, output[-2000:]))


def own_shard_state(db):
    """The state of a shard replica's own shard range, as its database has it (Swift's
    broker, which also commits its pending rows), or None."""
    from swift.container.backend import ContainerBroker
    own = ContainerBroker(db).get_own_shard_range(no_default=True)
    return own.state_text if own else None


def start_sharding_shard(cluster, parent, ic_conf):
    """Sets shard `parent` sharding with Swift's tools, as the probe tests shard a shard, and
    runs one sharder pass over its partition that cleaves one sub-shard per replica. Returns
    (part, nodes, sub-shard ranges as the shard's leader found them) or None when the setup
    failed."""
    account, container = parent["name"].split("/", 1)
    part, nodes = cluster.ring_nodes("container", account, container)
    dbs = {n: db_path(cluster, n, part, account, container) for n in nodes}
    # swift-manage-shard-ranges enables sharding only of a shard that knows itself ACTIVE,
    # which a shard learns from the root by a sharder pass after the root sharded (the probe
    # runs one "to get shards to update state from parent"); a replica that has is the leader.
    for attempt in range(2):
        states = {n: own_shard_state(dbs[n]) if os.path.exists(dbs[n]) else None
                  for n in nodes}
        if "active" in states.values() or attempt:
            break
        sharder_pass(cluster, nodes[0], ic_conf)
    leader = next((n for n in nodes if states[n] == "active"), None)
    if not check(leader is not None, "setup: a replica of shard %s knows itself active: %r"
                 % (parent["name"], states)):
        return None
    rows = len(object_names(cluster, leader, part, account, container) or [])
    # --force-commits: the rows put through the proxy since the shard was made may still be
    # in the replica's .pending file (the probe uses it for that). --force, as for the root.
    status, output = manage_shard_ranges(
        cluster, dbs[leader], "--force-commits", "find_and_replace",
        str(-(-rows // SUB_SHARDS)), "--enable", "--force")
    print("swift-manage-shard-ranges on shard %s (node %d, %d rows): %s"
          % (parent["name"], leader, rows, output.strip().replace("\n", " | ")[-400:]))
    if not check(status == 0, "setup: swift-manage-shard-ranges on the shard failed (%d): %s"
                 % (status, output[-2000:])):
        return None
    from swift.container.backend import ContainerBroker
    subs = [dict(sr) for sr in ContainerBroker(dbs[leader]).get_shard_ranges()]
    status, output, _ = cluster.swift_db_replicate("container", leader)
    check(status == 0, "setup: Swift's container replicator on node %d: %s"
          % (leader, output[-2000:]))
    # One pass over the shard's partition only (the probe's sharders.once(...,
    # '--partitions=<shard part>')), one sub-shard a replica: each replica moves to sharding,
    # creates the sub-shard containers (telling the root of them, as created, which listings
    # skip) and cleaves its rows of the first sub-shard. The sub-shards' own sharder passes,
    # which would report the first one cleaved to the root, have not run yet.
    sharder_pass(cluster, leader, ic_conf, cleave_batch_size=1, nodes=nodes,
                 partitions=str(part))
    return part, nodes, subs


def finish_sharding_shard(cluster, parent, part, nodes, ic_conf):
    """Sharder passes until every replica of `parent` says it is sharded (bounded)."""
    account, container = parent["name"].split("/", 1)
    started = time.monotonic()
    for attempt in range(1, MAX_SHARDER_PASSES + 1):
        sharder_pass(cluster, nodes[0], ic_conf)
        states = [sharding_state(cluster, n, part, account, container) for n in nodes]
        if all(s == (204, "sharded") for s in states):
            print("shard %s sharded in %d more sharder pass(es), %.1f s"
                  % (parent["name"], attempt, time.monotonic() - started))
            return True
    return check(False, "setup: replicas of shard %s not sharded after %d sharder passes: %r "
                 "(sharder logs: %s/sharder-*.log)"
                 % (parent["name"], MAX_SHARDER_PASSES, states, cluster.root))


def shard_replicas_present(cluster, ranges):
    """Whether every shard container has a replica on each of its three primaries."""
    missing = []
    for sr in ranges:
        shard_account, shard_container = sr["name"].split("/", 1)
        part, nodes = cluster.ring_nodes("container", shard_account, shard_container)
        for n in nodes:
            status, _, _ = direct(cluster, n, "HEAD", part, shard_account, shard_container)
            if status != 204:
                missing.append((sr["name"], n, status))
    return missing


def ensure_shard_replicas(cluster, ranges, what):
    """Every shard of `ranges` on its 3 primaries. The sharder needs only a quorum of each
    shard's replicas; the replicator brings the rest, as it would in a real cluster."""
    missing = shard_replicas_present(cluster, ranges)
    if missing:
        print("%s replicas missing after sharding, replicating:" % what, missing)
        for n in range(len(cluster.ports["container"])):
            cluster.swift_db_replicate("container", n)
        missing = shard_replicas_present(cluster, ranges)
    check(not missing, "setup: every %s on its 3 primaries: missing %r" % (what, missing))


def shard_of(ranges, name):
    """The shard range that owns `name`: lower < name <= upper, '' being unbounded."""
    for sr in ranges:
        if sr["lower"] < name and (sr["upper"] == "" or name <= sr["upper"]):
            return sr
    return None


# --- the proxies ----------------------------------------------------------------------------

class Proxies:
    """The Apus proxy and the stock Swift proxy, each with its own tempauth token."""

    def __init__(self, cluster, stock_port):
        self.ports = {"apus": cluster.proxy_port, "swift": stock_port}
        self.urls, self.tokens = {}, {}
        for side, port in self.ports.items():
            self.urls[side], self.tokens[side] = cluster.connect(port)

    def send(self, side, method, query=""):
        path = "/v1/%s/%s" % (ACCOUNT, CONTAINER) + ("?" + query if query else "")
        return procs.request(self.ports[side], method, path,
                             {"X-Auth-Token": self.tokens[side]}, timeout=30)

    def names(self, side):
        status, _, body = self.send(side, "GET", "format=json")
        return [o["name"] for o in json.loads(body)] if status == 200 else None

    def compare(self, method, query):
        """Same status, listing bytes and counts from both."""
        (sa, ha, ba), (ss, hs, bs) = (self.send(side, method, query)
                                      for side in ("apus", "swift"))
        label = "%s ?%s" % (method, query)
        check(sa == ss, "%s: status swift %d, apus %d" % (label, ss, sa))
        for header in ("x-container-object-count", "x-container-bytes-used", "content-type"):
            check(ha.get(header) == hs.get(header), "%s: %s swift %r, apus %r"
                  % (label, header, hs.get(header), ha.get(header)))
        if ba == bs:
            return
        detail = "swift %r, apus %r" % (bs[:300], ba[:300])
        if "format=json" in query:
            # The names say more than the first 300 bytes of two long documents.
            try:
                detail = "names swift %r, apus %r" % (
                    [o.get("name", o.get("subdir")) for o in json.loads(bs)],
                    [o.get("name", o.get("subdir")) for o in json.loads(ba)])
            except (ValueError, AttributeError):
                pass
        check(False, "%s: bodies differ: %s" % (label, detail))


def q(**params):
    """A listing query string, names quoted as a client quotes them."""
    return "&".join("%s=%s" % (k, quote(v, safe="")) for k, v in params.items())


def listing_queries(names, ranges):
    """Every query compared: fixed ones, then ones around each shard boundary of `names`."""
    queries = ["", "format=json", "format=plain", "format=xml", "limit=7",
               "limit=7&format=json", q(prefix="a/"), q(prefix="a/", format="json"),
               q(prefix="b"), q(delimiter="/"), q(delimiter="/", format="json"),
               q(delimiter="/", format="xml"), q(prefix="b/", delimiter="/"),
               q(prefix="b/x/", delimiter="/", format="json"),
               q(prefix="caf\u00e9", delimiter="/", format="json"),
               q(prefix="\u00e9t\u00e9/", format="json"), q(prefix="zzz"), "reverse=on",
               "reverse=on&format=json", "reverse=on&limit=5", q(reverse="on", delimiter="/"),
               q(reverse="on", prefix="a/", format="json"),
               q(reverse="on", delimiter="/", prefix="b/"),
               q(marker="b", end_marker="m", format="json"),
               q(marker="caf\u00e9", format="json"), q(end_marker="\u65e5\u672c"),
               q(marker="a/", end_marker="c", delimiter="/"),
               q(reverse="on", marker="m", end_marker="b", format="json"),
               q(reverse="on", marker="\u65e5\u672c", limit="3", format="json"),
               q(marker="a/05", limit="12", delimiter="/", format="json")]
    for sr in ranges[:-1]:
        upper = sr["upper"]  # the last name of this shard: the next one is in the next shard
        i = names.index(upper) if upper in names else None
        before = names[i - 1] if i else upper[:-1]
        after = names[i + 1] if i is not None and i + 1 < len(names) else upper + "\x01"
        queries += [q(marker=upper, format="json"),
                    q(marker=before, limit="1", format="json"),
                    q(marker=upper, limit="1", format="json"),
                    q(marker=before, limit="2", format="json"),
                    q(end_marker=upper, format="json"), q(end_marker=after),
                    q(marker=before, end_marker=after, format="json"),
                    q(marker=upper, end_marker=after, format="json"),
                    q(marker=upper + "\x01", limit="1"),
                    q(reverse="on", marker=after, format="json"),
                    q(reverse="on", marker=after, limit="1", format="json"),
                    q(reverse="on", marker=upper, limit="1", format="json"),
                    q(reverse="on", end_marker=upper, format="json"),
                    q(reverse="on", marker=after, end_marker=before, format="json")]
    return queries


def compare_listings(proxies, names, ranges, when, cold=None):
    """Every query through both proxies; with `cold` (the cluster), each with nothing cached."""
    queries = listing_queries(names, ranges)
    before = len(failures)
    for method, query in [("GET", query) for query in queries] + [("HEAD", "")]:
        if cold:
            forget_container_info(cold)
            forget_shard_ranges(cold)
        proxies.compare(method, query)
    print("%s: %d listing queries and a HEAD compared, %d differences"
          % (when, len(queries), len(failures) - before))


def state_text(sr):
    from swift.common.utils import ShardRange
    return ShardRange.STATES.get(sr["state"], sr["state"])


def root_listing_view(cluster, part, nodes):
    """The shard ranges every root replica answers a listing with (the same from each, else a
    setup failure: the proxies pick a replica at random), or None."""
    views = [listing_ranges(cluster, n, part) for n in nodes]
    if not check(all(v[0] == "shard" and v[1] and range_view(v[1]) == range_view(views[0][1])
                     for v in views),
                 "setup: every root replica lists the same shard ranges: %r"
                 % ([(v[0], range_view(v[1])) for v in views],)):
        return None
    return views[0][1]


def second_level(cluster, proxies, part, nodes, names, ranges):
    """A shard shards again (see the module's docstring). Returns the time it took, or None
    when the setup failed."""
    started = time.monotonic()
    ic_conf = cluster.internal_client_conf()
    # The fullest shard, for the most rows to split.
    parent = max(ranges, key=lambda sr: sum(1 for name in names if shard_of([sr], name)))
    account, container = parent["name"].split("/", 1)
    begun = start_sharding_shard(cluster, parent, ic_conf)
    if begun is None:
        return None
    spart, snodes, subs = begun
    print("sub-shard ranges of %s (lower, upper, objects):" % parent["name"],
          [(sr["lower"], sr["upper"], sr["object_count"]) for sr in subs])
    if not check(2 <= len(subs) <= SUB_SHARDS, "setup: the shard split in 2 to %d sub-shards: "
                 "%r" % (SUB_SHARDS, range_view(subs))):
        return None

    # (a) Half-way: every replica of the shard is sharding, the root lists the shard (still
    # active, see the module's docstring), and the shard answers a listing with its own shard
    # ranges: a proxy must follow them.
    states = [sharding_state(cluster, n, spart, account, container) for n in snodes]
    check(all(s == (204, "sharding") for s in states),
          "setup: every replica of the shard is sharding after one pass: %r" % (states,))
    half = root_listing_view(cluster, part, nodes)
    if half is None:
        return None
    print("half-way, the root lists (name, lower, upper, state):",
          [(sr["name"][-12:], sr["lower"], sr["upper"], state_text(sr)) for sr in half])
    listed = {sr["name"]: sr for sr in half}
    parent_answers = [listing_ranges(cluster, n, spart, account, container) for n in snodes]
    print("half-way, the shard answers a listing with:",
          [(t, [(sr["name"][-12:], sr["lower"], sr["upper"], state_text(sr)) for sr in r or []])
           for t, r in parent_answers])
    if not check(parent["name"] in listed and all(t == "shard" and r for t, r in parent_answers),
                 "setup: half-way the root lists the sharding shard and the shard answers a "
                 "listing with shard ranges (else no listing follows a shard's shard ranges)"):
        return None
    if subs[0]["name"] in listed:
        # Its sharder pass ran with the shard's (same partition) and reported it cleaved:
        # listings may then reach its rows from the root as well as through the shard.
        print("note: the root lists the cleaved sub-shard too")
    # A name put now inside the cleaved sub-shard goes there (the root's updating shard ranges
    # have the sub-shards, as created, before the shard), not to the shard: the shard's own
    # rows, all a proxy that did not follow its shard ranges would list, lack it, so the
    # listings below have it only if the proxies go root -> shard -> sub-shard.
    names = put_into_sub_shard(cluster, proxies, names, subs[0], "-half", [
        ("root", part, nodes, ACCOUNT, CONTAINER),
        ("sharding shard", spart, snodes, account, container)])
    forget_container_info(cluster)
    forget_shard_ranges(cluster)
    check(proxies.names("swift") == names,
          "setup: half-way the stock proxy lists every object: %r" % (proxies.names("swift"),))
    # Nothing cached for any query. The root's counts are stale here: the shard last reported
    # its stats before the stock proxy's PUT into it, does not report while sharding (the
    # latch of the module docstring), and the root does not count the created sub-shard's
    # row. Swift's proxy, answering a listing from the shard ranges it cached, takes the
    # counts from the container info it cached, which an earlier listing of every object set
    # to that listing's count; Apus, which caches no listing shard ranges, gives the root's,
    # as Swift's proxy does when it reads the root. With caches kept, the two differ in
    # X-Container-Object-Count and X-Container-Bytes-Used on every listing but the
    # unconstrained ones.
    # The boundaries checked are those a listing walks: the root's shards but the sharding
    # one, then what that one lists (its cleaved sub-shard, then itself).
    walked = sorted([sr for sr in half if sr["name"] != parent["name"]] + parent_answers[0][1],
                    key=lambda sr: (sr["upper"] == "", sr["upper"]))
    compare_listings(proxies, names, walked, "a shard sharding (the root lists it, it lists its "
                     "shard ranges)", cold=cluster)

    # (b) Sharded: the shard's replicas all say so, the sub-shards have their replicas, the
    # shard and the root keep no object rows of their own.
    if not finish_sharding_shard(cluster, parent, spart, snodes, ic_conf):
        return None
    ensure_shard_replicas(cluster, subs, "sub-shard")
    for n in snodes:
        got = object_names(cluster, n, spart, account, container)
        check(got == [], "setup: the sharded shard on node %d keeps no object rows of its own: "
              "%r" % (n, got))
    after = root_listing_view(cluster, part, nodes)
    if after is None:
        return None
    print("sharded, the root lists (name, lower, upper, state):",
          [(sr["name"][-12:], sr["lower"], sr["upper"], state_text(sr)) for sr in after])
    if parent["name"] in [sr["name"] for sr in after]:
        print("the root still lists the sharded shard: listings below go through it")
    else:
        # What Swift 2.30.1 does: the shard's last report deletes its range in the root and
        # makes the sub-shards active there. Listings read afresh from the root no longer
        # meet the shard; (a) is where a shard's shard ranges were followed.
        print("the root lists the sub-shards in the shard's place: listings below do not go "
              "through the sharded shard")
    forget_container_info(cluster)
    forget_shard_ranges(cluster)
    check(proxies.names("swift") == names,
          "setup: the stock proxy lists every object once the shard sharded: %r"
          % (proxies.names("swift"),))
    compare_listings(proxies, names, after, "a shard sharded")

    # (c) A PUT through Apus of a name inside a middle sub-shard goes to that sub-shard's
    # replicas, not to the sharded shard's own rows nor the root's.
    sub = next(sr for sr in after if sr["name"] == subs[len(subs) // 2]["name"])
    names = put_into_sub_shard(cluster, proxies, names, sub, "-sub\u00e9", [
        ("root", part, nodes, ACCOUNT, CONTAINER),
        ("sharded shard", spart, snodes, account, container)])
    for side in ("swift", "apus"):
        got = proxies.names(side)
        check(got == names, "after the PUT into a sub-shard: the %s proxy lists %r (want %r)"
              % (side, got, names))
    return time.monotonic() - started


def put_into_sub_shard(cluster, proxies, names, sub, suffix, elsewhere):
    """PUTs through Apus a name inside sub-shard `sub` (a name of it plus `suffix`) and checks
    that a majority of the sub-shard's replicas list it and that none of the containers of
    `elsewhere` ((label, part, nodes, account, container)...) got its row. Returns `names`
    with it."""
    # The updating shard ranges cached since the last PUT name the shard, not its sub-shards
    # (which would then redirect the update): dropped, as Swift's probe test does before its
    # PUT into a sub-shard, so that Apus reads them from the root.
    forget_shard_ranges(cluster)
    inside = [n for n in names if shard_of([sub], n)]
    new_name = (inside[len(inside) // 2] if inside else sub["lower"]) + suffix
    check(shard_of([sub], new_name) is sub and new_name not in names,
          "test: %r falls inside the sub-shard %r" % (new_name, sub))
    swift.put_object(proxies.urls["apus"], proxies.tokens["apus"], CONTAINER, new_name,
                     b"sub-shard object")
    for where, wpart, wnodes, waccount, wcontainer in elsewhere:
        for n in wnodes:
            got = object_names(cluster, n, wpart, waccount, wcontainer)
            check(got is not None and new_name not in got,
                  "the %s replica on node %d got the row of %r itself (it belongs in "
                  "sub-shard %s): %r" % (where, n, new_name, sub["name"], got))
    sub_account, sub_container = sub["name"].split("/", 1)
    subpart, subnodes = cluster.ring_nodes("container", sub_account, sub_container)
    views = [object_names(cluster, n, subpart, sub_account, sub_container) for n in subnodes]
    check(sum(1 for v in views if v and new_name in v) * 2 > len(subnodes),
          "the PUT of %r reached only a minority of sub-shard %s's replicas: %r"
          % (new_name, sub["name"], views))
    return sorted(names + [new_name])


def main():
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        # Step 1: Swift's container servers everywhere (sharding is theirs), Apus's account
        # and object servers, the Apus proxy (made by Cluster) and the stock one.
        cluster = Cluster(BIN, root, ps)
        for n in range(len(cluster.ports["container"])):
            cluster.start_swift("container", n)
        cluster.start_rsyncd()
        stock_port = cluster.start_stock_proxy("proxy-server")
        proxies = Proxies(cluster, stock_port)
        part, nodes = cluster.ring_nodes("container", ACCOUNT, CONTAINER)

        # Step 2: the objects, through the Apus proxy (its object servers update the root).
        url, token = proxies.urls["apus"], proxies.tokens["apus"]
        swift.put_container(url, token, CONTAINER)
        for name in NAMES:
            swift.put_object(url, token, CONTAINER, name, body_of(name))
        names = sorted(NAMES)
        for n in nodes:
            # Every replica whole before one is sharded: the test is about reading shards,
            # not about rows the sharder may or may not carry over.
            got = object_names(cluster, n, part, ACCOUNT, CONTAINER)
            check(got == names, "setup: root replica on node %d lists %r" % (n, got))
        setup_done = time.monotonic()

        # Step 3: shard with Swift's tools.
        ranges = shard(cluster, part, nodes)
        if ranges is None:
            print("FAIL: the setup failed (%d checks); Apus's proxy was not tested"
                  % len(failures))
            return 1
        print("shard ranges (lower, upper, objects):",
              [(sr["lower"], sr["upper"], sr["object_count"]) for sr in ranges])
        check(len(ranges) >= 3, "setup: at least 3 shards for %d objects: %d"
              % (len(names), len(ranges)))
        ensure_shard_replicas(cluster, ranges, "shard container")
        for n in nodes:
            got = object_names(cluster, n, part, ACCOUNT, CONTAINER)
            check(got == [], "setup: the sharded root on node %d keeps no object rows of its "
                  "own (listings must come from the shards): %r" % (n, got))
        forget_container_info(cluster)

        # The stock proxy reads the sharded container whole: the setup is sound.
        check(proxies.names("swift") == names,
              "setup: the stock proxy lists every object: %r" % (proxies.names("swift"),))
        status, headers, _ = proxies.send("swift", "HEAD")
        check(status == 204 and headers.get("x-container-object-count") == str(len(names)),
              "setup: the stock proxy counts %d objects: %d %r"
              % (len(names), status, headers.get("x-container-object-count")))
        setup_failures = len(failures)
        sharded = time.monotonic()
        print("setup: %.1f s (cluster and objects %.1f s, sharding %.1f s), %s"
              % (sharded - started, setup_done - started, sharded - setup_done,
                 "sound" if not setup_failures else "%d failures" % setup_failures))

        # Step 4: the Apus proxy reads what the stock one reads.
        compare_listings(proxies, names, ranges, "sharded container")

        # Writes through the Apus proxy: a new name inside a middle shard, and a delete in
        # another shard.
        middle = ranges[len(ranges) // 2]
        inside = [n for n in names if shard_of([middle], n)]
        new_name = inside[len(inside) // 2] + "-new\u00e9"
        check(shard_of([middle], new_name) is middle and new_name not in names,
              "test: %r falls inside the middle shard %r" % (new_name, middle))
        gone = next(n for n in names if shard_of(ranges, n) is not middle)
        gone_shard = shard_of(ranges, gone)
        swift.put_object(url, token, CONTAINER, new_name, b"new object")
        swift.delete_object(url, token, CONTAINER, gone)
        names = sorted(set(names) - {gone} | {new_name})

        # (a) both proxies list the change.
        for side in ("swift", "apus"):
            got = proxies.names(side)
            check(got == names, "after the writes: the %s proxy lists %r (want %r with %r "
                  "and without %r)" % (side, got, names, new_name, gone))
        # (b) the rows went to the shards: the root replicas' own rows stay empty, the
        # owning shards' replicas (a majority of them) show the put and the delete.
        for n in nodes:
            got = object_names(cluster, n, part, ACCOUNT, CONTAINER)
            check(got is not None and new_name not in got,
                  "the root replica on node %d got the new object's row itself (it belongs in "
                  "shard %s): %r" % (n, middle["name"], got))
        for sr, name, present in ((middle, new_name, True), (gone_shard, gone, False)):
            shard_account, shard_container = sr["name"].split("/", 1)
            spart, snodes = cluster.ring_nodes("container", shard_account, shard_container)
            views = [object_names(cluster, n, spart, shard_account, shard_container)
                     for n in snodes]
            right = sum(1 for v in views if v is not None and (name in v) == present)
            check(right * 2 > len(snodes),
                  "%s of %r reached only %d of shard %s's %d replicas: %r"
                  % ("the PUT" if present else "the DELETE", name, right, sr["name"],
                     len(snodes), views))
        # (c) the shard ranges Apus cached for updates are Swift's entry: Swift's memcache
        # client reads them under Swift's key, and the stock proxy's next write, which takes
        # them from there, lands in the right shard too.
        from swift.common.memcached import MemcacheRing
        from swift.proxy.controllers.base import get_cache_key
        cached = MemcacheRing(["127.0.0.1:%d" % cluster.memcached_port]).get(
            get_cache_key(ACCOUNT, CONTAINER, shard="updating"))
        check(isinstance(cached, list) and [sr.get("name") for sr in cached] ==
              [sr["name"] for sr in ranges],
              "the updating shard ranges Apus cached, as Swift reads them: %r" % (cached,))
        last = ranges[-1]
        by_stock = "zz-by-stock-proxy"
        check(shard_of([last], by_stock) is last, "test: %r falls in the last shard" % by_stock)
        swift.put_object(proxies.urls["swift"], proxies.tokens["swift"], CONTAINER, by_stock,
                         b"stock")
        names = sorted(names + [by_stock])
        last_account, last_container = last["name"].split("/", 1)
        lpart, lnodes = cluster.ring_nodes("container", last_account, last_container)
        views = [object_names(cluster, n, lpart, last_account, last_container) for n in lnodes]
        check(sum(1 for v in views if v and by_stock in v) * 2 > len(lnodes),
              "the stock proxy's PUT, routed by Apus's cache entry, reached shard %s: %r"
              % (last["name"], views))
        compare_listings(proxies, names, ranges, "after the writes")

        # Step 5: a shard shards again; the Apus proxy reads and writes through it.
        second = second_level(cluster, proxies, part, nodes, names, ranges)
        if second is None:
            print("FAIL: the setup of the second level failed (%d checks, %d in setups); the "
                  "Apus proxy was not tested on shards of shards"
                  % (len(failures), sum(1 for f in failures if f.startswith("setup:"))))
            return 1
        print("second level: %.1f s" % second)

    print("run time %.1f s" % (time.monotonic() - started))
    if failures:
        # Both levels' setup checks say "setup:".
        setup_failures = sum(1 for f in failures if f.startswith("setup:"))
        print("FAIL: %d checks failed, %s" % (
            len(failures), "%d of them in the setup" % setup_failures if setup_failures
            else "none in the setup (sharding and the stock proxy's reads were sound)"))
        return 1
    print("sharded container interop: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
