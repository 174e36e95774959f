#!/usr/bin/env python3
"""apus-object-replicator and apus-object-auditor on a 4-node Apus cluster (issue 16): a
primary down during writes then back (the handoffs' copies go home and leave the handoffs), a
primary's disk emptied (refilled from the other replicas), a delete while a primary was down
(the tombstone follows), a second pass with nothing to do but a stale temp file to remove, a
primary's device unmounted (a handoff stands in, then sends home), bit rot in one replica (the
auditor quarantines it, the replicator repairs it), the recon cache; and Swift 2.30.1's own
object replicator (sync_method = ssync) run on the Apus nodes, refilling an emptied Apus disk;
then sync_method = rsync into an rsync daemon over the nodes' devices, Apus's replicator and
Swift's: an emptied disk refilled, a handoff's copies sent home and removed.

usage: replication_test.py <build-dir>
"""
import json
import os
import shutil
import subprocess
import sys
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


def replicate(cluster, n, *extra, rsync=False):
    """apus-object-replicator --once for node n: its log."""
    status, output, log = cluster.replicate(n, *extra, rsync=rsync)
    check(status == 0, "replicator on node %d: %d %s" % (n, status, output))
    return log


def audit(cluster, n, *extra):
    """apus-object-auditor --once for node n: its log."""
    status, output, log = cluster.audit(n, *extra)
    check(status == 0, "auditor on node %d: %d %s" % (n, status, output))
    return log


def data_file(cluster, n, part, name):
    """The .data file of `name` on node n."""
    objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects", str(part))
    for dirpath, _, files in os.walk(objects):
        for f in files:
            if f.endswith(".data"):
                from swift.obj.diskfile import read_metadata
                if read_metadata(os.path.join(dirpath, f))["name"] == "/AUTH_test/c/" + name:
                    return os.path.join(dirpath, f)
    return None


def bit_rot(cluster, names, bodies, url, token):
    name = names[0]
    part, prim = cluster.placement("c", name)
    n = prim[0]
    path = data_file(cluster, n, part, name)
    check(path is not None, "found %s's .data on node %d" % (name, n))
    with open(path, "r+b") as f:
        f.seek(500)
        byte = f.read(1)
        f.seek(500)
        f.write(bytes([byte[0] ^ 0x55]))
    audit(cluster, n, "--zero-byte-only")
    check(os.path.exists(path), "a ZBF pass does not read non-empty objects")
    log = audit(cluster, n)
    hash_dir = os.path.basename(os.path.dirname(path))
    quarantined = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "quarantined", "objects",
                               hash_dir)
    check(not os.path.exists(path) and os.path.isdir(quarantined),
          "the rotten replica is quarantined: %s" % log[-500:])
    check("1 quarantined" in log, "the auditor counts it: %s" % log[-300:])
    with open(os.path.join(cluster.root, "recon-%d" % n, "object.recon")) as f:
        recon = json.load(f)
    check(recon.get("object_auditor_stats_ALL", {}).get("quarantined") == 1 and
          "object_auditor_stats_ZBF" in recon, "auditor stats in object.recon: %r" % recon)
    status, _ = head_on(cluster, n, part, name)
    check(status == 404, "node %d no longer serves it: %d" % (n, status))
    _, got = swift.get_object(url, token, "c", name)
    check(got == bodies[name], "the proxy serves the good bytes meanwhile")
    for m in prim[1:]:
        replicate(cluster, m)
    status, _, body = procs.request(cluster.ports["object"][n], "GET",
                                    "/sd%d/%d/AUTH_test/c/%s" % (n, part, name))
    check(status == 200 and body == bodies[name], "the replicator repaired node %d: %d" % (n, status))
    log = audit(cluster, n)
    check("0 quarantined" in log.splitlines()[-1], "a second audit finds nothing: %s" % log[-300:])


def swift_replicate(cluster, n, method="ssync"):
    """Swift 2.30.1's own object replicator (sync_method = ssync, or rsync into the cluster's
    rsync daemon) run once for node n, in a process of its own (eventlet)."""
    script = (
        "import sys, logging\n"
        "from swift.common import utils, storage_policy\n"
        "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
        "from swift.obj.replicator import ObjectReplicator\n"
        "conf = {'devices': sys.argv[2], 'mount_check': 'false', 'bind_ip': '127.0.0.1',\n"
        "        'bind_port': sys.argv[3], 'swift_dir': sys.argv[1], 'sync_method': sys.argv[5],\n"
        "        'rsync_module': sys.argv[6],\n"
        "        'recon_cache_path': sys.argv[4], 'concurrency': '1'}\n"
        "ObjectReplicator(conf).run_once()\n")
    recon = os.path.join(cluster.root, "swift-recon-%d" % n)
    os.makedirs(recon, exist_ok=True)
    module = "rsync://{replication_ip}:%d/object{replication_port}" % getattr(
        cluster, "rsyncd_port", 0)
    run = subprocess.run(["/usr/bin/python3", "-c", script, cluster.etc,
                          os.path.join(cluster.root, "node%d" % n),
                          str(cluster.ports["object"][n]), recon, method, module],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    check(run.returncode == 0, "Swift's replicator on node %d: %s" % (n, run.stdout[-2000:]))
    with open(os.path.join(recon, "object.recon")) as f:
        return json.load(f).get("replication_stats", {})


def auditor_daemon(cluster, n=0):
    """apus-object-auditor as a daemon: its ZBF and ALL passes run side by side (both stats in
    object.recon within seconds), and SIGTERM stops it at once."""
    audit(cluster, n)  # writes its config
    conf = os.path.join(cluster.etc, "auditor-%d.conf" % n)
    recon_file = os.path.join(cluster.root, "recon-%d" % n, "object.recon")
    os.unlink(recon_file)
    proc = cluster.ps.start([os.path.join(BIN, "apus-object-auditor"), conf],
                            os.path.join(cluster.root, "auditor-daemon-%d.out" % n))
    recon = {}
    for _ in range(100):
        time.sleep(0.1)
        if os.path.exists(recon_file):
            with open(recon_file) as f:
                recon = json.load(f)
            if "object_auditor_stats_ZBF" in recon and "object_auditor_stats_ALL" in recon:
                break
    check("object_auditor_stats_ZBF" in recon and "object_auditor_stats_ALL" in recon,
          "the auditor daemon runs ZBF and ALL passes side by side: %r" % recon)
    began = time.time()
    cluster.ps.stop(proc)
    check(proc.returncode is not None and time.time() - began < 5,
          "the auditor daemon stops within seconds of SIGTERM")


def auditor_resume(cluster, names, bodies):
    """Swift's auditor_status_ALL.json: a pass resumes with the partitions the file lists (an
    object rotted elsewhere waits for the next pass), and the file is gone when the pass ends."""
    parts = {name: cluster.placement("c", name)[0] for name in names}
    pairs = [(n, a, b) for n in range(4) for a in names for b in names
             if parts[a] != parts[b] and n in cluster.primaries("c", a) and
             n in cluster.primaries("c", b)]
    check(pairs, "two objects in different partitions of one node, for the resume test")
    if not pairs:
        return
    n, kept, rotted = pairs[0]
    path = data_file(cluster, n, parts[rotted], rotted)
    with open(path, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xff]))
    objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects")
    status = os.path.join(objects, "auditor_status_ALL.json")
    with open(status, "w") as f:
        json.dump({"partitions": [str(parts[kept])]}, f)
    audit(cluster, n)
    check(os.path.exists(path), "a resumed pass audits only the partitions left in its status file")
    check(not os.path.exists(status), "the status file goes when the pass ends")
    audit(cluster, n)
    check(not os.path.exists(path), "the next pass audits everything")
    replicate_all(cluster)  # the rotted copy comes back
    _, got = swift.get_object(*cluster.connect(), "c", rotted)
    check(got == bodies[rotted], "%s repaired after the resumed audit" % rotted)


def replicate_all(cluster, rsync=False):
    for n in range(4):
        replicate(cluster, n, rsync=rsync)


def head_on(cluster, n, part, name):
    status, headers, _ = procs.request(cluster.ports["object"][n], "HEAD",
                                       "/sd%d/%d/AUTH_test/c/%s" % (n, part, name))
    return status, headers


def hash_dirs(cluster, n):
    """Object hash directories on node n."""
    out = set()
    objects = os.path.join(cluster.root, "node%d" % n, "sd%d" % n, "objects")
    for dirpath, dirnames, _ in os.walk(objects):
        for d in dirnames:
            if len(d) == 32:
                out.add(d)
    return out


def main():
    with procs.TempDir("apus-replication-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        url, token = cluster.connect()
        swift.put_container(url, token, "c")
        victim = 1
        names = []
        i = 0
        while len(names) < 6:
            name = "obj-%d" % i
            i += 1
            if victim in cluster.primaries("c", name):
                names.append(name)
        swift.put_object(url, token, "c", names[-1], b"to be deleted")
        cluster.stop("object", victim)
        bodies = {}
        for name in names[:-1]:
            bodies[name] = os.urandom(1000 + len(name))
            swift.put_object(url, token, "c", name, bodies[name])
        swift.delete_object(url, token, "c", names[-1])
        cluster.start("object", victim)
        for name in names[:-1]:
            part, _ = cluster.placement("c", name)
            check(head_on(cluster, victim, part, name)[0] == 404,
                  "%s is missing on node %d before replication" % (name, victim))
        for name in names[:-1]:
            part, prim = cluster.placement("c", name)
            on_handoff = [n for n in set(range(4)) - set(prim)
                          if head_on(cluster, n, part, name)[0] == 200]
            check(on_handoff, "%s was written to a handoff while node %d was down" % (name, victim))

        # 1. Back from down: the handoffs' copies go home, the handoffs keep nothing of them.
        replicate_all(cluster)
        for name in names[:-1]:
            part, prim = cluster.placement("c", name)
            for n in prim:
                status, _ = head_on(cluster, n, part, name)
                check(status == 200, "%s on primary %d after a pass: %d" % (name, n, status))
            for n in set(range(4)) - set(prim):
                status, _ = head_on(cluster, n, part, name)
                check(status == 404, "%s gone from handoff %d: %d" % (name, n, status))
        part, _ = cluster.placement("c", names[-1])
        status, headers = head_on(cluster, victim, part, names[-1])
        check(status == 404 and "x-backend-timestamp" in headers,
              "the delete reached node %d as a tombstone: %d %r" % (victim, status, headers))
        with open(os.path.join(root, "recon-0", "object.recon")) as f:
            recon = json.load(f)
        check(recon.get("replication_stats", {}).get("attempted", 0) > 0 and
              "object_replication_last" in recon, "recon cache written: %r" % recon)

        # 2. A second pass finds everything in step, and removes what a crash left in tmp/ once
        # older than reclaim_age (as Swift's), but not a newer temp file (an upload in flight).
        tmp = os.path.join(root, "node0", "sd0", "tmp")
        os.makedirs(tmp, exist_ok=True)
        stale, fresh = os.path.join(tmp, "tmpSTALE1"), os.path.join(tmp, "tmpFRESH1")
        for path in (stale, fresh):
            with open(path, "wb") as f:
                f.write(b"left by a crash")
        eight_days_ago = time.time() - 8 * 86400
        os.utime(stale, (eight_days_ago, eight_days_ago))
        before = {n: hash_dirs(cluster, n) for n in range(4)}
        replicate_all(cluster)
        check(before == {n: hash_dirs(cluster, n) for n in range(4)},
              "a second pass changes nothing")
        check(not os.path.exists(stale) and os.path.exists(fresh),
              "the pass removed the stale temp file only: %r" % os.listdir(tmp))

        # 3. A disk emptied: the other replicas refill it.
        shutil.rmtree(os.path.join(root, "node%d" % victim, "sd%d" % victim, "objects"))
        for n in range(4):
            if n != victim:
                replicate(cluster, n)
        for name in names[:-1]:
            part, _ = cluster.placement("c", name)
            status, _, body = procs.request(cluster.ports["object"][victim], "GET",
                                            "/sd%d/%d/AUTH_test/c/%s" % (victim, part, name))
            check(status == 200 and body == bodies[name],
                  "%s refilled on node %d: %d" % (name, victim, status))
        check(hash_dirs(cluster, victim) == before[victim],
              "the emptied disk holds what it held before")
        for name in names[:-1]:
            _, got = swift.get_object(url, token, "c", name)
            check(got == bodies[name], "%s reads back through the proxy" % name)

        # 4. Bit rot in one replica.
        bit_rot(cluster, names, bodies, url, token)
        auditor_resume(cluster, names[:-1], bodies)
        auditor_daemon(cluster)

        # 5. A primary's device unmounted (507): the other primaries send to a handoff, which
        # sends home once the device is back.
        name = names[1]
        part, prim = cluster.placement("c", name)
        away, sender = prim[0], prim[1]
        handoff = [n for n in range(4) if n not in prim][0]
        device = os.path.join(root, "node%d" % away, "sd%d" % away)
        os.rename(device, device + ".away")
        replicate(cluster, sender, "--partitions", str(part))
        status, _ = head_on(cluster, handoff, part, name)
        check(status == 200, "with node %d's device unmounted, handoff %d took %s: %d"
              % (away, handoff, name, status))
        os.rename(device + ".away", device)
        replicate(cluster, handoff, "--partitions", str(part))
        check(head_on(cluster, handoff, part, name)[0] == 404 and
              head_on(cluster, away, part, name)[0] == 200,
              "once the device is back, the handoff's copy went home and left the handoff")

        # 6. Swift's own replicator, on Apus nodes, refills an emptied Apus disk over SSYNC.
        shutil.rmtree(os.path.join(root, "node%d" % victim, "sd%d" % victim, "objects"))
        for n in range(4):
            if n != victim:
                stats = swift_replicate(cluster, n)
                check(stats.get("failure", 1) == 0, "Swift's replicator on node %d: %r" % (n, stats))
        for name in names[:-1]:
            part, _ = cluster.placement("c", name)
            status, _, body = procs.request(cluster.ports["object"][victim], "GET",
                                            "/sd%d/%d/AUTH_test/c/%s" % (victim, part, name))
            check(status == 200 and body == bodies[name],
                  "Swift's replicator refilled %s on node %d: %d" % (name, victim, status))
        # And Apus's replicator then finds nothing left to do.
        before = {n: hash_dirs(cluster, n) for n in range(4)}
        replicate_all(cluster)
        check(before == {n: hash_dirs(cluster, n) for n in range(4)},
              "after Swift's pass, Apus's pass changes nothing")

        # 7. sync_method = rsync (Swift's default), into an rsync daemon over the nodes'
        # devices: an emptied disk refilled, then a handoff's copies sent home and removed.
        cluster.start_rsyncd()
        shutil.rmtree(os.path.join(root, "node%d" % victim, "sd%d" % victim, "objects"))
        logs = "".join(replicate(cluster, n, rsync=True) for n in range(4) if n != victim)
        check("Successful rsync of" in logs, "the replicators ran rsync: %s" % "\n".join(l for l in logs.splitlines() if "rsync" in l)[-3000:])
        for name in names[:-1]:
            part, _ = cluster.placement("c", name)
            status, _, body = procs.request(cluster.ports["object"][victim], "GET",
                                            "/sd%d/%d/AUTH_test/c/%s" % (victim, part, name))
            check(status == 200 and body == bodies[name],
                  "rsync refilled %s on node %d: %d" % (name, victim, status))
        cluster.stop("object", victim)
        late = {}
        for name in names[:3]:
            late[name] = os.urandom(777)
            swift.put_object(url, token, "c", name, late[name])
        cluster.start("object", victim)
        replicate_all(cluster, rsync=True)
        for name in names[:3]:
            part, prim = cluster.placement("c", name)
            for n in prim:
                status, _, body = procs.request(cluster.ports["object"][n], "GET",
                                                "/sd%d/%d/AUTH_test/c/%s" % (n, part, name))
                check(status == 200 and body == late[name],
                      "rsync: %s's new version on primary %d: %d" % (name, n, status))
            for n in set(range(4)) - set(prim):
                check(head_on(cluster, n, part, name)[0] == 404,
                      "rsync: %s gone from handoff %d" % (name, n))
            bodies[name] = late[name]
        # A second rsync pass has nothing to send.
        before = {n: hash_dirs(cluster, n) for n in range(4)}
        logs = "".join(replicate(cluster, n, rsync=True) for n in range(4))
        check(before == {n: hash_dirs(cluster, n) for n in range(4)} and
              "Bad rsync" not in logs, "a second rsync pass changes nothing")

        # 8. Swift's own replicator with rsync refills an emptied Apus disk.
        shutil.rmtree(os.path.join(root, "node%d" % victim, "sd%d" % victim, "objects"))
        for n in range(4):
            if n != victim:
                stats = swift_replicate(cluster, n, "rsync")
                check(stats.get("failure", 1) == 0,
                      "Swift's rsync replicator on node %d: %r" % (n, stats))
        for name in names[:-1]:
            part, _ = cluster.placement("c", name)
            status, _, body = procs.request(cluster.ports["object"][victim], "GET",
                                            "/sd%d/%d/AUTH_test/c/%s" % (victim, part, name))
            check(status == 200 and body == bodies[name],
                  "Swift's rsync refilled %s on node %d: %d" % (name, victim, status))
        before = {n: hash_dirs(cluster, n) for n in range(4)}
        replicate_all(cluster, rsync=True)
        check(before == {n: hash_dirs(cluster, n) for n in range(4)},
              "after Swift's rsync pass, Apus's rsync pass changes nothing")
    print("replication:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
