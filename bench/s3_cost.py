#!/usr/bin/python3
"""What the S3 API costs over the Swift API on one Apus cluster (issue 15's goal: at most 15%
more server CPU per 4 KiB GET and PUT).

One cluster (tests/support/cluster.py: four Apus storage nodes, memcached, one proxy whose
pipeline has s3api before tempauth, as the all-in-one's) serves both sides; apus-bench runs
each scenario through the Swift API (X-Auth-Token) and through the S3 API (--api s3: the same
user as access key, Version 4 header signatures with UNSIGNED-PAYLOAD), alternating, for
--rounds rounds. For each run: operations per second and the CPU seconds of every server
process during the measured window (sampled from /proc, as bench/ab.py does) per operation.
Prints the medians and the ratio S3 / Swift of CPU per operation, and writes every run to
OUT/s3_cost.json.

usage: bench/s3_cost.py [--build build] [--out DIR] [--rounds 3] [--duration 10]
                        [--concurrency 16] [--s3-option "s3_acl = true" ...]

--s3-option adds a line to [filter:s3api] (repeatable): what S3 ACLs cost, for one.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
sys.path.insert(0, HERE)
import procs  # noqa: E402
from ab import cpu_at, run_sampling_cpu  # noqa: E402
from cluster import Cluster  # noqa: E402

PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api "
            "tempauth copy slo proxy-logging proxy-server")
FILTERS = ("[filter:s3api]\nuse = egg:swift#s3api\n[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:slo]\nuse = egg:swift#slo\n")


def run(build, port, sessions, api, workload, args, tag, out):
    json_path = os.path.join(out, "runs", tag + ".json")
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    argv = [os.path.join(build, "bin", "apus-bench"),
            "--auth", "http://127.0.0.1:%d/auth/v1.0" % port, "--api", api,
            "--workload", workload, "--size", "4KiB", "--prefix", tag.replace("_", "-"),
            "--json", json_path] + args
    returncode, output, samples = run_sampling_cpu(argv, sessions)
    if returncode != 0:
        sys.exit("apus-bench failed (%s):\n%s" % (tag, output[-2000:]))
    with open(json_path) as f:
        bench = json.load(f)
    wall = bench["wall_clock_s"]
    begin = wall["auth"] + wall["setup"] + wall["warmup"]
    cpu = cpu_at(samples, begin + wall["window"]) - cpu_at(samples, begin)
    total = bench["totals"]
    if total["errors"]:
        sys.exit("%s: %d errors: %r" % (tag, total["errors"], total["errors_by_cause"]))
    return {"api": api, "workload": workload, "ops": total["ops"],
            "ops_per_s": total["ops_per_s"], "server_cpu_s": round(cpu, 3),
            "server_cpu_ms_per_op": 1000 * cpu / total["ops"] if total["ops"] else None,
            "p99_ms": total["latency_ms"]["p99"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "results", "s3_cost"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--s3-option", action="append", default=[],
                    help="a line for [filter:s3api], e.g. 's3_acl = true'")
    o = ap.parse_args()
    build = os.path.abspath(o.build)
    os.makedirs(o.out, exist_ok=True)
    runs = []
    with procs.TempDir("apus-s3-cost-") as root, procs.Processes() as ps:
        cluster = Cluster(os.path.join(build, "bin"), root, ps)
        filters = FILTERS.replace("use = egg:swift#s3api\n", "use = egg:swift#s3api\n" +
                                  "".join(line + "\n" for line in o.s3_option))
        port = cluster.start_proxy("proxy-s3", pipeline=PIPELINE, filters=filters)
        sessions = {p.pid for p, _ in ps.procs}  # each server leads a session of its own
        common = ["--concurrency", str(o.concurrency), "--threads", "1",
                  "--duration", str(o.duration), "--verify", "headers"]
        for r in range(o.rounds):
            for workload, extra in (("get", ["--objects", str(4 * o.concurrency)]),
                                    ("put", [])):
                for api in ("swift", "s3"):
                    tag = "r%d_%s_%s" % (r, workload, api)
                    one = run(build, port, sessions, api, workload, common + extra, tag, o.out)
                    one["round"] = r
                    runs.append(one)
                    print("round %d %-3s %-5s %8.0f ops/s  %.3f ms server CPU/op  p99 %.2f ms"
                          % (r, workload.upper(), api, one["ops_per_s"],
                             one["server_cpu_ms_per_op"], one["p99_ms"]), flush=True)
    summary = {}
    print("\n4 KiB, c%d, %d rounds, medians:" % (o.concurrency, o.rounds))
    for workload in ("get", "put"):
        med = {}
        for api in ("swift", "s3"):
            mine = [x for x in runs if x["workload"] == workload and x["api"] == api]
            med[api] = {k: statistics.median(x[k] for x in mine)
                        for k in ("ops_per_s", "server_cpu_ms_per_op", "p99_ms")}
        ratio = med["s3"]["server_cpu_ms_per_op"] / med["swift"]["server_cpu_ms_per_op"]
        summary[workload] = dict(med, s3_over_swift_cpu=ratio)
        print("  %-3s swift %8.0f ops/s %.3f ms CPU/op | s3 %8.0f ops/s %.3f ms CPU/op | "
              "S3/Swift CPU per op %.3f (goal <= 1.15)"
              % (workload.upper(), med["swift"]["ops_per_s"], med["swift"]["server_cpu_ms_per_op"],
                 med["s3"]["ops_per_s"], med["s3"]["server_cpu_ms_per_op"], ratio))
    with open(os.path.join(o.out, "s3_cost.json"), "w") as f:
        json.dump({"runs": runs, "summary": summary,
                   "concurrency": o.concurrency, "duration": o.duration}, f, indent=1)


if __name__ == "__main__":
    main()
