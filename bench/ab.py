#!/usr/bin/python3
"""A/B benchmark: Apus against stock Swift (Debian's swift-* packages) on this machine, as
docs/benchmarking.md asks.

Both sides run on the same layout, made once by scripts/saio: the same rings, four nodes of
object, container and account servers on the same device directories (wiped before each
side's turn), the same config files (Swift's get `user = root` added), one memcached, tempauth
with the same users. In front: N proxies of the side's kind, and HAProxy from Debian on one
ingress port balancing over them. Each scenario runs through the ingress ("ha") and spread by
apus-bench over the N proxies ("direct"). The sides alternate, Apus then Swift, for --rounds
rounds; each run's apus-bench JSON, the CPU seconds of all the side's processes during it,
the machine's description and physical references, and both sides' config files go to
OUT/results.json, and bench/report.py draws OUT/report.html from it.

usage: bench/ab.py [--build build] [--out DIR] [--rounds 3] [--proxies 2] [--quick]
                   [--only REGEX] [--topologies ha,direct] [--base-port 18090]
                   [--versus KEY=VALUE[,KEY=VALUE...]] [--versus-build DIR]

--quick runs every scenario briefly (a smoke test of the harness, not a result).
--versus makes side B Apus too, its proxies with these [app:proxy-server] options (say
local_info_cache_ttl=0): the A/B of one proxy knob, in the same harness and alternation.
--versus-build makes side B Apus built in DIR (another commit's binaries, same configs): the
A/B of a code change.
Needs haproxy: scripts/install-deps --bench (Swift comes with scripts/install-deps).
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
NODES = (1, 2, 3, 4)
KINDS = ("account", "container", "object")


def scenarios(quick):
    """(name, apus-bench arguments). Durations shrink with --quick."""
    d = lambda full: str(2 if quick else full)
    out = []
    for op in ("put", "get", "head", "delete"):
        for c in (1, 32, 128):
            args = ["--workload", op, "--size", "4KiB", "--concurrency", str(c),
                    "--duration", d(10), "--threads", "2"]
            if op == "delete":
                # Each object can be deleted once: no warm-up (it would use them up), and the
                # run ends when they are gone (the window is the time that took).
                args += ["--objects", str(500 if quick else 5000), "--warmup", "0"]
            elif op != "put":
                args += ["--objects", str(max(256, 4 * c))]
            out.append(("4KiB %s c%d" % (op.upper(), c), args))
    for size in ("1MiB", "16MiB"):
        for op in ("put", "get"):
            # The client checks lengths and ETag headers, not the MD5 of every byte: on two
            # cores that hashing would make the figure the client's.
            out.append(("%s %s c4" % (size, op.upper()),
                        ["--workload", op, "--size", size, "--concurrency", "4",
                         "--duration", d(15), "--objects", "8", "--verify", "headers"]))
    # Large objects: one 1 GiB object per client, plain and as an SLO of 100 MiB segments
    # (issue 13: segment prefetch should keep the SLO within 10% of the plain object).
    for label, extra in (("1GiB GET c2", []),
                         ("1GiB SLO GET (100MiB segments) c2", ["--slo-segment", "100MiB"])):
        out.append((label, ["--workload", "get", "--size", "1GiB", "--concurrency", "2",
                            "--duration", d(40), "--objects", "2", "--verify", "headers"] + extra))
    out.append(("80/20 GET/PUT 4KiB c32 (90 s)",
                ["--workload", "mixed", "--size", "4KiB", "--concurrency", "32",
                 "--duration", d(90), "--threads", "2", "--objects", "1024"]))
    out.append(("listing (limit 100) c8",
                ["--workload", "list", "--size", "1KiB", "--concurrency", "8",
                 "--duration", d(10), "--objects", "2000", "--containers", "1"]))
    return out


def port_in_use(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_in_use(port):
            return True
        time.sleep(0.1)
    return False


def session_cpu_seconds(sessions):
    """utime + stime of every live process in the given sessions (Swift forks workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state (field 3); session is field 6, utime/stime fields 14/15.
        if int(fields[3]) in sessions:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


class Side:
    """One side's processes (storage servers, proxies), all in sessions we created. `kind` is
    "apus" or "swift"; an Apus side may give its proxies extra [app:proxy-server] options
    (`proxy_options`, a list of "key=value")."""

    def __init__(self, name, cluster, build, proxy_ports, kind=None, proxy_options=()):
        self.name, self.cluster, self.build, self.proxy_ports = name, cluster, build, proxy_ports
        self.kind = kind or name
        self.proxy_options = list(proxy_options)
        self.procs = []

    def start(self, argv, log):
        out = open(os.path.join(self.cluster, "log", log), "ab")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.procs.append(p)

    def conf(self, name):
        path = os.path.join(self.cluster, "etc", name + ".conf")
        if self.kind == "apus":
            if not (self.proxy_options and name.startswith("proxy-server")):
                return path
            variant = path + "." + self.name
            shutil.copyfile(path, variant)
            subprocess.run([os.path.join(TOP, "scripts", "saio"), "conf-set", variant,
                            "[app:proxy-server]"] + self.proxy_options, check=True)
            return variant
        swift_conf = path + ".swift"
        with open(path) as f, open(swift_conf, "w") as out:
            out.write(f.read().replace("[DEFAULT]\n", "[DEFAULT]\nuser = root\n", 1))
        return swift_conf

    def up(self):
        etc = os.path.join(self.cluster, "etc")
        # A server left over from another run on one of these ports would take part of the
        # load (our servers bind with SO_REUSEPORT) with its CPU uncounted: refuse.
        ports = [int("6%d%s" % (n, k)) for n in NODES for k in ("16", "17", "18")]
        taken = [p for p in ports + list(self.proxy_ports) if port_in_use(p)]
        if taken:
            raise RuntimeError("%s: ports %s are in use before our servers start (a run left "
                               "its servers behind?)" % (self.name, taken))
        for n in NODES:
            for kind in KINDS:
                name = "%s-server-%d" % (kind, n)
                if self.kind == "apus":
                    argv = [os.path.join(self.build, "bin", "apus-%s-server" % kind), self.conf(name)]
                else:
                    argv = [PY, os.path.join(TOP, "tests", "support", "run_swift_server.py"), etc,
                            kind, self.conf(name)]
                self.start(argv, "%s.%s.out" % (name, self.name))
        for i, port in enumerate(self.proxy_ports, 1):
            name = "proxy-server-%d" % i
            if self.kind == "apus":
                argv = [os.path.join(self.build, "bin", "apus-proxy-server"), self.conf(name)]
            else:
                argv = [PY, os.path.join(TOP, "tests", "support", "run_swift_server.py"), etc,
                        "proxy", self.conf(name)]
            self.start(argv, "%s.%s.out" % (name, self.name))
        for port in ports + list(self.proxy_ports):
            if not wait_port(port):
                raise RuntimeError("%s: nothing listens on %d" % (self.name, port))
        time.sleep(1 if self.kind == "apus" else 3)  # Swift's workers fork after binding

    def sessions(self):
        return {p.pid for p in self.procs if p.poll() is None}

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []


def layout(cluster, build, proxies, base_port, memcached_port):
    env = dict(os.environ, APUS_SAIO_DIR=cluster, APUS_SAIO_PORT=str(base_port + 1),
               APUS_BUILD_DIR=build, APUS_SAIO_MEMCACHED_PORT=str(memcached_port))
    subprocess.run([os.path.join(TOP, "scripts", "saio"), "reset"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    etc = os.path.join(cluster, "etc")
    ports = []
    # Each proxy: saio's proxy config with its own port, admin (metrics) port and log file.
    edits = []
    for i in range(1, proxies + 1):
        port = base_port + i
        ports.append(port)
        conf = os.path.join(etc, "proxy-server-%d.conf" % i)
        shutil.copyfile(os.path.join(etc, "proxy-server.conf"), conf)
        edits += ["--", conf, "[DEFAULT]", "bind_port=%d" % port,
                  "log_file=%s" % os.path.join(cluster, "log", "proxy-server-%d.log" % i),
                  "[app:proxy-server]", "metrics_bind_port=%d" % (port + 1000),
                  # Memcached tuned for 128 clients, as an operator would, the same for both
                  # sides: with Swift's defaults (2 connections per worker, 2 s I/O timeout)
                  # Swift's proxies time out waiting for a connection or for an answer their
                  # busy event loop reads late, error-limit memcached after 10 such timeouts
                  # and then lose every tempauth token for 60 s (401s, 503s at auth:
                  # bench/results/2026-12-07-ab-c128.md). Apus keeps one connection per
                  # worker thread and reads only the timeout.
                  "[filter:cache]", "memcache_max_connections=32", "io_timeout=5"]
    subprocess.run([os.path.join(TOP, "scripts", "saio"), "conf-set"] + edits[1:], env=env,
                   check=True)
    os.remove(os.path.join(etc, "proxy-server.conf"))
    haproxy = os.path.join(etc, "haproxy.cfg")
    with open(haproxy, "w") as f:
        f.write("global\n  maxconn 4096\n\ndefaults\n  mode http\n  timeout connect 5s\n"
                "  timeout client 120s\n  timeout server 120s\n  option http-keep-alive\n\n"
                "frontend ingress\n  bind 127.0.0.1:%d\n  default_backend proxies\n\n"
                "backend proxies\n  balance roundrobin\n" % base_port)
        for i, port in enumerate(ports, 1):
            f.write("  server proxy%d 127.0.0.1:%d\n" % (i, port))
    return ports, haproxy


def flush_memcached(port):
    """Forgets the cached tokens and account/container info of the previous side's turn."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"flush_all\r\n")
        s.recv(64)


def wipe_devices(cluster):
    for n in NODES:
        dev = os.path.join(cluster, "srv", str(n), "node", "sdb%d" % n)
        shutil.rmtree(dev, ignore_errors=True)
        os.makedirs(dev)


def machine():
    def run(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, timeout=120).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    model = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    mem = re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read())
    desc = "%d vCPU %s, %.0f GiB RAM, Linux %s" % (
        os.cpu_count(), model.group(1) if model else "?",
        int(mem.group(1)) / 2**20 if mem else 0, platform.release())
    return desc


def nginx_ceiling(build, work, port):
    """One-hop HTTP ceiling and loopback bandwidth: nginx (2 workers) serving a 4 KiB and a
    16 MiB file to the same kind of client, for 3 s each."""
    if not shutil.which("nginx"):
        return {}
    www = os.path.join(work, "www")
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    os.makedirs(www, exist_ok=True)
    os.chmod(work, 0o755)
    with open(os.path.join(www, "small"), "wb") as f:
        f.write(os.urandom(4096))
    with open(os.path.join(www, "large"), "wb") as f:
        f.write(os.urandom(16 << 20))
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("worker_processes 2;\npid %s/nginx.pid;\nerror_log %s/logs/error.log;\n"
                "events { worker_connections 4096; }\nhttp { access_log off; "
                "keepalive_requests 1000000; server { listen 127.0.0.1:%d; root %s; } }\n"
                % (work, work, port, www))
    nginx = subprocess.Popen(["nginx", "-p", work, "-c", conf, "-g", "daemon off;"],
                             start_new_session=True, stderr=subprocess.DEVNULL)
    refs = {}
    try:
        wait_port(port)
        load = os.path.join(build, "bin", "apus-http-load")
        for name, path, conc in (("small", "/small", 32), ("large", "/large", 4)):
            out = subprocess.run([load, "--port", str(port), "--path", path, "--concurrency",
                                  str(conc), "--seconds", "3", "--warmup", "1"],
                                 stdout=subprocess.PIPE, text=True).stdout
            r = json.loads(out)
            if name == "small":
                refs["nginx, 4 KiB static file, c32 (req/s)"] = round(r["rps"])
            else:
                refs["loopback: nginx, 16 MiB file, c4 (MB/s)"] = round(r["rps"] * 16 * 1.048576)
    except (OSError, ValueError):
        pass
    finally:
        os.killpg(nginx.pid, signal.SIGTERM)
        nginx.wait()
    return refs


def references(cluster, build, port):
    refs = nginx_ceiling(build, os.path.join(os.path.dirname(cluster), "nginx"), port)
    for algo in ("md5", "sha256"):
        out = subprocess.run(["openssl", "speed", "-seconds", "1", algo], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        m = re.search(r"^%s\s+.*\s([\d.]+)k\s*$" % algo, out, re.M)
        if m:
            refs["%s per core, 16 KiB blocks (MB/s)" % algo.upper()] = round(float(m.group(1)) / 1000)
    path = os.path.join(cluster, "fsync-probe")
    times = []
    with open(path, "wb") as f:
        for _ in range(50):
            f.write(b"x" * 4096)
            start = time.perf_counter()
            f.flush()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - start)
    os.remove(path)
    times.sort()
    refs["fsync of a 4 KiB append, median (ms)"] = round(times[len(times) // 2] * 1e3, 3)
    # What large PUTs write: every replica's bytes reach the disk (fsync) before the answer.
    block = os.urandom(1 << 20)
    start = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(64):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    refs["64 MiB written and fsynced (MB/s)"] = round(64 * 1.048576 / (time.perf_counter() - start))
    os.remove(path)
    fs = subprocess.run(["df", "-T", cluster], stdout=subprocess.PIPE, text=True).stdout.split()
    refs["data filesystem"] = fs[-6] if len(fs) >= 7 else "?"
    return refs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--out", default="/tmp/apus-ab-" + time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--proxies", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--topologies", default="ha,direct")
    ap.add_argument("--base-port", type=int, default=18090)
    ap.add_argument("--idle-seconds", type=float, default=None)
    ap.add_argument("--versus", default="",
                    help="side B is Apus with these [app:proxy-server] options, not Swift")
    ap.add_argument("--versus-build", default="",
                    help="side B is Apus built in this directory, not Swift")
    args = ap.parse_args()
    versus = [o.strip() for o in args.versus.split(",") if o.strip()]
    if any("=" not in o for o in versus):
        sys.exit("ab.py: --versus takes KEY=VALUE[,KEY=VALUE...]")
    versus_build = os.path.abspath(args.versus_build) if args.versus_build else ""
    if versus_build and not os.path.isfile(os.path.join(versus_build, "bin", "apus-proxy-server")):
        sys.exit("ab.py: no Apus build in %s" % versus_build)
    side_b = ("apus(%s)" % ",".join(versus) if versus else
              "apus@%s" % os.path.basename(versus_build) if versus_build else "swift")
    if not shutil.which("haproxy"):
        sys.exit("ab.py: haproxy is missing (scripts/install-deps --bench)")
    build = os.path.abspath(args.build)
    side_b_build = versus_build or build  # Swift's side runs no binary of ours but apus-bench
    out = os.path.abspath(args.out)
    cluster = os.path.join(out, "cluster")
    os.makedirs(out, exist_ok=True)
    memcached_port = args.base_port + 50
    proxy_ports, haproxy_cfg = layout(cluster, build, args.proxies, args.base_port, memcached_port)
    topologies = [t for t in args.topologies.split(",") if t]
    chosen = [(n, a) for n, a in scenarios(args.quick) if re.search(args.only, n)]
    idle_seconds = args.idle_seconds if args.idle_seconds is not None else (3 if args.quick else 30)
    results = {"sides": ["apus", side_b], "rounds": args.rounds, "quick": args.quick,
               "machine": {"description": machine(),
                           "references": references(cluster, build, args.base_port + 60)},
               "topologies": {"ha": "HAProxy on 127.0.0.1:%d in front of %d proxies"
                              % (args.base_port, args.proxies),
                              "direct": "apus-bench spreads its connections over the %d proxies"
                              % args.proxies},
               "scenarios": [], "idle": {"seconds": idle_seconds, "apus": [], side_b: []},
               "configs": {}}
    table = {}
    for name, bench_args in chosen:
        for topo in topologies:
            entry = {"name": name, "topology": topo, "args": bench_args,
                     "runs": {"apus": [], side_b: []}}
            results["scenarios"].append(entry)
            table[(name, topo)] = entry
    helpers = []
    try:
        mc = subprocess.Popen(["memcached", "-u", "root", "-l", "127.0.0.1", "-p",
                               str(memcached_port), "-U", "0", "-m", "64"],
                              start_new_session=True)
        helpers.append(mc)
        ha = subprocess.Popen(["haproxy", "-f", haproxy_cfg, "-db"], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        helpers.append(ha)
        wait_port(args.base_port)
        for rnd in range(args.rounds):
            for side_name in ("apus", side_b):
                side = Side(side_name, cluster, side_b_build if side_name != "apus" else build,
                            proxy_ports, kind="apus" if (versus or versus_build) else None,
                            proxy_options=versus)
                if side_name == "apus":
                    side.proxy_options = []
                wipe_devices(cluster)
                flush_memcached(memcached_port)
                try:
                    side.up()  # inside: servers started before a failure are stopped too
                    if rnd == 0:
                        etc = os.path.join(cluster, "etc")
                        confs = {}
                        for f in sorted(os.listdir(etc)):
                            keep = (f.endswith(".conf.swift") if side_name == "swift" else
                                    f.endswith(".conf") or f.endswith(".conf." + side_name))
                            if keep or f in ("haproxy.cfg", "swift.conf"):
                                confs[f] = open(os.path.join(etc, f)).read()
                        results["configs"][side_name] = confs
                    cpu0 = session_cpu_seconds(side.sessions())
                    time.sleep(idle_seconds)
                    results["idle"][side_name].append(
                        round(session_cpu_seconds(side.sessions()) - cpu0, 3))
                    for i, (name, bench_args) in enumerate(chosen):
                        for topo in topologies:
                            run = run_scenario(build, out, side, name, bench_args, topo,
                                               args.base_port, proxy_ports,
                                               "%s-r%d-%d-%s" % (side_name, rnd, i, topo),
                                               ha.pid)
                            table[(name, topo)]["runs"][side_name].append(run)
                            t = run["bench"]["totals"] if run.get("bench") else {}
                            ha_cpu = ""
                            if topo == "ha" and t.get("ops"):
                                ha_cpu = "  haproxy %.3f ms/op" % (
                                    1000 * run["haproxy_cpu_s"] / t["ops"])
                            print("round %d %-6s %-32s %-6s %9s ops/s  p99 %8s ms  errors %s%s"
                                  % (rnd + 1, side_name, name, topo, t.get("ops_per_s", "-"),
                                     t.get("latency_ms", {}).get("p99", "-"), t.get("errors", "-"),
                                     ha_cpu), flush=True)
                finally:
                    side.down()
    finally:
        for p in helpers:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait()
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        subprocess.run([PY, os.path.join(TOP, "bench", "report.py"),
                        os.path.join(out, "results.json"), os.path.join(out, "report.html")])
        print("results: %s/results.json, report: %s/report.html" % (out, out))


def run_scenario(build, out, side, name, bench_args, topo, base_port, proxy_ports, tag,
                 haproxy_session):
    json_path = os.path.join(out, "runs", tag + ".json")
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    argv = [os.path.join(build, "bin", "apus-bench"),
            "--auth", "http://127.0.0.1:%d/auth/v1.0" % base_port,
            "--prefix", re.sub(r"[^a-z0-9]+", "-", tag.lower()), "--json", json_path,
            "--label", "%s %s %s" % (side.name, name, topo)] + bench_args
    if topo == "direct":
        argv += ["--endpoints", ",".join("127.0.0.1:%d" % p for p in proxy_ports)]
    returncode, output, samples = run_sampling_cpu(argv, side.sessions(), {haproxy_session})
    run = {"exit": returncode, "output": output[-2000:]}
    try:
        with open(json_path) as f:
            run["bench"] = json.load(f)
    except (OSError, ValueError):
        run["bench"] = None
        return run
    wall = run["bench"]["wall_clock_s"]
    begin = wall["auth"] + wall["setup"] + wall["warmup"]
    end = begin + wall["window"]
    run["server_cpu_s"] = round(cpu_at(samples, end, 1) - cpu_at(samples, begin, 1), 3)
    # HAProxy's own, apart: it works in "ha" runs only, for both sides alike.
    run["haproxy_cpu_s"] = round(cpu_at(samples, end, 2) - cpu_at(samples, begin, 2), 3)
    return run


def run_sampling_cpu(argv, sessions, haproxy_sessions=()):
    """Runs apus-bench `argv` while sampling the CPU seconds of the servers in `sessions` and of
    HAProxy's sessions every 0.2 s: (exit status, output, [(seconds since start, servers' CPU
    seconds, HAProxy's CPU seconds)]). The measured window is cut out of the samples afterwards
    from apus-bench's own account of its wall-clock (setup and warm-up are not counted)."""
    samples = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def sample():
        samples.append((time.monotonic() - start, session_cpu_seconds(sessions),
                        session_cpu_seconds(haproxy_sessions)))
    while proc.poll() is None:
        sample()
        time.sleep(0.2)
    sample()
    return proc.returncode, proc.stdout.read(), samples


def cpu_at(samples, t, column=1):
    """CPU seconds of the samples' `column` at time t, interpolated between the samples around
    it."""
    for a, b in zip(samples, samples[1:]):
        if a[0] <= t <= b[0]:
            return a[column] + (b[column] - a[column]) * (
                (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0)
    return samples[-1][column] if t > samples[-1][0] else samples[0][column]


if __name__ == "__main__":
    main()
