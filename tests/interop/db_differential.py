#!/usr/bin/env python3
"""Differential test of container replication (issue 17): the same random row operations go to
a container's three replicas on an Apus cluster and on a cluster whose container servers are
stock Swift 2.30.1's, with one replica cut off (partitioned) for about half of the operations.

Operations, sent straight to the container servers as proxies and object servers send them:
object rows put (sizes, types, etags) and deleted, some with timestamps older than rows already
there (writes that raced); container metadata set and removed by POST; the container PUT again
and DELETEd (409 while a replica has objects, so replicas disagree on it, as a racing DELETE
leaves them). Each answer of each replica must be the same on both sides. Then every node's
replicator runs twice; afterwards the three replicas on each side must list the same rows,
counts, metadata and timestamps, and each of Apus's must equal the same replica of Swift's.

APUS_DIFF_SEED picks the run (printed on failure), APUS_DIFF_OPS its length (default 400).

usage: db_differential.py <build-dir>
"""
import json
import os
import random
import sys
import tempfile
import time
from urllib.parse import quote

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
ACCOUNT = "AUTH_test"
CONTAINER = "diff"
NAMES = ["o%02d" % i for i in range(30)] + ["caf\u00e9", "a/b/c", "\u6f22\u5b57"]
META = ["A", "B", "C", "D"]
TYPES = ["text/plain", "application/octet-stream", "image/png;swift_bytes=10"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def operations(rng, count, base):
    """[(method, object name or None, headers, partitioned replica or None)]: the run's
    operations with their timestamps, partitions in stretches of 5 to 20 operations."""
    ops = []
    clock = base
    cut, left = None, 0
    for _ in range(count):
        if left == 0:
            left = rng.randint(5, 20)
            cut = rng.randrange(3) if cut is None else None
        left -= 1
        clock += 1.0
        ts = clock
        if rng.random() < 0.1:  # a write that raced a newer one
            ts -= rng.randint(1, 40)
        h = {"X-Timestamp": "%.5f" % ts, "X-Backend-Storage-Policy-Index": "0"}
        r = rng.random()
        if r < 0.45:
            h.update({"X-Size": str(rng.choice([0, 1, 10, 4096, 10 ** 9])),
                      "X-Content-Type": rng.choice(TYPES),
                      "X-Etag": "%032x" % rng.getrandbits(128)})
            ops.append(("PUT", rng.choice(NAMES), h, cut))
        elif r < 0.70:
            ops.append(("DELETE", rng.choice(NAMES), h, cut))
        elif r < 0.85:
            key = "X-Container-Meta-" + rng.choice(META)
            h[key] = rng.choice(["", "v%d" % rng.randrange(100), "\u00fc".encode("utf-8")])
            ops.append(("POST", None, h, cut))
        elif r < 0.95:
            if rng.random() < 0.5:
                h["X-Container-Meta-" + rng.choice(META)] = "put%d" % rng.randrange(100)
            ops.append(("PUT", None, h, cut))
        else:
            ops.append(("DELETE", None, h, cut))
    return ops


def path_of(obj):
    return "/%s/%s" % (ACCOUNT, CONTAINER) + ("" if obj is None else "/" + obj)


def apply(cluster, ops):
    """Sends every operation to the container's replicas (not the cut one): the answers, per
    operation a status per replica (None where cut)."""
    part, nodes = cluster.ring_nodes("container", ACCOUNT, CONTAINER)
    answers = []
    for method, obj, headers, cut in ops:
        row = []
        for i, n in enumerate(nodes):
            if i == cut:
                row.append(None)
                continue
            target = "/sd%d/%d%s" % (n, part, quote(path_of(obj)))
            row.append(procs.request(cluster.ports["container"][n], method, target,
                                     dict(headers), b"")[0])
        answers.append(row)
    return answers


def state(cluster):
    """What each replica says of the container: status, the headers replicas must agree on,
    and its listing (with deleted rows left out, as listed)."""
    part, nodes = cluster.ring_nodes("container", ACCOUNT, CONTAINER)
    out = []
    for n in nodes:
        target = "/sd%d/%d%s?format=json" % (n, part, quote(path_of(None)))
        status, headers, body = procs.request(cluster.ports["container"][n], "GET", target)
        keep = {k: v for k, v in headers.items()
                if k.startswith("x-container-meta-") or
                k in ("x-container-object-count", "x-container-bytes-used", "x-put-timestamp",
                      "x-timestamp", "x-backend-put-timestamp", "x-backend-delete-timestamp",
                      "x-backend-status-changed-at", "x-backend-storage-policy-index")}
        rows = json.loads(body) if status == 200 else None
        out.append((status, keep, rows))
    return out


def replicate(cluster, swift_side):
    for n in range(4):
        if swift_side:
            status, output, _ = cluster.swift_db_replicate("container", n)
        else:
            status, output, _ = cluster.db_replicate("container", n)
        check(status == 0, "%s container replicator on node %d: %s" %
              ("Swift's" if swift_side else "Apus's", n, output[-1500:]))


def main():
    seed = int(os.environ.get("APUS_DIFF_SEED", random.randrange(1 << 30)))
    count = int(os.environ.get("APUS_DIFF_OPS", "400"))
    base = float(int(time.time()) - 3 * count)  # recent: nothing old enough to reclaim
    ops = operations(random.Random(seed), count, base)
    first = ("PUT", None, {"X-Timestamp": "%.5f" % base,
                           "X-Backend-Storage-Policy-Index": "0"}, None)
    ops.insert(0, first)
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        for side in ("apus", "swift"):
            os.makedirs(os.path.join(root, side))
        apus = Cluster(BIN, os.path.join(root, "apus"), ps)
        swift = Cluster(BIN, os.path.join(root, "swift"), ps)
        for n in range(4):
            swift.start_swift("container", n)
        for c in (apus, swift):
            c.start_rsyncd()
        got = {"apus": apply(apus, ops), "swift": apply(swift, ops)}
        differing = [(i, ops[i][:2], got["apus"][i], got["swift"][i]) for i in range(len(ops))
                     if got["apus"][i] != got["swift"][i]]
        check(not differing, "%d answers differ (op, apus, swift), first: %r" %
              (len(differing), differing[:5]))
        tally = {}
        for (method, obj, _, _), row in zip(ops, got["apus"]):
            key = "%s %s" % (method, "container" if obj is None else "object")
            for status in row:
                if status is not None:
                    tally.setdefault(key, {}).setdefault(status, 0)
                    tally[key][status] += 1
        print("answers: %d operations, %d cut off a replica; statuses %r" %
              (len(ops), sum(1 for op in ops if op[3] is not None), tally))
        for side, c in (("apus", apus), ("swift", swift)):
            before = state(c)
            check(any(v != before[0] for v in before),
                  "%s: the replicas differ before replication (or the run shows nothing)" % side)
        for _ in range(2):
            replicate(apus, False)
            replicate(swift, True)
        views = {"apus": state(apus), "swift": state(swift)}

        def without(view, *names):
            status, headers, rows = view
            return status, {k: v for k, v in headers.items() if k not in names}, rows
        # X-Backend-Status-Changed-At is each replica's own (when it last went from live to
        # deleted or back), which Swift's replication leaves alone: compared across the sides
        # replica by replica, not among replicas.
        for side, view in views.items():
            check(all(without(v, "x-backend-status-changed-at") ==
                      without(view[0], "x-backend-status-changed-at") for v in view),
                  "%s: the replicas agree after replication:\n%s" %
                  (side, "\n".join(repr(v) for v in view)))
        # X-Timestamp is the database's created_at: when a replica was made (the earliest, once
        # replicated), which the operations do not choose.
        for i in range(3):
            check(without(views["apus"][i], "x-timestamp") ==
                  without(views["swift"][i], "x-timestamp"),
                  "replica %d: Apus's equals Swift's:\n  apus  %r\n  swift %r" %
                  (i, views["apus"][i], views["swift"][i]))
        listed = views["swift"][0][2]
        print("final: status %d, %d objects listed, %r" %
              (views["swift"][0][0], len(listed or []), views["swift"][0][1]))
    if failures:
        print("%d failed (APUS_DIFF_SEED=%d APUS_DIFF_OPS=%d)" % (len(failures), seed, count))
        return 1
    print("db differential: all checks passed (seed %d)" % seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
