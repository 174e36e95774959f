#!/usr/bin/python3
"""Where one ab.py scenario's time goes, on the whole machine: every process's CPU and a
`perf` profile over the scenario's measured window, as text (issue 19 asks for a profile per
hot scenario, and benchmarking.md for each figure's wall-clock explained).

Brings up the Apus side of bench/ab.py's layout (same configs, rings, HAProxy, memcached; or
Swift's side with --swift), runs one of ab.py's scenarios once, and meanwhile:
  - samples utime + stime of every process on the machine every 0.2 s (kernel threads too:
    jbd2 and the writeback workers do part of an fsync's work), and the machine's idle and
    iowait time from /proc/stat;
  - runs `perf record -a -g` (499 Hz, CLOCK_MONOTONIC timestamps).
The window apus-bench reports (after its setup and warm-up) is cut out of both. The report
gives the machine's time per operation (CPUs x window / operations) split by process group,
then per group its share of the samples by library, by system call (kernel samples are put
under the system call on their stack; the rest are interrupts, softirqs and the kernel's own
threads) and its hottest functions.

Needs perf and haproxy: scripts/install-deps --bench.

usage: bench/profile_scenario.py --only REGEX [--topology direct|ha] [--build build] [--swift]
                        [--out FILE] [--keep DIR]
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "support"))
import ab  # noqa: E402  (the layout, the sides and the scenarios are ab.py's)
from procs import proc_stat  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count()

# Process groups: a process's group is the first pattern its name matches.
GROUPS = [
    ("proxy", r"apus-proxy-serv|swift-proxy|proxy-server"),
    ("object servers", r"apus-object-ser|swift-object|object-server"),
    ("container servers", r"apus-container-|swift-container|container-serv"),
    ("account servers", r"apus-account-se|swift-account|account-server"),
    ("client (apus-bench)", r"apus-bench"),
    ("haproxy", r"haproxy"),
    ("memcached", r"memcached"),
    ("kernel: journal (jbd2)", r"jbd2"),
    ("kernel: workers and softirqs", r"kworker|ksoftirqd|kswapd|rcu_|migration|kcompact"),
    ("perf and this script", r"^perf$|python3|profile.py"),
]


def group_of(name, cmdline):
    for label, pattern in GROUPS:
        if re.search(pattern, name) or (cmdline and re.search(pattern, cmdline)):
            return label
    return "other"


def processes():
    """{pid: (name, cmdline, cpu seconds)} for every process now on the machine."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            name, cpu = proc_stat(pid)
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:300]
        except OSError:
            continue
        out[int(pid)] = (name, cmdline, cpu)
    return out


def machine_times():
    """(idle, iowait) CPU seconds of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return int(cpu[4]) / HZ, int(cpu[5]) / HZ


def run_sampled(argv):
    """Runs apus-bench, sampling every process's CPU: (exit, output, start, samples), samples
    [(monotonic time, {pid: (name, cmdline, cpu)}, (idle, iowait))]."""
    samples = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while proc.poll() is None:
        samples.append((time.monotonic(), processes(), machine_times()))
        time.sleep(0.2)
    samples.append((time.monotonic(), processes(), machine_times()))
    return proc.returncode, proc.stdout.read(), start, samples


def nearest(samples, t):
    return min(samples, key=lambda s: abs(s[0] - t))


def cpu_by_group(samples, begin, end):
    """CPU seconds per group between the samples nearest `begin` and `end` (0.2 s apart at
    most), idle and iowait included, and the pid -> group map."""
    a, b = nearest(samples, begin), nearest(samples, end)
    groups = collections.Counter()
    pid_group = {}
    for pid, (name, cmdline, cpu) in b[1].items():
        g = group_of(name, cmdline)
        pid_group[pid] = g
        before = a[1].get(pid)
        # Not matched by name: a kernel worker's name changes with the work it picks up.
        groups[g] += cpu - (before[2] if before else 0)
    groups["idle"] = b[2][0] - a[2][0]
    groups["iowait"] = b[2][1] - a[2][1]
    return groups, pid_group, b[0] - a[0]


SYSCALL = re.compile(r"__(?:x64|ia32)_sys_(\w+)|__do_sys_(\w+)|__se_sys_(\w+)")


def perf_samples(data, begin, end):
    """[(pid, tid, leaf symbol, leaf dso, syscall or None)] of the samples in [begin, end]."""
    out = subprocess.run(["perf", "script", "-i", data, "--time", "%.6f,%.6f" % (begin, end),
                          "-F", "pid,tid,time,ip,sym,dso"],
                         capture_output=True, text=True, errors="replace").stdout
    samples = []
    head, frames = None, []

    def flush():
        if head is None:
            return
        leaf_sym, leaf_dso = frames[0] if frames else ("[unknown]", "[unknown]")
        syscall = None
        for sym, _ in frames:
            m = SYSCALL.match(sym)
            if m:
                syscall = next(g for g in m.groups() if g)
                break
        samples.append((head[0], head[1], leaf_sym, leaf_dso, syscall))

    for line in out.splitlines():
        m = re.match(r"\s*(\d+)/(\d+)\s+[\d.]+:", line)
        if m:
            flush()
            head, frames = (int(m.group(1)), int(m.group(2))), []
            continue
        m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", line)
        if m and head is not None:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            frames.append((sym, os.path.basename(m.group(2))))
    flush()
    return samples


def short_dso(dso):
    if dso.startswith("[kernel"):
        return "kernel"
    return re.sub(r"\.so[.\d]*$", "", dso)


def report(title, ops, window, groups, samples, pid_group, top):
    lines = [title, ""]
    machine_ms = NCPU * window * 1000 / ops if ops else 0
    lines.append("%d CPUs x %.2f s window / %d operations = %.3f ms of machine time per "
                 "operation, spent as:" % (NCPU, window, ops, machine_ms))
    lines.append("")
    lines.append("| where | ms per op | share |")
    lines.append("|---|---|---|")
    total = sum(groups.values())
    for g, secs in groups.most_common():
        if secs * 1000 / ops < 0.001:
            continue
        lines.append("| %s | %.3f | %.1f%% |" % (g, secs * 1000 / ops, 100 * secs / total))
    lines.append("| (sum; the CPUs' time in the window) | %.3f | |" % (total * 1000 / ops))
    lines.append("")
    by_group = collections.defaultdict(list)
    for s in samples:
        by_group["idle" if s[0] == 0 else pid_group.get(s[0], "other")].append(s)
    lines.append("perf: %d samples in the window (499 Hz per CPU)." % len(samples))
    for g, secs in groups.most_common():
        ss = by_group.get(g)
        if g in ("idle", "iowait") or not ss or len(ss) < 20:
            continue
        n = len(ss)
        lines.append("")
        lines.append("### %s: %d samples, %.3f ms per op" % (g, n, secs * 1000 / ops))
        dsos = collections.Counter(short_dso(s[3]) for s in ss)
        lines.append("by library: " + ", ".join("%s %.1f%%" % (d, 100 * c / n)
                                               for d, c in dsos.most_common(6)))
        kernel = [s for s in ss if short_dso(s[3]) == "kernel"]
        if kernel:
            calls = collections.Counter(s[4] or "(no system call: interrupts, softirqs, "
                                        "scheduling, kernel threads)" for s in kernel)
            lines.append("kernel samples by system call: " + ", ".join(
                "%s %.1f%%" % (c, 100 * k / n) for c, k in calls.most_common(10)))
        syms = collections.Counter("%s (%s)" % (s[2], short_dso(s[3])) for s in ss)
        lines.append("hottest functions: " + ", ".join(
            "%s %.1f%%" % (sym, 100 * c / n) for sym, c in syms.most_common(top)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", required=True, help="regex naming one of ab.py's scenarios")
    ap.add_argument("--topology", default="direct", choices=("direct", "ha"))
    ap.add_argument("--build", default=os.path.join(ab.TOP, "build"))
    ap.add_argument("--swift", action="store_true", help="profile Swift's side instead")
    ap.add_argument("--proxies", type=int, default=2)
    ap.add_argument("--base-port", type=int, default=18190)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", default="", help="keep the cluster, perf data and logs here")
    args = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("profile_scenario.py: perf is missing (scripts/install-deps --bench)")
    chosen = [(n, a) for n, a in ab.scenarios(False) if re.search(args.only, n)]
    if len(chosen) != 1:
        sys.exit("profile_scenario.py: --only must name one scenario; it names %s"
                 % [n for n, _ in chosen])
    name, bench_args = chosen[0]
    build = os.path.abspath(args.build)
    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="apus-profile-")
    os.makedirs(work, exist_ok=True)
    cluster = os.path.join(work, "cluster")
    memcached_port = args.base_port + 50
    proxy_ports, haproxy_cfg = ab.layout(cluster, build, args.proxies, args.base_port,
                                         memcached_port)
    side = ab.Side("swift" if args.swift else "apus", cluster, build, proxy_ports)
    helpers = []
    perf = None
    try:
        helpers.append(subprocess.Popen(["memcached", "-u", "root", "-l", "127.0.0.1", "-p",
                                         str(memcached_port), "-U", "0", "-m", "64"],
                                        start_new_session=True))
        helpers.append(subprocess.Popen(["haproxy", "-f", haproxy_cfg, "-db"],
                                        start_new_session=True, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        ab.wait_port(args.base_port)
        ab.wipe_devices(cluster)
        side.up()
        data = os.path.join(work, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-k", "CLOCK_MONOTONIC", "-a", "-g",
                                 "-F", "499", "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(1)
        json_path = os.path.join(work, "bench.json")
        argv = [os.path.join(build, "bin", "apus-bench"),
                "--auth", "http://127.0.0.1:%d/auth/v1.0" % args.base_port,
                "--prefix", "profile", "--json", json_path, "--label", name] + bench_args
        if args.topology == "direct":
            argv += ["--endpoints", ",".join("127.0.0.1:%d" % p for p in proxy_ports)]
        code, output, start, samples = run_sampled(argv)
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        perf = None
        if code != 0:
            sys.exit("profile_scenario.py: apus-bench failed:\n" + output[-2000:])
        with open(json_path) as f:
            bench = json.load(f)
        wall = bench["wall_clock_s"]
        begin = start + wall["auth"] + wall["setup"] + wall["warmup"]
        end = begin + wall["window"]
        groups, pid_group, window = cpu_by_group(samples, begin, end)
        ops = bench["totals"]["ops"] * window / wall["window"]
        rev = subprocess.run(["git", "-C", ab.TOP, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        title = ("## %s, %s, %s side (binaries from %s; %s)\n\n%.1f ops/s, p99 %.1f ms, errors %d"
                 % (name, args.topology, side.name, build, "checkout at " + rev,
                    bench["totals"]["ops_per_s"], bench["totals"]["latency_ms"]["p99"],
                    bench["totals"]["errors"]))
        text = report(title, ops, window, groups, perf_samples(data, begin, end), pid_group,
                      args.top)
    finally:
        if perf is not None and perf.poll() is None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
        side.down()
        for p in helpers:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
