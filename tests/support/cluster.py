"""A small Apus cluster of real processes for integration tests: rings built with
apus-ring-builder on free loopback ports, Apus storage servers, memcached and proxies.

Only /usr/bin/python3 runs these (Debian's python3-swift lives there).
"""
import json
import os
import subprocess

import procs
from swiftclient import client as swift


class Cluster:
    """4 Apus storage nodes (object, container and account servers; 3 replicas, part power 6)
    on free loopback ports, memcached, and two proxies (tempauth user test:tester / testing).
    `bin_dir` holds the Apus programs; every process goes through `ps` (procs.Processes), so
    it is stopped when the test ends."""

    # The [container-updater] options of the storage nodes (a test that needs account listings
    # kept current, such as the expirer's, sets an interval instead).
    container_updater = "enabled = false\n"
    # More [app:<kind>-server] options per server kind, e.g. {"object": "x = 1\n"}.
    app_options = {}

    def __init__(self, bin_dir, root, ps, nodes=4, hosts=None, prefixes=None, part_power=6):
        """`hosts[n]` is node n's address (default 127.0.0.1) and `prefixes[n]` an argv prefix
        its programs run under (a network namespace's `ip netns exec`; default none)."""
        self.bin, self.root, self.ps = bin_dir, root, ps
        self.hosts = hosts or ["127.0.0.1"] * nodes
        self.prefixes = prefixes or [[]] * nodes
        self.etc = os.path.join(root, "etc")
        os.makedirs(self.etc)
        with open(os.path.join(self.etc, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = prox\nswift_hash_path_suffix = y\n\n"
                    "[storage-policy:0]\nname = gold\ndefault = yes\n")
        self.ports = {kind: [procs.free_port() for _ in range(nodes)]
                      for kind in ("object", "container", "account")}
        self.procs = {}  # (kind, node number) or ("proxy", name) -> process
        self.proxies = {}  # name -> (config path, port)
        self.mounts = []  # what a test mounted under root: unmount after the processes stop
        for kind, ports in self.ports.items():
            builder = os.path.join(self.etc, kind + ".builder")
            self.ring_builder(builder, "create", str(part_power), "3", "0")
            for n, port in enumerate(ports):
                self.ring_builder(builder, "add",
                                  "r1z%d-%s:%d/sd%d" % (n + 1, self.hosts[n], port, n), "100")
            self.ring_builder(builder, "rebalance")
        for kind, ports in self.ports.items():
            for n, port in enumerate(ports):
                self.start(kind, n)
        self.memcached_port = procs.free_port()
        mc_log = os.path.join(root, "memcached.out")
        mc = ps.start(["/usr/bin/memcached", "-u", "root", "-l", "127.0.0.1", "-U", "0",
                       "-p", str(self.memcached_port), "-m", "16"], mc_log)
        procs.wait_for_port(self.memcached_port, proc=mc, log_path=mc_log)
        self.proxy_port = self.start_proxy("proxy-server")
        self.second_proxy_port = self.start_proxy("proxy-server-2")

    def start_proxy(self, name, app_options="", ratelimit=None, pipeline=None, filters="",
                    users="", defaults=""):
        """Starts a proxy named `name` and returns its port. `app_options` go into
        [app:proxy-server]; `pipeline` replaces the default pipeline line (its filters must be
        configured here or in `filters`, extra config text appended to the file); `users`,
        more tempauth user lines; `defaults`, more [DEFAULT] lines (seen by every section;
        when they set log_file, the proxy does not log to <root>/<name>.log)."""
        root = self.root
        port = procs.free_port()
        conf = os.path.join(self.etc, name + ".conf")
        with open(conf, "w") as f:
            f.write("[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %d\nworkers = 2\nswift_dir = %s\n"
                    "%s%s\n"
                    "[pipeline:main]\npipeline = %s\n\n"
                    "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n"
                    "node_timeout = 1\nconn_timeout = 0.5\n%s\n"
                    "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                    "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n"
                    "[filter:healthcheck]\nuse = egg:swift#healthcheck\n"
                    "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
                    "[filter:cache]\nuse = egg:swift#memcache\n"
                    "memcache_servers = 127.0.0.1:%d\n"
                    "[filter:listing_formats]\nuse = egg:swift#listing_formats\n"
                    "[filter:tempauth]\nuse = egg:swift#tempauth\n"
                    "user_test_tester = testing .admin\n%s%s"
                    % (port, self.etc,
                       "" if "log_file" in defaults else "log_file = %s/%s.log\n" % (root, name),
                       defaults,
                       pipeline or "catch_errors gatekeeper healthcheck proxy-logging cache "
                       "listing_formats %stempauth proxy-server" % ("ratelimit " if ratelimit else ""),
                       app_options,
                       self.memcached_port, users,
                       "[filter:ratelimit]\nuse = egg:swift#ratelimit\n" + ratelimit
                       if ratelimit else "") + filters)
        self.proxies[name] = (conf, port)
        self.restart_proxy(name)
        return port

    def restart_proxy(self, name):
        """(Re)starts the proxy `name` made by start_proxy, on its config and port."""
        conf, port = self.proxies[name]
        log = os.path.join(self.root, name + ".out")
        proxy = self.ps.start([os.path.join(self.bin, "apus-proxy-server"), conf], log)
        procs.wait_for_port(port, proc=proxy, log_path=log)
        self.procs[("proxy", name)] = proxy

    def start_stock_proxy(self, name):
        """Stock swift-proxy-server (Debian's) on the config of the Apus proxy `name`, on
        another port: the reference an interop test compares the Apus proxy with."""
        port = procs.free_port()
        with open(os.path.join(self.etc, name + ".conf")) as f:
            conf = f.read()
        lines = []
        for line in conf.splitlines():
            if line.startswith("bind_port"):
                line = "bind_port = %d" % port
            lines.append(line)
            if line == "[DEFAULT]":
                lines.append("user = root")
        path = os.path.join(self.etc, "stock-" + name + ".conf")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = os.path.join(self.root, "stock-" + name + ".out")
        here = os.path.dirname(os.path.abspath(__file__))
        proc = self.ps.start(["/usr/bin/python3", os.path.join(here, "run_swift_server.py"),
                              self.etc, "proxy", path], log)
        procs.wait_for_port(port, timeout=30, proc=proc, log_path=log)
        return port

    def ring_builder(self, *args):
        subprocess.run([os.path.join(self.bin, "apus-ring-builder")] + list(args), check=True,
                       stdout=subprocess.DEVNULL)

    def start(self, kind, n):
        dev_root = os.path.join(self.root, "node%d" % n)
        os.makedirs(os.path.join(dev_root, "sd%d" % n), exist_ok=True)
        conf = os.path.join(self.etc, "%s-%d.conf" % (kind, n))
        with open(conf, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = %s\n"
                    "bind_port = %d\nworkers = 1\nswift_dir = %s\nlog_file = %s/%s-%d.log\n"
                    "fallocate_reserve = 0\n\n[pipeline:main]\npipeline = %s-server\n\n"
                    "[app:%s-server]\nuse = egg:swift#%s\n%s\n[container-updater]\n%s"
                    % (dev_root, self.hosts[n], self.ports[kind][n], self.etc, self.root, kind,
                       n, kind, kind, kind, self.app_options.get(kind, ""),
                       self.container_updater))
        log = os.path.join(self.root, "%s-%d.out" % (kind, n))
        proc = self.ps.start(self.prefixes[n] + [os.path.join(self.bin, "apus-%s-server" % kind),
                                                 conf], log)
        procs.wait_for_port(self.ports[kind][n], proc=proc, log_path=log, host=self.hosts[n])
        self.procs[(kind, n)] = proc

    def stop(self, kind, n):
        self.ps.stop(self.procs.pop((kind, n)))

    def daemon_once(self, program, section, n, options="", *args, kind="object"):
        """Runs apus-<kind>-<program> --once for storage node n, on its <kind> server's config
        with `section` added (recon cache in <root>/recon-<n>). Returns (exit status, output,
        the daemon's log)."""
        conf = os.path.join(self.etc, "%s-%d.conf" % (program, n))
        log = os.path.join(self.root, "%s-%d.log" % (program, n))
        with open(os.path.join(self.etc, "%s-%d.conf" % (kind, n))) as f:
            text = f.read()
        recon = os.path.join(self.root, "recon-%d" % n)
        os.makedirs(recon, exist_ok=True)
        with open(conf, "w") as f:
            f.write(text.replace("log_file = %s/%s-%d.log" % (self.root, kind, n),
                                 "log_file = " + log)
                    + "\n[%s]\nrecon_cache_path = %s\n%s" % (section, recon, options))
        run = subprocess.run(self.prefixes[n] +
                             [os.path.join(self.bin, "apus-%s-%s" % (kind, program)), conf,
                              "--once"]
                             + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=600)
        with open(log) as f:
            return run.returncode, run.stdout, f.read()

    def replicate(self, n, *args, rsync=False):
        """apus-object-replicator --once on node n: (exit status, output, log). With SSYNC, or
        with rsync into the nodes' rsync daemon (start_rsyncd)."""
        method = ("sync_method = rsync\nrsync_module = rsync://{replication_ip}:%d/"
                  "object{replication_port}\n" % self.rsyncd_port) if rsync else \
            "sync_method = ssync\n"
        return self.daemon_once("replicator", "object-replicator", n,
                                "concurrency = 2\n" + method, *args)

    def start_rsyncd(self):
        """An rsync daemon for every node, as Swift's all-in-one has one: modules
        object<port>, container<port> and account<port> (each server's port) over node n's
        devices directory. Returns its port."""
        port = procs.free_port()
        conf = os.path.join(self.etc, "rsyncd.conf")
        with open(conf, "w") as f:
            f.write("uid = root\ngid = root\nuse chroot = no\nlog file = %s/rsyncd.log\n"
                    "pid file = %s/rsyncd.pid\nlock file = %s/rsyncd.lock\n\n"
                    % (self.root, self.root, self.root))
            for kind in ("object", "container", "account"):
                for n, server_port in enumerate(self.ports[kind]):
                    f.write("[%s%d]\nmax connections = 8\npath = %s\nread only = false\n"
                            "lock file = %s/rsyncd-%s%d.lock\n\n"
                            % (kind, server_port, os.path.join(self.root, "node%d" % n),
                               self.root, kind, server_port))
        log = os.path.join(self.root, "rsyncd.out")
        proc = self.ps.start(["rsync", "--daemon", "--no-detach", "--config=" + conf,
                              "--address=127.0.0.1", "--port=%d" % port], log)
        procs.wait_for_port(port, proc=proc, log_path=log)
        self.rsyncd_port = port
        return port

    def start_swift(self, kind, n):
        """Stock Swift's <kind> server (Debian's, run by run_swift_server.py) in place of node
        n's Apus one, on the same config and device; after a stop, again."""
        if (kind, n) in self.procs:
            self.stop(kind, n)
        path = os.path.join(self.etc, "%s-%d.conf.swift" % (kind, n))
        if not os.path.exists(path):
            with open(os.path.join(self.etc, "%s-%d.conf" % (kind, n))) as f:
                text = f.read().replace("[DEFAULT]\n", "[DEFAULT]\nuser = root\n", 1)
            with open(path, "w") as f:
                f.write(text)
        log = os.path.join(self.root, "swift-%s-%d.out" % (kind, n))
        here = os.path.dirname(os.path.abspath(__file__))
        proc = self.ps.start(["/usr/bin/python3", os.path.join(here, "run_swift_server.py"),
                              self.etc, kind, path], log)
        procs.wait_for_port(self.ports[kind][n], timeout=30, proc=proc, log_path=log,
                            host=self.hosts[n])
        self.procs[(kind, n)] = proc

    def internal_client_conf(self, name="internal-client.conf"):
        """A config for Swift's InternalClient (Swift's proxy app in-process, on this
        cluster's rings and memcached; account_autocreate for the daemons' own accounts), as
        Swift's sharder and reconciler take one. Returns its path."""
        path = os.path.join(self.etc, name)
        with open(path, "w") as f:
            f.write("[DEFAULT]\nswift_dir = %s\n\n"
                    "[pipeline:main]\npipeline = catch_errors cache proxy-server\n\n"
                    "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n\n"
                    "[filter:cache]\nuse = egg:swift#memcache\n"
                    "memcache_servers = 127.0.0.1:%d\n\n"
                    "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                    % (self.etc, self.memcached_port))
        return path

    def db_replicate(self, kind, n):
        """apus-<kind>-replicator --once for node n: (exit status, output, log)."""
        return self.daemon_once("replicator", kind + "-replicator", n, "", kind=kind)

    def swift_db_replicate(self, kind, n, per_diff=1000):
        """Swift 2.30.1's <kind> (container or account) replicator, once, for node n, whole
        files going by rsync into the nodes' rsync daemon (start_rsyncd): (exit status,
        output, its replication_stats)."""
        script = (
            "import sys\n"
            "from swift.common import utils, storage_policy\n"
            "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
            "from swift.%s.replicator import %sReplicator as R\n"
            "conf = {'devices': sys.argv[2], 'mount_check': 'false', 'bind_ip': '127.0.0.1',\n"
            "        'bind_port': sys.argv[3], 'swift_dir': sys.argv[1],\n"
            "        'recon_cache_path': sys.argv[4], 'databases_per_second': '1000',\n"
            "        'rsync_module': sys.argv[5], 'per_diff': sys.argv[6]}\n"
            "R(conf).run_once()\n" % (kind, kind.capitalize()))
        module = "rsync://{replication_ip}:%d/%s{replication_port}" % (self.rsyncd_port, kind)
        recon = os.path.join(self.root, "swift-recon-%d" % n)
        os.makedirs(recon, exist_ok=True)
        run = subprocess.run(["/usr/bin/python3", "-c", script, self.etc,
                              os.path.join(self.root, "node%d" % n),
                              str(self.ports[kind][n]), recon, module, str(per_diff)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=300)
        stats = {}
        try:
            with open(os.path.join(recon, kind + ".recon")) as f:
                stats = json.load(f).get("replication_stats", {})
        except (OSError, ValueError):
            pass
        return run.returncode, run.stdout, stats

    def audit(self, n, *args):
        """apus-object-auditor --once on node n (unpaced): (exit status, output, log)."""
        return self.daemon_once("auditor", "object-auditor", n,
                                "files_per_second = 0\nbytes_per_second = 0\n", *args)

    def reap(self, n, options=""):
        """apus-account-reaper --once on node n: (exit status, output, log)."""
        return self.daemon_once("reaper", "account-reaper", n, options, kind="account")

    def connect(self, port=None):
        """(storage URL, token) of test:tester through the proxy on `port` (the first one)."""
        url, token = swift.get_auth("http://127.0.0.1:%d/auth/v1.0" % (port or self.proxy_port),
                                    "test:tester", "testing")
        return url, token

    def ring_nodes(self, kind, account, container=None, obj=None):
        """The partition of an account, container or object in the `kind` ring and the node
        numbers of its primaries (Swift's own Ring on our ring file)."""
        from swift.common import utils
        from swift.common.ring import Ring
        utils.set_swift_dir(self.etc)  # this cluster's hash prefix and suffix
        names = [n for n in (container, obj) if n is not None]
        part, nodes = Ring(os.path.join(self.etc, kind + ".ring.gz")).get_nodes(account, *names)
        return part, [self.ports[kind].index(n["port"]) for n in nodes]

    def placement(self, container, obj):
        """An object's partition and the node numbers of its primaries (Swift's own Ring on
        our ring file)."""
        from swift.common import utils
        from swift.common.ring import Ring
        utils.set_swift_dir(self.etc)  # this cluster's hash prefix and suffix
        part, nodes = Ring(os.path.join(self.etc, "object.ring.gz")).get_nodes(
            "AUTH_test", container, obj)
        return part, [self.ports["object"].index(n["port"]) for n in nodes]

    def primaries(self, container, obj):
        return self.placement(container, obj)[1]
