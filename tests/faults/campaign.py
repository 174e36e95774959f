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
  kill-9         object servers killed with SIGKILL at random moments under mixed PUT/DELETE
                 load, and restarted

For each: acknowledged operations, lost ones (must be 0), and the time from the end of the
fault to full repair (replication passes until every replica is in place). Prints a table and
writes faults.json to --out.

Not yet: network partitions (network namespaces), a full disk (a size-limited tmpfs), paused
processes (SIGSTOP).

usage: campaign.py <build-dir> [--short] [--out DIR] [--seed N]
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import threading
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
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

    def tried(self, name, state, ok):
        with self.lock:
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
    except Exception:
        ledger.tried(name, state, False)


def delete(conn, name, ledger):
    url, token = conn
    try:
        swift.delete_object(url, token, "c", name)
        ledger.tried(name, ("delete", None), True)
    except Exception:
        ledger.tried(name, ("delete", None), False)


def storm(conn, ledger, names, threads=8, size=(1, 65536), deletes=0.0, stop=None, rng=None):
    """Each thread owns a slice of `names` (so one name's operations are ordered)."""
    rng = rng or random.Random(1)
    seeds = [rng.random() for _ in range(threads)]

    def work(i):
        r = random.Random(seeds[i])
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
                                           "/sd%d/%d/AUTH_test/c/%s" % (n, part, name))
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
    for n in range(4):
        objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects")
        datas = sorted(os.path.join(d, f) for d, _, fs in os.walk(objects) for f in fs
                       if f.endswith(".data"))
        for path in rng.sample(datas, min(len(datas), max(1, args.objects // 20))):
            size = os.path.getsize(path)
            if size == 0:
                continue
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
    ledger = Ledger()
    stop = threading.Event()
    names = ["kill-%d" % i for i in range(args.objects // 2)]
    kills = [0]

    def killer():
        r = random.Random(rng.random())
        while not stop.is_set():
            time.sleep(r.uniform(0.2, 0.8))
            n = r.randrange(4)
            if ("object", n) in cluster.procs:
                cluster.ps.stop(cluster.procs.pop(("object", n)), sig=signal.SIGKILL)
                kills[0] += 1
                time.sleep(r.uniform(0.1, 0.5))
                cluster.start("object", n)
    k = threading.Thread(target=killer)
    k.start()
    timer = threading.Timer(args.kill_seconds, stop.set)
    timer.start()
    storm(conn, ledger, names, deletes=0.3, stop=stop, rng=rng)
    k.join()
    for n in range(4):
        if ("object", n) not in cluster.procs:
            cluster.start("object", n)
    ledger.note = "%d kills" % kills[0]
    return ledger


SCENARIOS = [("primary-down", scenario_primary_down), ("disk-replaced", scenario_disk_replaced),
             ("bit-rot", scenario_bit_rot), ("kill-9", scenario_kill9)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--short", action="store_true", help="CI size: fewer objects, shorter load")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("APUS_FAULTS_SEED", "1")))
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    args = ap.parse_args()
    args.objects = 40 if args.short else 400
    args.kill_seconds = 5 if args.short else 40
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    rng = random.Random(args.seed)
    results = []
    for name, run in SCENARIOS:
        if args.only and name not in args.only.split(","):
            continue
        with procs.TempDir("apus-faults-") as root, procs.Processes() as ps:
            cluster = Cluster(bin_dir, root, ps)
            conn = cluster.connect()
            swift.put_container(conn[0], conn[1], "c")
            began = time.time()
            ledger = run(cluster, conn, args, rng)
            load = time.time() - began
            damaged = not repaired(cluster, ledger)
            seconds, passes = repair(cluster, ledger)
            # Read back through a proxy of its own: the loaded ones error-limited the nodes
            # that were down (for error_suppression_interval), which says nothing of the data.
            port = cluster.start_proxy("proxy-verify")
            verify = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % port, "test:tester",
                                    "testing")
            bad = lost(cluster, ledger, verify)
            results.append({"scenario": name, "acknowledged": ledger.acked, "lost": len(bad),
                            "repair_s": round(seconds, 2), "passes": passes,
                            "fault_and_load_s": round(load, 1), "replicas_off_before": damaged,
                            "note": getattr(ledger, "note", ""), "lost_examples": bad[:5]})
            print("%s: %d acknowledged, %d lost, repaired in %.1f s (%s passes) %s"
                  % (name, ledger.acked, len(bad), seconds, passes,
                     getattr(ledger, "note", "")), flush=True)
    for r in results:
        for example in r["lost_examples"]:
            print("lost in %s: %r" % (r["scenario"], example))
    print("\n| scenario | acknowledged | lost | replicas off after the fault | repair time |"
          " replication passes |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print("| %s | %d | %d | %s | %.1f s | %s |"
              % (r["scenario"], r["acknowledged"], r["lost"],
                 "yes" if r["replicas_off_before"] else "no", r["repair_s"],
                 r["passes"] or "not repaired"))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "faults.json"), "w") as f:
            json.dump({"seed": args.seed, "short": args.short, "results": results}, f, indent=1)
    failed = [r for r in results if r["lost"] or not r["passes"]]
    print("fault campaign:", "%d scenarios failed" % len(failed) if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
