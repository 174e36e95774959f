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
other, and its queue entry popped.

Then apus-container-reconciler works a second batch, one row for each of Swift's cases: an
object moved (its body, streamed over several chunks, its metadata, sysmeta and ETag kept, at
its time + 2 offsets), a queued DELETE carried over to the container's policy, a copy the
container's policy already holds newer (only the old one goes), a source that is missing
(the row stays for a later pass), a row in the container's own policy (popped), and a row
that is no entry (left, counted as invalid).

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


class MisplacedCluster(Cluster):
    # A reconciler finds every queue container but the current hour's in the account listing
    # of .misplaced_objects, which the container servers' updaters keep: every second here.
    container_updater = "interval = 1\n"


def wait_for_queue_listing(cluster, queues, timeout=30):
    """Waits until every replica of the .misplaced_objects account lists each of `queues`."""
    apart, anodes = cluster.ring_nodes("account", ".misplaced_objects")
    deadline = time.time() + timeout
    while True:
        missing = []
        for n in anodes:
            status, _, body = procs.request(
                cluster.ports["account"][n], "GET",
                "/sd%d/%d/.misplaced_objects?format=json" % (n, apart), headers={})
            listed = {e["name"] for e in json.loads(body)} if status == 200 else set()
            missing += ["%s on node %d" % (q, n) for q in queues if q not in listed]
        if not missing or time.time() > deadline:
            return check(not missing, "the queue account lists its containers: %r missing"
                         % missing)
        time.sleep(0.2)


def replicate_all(cluster):
    logs = []
    for n in range(4):
        status, output, log = cluster.daemon_once("replicator", "container-replicator", n,
                                                  kind="container")
        check(status == 0, "container-replicator on node %d exited %d: %s" % (n, status, output))
        logs.append(log)
    return logs


def put_in_policy(cluster, policy, name, ts, body, part, nodes, headers=None):
    """The object PUT straight to the object servers of `policy`, with the container updates
    a proxy would send (so the container replicas get a row of that policy)."""
    opart, onodes = cluster.ring_nodes("object", ACCOUNT, "c", name)
    cont = {"X-Container-Partition": str(part),
            "X-Container-Host": ",".join("127.0.0.1:%d" % cluster.ports["container"][n]
                                         for n in nodes),
            "X-Container-Device": ",".join("sd%d" % n for n in nodes)}
    for n in onodes:
        h = dict(cont, **{"X-Timestamp": ts, "Content-Type": "text/x-moved",
                          "Content-Length": str(len(body)),
                          "X-Backend-Storage-Policy-Index": str(policy)})
        h.update(headers or {})
        status, _, _ = procs.request(
            cluster.ports["object"][n], "PUT",
            "/sd%d/%d/%s" % (n, opart, quote("%s/c/%s" % (ACCOUNT, name))), h, body)
        check(status == 201, "policy-%d PUT of %r on node %d: %d" % (policy, name, n, status))
    return opart, onodes


def object_heads(cluster, policy, name):
    """Each primary's (status, headers) for the object in `policy`."""
    opart, onodes = cluster.ring_nodes("object", ACCOUNT, "c", name)
    out = []
    for n in onodes:
        status, h, _ = procs.request(
            cluster.ports["object"][n], "HEAD",
            "/sd%d/%d/%s" % (n, opart, quote("%s/c/%s" % (ACCOUNT, name))),
            {"X-Backend-Storage-Policy-Index": str(policy)})
        out.append((status, h))
    return out


def queue_rows(cluster, queue):
    """The names of the rows any replica of the queue container holds."""
    qpart, qnodes = cluster.ring_nodes("container", ".misplaced_objects", queue)
    names = set()
    for n in qnodes:
        status, _, body = direct(cluster, n, qpart, "/.misplaced_objects/%s" % queue,
                                 query="?format=json")
        if status == 200:
            names.update(e["name"] for e in json.loads(body))
    return names


def apus_reconciler_batch(cluster, url, token, part, nodes):
    # Rows 1. to 4. are an hour old: their queue container is not the current hour's, so the
    # reconciler has to find it in the queue account's listing.
    now = time.time()
    ts = ["%.5f" % (now - 3600 - 10 + i) for i in range(5)] + ["%.5f" % (now - 5)]
    big = os.urandom(3 * 1024 * 1024 + 17)  # many 64 KiB chunks through the GET and the PUT
    meta = {"X-Object-Meta-Color": "blue", "X-Object-Sysmeta-Apus-Test": "kept",
            "Content-Encoding": "gzip"}
    # 1. Moved: only policy 1 holds it.
    put_in_policy(cluster, 1, "big", ts[0], big, part, nodes, meta)
    # 2. A DELETE made in policy 1 over an older object of the container's policy 0.
    put_in_policy(cluster, 0, "deleted-there", ts[0], b"old", part, nodes)
    for n in nodes:
        status, _, _ = direct(cluster, n, part, "/%s/c/deleted-there" % ACCOUNT, "DELETE",
                              {"X-Timestamp": ts[1], "X-Backend-Storage-Policy-Index": "1"})
        check(status == 204, "misplaced tombstone on node %d: %d" % (n, status))
    # 3. Policy 0 already holds a newer copy: only policy 1's old one goes.
    put_in_policy(cluster, 1, "newer-here", ts[2], b"old copy", part, nodes)
    newer_ts = "%.5f" % (now - 3)
    put_in_policy(cluster, 0, "newer-here", newer_ts, b"new copy", part, nodes)
    # 4. The source is missing: the row stays.
    for n in nodes:
        status, _, _ = direct(cluster, n, part, "/%s/c/nowhere" % ACCOUNT, "PUT",
                              {"X-Timestamp": ts[4], "X-Size": "1", "X-Etag": "e",
                               "X-Content-Type": "a/b", "X-Backend-Storage-Policy-Index": "1"})
        check(status == 201, "misplaced row without an object on node %d: %d" % (n, status))
    logs = replicate_all(cluster)
    check(sum(log.count("Queued misplaced") for log in logs) >= 2,
          "the second batch was queued: %r" % [log[-400:] for log in logs])
    # 5. and 6.: rows written into the queue by hand: one in the container's own policy, one
    # that is no entry.
    queue = str(int(now) // 3600 * 3600)
    qpart, qnodes = cluster.ring_nodes("container", ".misplaced_objects", queue)
    for n in qnodes:
        for name, ctype in (("0:/%s/c/placed" % ACCOUNT, "application/x-put"),
                            ("not an entry", "application/x-put")):
            status, _, _ = direct(cluster, n, qpart, "/.misplaced_objects/%s/%s" % (queue, name),
                                  "PUT", {"X-Timestamp": ts[5], "X-Size": "0", "X-Etag": ts[5],
                                          "X-Content-Type": ctype})
            check(status == 201, "hand-made queue row %r on node %d: %d" % (name, n, status))

    old_queue = str(int(float(ts[0])) // 3600 * 3600)
    wait_for_queue_listing(cluster, {old_queue, queue})

    conf = cluster.internal_client_conf("apus-container-reconciler.conf")
    log = os.path.join(cluster.root, "apus-container-reconciler.log")
    with open(conf, "a") as f:
        f.write("\n[container-reconciler]\nlog_file = %s\nlog_level = DEBUG\n" % log)
    run = subprocess.run([os.path.join(BIN, "apus-container-reconciler"), conf, "--once"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    text = open(log).read() if os.path.exists(log) else ""
    check(run.returncode == 0, "apus-container-reconciler exited %d: %s" % (run.returncode,
                                                                            run.stdout[-2000:]))
    tail = text[-3000:]
    print("apus-container-reconciler:", [line.split(": ", 1)[-1] for line in text.splitlines()
                                         if "Reconciler Stats" in line])

    # 1. The moved object: body, metadata, sysmeta and ETag through the proxy, in policy 0 at
    # its time + 2 offsets; gone from policy 1.
    try:
        headers, body = swift.get_object(url, token, "c", "big")
    except swift.ClientException as err:
        headers, body = {}, err
    check(body == big, "the moved object's body (%s)" % tail)
    check(headers.get("x-object-meta-color") == "blue" and
          headers.get("content-encoding") == "gzip" and
          headers.get("content-type") == "text/x-moved" and
          headers.get("etag") == __import__("hashlib").md5(big).hexdigest(),
          "the moved object's headers: %r" % headers)
    heads = object_heads(cluster, 0, "big")
    check(all(st == 200 and h.get("x-backend-timestamp") == ts[0] + "_0000000000000002" and
              h.get("x-object-sysmeta-apus-test") == "kept" for st, h in heads),
          "policy 0 holds the object at its time + 2 offsets, sysmeta kept: %r" % heads)
    heads = object_heads(cluster, 1, "big")
    check(all(st == 404 and h.get("x-backend-timestamp") == ts[0] + "_0000000000000001"
              for st, h in heads), "policy 1's copy deleted at its time + 1 offset: %r" % heads)
    # 2. The DELETE carried over at its time + 2 offsets.
    heads = object_heads(cluster, 0, "deleted-there")
    check(all(st == 404 and h.get("x-backend-timestamp") == ts[1] + "_0000000000000002"
              for st, h in heads), "the queued DELETE reached policy 0: %r" % heads)
    # 3. The newer copy stays; the old one is gone.
    check(all(st == 200 and h.get("x-backend-timestamp") == newer_ts
              for st, h in object_heads(cluster, 0, "newer-here")), "policy 0's newer copy stays")
    check(all(st == 404 for st, _ in object_heads(cluster, 1, "newer-here")),
          "policy 1's older copy is gone")
    # The queue: only the missing source and the non-entry are left.
    left = queue_rows(cluster, queue) | queue_rows(cluster, old_queue)
    check(left == {"1:/%s/c/nowhere" % ACCOUNT, "not an entry"},
          "rows left in the queue: %r (%s)" % (sorted(left), tail))
    for phrase in ("copy_success", "delete_success", "found_object", "noop_object",
                   "unavailable_source", "invalid_record", "Reconciler Stats"):
        check(phrase in text, "the reconciler's log says %s" % phrase)

def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = MisplacedCluster(BIN, root, ps)
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
        wait_for_queue_listing(cluster, {str(int(float(ts)) // 3600 * 3600)
                                         for ts in (put_ts, delete_ts)})
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
        remaining = queue_rows(cluster, str(int(float(put_ts)) // 3600 * 3600))
        check(not remaining, "entries left in the queue after the reconciler: %r" % remaining)

        apus_reconciler_batch(cluster, url, token, part, nodes)

    print("misplaced objects test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
