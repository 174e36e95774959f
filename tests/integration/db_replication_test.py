#!/usr/bin/env python3
"""apus-container-replicator and apus-account-replicator on a 4-node Apus cluster (issue 17):

- a container replica that missed rows (its server was down during PUTs and DELETEs) and
  metadata (down during a POST) gets them in one pass, and then lists exactly what the others
  list, with the same counts;
- a container made while a primary was down lives on a handoff node: the handoff's
  replicator makes it on the primary (Apus's apus_create_db, then every row) and removes its
  own copy;
- an account replica that missed container rows gets them;
- a container DELETE that raced an object PUT (one replica holds a row the others missed, and
  refused the DELETE with 409 while the others deleted) ends with the same state on every
  replica after one pass, as Swift's replication leaves it;
- apus-container-auditor and apus-account-auditor then find every replica's counts equal to
  its rows (and write Swift's recon keys);
- a second pass finds every replica in step and sends no row; REPLICATE's refusals (bad
  bodies, unknown operations, a whole file that is not there, shard ranges) are clear.

usage: db_replication_test.py <build-dir>
"""
import json
import os
import re
import sys
import tempfile
from urllib.parse import quote

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
ACCOUNT = "AUTH_test"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def placement(cluster, kind, container=None):
    return cluster.ring_nodes(kind, ACCOUNT, container)


def direct(cluster, kind, n, part, path, method="GET", body=None, headers=None, query=""):
    return procs.request(cluster.ports[kind][n], method,
                         "/sd%d/%d%s%s" % (n, part, quote(path), query),
                         body=body, headers=headers or {})


def listing(cluster, kind, n, part, path):
    """(status, {count headers}, [rows]) of one replica."""
    status, headers, body = direct(cluster, kind, n, part, path, query="?format=json")
    counts = {k.lower(): v for k, v in headers.items()
              if k.lower().endswith(("-count", "-bytes-used")) or k.lower().startswith(
                  ("x-container-meta-", "x-account-meta-"))}
    rows = json.loads(body) if status == 200 else None
    if rows is not None:
        for row in rows:  # the time of the listing's own making differs by replica
            row.pop("last_modified", None)
    return status, counts, rows


LOG_SEEN = {}  # (kind, node) -> length of that replicator's log already returned


def replicate_all(cluster, kind):
    """One --once pass of the <kind> replicator on every node; returns what they logged."""
    logs = []
    for n in range(4):
        status, output, log = cluster.daemon_once("replicator", kind + "-replicator", n,
                                                  "concurrency = 4\n", kind=kind)
        check(status == 0, "%s-replicator on node %d exited %d: %s" % (kind, n, status, output))
        logs.append(log[LOG_SEEN.get((kind, n), 0):])
        LOG_SEEN[(kind, n)] = len(log)
    return "\n".join(logs)


def stat_sum(log, name):
    return sum(int(m) for m in re.findall(r"\b%s:(\d+)" % name, log))


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        url, token = cluster.connect()

        # Rows and metadata missed by one container replica.
        swift.put_container(url, token, "missed")
        part, nodes = placement(cluster, "container", "missed")
        down = nodes[0]
        cluster.stop("container", down)
        for i in range(30):
            swift.put_object(url, token, "missed", "obj-%02d \u00e9" % i, b"x" * i)
        for i in range(0, 30, 6):
            swift.delete_object(url, token, "missed", "obj-%02d \u00e9" % i)
        cluster.start("container", down)
        meta_down = nodes[1]
        cluster.stop("container", meta_down)
        swift.post_container(url, token, "missed", {"X-Container-Meta-Colour": "blue"})
        cluster.start("container", meta_down)
        before = [listing(cluster, "container", n, part, "/%s/missed" % ACCOUNT) for n in nodes]
        check(before[0][2] == [], "the stopped replica lists nothing before replication: %r"
              % (before[0][2],))

        # A container made while one of its primaries was down: a handoff holds it.
        hpart, hnodes = placement(cluster, "container", "handed")
        hdown = hnodes[1]
        handoff = [n for n in range(4) if n not in hnodes][0]
        cluster.stop("container", hdown)
        swift.put_container(url, token, "handed", {"X-Container-Meta-Kind": "handoff"})
        for i in range(5):
            swift.put_object(url, token, "handed", "h%d" % i, b"y")
        cluster.start("container", hdown)
        status, _, _ = direct(cluster, "container", handoff, hpart, "/%s/handed" % ACCOUNT,
                              "HEAD")
        check(status == 204, "the handoff node holds the new container: %d" % status)

        # Container rows missed by an account replica.
        apart, anodes = placement(cluster, "account")
        cluster.stop("account", anodes[2])
        for c in ("acct-a", "acct-b", "acct-c"):
            swift.put_container(url, token, c)
        swift.delete_container(url, token, "acct-b")
        cluster.start("account", anodes[2])

        # A DELETE racing a PUT: the replica that got the object's row refuses the DELETE.
        rpart, rnodes = placement(cluster, "container", "racing")
        swift.put_container(url, token, "racing")
        for n in rnodes[1:]:
            cluster.stop("container", n)
        swift.put_object(url, token, "racing", "late", b"l")
        for n in rnodes[1:]:
            cluster.start("container", n)
        try:
            swift.delete_container(url, token, "racing")
        except swift.ClientException as e:
            check(False, "the racing DELETE: %s" % e)
        heads = [direct(cluster, "container", n, rpart, "/%s/racing" % ACCOUNT, "HEAD")[0]
                 for n in rnodes]
        check(heads[0] == 204 and heads[1:] == [404, 404],
              "before replication one replica lives and two are deleted: %r" % (heads,))

        log = replicate_all(cluster, "container")
        racing = []
        for n in rnodes:
            status, headers, _ = direct(cluster, "container", n, rpart, "/%s/racing" % ACCOUNT,
                                        "HEAD")
            racing.append((status, headers.get("x-container-object-count"),
                           headers.get("x-backend-delete-timestamp")))
        check(all(r == racing[0] for r in racing),
              "the racing container's replicas agree after one pass: %r" % (racing,))
        after = [listing(cluster, "container", n, part, "/%s/missed" % ACCOUNT) for n in nodes]
        check(after[0][2] is not None and len(after[0][2]) == 25,
              "the stale replica lists 25 objects after one pass: %r" % (after[0][2],))
        check(all(a == after[0] for a in after),
              "every replica of 'missed' lists and counts the same: %r" % (after,))
        check(after[1][1].get("x-container-meta-colour") == "blue",
              "the replica that missed the POST has its metadata: %r" % (after[1][1],))
        handed = [listing(cluster, "container", n, hpart, "/%s/handed" % ACCOUNT)
                  for n in hnodes]
        check(all(h[0] == 200 and len(h[2]) == 5 for h in handed),
              "every primary of 'handed' lists its 5 objects: %r" % (handed,))
        check(all(h == handed[0] for h in handed), "the 'handed' replicas agree: %r" % (handed,))
        check(handed[1][1].get("x-container-meta-kind") == "handoff",
              "the replica made from the handoff has its metadata: %r" % (handed[1][1],))
        status, _, _ = direct(cluster, "container", handoff, hpart, "/%s/handed" % ACCOUNT,
                              "HEAD")
        check(status == 404, "the handoff copy is gone after the pass: %d" % status)
        check(stat_sum(log, "created") >= 1, "a replica was made on a peer:\n" + log[-2000:])

        # A second pass: everything is in step.
        log = replicate_all(cluster, "container")
        check(stat_sum(log, "rows_sent") == 0, "a second pass sends no row:\n" + log[-2000:])
        check("0 failures" in log and not re.search(r"[1-9]\d* failures", log),
              "a second pass has no failure:\n" + log[-2000:])

        log = replicate_all(cluster, "account")
        accounts = [listing(cluster, "account", n, apart, "/" + ACCOUNT) for n in anodes]
        names = [[r["name"] for r in a[2]] for a in accounts]
        check(all(n == ["acct-a", "acct-c", "handed", "missed"] for n in names),
              "every account replica lists the same containers: %r" % (names,))
        check(all(a[1].get("x-account-container-count") == "4" for a in accounts),
              "every account replica counts 4 containers: %r" % ([a[1] for a in accounts],))

        # The auditors: every database's counts agree with its rows on every node.
        for kind, least in (("container", 2), ("account", 1)):
            passed = 0
            for n in range(4):
                status, output, log = cluster.daemon_once(
                    "auditor", kind + "-auditor", n, "%ss_per_second = 0\n" % kind, kind=kind)
                check(status == 0, "%s-auditor on node %d: %d %s" % (kind, n, status, output))
                m = re.search(r"audit pass completed: [0-9.]+s \((\d+) passed, (\d+) failed", log)
                check(m is not None and m.group(2) == "0",
                      "%s-auditor on node %d found no failure: %s" % (kind, n, log[-500:]))
                passed += int(m.group(1)) if m else 0
                with open(os.path.join(cluster.root, "recon-%d" % n, kind + ".recon")) as f:
                    recon = json.load(f)
                check(recon.get(kind + "_audits_failed") == 0 and
                      kind + "_auditor_pass_completed" in recon,
                      "%s.recon on node %d: %r" % (kind, n, recon))
            check(passed >= least * 3, "the %s auditors passed %d databases" % (kind, passed))

        # Refusals.
        db = "/%s/missed" % ACCOUNT
        n = nodes[0]
        from swift.common.utils import hash_path
        from swift.common import utils
        utils.set_swift_dir(cluster.etc)
        h = hash_path(ACCOUNT, "missed")
        port = cluster.ports["container"][n]
        for body, want in ((b"{}", 400), (b'["nope"]', 400), (b'["sync", 1]', 400),
                           (b'["complete_rsync", "x", "y.db"]', 404),
                           (b'["rsync_then_merge", "../x"]', 400),
                           (b'["merge_syncs", [{"remote_id": "a\\nb", "sync_point": 1}]]', 400),
                           (b'["merge_shard_ranges", []]', 501),
                           (b'["merge_items", [{"name": "\\u00e9"}], "x"]', 400)):
            status, _, text = procs.request(port, "REPLICATE", "/sd%d/%d/%s" % (n, part, h),
                                            body=body)
            check(status == want, "REPLICATE %s: %d %r (want %d)" % (body, status, text, want))
        status, _, _ = procs.request(port, "REPLICATE", "/sd%d/%d/%s" % (n, part, "0" * 32),
                                     body=b'["merge_syncs", []]')
        check(status == 404, "REPLICATE of a missing database: %d" % status)
        status, _, _ = procs.request(port, "REPLICATE", "/sd%d/%d/../x" % (n, part),
                                     body=b'["merge_syncs", []]')
        check(status == 400, "REPLICATE of a path that is no hash: %d" % status)
        del db

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("db replication: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
