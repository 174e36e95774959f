#!/usr/bin/python3
"""What the consistency daemons cost (issue 16): apus-object-replicator and apus-object-auditor
on an idle cluster holding many objects (1 million by default), and how fast a replaced disk
is refilled.

The cluster: three Apus storage nodes (tests/support/cluster.py; 3 replicas, so every node
holds every object) with part power --part-power. The objects are written straight to node 0's
disk in Swift's layout (a 1-byte .data file with Swift's pickled metadata and its checksum per
object; no container rows: the daemons do not read them) and hard-linked onto the other nodes,
which is what a replicated cluster holds.

Measured, from /proc (user + system CPU of each process over a window):
  replicator, first pass   each node's first pass: every partition hashed (hashes.pkl made)
  replicator, idle         the next --window seconds of passes (interval 30 s, Swift's
                           default): the replicators' CPU and the object servers' CPU answering
                           their REPLICATEs, as a share of one core per node
  Swift's replicator, idle the same window with Swift 2.30.1's replicator (ssync) on node 0
                           (its first pass finds hashes.pkl made already)
  auditor, paced           apus-object-auditor as a daemon for --window seconds on node 0: its
                           first pass is a ZBF one, at Swift's default 50 files/s
  auditor, unpaced         CPU microseconds per object of an unpaced ALL pass over node 0
  refill                   (first, on a cluster of its own) on data sets of 4 KiB objects and
                           of larger ones: node 2's
                           disk emptied, nodes 0 and 1 replicate (ssync, then the same with
                           rsync; Swift's default concurrency), pass after pass: objects/s
                           and MiB/s until node 2 holds every object again

usage: bench/daemon_costs.py [--build build] [--out DIR] [--objects 1000000]
                             [--part-power 10] [--window 90] [--refill-objects 20000]
                             [--refill-large-objects 1000] [--refill-size 1048576]
                             [--no-swift] [--no-auditor] [--no-refill]
Prints a table and writes OUT/daemon_costs.json. Needs about 4 KiB of disk per object and
node (a hash directory and a file) and, for the refill set, its size three times.
"""
import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402


def populate(cluster, node, names, size, prefix=b"prox", suffix=b"y", part_power=10):
    """Writes `names` in container c of AUTH_test onto node `node`'s disk, Swift's layout."""
    device = os.path.join(cluster.root, "node%d" % node, "sd%d" % node, "objects")
    body = b"x" * size
    etag = hashlib.md5(body).hexdigest()
    shift = 32 - part_power
    ts = "%.5f" % time.time()
    for name in names:
        path = "/AUTH_test/c/" + name
        digest = hashlib.md5(prefix + path.encode() + suffix).digest()
        hexhash = digest.hex()
        part = int.from_bytes(digest[:4], "big") >> shift
        d = os.path.join(device, str(part), hexhash[-3:], hexhash)
        os.makedirs(d, exist_ok=True)
        meta = pickle.dumps({"name": path, "X-Timestamp": ts, "Content-Length": str(size),
                             "ETag": etag, "Content-Type": "application/octet-stream"},
                            protocol=2)
        fd = os.open(os.path.join(d, ts + ".data"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, body)
        os.setxattr(fd, "user.swift.metadata", meta)
        os.setxattr(fd, "user.swift.metadata_checksum", hashlib.md5(meta).hexdigest().encode())
        os.close(fd)


def link_copy(cluster, src, dst):
    a = os.path.join(cluster.root, "node%d" % src, "sd%d" % src, "objects")
    b = os.path.join(cluster.root, "node%d" % dst, "sd%d" % dst, "objects")
    shutil.rmtree(b, ignore_errors=True)
    subprocess.run(["cp", "-al", a, b], check=True)


def count_objects(cluster, node):
    device = os.path.join(cluster.root, "node%d" % node, "sd%d" % node, "objects")
    return sum(1 for _, _, files in os.walk(device) for f in files if f.endswith(".data"))


def daemon_conf(cluster, program, section, n, options):
    conf = os.path.join(cluster.etc, "%s-bench-%d.conf" % (program, n))
    log = os.path.join(cluster.root, "%s-bench-%d.log" % (program, n))
    with open(os.path.join(cluster.etc, "object-%d.conf" % n)) as f:
        text = f.read()
    recon = os.path.join(cluster.root, "recon-%d" % n)
    os.makedirs(recon, exist_ok=True)
    with open(conf, "w") as f:
        f.write(text.replace("log_file = %s/object-%d.log" % (cluster.root, n), "log_file = " + log)
                + "\n[%s]\nrecon_cache_path = %s\n%s" % (section, recon, options))
    return conf, log


def passes_done(log):
    if not os.path.exists(log):
        return 0
    with open(log) as f:
        return sum(1 for line in f if "partitions replicated in" in line)


def measure_replicators(cluster, nodes, window):
    """Starts a replicator per node; (first pass seconds, idle CPU shares over `window`)."""
    ps = cluster.ps
    reps = {}
    for n in nodes:
        conf, log = daemon_conf(cluster, "replicator", "object-replicator", n,
                                "sync_method = ssync\ninterval = 30\n")
        reps[n] = (ps.start([os.path.join(cluster.bin, "apus-object-replicator"), conf],
                            log + ".out"), log)
    began = time.time()
    while any(passes_done(log) < 1 for _, log in reps.values()):
        time.sleep(0.5)
        if time.time() - began > 3600:
            raise RuntimeError("first replication pass took over an hour")
    first = time.time() - began
    first_cpu = {n: procs.cpu_seconds(p.pid) for n, (p, _) in reps.items()}
    servers = {n: cluster.procs[("object", n)].pid for n in nodes}
    t0 = time.time()
    rep0 = {n: procs.cpu_seconds(p.pid) for n, (p, _) in reps.items()}
    srv0 = {n: procs.cpu_seconds(pid) for n, pid in servers.items()}
    passes0 = {n: passes_done(log) for n, (_, log) in reps.items()}
    time.sleep(window)
    dt = time.time() - t0
    rep1 = {n: procs.cpu_seconds(p.pid) for n, (p, _) in reps.items()}
    srv1 = {n: procs.cpu_seconds(pid) for n, pid in servers.items()}
    passes1 = {n: passes_done(log) for n, (_, log) in reps.items()}
    for p, _ in reps.values():
        ps.stop(p)
    return {
        "first_pass_s": round(first, 1),
        "first_pass_cpu_s": {n: round(c, 1) for n, c in first_cpu.items()},
        "idle_window_s": round(dt, 1),
        "idle_passes": {n: passes1[n] - passes0[n] for n in nodes},
        "idle_replicator_cpu_pct": {n: round(100 * (rep1[n] - rep0[n]) / dt, 2) for n in nodes},
        "idle_object_server_cpu_pct": {n: round(100 * (srv1[n] - srv0[n]) / dt, 2)
                                       for n in nodes},
    }


def measure_swift_replicator(cluster, n, window):
    """Swift 2.30.1's replicator (ssync) on node n for `window` seconds after its first pass."""
    script = (
        "import sys\n"
        "from swift.common import utils, storage_policy\n"
        "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
        "from swift.obj.replicator import ObjectReplicator\n"
        "conf = {'devices': sys.argv[2], 'mount_check': 'false', 'bind_ip': '127.0.0.1',\n"
        "        'bind_port': sys.argv[3], 'swift_dir': sys.argv[1], 'sync_method': 'ssync',\n"
        "        'recon_cache_path': sys.argv[4], 'concurrency': '1', 'interval': '30',\n"
        "        'log_level': 'INFO'}\n"
        "r = ObjectReplicator(conf)\n"
        "r.run_once()\n"
        "print('FIRST PASS DONE', flush=True)\n"
        "r.run_forever()\n")
    recon = os.path.join(cluster.root, "swift-recon-%d" % n)
    os.makedirs(recon, exist_ok=True)
    out = os.path.join(cluster.root, "swift-replicator-%d.out" % n)
    proc = cluster.ps.start(["/usr/bin/python3", "-c", script, cluster.etc,
                             os.path.join(cluster.root, "node%d" % n),
                             str(cluster.ports["object"][n]), recon], out)
    began = time.time()
    while "FIRST PASS DONE" not in open(out, errors="replace").read():
        time.sleep(0.5)
        if proc.poll() is not None or time.time() - began > 3600:
            raise RuntimeError("Swift's replicator: " + open(out).read()[-2000:])
    first = time.time() - began
    c0, t0 = procs.cpu_seconds(proc.pid), time.time()
    time.sleep(window)
    c1, dt = procs.cpu_seconds(proc.pid), time.time() - t0
    cluster.ps.stop(proc)
    return {"first_pass_s": round(first, 1), "idle_cpu_pct": round(100 * (c1 - c0) / dt, 2)}


def measure_auditor(cluster, n, window, objects):
    conf, log = daemon_conf(cluster, "auditor", "object-auditor", n, "interval = 30\n")
    proc = cluster.ps.start([os.path.join(cluster.bin, "apus-object-auditor"), conf],
                            log + ".out")
    time.sleep(2)  # started
    c0, t0 = procs.cpu_seconds(proc.pid), time.time()
    time.sleep(window)
    c1, dt = procs.cpu_seconds(proc.pid), time.time() - t0
    cluster.ps.stop(proc)
    paced = round(100 * (c1 - c0) / dt, 2)
    # Unpaced ALL pass: CPU per object (its children's CPU counted through the wait).
    conf, log = daemon_conf(cluster, "auditor-fast", "object-auditor", n,
                            "files_per_second = 0\nbytes_per_second = 0\n")
    before = os.times()
    t0 = time.time()
    subprocess.run([os.path.join(cluster.bin, "apus-object-auditor"), conf, "--once"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.time() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return {"paced_cpu_pct": paced, "unpaced_objects_per_s": round(objects / wall),
            "unpaced_cpu_us_per_object": round(1e6 * cpu / objects, 1),
            "unpaced_wall_s": round(wall, 1)}


def measure_refill(cluster, objects, size, method, max_passes=10):
    """Empties node 2's disk; nodes 0 and 1 replicate once each, together, at Swift's defaults
    (concurrency 1; the receiver takes one SSYNC per device at a time and 4 in all, and answers
    503 beyond), pass after pass until node 2 holds every object again. Objects/s, MiB/s."""
    shutil.rmtree(os.path.join(cluster.root, "node2", "sd2", "objects"))
    opts = "sync_method = ssync\n" if method == "ssync" else \
        ("sync_method = rsync\nrsync_module = rsync://{replication_ip}:%d/object"
         "{replication_port}\n" % cluster.rsyncd_port)
    t0 = time.time()
    passes, got = 0, 0
    while passes < max_passes and got < objects:
        passes += 1
        runs = []
        for n in (0, 1):
            conf, log = daemon_conf(cluster, "refill-%s" % method, "object-replicator", n, opts)
            runs.append(subprocess.Popen([os.path.join(cluster.bin, "apus-object-replicator"),
                                          conf, "--once"], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
        for r in runs:
            r.wait()
        got = count_objects(cluster, 2)
    wall = time.time() - t0
    return {"method": method, "objects": objects, "object_size": size, "refilled": got,
            "passes": passes, "seconds": round(wall, 1), "objects_per_s": round(got / wall),
            "mib_per_s": round(got * size / wall / 2**20, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--out", default="/tmp/apus-daemon-costs")
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--part-power", type=int, default=10)
    ap.add_argument("--window", type=int, default=90)
    ap.add_argument("--refill-objects", type=int, default=20000, help="4 KiB ones")
    ap.add_argument("--refill-large-objects", type=int, default=1000)
    ap.add_argument("--refill-size", type=int, default=1 << 20)
    ap.add_argument("--no-swift", action="store_true", help="skip Swift's replicator")
    ap.add_argument("--no-auditor", action="store_true", help="skip the auditor")
    ap.add_argument("--no-refill", action="store_true", help="skip the refill trials")
    args = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    result = {"objects": args.objects, "part_power": args.part_power}
    # Refills first, on a cluster of their own: removing a million objects' trees between data
    # sets would take longer than the measurements.
    with procs.TempDir("apus-daemon-refill-") as root, procs.Processes() as ps:
        cluster = Cluster(bin_dir, root, ps, nodes=3, part_power=args.part_power)
        cluster.start_rsyncd()
        # Small objects (the cost per object), then large ones (MiB/s).
        for key, count, size in (() if args.no_refill else (
                ("refill_small", args.refill_objects, 4096),
                ("refill_large", args.refill_large_objects, args.refill_size))):
            for n in range(3):
                shutil.rmtree(os.path.join(root, "node%d" % n, "sd%d" % n, "objects"),
                              ignore_errors=True)
            populate(cluster, 0, ("%s%d" % (key, i) for i in range(count)), size,
                     part_power=args.part_power)
            for n in (1, 2):
                link_copy(cluster, 0, n)
            result[key] = [measure_refill(cluster, count, size, m) for m in ("ssync", "rsync")]
            print("%s (%d x %d bytes):" % (key, count, size), result[key], flush=True)
    with procs.TempDir("apus-daemon-costs-") as root, procs.Processes() as ps:
        cluster = Cluster(bin_dir, root, ps, nodes=3, part_power=args.part_power)
        t0 = time.time()
        populate(cluster, 0, ("o%d" % i for i in range(args.objects)), 1,
                 part_power=args.part_power)
        for n in (1, 2):
            link_copy(cluster, 0, n)
        result["populate_s"] = round(time.time() - t0, 1)
        print("populated %d objects x 3 nodes in %.0f s" % (args.objects, result["populate_s"]),
              flush=True)
        result["replicator"] = measure_replicators(cluster, [0, 1, 2], args.window)
        print("replicator:", result["replicator"], flush=True)
        if not args.no_swift:
            result["swift_replicator"] = measure_swift_replicator(cluster, 0, args.window)
            print("Swift's replicator:", result["swift_replicator"], flush=True)
        if not args.no_auditor:
            result["auditor"] = measure_auditor(cluster, 0, args.window, args.objects)
            print("auditor:", result["auditor"], flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "daemon_costs.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
