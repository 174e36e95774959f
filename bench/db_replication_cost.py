#!/usr/bin/python3
"""What container replication costs (issue 17): apus-container-replicator on three Apus storage
nodes (tests/support/cluster.py, 3 replicas: every node holds every database).

Measured, from /proc (user + system CPU of each process over a window):
  first pass       --containers empty containers made on every node (backend PUTs), then one
                   unpaced pass of each node's replicator (databases_per_second = 0, so the
                   figure is the work, not the pacing): seconds, and CPU per database of the
                   replicator and of the container servers answering it
  idle             the replicators as daemons at Swift's cadence (a pass every 30 s) for
                   --window seconds after their first pass (unpaced here, so that it does not
                   take --containers/50 seconds): share of one core per node of the
                   replicators and of the container servers (what an idle cluster pays)
  rows             a container holding --rows rows on node 0 only (UPDATE requests, 1000
                   rows each); node 0's replicator makes it on nodes 1 and 2 and sends every
                   row (per_diff 1000, max_diffs high enough for one pass): rows/s merged per
                   peer and CPU seconds per million rows sent (replicator) and merged
                   (receiving container servers)

usage: bench/db_replication_cost.py [--build build] [--out DIR] [--containers 100000]
                                    [--rows 1000000] [--window 90]
Prints a table and writes OUT/db_replication_cost.json.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

ACCOUNT = "AUTH_bench"


def container_ring(cluster):
    from swift.common import utils
    from swift.common.ring import Ring
    utils.set_swift_dir(cluster.etc)
    return Ring(os.path.join(cluster.etc, "container.ring.gz"))


def make_containers(cluster, count, threads=8):
    """`count` empty containers on every node (backend PUTs, no account updates)."""
    ring = container_ring(cluster)
    ts = "%.5f" % time.time()
    work = list(range(count))
    lock = threading.Lock()

    def worker():
        conns = {}
        while True:
            with lock:
                if not work:
                    break
                i = work.pop()
            name = "c%07d" % i
            part = ring.get_part(ACCOUNT, name)
            for n, port in enumerate(cluster.ports["container"]):
                conn = conns.get(port) or http.client.HTTPConnection("127.0.0.1", port)
                conns[port] = conn
                conn.request("PUT", "/sd%d/%d/%s/%s" % (n, part, ACCOUNT, name),
                             headers={"X-Timestamp": ts,
                                      "X-Backend-Storage-Policy-Index": "0"})
                r = conn.getresponse()
                r.read()
                if r.status not in (201, 202):
                    raise RuntimeError("container PUT: %d" % r.status)

    # A worker's exception (a refused PUT) must end the run, not just its thread.
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(worker) for _ in range(threads)]:
            done.result()


def fill_rows(cluster, node, name, rows):
    """A container on `node` only, with `rows` object rows (UPDATE, 1000 rows a request)."""
    ring = container_ring(cluster)
    part = ring.get_part(ACCOUNT, name)
    port = cluster.ports["container"][node]
    path = "/sd%d/%d/%s/%s" % (node, part, ACCOUNT, name)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    ts = time.time()
    conn.request("PUT", path, headers={"X-Timestamp": "%.5f" % ts,
                                       "X-Backend-Storage-Policy-Index": "0"})
    conn.getresponse().read()
    for start in range(0, rows, 1000):
        batch = [{"name": "obj-%09d" % i, "created_at": "%.5f" % (ts + 1 + i * 1e-5),
                  "size": 1024, "content_type": "application/octet-stream",
                  "etag": "d41d8cd98f00b204e9800998ecf8427e", "deleted": 0,
                  "storage_policy_index": 0} for i in range(start, min(rows, start + 1000))]
        body = json.dumps(batch).encode()
        conn.request("UPDATE", path, body=body,
                     headers={"X-Timestamp": "%.5f" % time.time(),
                              "X-Backend-Storage-Policy-Index": "0",
                              "Content-Length": str(len(body))})
        r = conn.getresponse()
        r.read()
        if r.status != 202:
            raise RuntimeError("UPDATE: %d" % r.status)
    return part


def replicator_conf(cluster, n, options):
    conf = os.path.join(cluster.etc, "container-replicator-%d.conf" % n)
    with open(os.path.join(cluster.etc, "container-%d.conf" % n)) as f:
        text = f.read()
    recon = os.path.join(cluster.root, "recon-%d" % n)
    os.makedirs(recon, exist_ok=True)
    log = os.path.join(cluster.root, "container-replicator-%d.log" % n)
    with open(conf, "w") as f:
        f.write(text.replace("log_file = %s/container-%d.log" % (cluster.root, n),
                             "log_file = " + log)
                + "\n[container-replicator]\nrecon_cache_path = %s\n%s" % (recon, options))
    return conf, log


def run_once(cluster, n, options):
    """One --once pass on node n: (seconds, replicator CPU seconds)."""
    conf, _ = replicator_conf(cluster, n, options)
    begin = time.monotonic()
    proc = cluster.ps.start([os.path.join(cluster.bin, "apus-container-replicator"), conf,
                             "--once"], os.path.join(cluster.root, "once-%d.out" % n))
    cpu = 0.0
    while proc.poll() is None:
        try:
            cpu = procs.cpu_seconds(proc.pid)
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.05)
    return time.monotonic() - begin, cpu


def server_cpu(cluster):
    return {n: procs.cpu_seconds(cluster.procs[("container", n)].pid) for n in range(3)}


def passes_done(log_path):
    try:
        with open(log_path) as f:
            return len(re.findall(r"Attempted to replicate", f.read()))
    except FileNotFoundError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--containers", type=int, default=100000)
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--window", type=float, default=90)
    args = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    out = args.out or tempfile.mkdtemp(prefix="apus-db-repl-cost-")
    result = {"containers": args.containers, "rows": args.rows, "window_s": args.window}
    with procs.Processes() as ps, tempfile.TemporaryDirectory() as root:
        Cluster.container_updater = "enabled = false\n"
        cluster = Cluster(bin_dir, root, ps, nodes=3)
        t0 = time.monotonic()
        make_containers(cluster, args.containers)
        print("made %d containers on 3 nodes in %.0f s" % (args.containers,
                                                           time.monotonic() - t0))

        before = server_cpu(cluster)
        first = {n: run_once(cluster, n, "databases_per_second = 0\nconcurrency = 8\n")
                 for n in range(3)}
        after = server_cpu(cluster)
        served = sum(after[n] - before[n] for n in range(3))
        result["first_pass"] = {
            "seconds": {n: round(first[n][0], 1) for n in range(3)},
            "replicator_cpu_us_per_db": round(
                1e6 * sum(c for _, c in first.values()) / (3 * args.containers), 1),
            "servers_cpu_us_per_db": round(1e6 * served / (3 * args.containers), 1)}
        print("first pass:", result["first_pass"])

        daemons, logs, earlier = {}, {}, {}
        for n in range(3):
            # Unpaced, so the daemon's first pass (every database compared, as in any new
            # process) does not take containers/50 seconds; the idle passes after it skip
            # every database, which the pacing does not touch.
            conf, logs[n] = replicator_conf(cluster, n,
                                            "interval = 30\ndatabases_per_second = 0\n")
            earlier[n] = passes_done(logs[n])  # the --once pass logged there too
            daemons[n] = ps.start([os.path.join(bin_dir, "apus-container-replicator"), conf],
                                  os.path.join(root, "daemon-%d.out" % n))
        deadline = time.monotonic() + 3600
        # A new process compares every database in its first pass; the window starts after.
        while any(passes_done(logs[n]) <= earlier[n] for n in range(3)) and \
                time.monotonic() < deadline:
            time.sleep(1)
        rep0 = {n: procs.cpu_seconds(daemons[n].pid) for n in range(3)}
        srv0 = server_cpu(cluster)
        time.sleep(args.window)
        rep1 = {n: procs.cpu_seconds(daemons[n].pid) for n in range(3)}
        srv1 = server_cpu(cluster)
        result["idle"] = {
            "replicator_cpu_pct": {n: round(100 * (rep1[n] - rep0[n]) / args.window, 3)
                                   for n in range(3)},
            "server_cpu_pct": {n: round(100 * (srv1[n] - srv0[n]) / args.window, 3)
                               for n in range(3)},
            "passes": {n: passes_done(logs[n]) - earlier[n] - 1 for n in range(3)}}
        print("idle:", result["idle"])
        for n in range(3):
            ps.stop(daemons[n])

        if args.rows:
            t0 = time.monotonic()
            fill_rows(cluster, 0, "rows", args.rows)
            print("filled %d rows in %.0f s" % (args.rows, time.monotonic() - t0))
            before = server_cpu(cluster)
            seconds, cpu = run_once(cluster, 0, "databases_per_second = 0\nmax_diffs = %d\n"
                                    % (args.rows // 1000 + 1))
            after = server_cpu(cluster)
            merged = sum(after[n] - before[n] for n in (1, 2))
            result["rows"] = {
                "seconds": round(seconds, 1),
                "rows_per_s_per_peer": round(args.rows / seconds),
                "replicator_cpu_s_per_million_rows": round(cpu * 1e6 / (2 * args.rows), 2),
                "servers_cpu_s_per_million_rows_merged": round(merged * 1e6 / (2 * args.rows), 2)}
            print("rows:", result["rows"])
            ring = container_ring(cluster)
            part = ring.get_part(ACCOUNT, "rows")
            for n in (1, 2):
                status, headers, _ = procs.request(cluster.ports["container"][n], "HEAD",
                                                   "/sd%d/%d/%s/rows" % (n, part, ACCOUNT))
                count = int(headers.get("x-container-object-count", -1))
                if count != args.rows:
                    print("node %d holds %d rows, not %d" % (n, count, args.rows))
                    result["rows"]["incomplete"] = True
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "db_replication_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    print("written to", os.path.join(out, "db_replication_cost.json"))


if __name__ == "__main__":
    main()
