#!/usr/bin/python3
"""Container PUTs with account_update_mode = sync (Swift's) and async (issue 17): one
apus-container-server per mode, driven directly (backend requests, as a proxy sends them, each
naming one account replica) by apus-http-load, both updating one apus-account-server;
db_sync_writes = true on all; no container updater runs. Alternating sync and async in every
round; medians of --rounds.

Per mode: container PUTs/s, p50 and p99 latency (ms), and server CPU per PUT (the container
server's and the account server's, from /proc).

usage: bench/account_update_modes.py [--build build] [--rounds 3] [--seconds 5]
                                     [--concurrency 16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
import procs  # noqa: E402


def server(ps, root, bin_dir, kind, name, extra=""):
    port = procs.free_port()
    dev = os.path.join(root, name)
    os.makedirs(os.path.join(dev, "sda"), exist_ok=True)
    conf = os.path.join(root, name + ".conf")
    with open(conf, "w") as f:
        f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                "bind_port = %d\nworkers = 2\nswift_dir = %s\nlog_file = %s/%s.log\n"
                "log_level = WARNING\n\n[pipeline:main]\npipeline = %s-server\n\n"
                "[app:%s-server]\nuse = egg:swift#%s\ndb_sync_writes = true\n%s\n"
                "[container-updater]\nenabled = false\n"
                % (dev, port, root, root, name, kind, kind, kind, extra))
    log = os.path.join(root, name + ".out")
    proc = ps.start([os.path.join(bin_dir, "apus-%s-server" % kind), conf], log)
    procs.wait_for_port(port, proc=proc, log_path=log)
    return port, proc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    results = {"sync": [], "async": []}
    with procs.Processes() as ps, tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = acc\nswift_hash_path_suffix = upd\n")
        aport, aproc = server(ps, root, bin_dir, "account", "account")
        sides = {mode: server(ps, root, bin_dir, "container", "container-" + mode,
                              "account_update_mode = %s\n" % mode)
                 for mode in ("sync", "async")}
        for rnd in range(args.rounds):
            for mode, (port, proc) in sides.items():
                account = "AUTH_r%d%s" % (rnd, mode)
                status, _, _ = procs.request(aport, "PUT", "/sda/0/" + account,
                                             headers={"X-Timestamp": "%.5f" % time.time()})
                assert status in (201, 202), status
                before = (procs.cpu_seconds(proc.pid), procs.cpu_seconds(aproc.pid))
                out = subprocess.run(
                    [os.path.join(bin_dir, "apus-http-load"), "--port", str(port),
                     "--path", "/sda/0/" + account, "--method", "PUT", "--size", "0",
                     "--objects", "100000000", "--backend", "--concurrency",
                     str(args.concurrency), "--seconds", str(args.seconds), "--warmup", "0",
                     "--header", "X-Account-Host: 127.0.0.1:%d" % aport,
                     "--header", "X-Account-Device: sda",
                     "--header", "X-Account-Partition: 0"],
                    stdout=subprocess.PIPE, check=True, text=True).stdout
                after = (procs.cpu_seconds(proc.pid), procs.cpu_seconds(aproc.pid))
                r = json.loads(out)
                n = max(1, r["requests"])
                # Async updates still in flight are work of both servers: wait them out.
                time.sleep(1)
                after = (procs.cpu_seconds(proc.pid), procs.cpu_seconds(aproc.pid))
                results[mode].append({
                    "puts_per_s": r["rps"], "errors": r["errors"],
                    "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                    "container_cpu_ms": 1000 * (after[0] - before[0]) / n,
                    "account_cpu_ms": 1000 * (after[1] - before[1]) / n})
    summary = {}
    for mode, runs in results.items():
        summary[mode] = {k: round(statistics.median(r[k] for r in runs), 3)
                         for k in runs[0] if k != "errors"}
        summary[mode]["errors"] = sum(r["errors"] for r in runs)
    summary["async_over_sync_puts_per_s"] = round(
        summary["async"]["puts_per_s"] / summary["sync"]["puts_per_s"], 2)
    print(json.dumps({"rounds": results, "median": summary}, indent=1))


if __name__ == "__main__":
    main()
