"""Test hosts in network namespaces (iproute2), for tests of what crosses a network: a hub
namespace with a bridge, and one namespace per storage node joined to it by a veth pair. The
test itself runs in the hub (its loopback holds the proxy and memcached); node n answers on
10.77.0.(11+n). Everything lives in namespaces this test creates and deletes: nothing touches
the host's own network.

    with Topology(4) as topo:           # creates the namespaces
        topo.run_in_hub(argv)           # the test, inside the hub
    # inside the hub: node_prefix(n) runs a program on node n; partition(n) / heal(n)

partition(n) takes node n's link to the bridge down: its packets are dropped, so a connection
to it times out (as a real partition), unlike a refused connection of a stopped server.

Only /usr/bin/python3 runs these.
"""
import os
import subprocess

SUBNET = "10.77.0"


def host(n):
    return "%s.%d" % (SUBNET, 11 + n)


def node_netns(tag, n):
    return "%s-n%d" % (tag, n)


def node_prefix(tag, n):
    """argv prefix that runs a program in node n's namespace."""
    return ["ip", "netns", "exec", node_netns(tag, n)]


def hub_link(n):
    return "vh%d" % n


def partition(n):
    """From inside the hub: cut node n off (its link to the bridge down)."""
    subprocess.run(["ip", "link", "set", hub_link(n), "down"], check=True)


def heal(n):
    subprocess.run(["ip", "link", "set", hub_link(n), "up"], check=True)


def available():
    """Whether this machine lets us make namespaces (root, iproute2, veth and bridge)."""
    if os.geteuid() != 0 or not os.path.exists("/usr/sbin/ip"):
        return False
    probe = "apus-probe-%d" % os.getpid()
    ok = subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.DEVNULL).returncode == 0
    if ok:
        ok = subprocess.run(["ip", "netns", "exec", probe, "ip", "link", "add", "b0", "type",
                             "bridge"], stderr=subprocess.DEVNULL).returncode == 0
        subprocess.run(["ip", "netns", "del", probe])
    return ok


class Topology:
    def __init__(self, nodes, tag=None):
        self.nodes = nodes
        self.tag = tag or "apus-t%d" % os.getpid()
        self.hub = self.tag + "-hub"
        self.made = []

    def _ip(self, *args, netns=None):
        argv = (["ip", "netns", "exec", netns] if netns else []) + ["ip"] + list(args)
        subprocess.run(argv, check=True)

    def __enter__(self):
        try:
            for name in [self.hub] + [node_netns(self.tag, n) for n in range(self.nodes)]:
                self._ip("netns", "add", name)
                self.made.append(name)
                self._ip("link", "set", "lo", "up", netns=name)
            self._ip("link", "add", "br0", "type", "bridge", netns=self.hub)
            self._ip("addr", "add", SUBNET + ".1/24", "dev", "br0", netns=self.hub)
            self._ip("link", "set", "br0", "up", netns=self.hub)
            for n in range(self.nodes):
                name = node_netns(self.tag, n)
                self._ip("link", "add", hub_link(n), "type", "veth", "peer", "name", "eth0",
                         "netns", name, netns=self.hub)
                self._ip("link", "set", hub_link(n), "master", "br0", netns=self.hub)
                self._ip("link", "set", hub_link(n), "up", netns=self.hub)
                self._ip("addr", "add", host(n) + "/24", "dev", "eth0", netns=name)
                self._ip("link", "set", "eth0", "up", netns=name)
        except Exception:
            self.__exit__()
            raise
        return self

    def run_in_hub(self, argv, **kwargs):
        return subprocess.run(["ip", "netns", "exec", self.hub] + list(argv), **kwargs)

    def __exit__(self, *exc):
        for name in reversed(self.made):  # veth pairs and the bridge go with their namespaces
            subprocess.run(["ip", "netns", "del", name])
        self.made = []
