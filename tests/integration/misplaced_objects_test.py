#!/usr/bin/env python3
"""The container replicator queues misplaced objects for the container reconciler (issue 17),
as Swift's does: when a container's replicas took object rows under another storage policy
(both halves of a split-brain container PUT took writes, the policy conflict then resolved by
replication), each such row becomes an entry of `.misplaced_objects/<hour of its timestamp>`:
"<policy>:/<account>/<container>/<object>", its timestamp as etag, application/x-put or
application/x-delete as content type. Swift's reconciler reads the entries (checked with its own
parser); the replica remembers how far it queued, so the next pass queues nothing again. And
Swift 2.30.1's own container reconciler, run on the Apus cluster, works the queue: the object
written under the wrong policy ends up readable in the container's policy, gone from the
other, and its queue entry popped (what a mixed cluster can run until Apus has its own).

usage: misplaced_objects_test.py <build-dir>
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
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
    return cond


def direct(cluster, n, part, path, method="GET", headers=None, query=""):
    return procs.request(cluster.ports["container"][n], method,
                         "/sd%d/%d%s%s" % (n, part, quote(path), query), headers=headers or {})


def replicate_all(cluster):
    logs = []
    for n in range(4):
        status, output, log = cluster.daemon_once("replicator", "container-replicator", n,
                                                  kind="container")
        check(status == 0, "container-replicator on node %d exited %d: %s" % (n, status, output))
        logs.append(log)
    return logs


def main():
    with procs.Processes() as ps, tempfile.TemporaryDirectory() as root:
        cluster = Cluster(BIN, root, ps)
        # A second policy, known to the container servers (restarted to read it).
        with open(os.path.join(cluster.etc, "swift.conf"), "a") as f:
            f.write("\n[storage-policy:1]\nname = silver\n")
        shutil.copy(os.path.join(cluster.etc, "object.ring.gz"),
                    os.path.join(cluster.etc, "object-1.ring.gz"))
        for n in range(4):
            for kind in ("container", "object"):
                cluster.stop(kind, n)
                cluster.start(kind, n)
        url, token = cluster.connect()
        swift.put_container(url, token, "c")
        swift.put_object(url, token, "c", "placed", b"in policy 0")
        part, nodes = cluster.ring_nodes("container", ACCOUNT, "c")

        # An object written under policy 1 into a policy-0 container (what the half of a split
        # brain that took the other policy's writes holds): stored by policy 1's object servers,
        # which update the container replicas with a policy-1 row. And a policy-1 tombstone.
        now = time.time()
        put_ts, delete_ts = "%.5f" % (now - 2), "%.5f" % (now - 1)
        moved = "moved \u00e9"
        opart, onodes = cluster.ring_nodes("object", ACCOUNT, "c", moved)
        cont = {"X-Container-Partition": str(part),
                "X-Container-Host": ",".join("127.0.0.1:%d" % cluster.ports["container"][n]
                                             for n in nodes),
                "X-Container-Device": ",".join("sd%d" % n for n in nodes)}
        for i, n in enumerate(onodes):
            status, _, _ = procs.request(
                cluster.ports["object"][n], "PUT",
                "/sd%d/%d/%s" % (n, opart, quote("%s/c/%s" % (ACCOUNT, moved))),
                dict(cont, **{"X-Timestamp": put_ts, "Content-Type": "text/plain",
                              "Content-Length": "3", "X-Backend-Storage-Policy-Index": "1"}),
                b"abc")
            check(status == 201, "policy-1 object PUT on node %d: %d" % (n, status))
        for n in nodes:
            status, _, _ = direct(cluster, n, part, "/%s/c/gone" % ACCOUNT, "DELETE",
                                  {"X-Timestamp": delete_ts,
                                   "X-Backend-Storage-Policy-Index": "1"})
            check(status == 204, "misplaced tombstone on node %d: %d" % (n, status))

        logs = replicate_all(cluster)
        check(any("Queued misplaced object rows" in log for log in logs),
              "a replicator queued the misplaced rows: %r" % [log[-500:] for log in logs])

        # The queue: one container per hour of the rows' timestamps (both in the same hour
        # unless the test straddles one).
        from swift.container.reconciler import parse_raw_obj
        expected = {
            "1:/%s/c/%s" % (ACCOUNT, moved): (put_ts, "application/x-put"),
            "1:/%s/c/gone" % ACCOUNT: (delete_ts, "application/x-delete"),
        }
        found = {}
        for name, (ts, _) in expected.items():
            queue = str(int(float(ts)) // 3600 * 3600)
            qpart, qnodes = cluster.ring_nodes("container", ".misplaced_objects", queue)
            holders = 0
            for n in qnodes:
                status, _, body = direct(cluster, n, qpart, "/.misplaced_objects/%s" % queue,
                                         query="?format=json")
                if status != 200:
                    continue
                for entry in json.loads(body):
                    if entry["name"] == name:
                        holders += 1
                        found[name] = entry
            check(holders * 2 > len(qnodes), "%r queued on %d of %d replicas of "
                  ".misplaced_objects/%s" % (name, holders, len(qnodes), queue))
        for name, (ts, op_type) in expected.items():
            entry = found.get(name)
            if not check(entry is not None, "queue entry %r" % name):
                continue
            check(entry["hash"] == ts and entry["content_type"] == op_type and
                  entry["bytes"] == 0, "queue entry %r: %r" % (name, entry))
            # Swift's reconciler reads it as the move it stands for.
            parsed = parse_raw_obj(dict(entry, name=entry["name"]))
            check(parsed["q_policy_index"] == 1 and parsed["account"] == ACCOUNT and
                  parsed["container"] == "c" and parsed["q_op"] ==
                  ("PUT" if op_type.endswith("put") else "DELETE") and
                  parsed["q_ts"].internal == ts,
                  "Swift's parse_raw_obj of %r: %r" % (name, parsed))
        check(not any(name.endswith("/placed") for name in found), "the row in the container's "
              "own policy is not queued")

        # The replicas recorded how far they queued: the next passes queue nothing again.
        queued = [log.count("Queued misplaced") for log in logs]
        check(sum(queued) >= 2, "a majority of the replicas queued: %r" % queued)
        for again in (2, 3):
            logs = replicate_all(cluster)
            check([log.count("Queued misplaced") for log in logs] == queued,
                  "pass %d queued the rows again: %r" % (again, [log[-400:] for log in logs]))
        # Swift's reconciler (an in-process Swift proxy on this cluster) works the queue.
        ic_conf = cluster.internal_client_conf("container-reconciler.conf")
        script = ("import sys\n"
                  "from swift.common import utils, storage_policy\n"
                  "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
                  "from swift.container.reconciler import ContainerReconciler\n"
                  "r = ContainerReconciler({'__file__': sys.argv[2], 'swift_dir': sys.argv[1]},\n"
                  "    logger=utils.get_logger({}, log_to_console=True))\n"
                  "r.run_once()\n"
                  "print(dict(r.stats))\n")
        run = subprocess.run(["/usr/bin/python3", "-c", script, cluster.etc, ic_conf],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=300)
        check(run.returncode == 0, "Swift's reconciler: %s" % run.stdout[-2000:])
        # The object is now in policy 0, readable through the proxy, and gone from policy 1.
        try:
            _, body = swift.get_object(url, token, "c", moved)
        except swift.ClientException as err:
            body = err
        check(body == b"abc", "the moved object through the proxy: %r (reconciler said %s)"
              % (body, run.stdout[-1500:]))
        left = []
        for n in onodes:
            status, _, _ = procs.request(
                cluster.ports["object"][n], "HEAD",
                "/sd%d/%d/%s" % (n, opart, quote("%s/c/%s" % (ACCOUNT, moved))),
                {"X-Backend-Storage-Policy-Index": "1"})
            left.append(status)
        check(all(st == 404 for st in left), "policy 1 keeps the object: %r" % left)
        queue = str(int(float(put_ts)) // 3600 * 3600)
        qpart, qnodes = cluster.ring_nodes("container", ".misplaced_objects", queue)
        remaining = set()
        for n in qnodes:
            status, _, body = direct(cluster, n, qpart, "/.misplaced_objects/%s" % queue,
                                     query="?format=json")
            if status == 200:
                remaining.update(e["name"] for e in json.loads(body))
        check(not remaining, "entries left in the queue after the reconciler: %r" % remaining)

    print("misplaced objects test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
