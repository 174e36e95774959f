#!/usr/bin/env python3
"""Fault campaigns (issue 16): a 4-node Apus cluster on loopback (tests/support/cluster.py:
each node its own object, container and account servers on their own ports and device
directory; 3 replicas), hit by one fault per scenario while clients write, then repaired by
apus-object-auditor and apus-object-replicator passes. After the repair every acknowledged
write must read back with its content through the proxy and be on all three primaries (and on
no handoff), and every acknowledged delete must stay deleted.

Scenarios:
  primary-down   an object server stopped during a PUT storm, then back (handoffs revert)
  disk-replaced  a node's object disk emptied (refilled from the other replicas)
  bit-rot        bytes flipped in several replicas on several nodes (auditor quarantines,
                 replicator repairs; the proxy never serves the bad bytes after the audit)
  kill-9         object, container and account servers of every node and one of the two
                 proxies killed with SIGKILL at random moments under mixed PUT/DELETE load, and
                 restarted
  paused         one node's object server and another's container server stopped with SIGSTOP
                 during a PUT storm (connections accepted, never answered), then SIGCONT
  full-disk      one node's device on a 64 MiB tmpfs, filled during a PUT storm (its servers
                 answer 507 and must stay up), then freed
  partition      each node in a network namespace of its own (tests/support/netns.py); one
                 node's link cut while clients overwrite and delete what it holds, then back

For each: acknowledged operations, lost ones (must be 0), and the time from the end of the
fault to full repair (replication passes until every replica is in place). Prints a table and
writes faults.json to --out. full-disk and partition need root (mount, ip netns) and are
reported as skipped without it.

usage: campaign.py <build-dir> [--short] [--out DIR] [--seed N]
"""
import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import netns  # noqa: E402
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402


class Ledger:
    """What clients were told, per object name: the acknowledged state, and the operations
    tried after it whose outcome is unknown (a failed PUT may still have landed somewhere)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state = {}      # name -> ("put", md5) or ("delete", None), last acknowledged
        self.maybe = {}      # name -> set of states tried after it without an answer
        self.acked = 0
        self.tries = 0
        self.errors = []     # the first few client errors, for the report

    def tried(self, name, state, ok, error=None):
        with self.lock:
            self.tries += 1
            if error is not None and len(self.errors) < 5:
                self.errors.append(error)
            if ok:
                self.state[name] = state
                self.maybe[name] = set()
                self.acked += 1
            else:
                self.maybe.setdefault(name, set()).add(state)


def put(conn, name, ledger, size):
    url, token = conn
    body = os.urandom(size)
    state = ("put", hashlib.md5(body).hexdigest())
    try:
        swift.put_object(url, token, "c", name, body)
        ledger.tried(name, state, True)
    except Exception as e:
        ledger.tried(name, state, False, "PUT %s: %s" % (name, str(e)[:200]))


def delete(conn, name, ledger):
    url, token = conn
    try:
        swift.delete_object(url, token, "c", name)
        ledger.tried(name, ("delete", None), True)
    except Exception as e:
        ledger.tried(name, ("delete", None), False, "DELETE %s: %s" % (name, str(e)[:200]))


def storm(conn, ledger, names, threads=8, size=(1, 65536), deletes=0.0, stop=None, rng=None):
    """Each thread owns a slice of `names` (so one name's operations are ordered). `conn` is
    one (url, token) or a list of them, shared out among the threads (one proxy each)."""
    rng = rng or random.Random(1)
    seeds = [rng.random() for _ in range(threads)]
    conns = conn if isinstance(conn, list) else [conn]

    def work(i):
        r = random.Random(seeds[i])
        conn = conns[i % len(conns)]
        mine = names[i::threads]
        while True:
            for name in mine:
                if stop is not None and stop.is_set():
                    return
                if deletes and name in ledger.state and r.random() < deletes:
                    delete(conn, name, ledger)
                else:
                    put(conn, name, ledger, r.randint(*size))
            if stop is None:
                return
    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def replica_states(cluster, name):
    """(state per primary node, nodes that are not primaries but hold it)."""
    part, prim = cluster.placement("c", name)
    states, stray = {}, []
    for n in range(len(cluster.ports["object"])):
        if ("object", n) not in cluster.procs:
            continue
        status, headers, _ = procs.request(cluster.ports["object"][n], "HEAD",
                                           "/sd%d/%d/AUTH_test/c/%s" % (n, part, name),
                                           host=cluster.hosts[n])
        if n in prim:
            states[n] = ("put", headers.get("etag", "").strip('"')) if status == 200 else (
                ("delete", None) if status == 404 else ("error", status))
        elif status == 200:
            stray.append(n)
    return states, stray


def repaired(cluster, ledger):
    """Whether every acknowledged object is in its state on every primary, and nowhere else."""
    for name, state in ledger.state.items():
        allowed = {state} | ledger.maybe.get(name, set())
        states, stray = replica_states(cluster, name)
        if stray or any(s not in allowed for s in states.values()) or len(set(states.values())) > 1:
            return False
    return True


def repair(cluster, ledger, max_passes=4):
    """Replication passes on every node until repaired: (seconds, passes)."""
    began = time.time()
    for p in range(1, max_passes + 1):
        for n in range(len(cluster.ports["object"])):
            cluster.replicate(n)
        if repaired(cluster, ledger):
            return time.time() - began, p
    return time.time() - began, None


def lost(cluster, ledger, conn):
    """Acknowledged writes not read back (wrong content, missing) and deletes undone."""
    url, token = conn
    bad = []
    for name, state in ledger.state.items():
        allowed = {state} | ledger.maybe.get(name, set())
        try:
            _, body = swift.get_object(url, token, "c", name)
            got = ("put", hashlib.md5(body).hexdigest())
        except swift.ClientException as e:
            got = ("delete", None) if e.http_status == 404 else ("error", e.http_status)
        if got not in allowed:
            bad.append((name, state, got))
    return bad


def scenario_primary_down(cluster, conn, args, rng):
    ledger = Ledger()
    victim = rng.randrange(4)
    cluster.stop("object", victim)
    storm(conn, ledger, ["down-%d" % i for i in range(args.objects)], rng=rng)
    cluster.start("object", victim)
    return ledger


def scenario_disk_replaced(cluster, conn, args, rng):
    ledger = Ledger()
    storm(conn, ledger, ["disk-%d" % i for i in range(args.objects)], rng=rng)
    victim = rng.randrange(4)
    cluster.stop("object", victim)
    shutil.rmtree(os.path.join(cluster.root, "node%d" % victim, "sd%d" % victim, "objects"))
    cluster.start("object", victim)
    return ledger


def scenario_bit_rot(cluster, conn, args, rng):
    ledger = Ledger()
    names = ["rot-%d" % i for i in range(args.objects)]
    storm(conn, ledger, names, size=(100, 65536), rng=rng)
    rotten = 0
    # At most two of an object's three replicas rot: with all three gone bad there is nothing
    # left to repair from, which no storage system survives (a run once picked all three).
    rotted_replicas = collections.Counter()  # by hash directory (the same on every node)
    for n in range(4):
        objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects")
        datas = sorted(os.path.join(d, f) for d, _, fs in os.walk(objects) for f in fs
                       if f.endswith(".data"))
        for path in rng.sample(datas, min(len(datas), max(1, args.objects // 20))):
            size = os.path.getsize(path)
            object_hash = os.path.basename(os.path.dirname(path))
            if size == 0 or rotted_replicas[object_hash] >= 2:
                continue
            rotted_replicas[object_hash] += 1
            with open(path, "r+b") as f:
                f.seek(rng.randrange(size))
                b = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([b[0] ^ 0xff]))
            rotten += 1
    for n in range(4):
        cluster.audit(n)
    ledger.note = "%d replicas rotted" % rotten
    return ledger


def scenario_kill9(cluster, conn, args, rng):
    """SIGKILL at random moments under mixed load, each server restarted a moment later: object,
    container and account servers of every node, and one of the two proxies the clients use
    (its clients' requests in flight fail, so their outcome is unknown)."""
    ledger = Ledger()
    stop = threading.Event()
    names = ["kill-%d" % i for i in range(args.objects // 2)]
    kills = {}
    second = cluster.connect(cluster.second_proxy_port)
    victims = [(kind, n) for kind in ("object", "container", "account") for n in range(4)]
    victims.append(("proxy", "proxy-server-2"))

    def killer():
        r = random.Random(rng.random())
        while not stop.is_set():
            time.sleep(r.uniform(0.2, 0.8))
            key = r.choice(victims)
            if key in cluster.procs:
                cluster.ps.stop(cluster.procs.pop(key), sig=signal.SIGKILL)
                kills[key[0]] = kills.get(key[0], 0) + 1
                time.sleep(r.uniform(0.1, 0.5))
                restart(cluster, key)
    k = threading.Thread(target=killer)
    k.start()
    timer = threading.Timer(args.kill_seconds, stop.set)
    timer.start()
    storm([conn, second], ledger, names, deletes=0.3, stop=stop, rng=rng)
    k.join()
    for key in victims:
        if key not in cluster.procs:
            restart(cluster, key)
    ledger.note = "kills: " + ", ".join("%d %s" % (v, k) for k, v in sorted(kills.items()))
    return ledger


def restart(cluster, key):
    if key[0] == "proxy":
        cluster.restart_proxy(key[1])
    else:
        cluster.start(*key)


def scenario_paused(cluster, conn, args, rng):
    """SIGSTOP (a hung process: the kernel still accepts its connections, nothing answers) of
    one node's object server and another node's container server during a PUT storm, then
    SIGCONT: what the paused servers had queued lands late, with its original timestamps."""
    ledger = Ledger()
    obj_victim = rng.randrange(4)
    cont_victim = (obj_victim + 1 + rng.randrange(3)) % 4
    paused = [cluster.procs[("object", obj_victim)], cluster.procs[("container", cont_victim)]]
    for p in paused:
        os.kill(p.pid, signal.SIGSTOP)
    try:
        storm(conn, ledger, ["pause-%d" % i for i in range(args.objects)], rng=rng)
    finally:
        for p in paused:
            os.kill(p.pid, signal.SIGCONT)
    ledger.note = "object server %d and container server %d paused" % (obj_victim, cont_victim)
    return ledger


def scenario_full_disk(cluster, conn, args, rng):
    """One node's device (its object, container and account data) on a small tmpfs filled up
    during a PUT storm: its servers answer 507 and stay up, the proxy writes to handoffs; then
    space comes back and the replicators send the objects home."""
    ledger = Ledger()
    victim = rng.randrange(4)
    device = os.path.join(cluster.root, "node%d" % victim, "sd%d" % victim)
    for kind in ("object", "container", "account"):
        cluster.stop(kind, victim)
    aside = device + ".before"
    os.rename(device, aside)
    os.makedirs(device)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", device],
                      stderr=subprocess.PIPE).returncode != 0:
        raise Skip("cannot mount a tmpfs (needs root)")
    cluster.mounts.append(device)
    subprocess.run(["cp", "-a", aside + "/.", device], check=True)
    for kind in ("object", "container", "account"):
        cluster.start(kind, victim)
    filler = os.path.join(device, "filler")
    with open(filler, "wb") as f:
        free = os.statvfs(device).f_bavail * os.statvfs(device).f_frsize
        f.write(b"\0" * max(0, free - (64 << 10)))  # 64 KiB left: a few small objects fit
    storm(conn, ledger, ["full-%d" % i for i in range(args.objects)], rng=rng)
    alive = [k for k in ("object", "container", "account")
             if cluster.procs[(k, victim)].poll() is None]
    os.unlink(filler)
    ledger.note = "node %d full; servers up after: %s" % (victim, ",".join(alive))
    ledger.crashed = len(alive) != 3
    return ledger


def scenario_partition(cluster, conn, args, rng):
    """One node cut off the network (its namespace's link down: packets dropped, connections
    time out) while clients overwrite and delete objects it holds; then the link comes back.
    Its stale copies must lose to the newer writes and tombstones."""
    ledger = Ledger()
    names = ["part-%d" % i for i in range(args.objects)]
    storm(conn, ledger, names, rng=rng)
    victim = rng.randrange(4)
    netns.partition(victim)
    try:
        storm(conn, ledger, names, deletes=0.3, rng=rng)
    finally:
        netns.heal(victim)
    ledger.note = "node %d partitioned" % victim
    return ledger


class Skip(Exception):
    """A scenario this machine cannot run (said in the table)."""


# (name, scenario, whether every write must succeed: one node's fault leaves two replicas and
# handoffs, so a client sees no error; kill-9 also kills a proxy under its clients).
SCENARIOS = [("primary-down", scenario_primary_down, True),
             ("disk-replaced", scenario_disk_replaced, True),
             ("bit-rot", scenario_bit_rot, True),
             ("kill-9", scenario_kill9, False),
             ("paused", scenario_paused, True),
             ("full-disk", scenario_full_disk, True),
             ("partition", scenario_partition, True)]
IN_NETNS = {"partition"}  # scenarios whose nodes are network namespaces (tests/support/netns.py)


def run_scenario(name, run, cluster, args, rng):
    conn = cluster.connect()
    swift.put_container(conn[0], conn[1], "c")
    began = time.time()
    try:
        ledger = run(cluster, conn, args, rng)
    except Skip as e:
        return skipped(name, str(e))
    load = time.time() - began
    damaged = not repaired(cluster, ledger)
    seconds, passes = repair(cluster, ledger)
    # Read back through a proxy of its own: the loaded ones error-limited the nodes that were
    # down (for error_suppression_interval), which says nothing of the data.
    port = cluster.start_proxy("proxy-verify")
    verify = cluster.connect(port)
    bad = lost(cluster, ledger, verify)
    note = getattr(ledger, "note", "")
    return {"scenario": name, "acknowledged": ledger.acked, "tried": ledger.tries,
            "lost": len(bad),
            "repair_s": round(seconds, 2), "passes": passes, "fault_and_load_s": round(load, 1),
            "replicas_off_before": damaged, "note": note,
            "crashed": getattr(ledger, "crashed", False), "lost_examples": bad[:5],
            "client_errors": ledger.errors}


class FaultCluster(Cluster):
    # The proxies here wait node_timeout = 1 s for a storage server; an object server waits at
    # most container_update_timeout for its container update before it answers (then the
    # update goes on, or becomes an async pending). Swift's defaults keep the second well
    # below the first (1 s and 10 s): so does this cluster, or a paused container server
    # would make every object server it updates look dead to the proxies (error-limited).
    app_options = {"object": "container_update_timeout = 0.25\n"}


def run_on_cluster(name, run, bin_dir, args, rng):
    with procs.TempDir("apus-faults-") as root:
        mounts = []
        try:
            with procs.Processes() as ps:
                if args.in_netns:
                    cluster = FaultCluster(bin_dir, root, ps,
                                           hosts=[netns.host(n) for n in range(4)],
                                           prefixes=[netns.node_prefix(args.in_netns, n)
                                                     for n in range(4)])
                else:
                    cluster = FaultCluster(bin_dir, root, ps)
                cluster.mounts = mounts
                return run_scenario(name, run, cluster, args, rng)
        finally:
            for m in mounts:
                subprocess.run(["umount", "-l", m])


def run_in_netns(name, args):
    """Runs scenario `name` in a child process inside the hub of a fresh namespace topology
    (the cluster's nodes in namespaces of their own), and returns its result."""
    if not netns.available():
        return skipped(name, "no network namespaces here (needs root and iproute2)")
    with procs.TempDir("apus-faults-netns-") as tmp, netns.Topology(4) as topo:
        result_file = os.path.join(tmp, "result.json")
        argv = ["/usr/bin/python3", os.path.abspath(__file__), args.build, "--only", name,
                "--in-netns", topo.tag, "--result-file", result_file, "--seed", str(args.seed)]
        topo.run_in_hub(argv + (["--short"] if args.short else []), timeout=1800)
        if not os.path.exists(result_file):
            return skipped(name, "its run in the namespaces ended without a result")
        with open(result_file) as f:
            return json.load(f)


def skipped(name, why):
    return {"scenario": name, "skipped": why, "acknowledged": 0, "lost": 0, "repair_s": 0,
            "passes": None, "note": "skipped: %s" % why, "lost_examples": []}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--short", action="store_true", help="CI size: fewer objects, shorter load")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("APUS_FAULTS_SEED", "1")))
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--in-netns", default="", help=argparse.SUPPRESS)  # the topology's tag
    ap.add_argument("--result-file", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.objects = 40 if args.short else 400
    args.kill_seconds = 5 if args.short else 40
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    rng = random.Random(args.seed)
    results = []
    for name, run, available in SCENARIOS:
        if args.only and name not in args.only.split(","):
            continue
        if name in IN_NETNS and not args.in_netns:
            result = run_in_netns(name, args)
        else:
            result = run_on_cluster(name, run, bin_dir, args, rng)
        if args.result_file:  # a scenario run inside a hub namespace for its parent
            with open(args.result_file, "w") as f:
                json.dump(result, f)
            return 0
        result["must_be_available"] = available
        results.append(result)
        print("%s: %d acknowledged, %d lost, repaired in %.1f s (%s passes) %s"
              % (name, result["acknowledged"], result["lost"], result["repair_s"],
                 result["passes"], result["note"]), flush=True)
    for r in results:
        for example in r["lost_examples"]:
            print("lost in %s: %r" % (r["scenario"], example))
    print("\n| scenario | acknowledged / tried | lost | replicas off after the fault |"
          " repair time | replication passes |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if "skipped" in r:
            print("| %s | skipped: %s | | | | |" % (r["scenario"], r["skipped"]))
            continue
        print("| %s | %d / %d | %d | %s | %.1f s | %s |"
              % (r["scenario"], r["acknowledged"], r["tried"], r["lost"],
                 "yes" if r["replicas_off_before"] else "no", r["repair_s"],
                 r["passes"] or "not repaired"))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "faults.json"), "w") as f:
            json.dump({"seed": args.seed, "short": args.short, "results": results}, f, indent=1)
    failed = [r for r in results
              if "skipped" not in r and (r["lost"] or not r["passes"] or r["crashed"] or
                                         (r["must_be_available"] and r["acknowledged"] < r["tried"]))]
    for r in failed:
        if r["must_be_available"] and r["acknowledged"] < r["tried"]:
            print("%s: %d writes refused, e.g. %r" % (r["scenario"], r["tried"] - r["acknowledged"],
                                                      r.get("client_errors", [])))
    print("fault campaign:", "%d scenarios failed" % len(failed) if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
