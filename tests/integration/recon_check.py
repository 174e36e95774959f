#!/usr/bin/env python3
"""The storage servers' recon filter on a running all-in-one (called by saio_test.sh): each
/recon/ endpoint of node 1's object, container and account servers answers what Swift's recon
middleware would (checked against the files and the host), and Debian's swift-recon runs
against the cluster for each server type without an error.

usage: recon_check.py <saio dir>
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

SAIO = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type"), err.read()


def md5_of(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def main():
    etc = os.path.join(SAIO, "etc")
    devices = os.path.join(SAIO, "srv", "1", "node")
    # A quarantined object of each policy and a quarantined container on node 1's device.
    for kind, name in (("objects", "a" * 32), ("objects-1", "b" * 32),
                       ("containers", "c" * 32)):
        os.makedirs(os.path.join(devices, "sdb1", "quarantined", kind, name), exist_ok=True)
    rings = sorted(f for f in os.listdir(etc) if f.endswith(".ring.gz"))
    # The object updater (a pass every 5 s here) reports its sweeps and the async pendings it
    # counted in object.recon; wait for its first pass before reading them.
    deadline = time.time() + 20
    sweep = None
    while time.time() < deadline and sweep is None:
        status, _, body = get(6116, "/recon/updater/object")
        sweep = json.loads(body).get("object_updater_sweep") if status == 200 else None
        time.sleep(0.5)
    check(isinstance(sweep, float), "object updater sweep in recon: %r" % sweep)
    for kind, port in (("object", 6116), ("container", 6117), ("account", 6118)):
        def recon(check_name):
            status, ctype, body = get(port, "/recon/" + check_name)
            if not check(status == 200 and ctype == "application/json",
                         "%s /recon/%s: %s %s %r" % (kind, check_name, status, ctype, body[:200])):
                return None
            return json.loads(body)

        check(recon("version") == {"version": "2.30.1"}, "%s version" % kind)
        load = recon("load") or {}
        check(set(load) == {"1m", "5m", "15m", "tasks", "processes"} and
              isinstance(load["processes"], int), "%s load: %r" % (kind, load))
        check("MemTotal" in (recon("mem") or {}), "%s mem" % kind)
        check(recon("devices") == {devices: sorted(os.listdir(devices))}, "%s devices" % kind)
        check(recon("unmounted") == [], "%s unmounted (the .ismount stub counts)" % kind)
        usage = recon("diskusage") or [{}]
        check(len(usage) == 1 and usage[0].get("device") == "sdb1" and
              usage[0].get("mounted") is True and usage[0]["size"] > 0 and
              usage[0]["used"] + usage[0]["avail"] <= usage[0]["size"],
              "%s diskusage: %r" % (kind, usage))
        check(recon("ringmd5") == {os.path.join(etc, r): md5_of(os.path.join(etc, r))
                                   for r in rings}, "%s ringmd5" % kind)
        check(recon("swiftconfmd5") ==
              {"/etc/swift/swift.conf": md5_of(os.path.join(etc, "swift.conf"))},
              "%s swiftconfmd5" % kind)
        check(recon("quarantined") == {"objects": 2, "containers": 1, "accounts": 0,
                                       "policies": {"0": {"objects": 1}, "1": {"objects": 1}}},
              "%s quarantined" % kind)
        check("tcp_in_use" in (recon("sockstat") or {}), "%s sockstat" % kind)
        check(abs((recon("time") or 0) - time.time()) < 60, "%s time" % kind)
        # Every server type reads the async entry from object.recon, as Swift's recon does.
        pending = recon("async") or {}
        check(pending.get("async_pending") == 0 and
              isinstance(pending.get("async_pending_last"), float),
              "%s async: %r" % (kind, pending))
        check(set(recon("replication/" + kind) or {}) >=
              {"replication_time", "replication_stats", "replication_last"},
              "%s replication keys" % kind)
        status, ctype, body = get(port, "/recon/nope")
        check(status == 404 and body == b"Invalid path: /recon/nope",
              "%s /recon/nope: %s %r" % (kind, status, body))
        status, _, _ = get(port, "/recon/replication/object/more")
        check(status == 404, "%s /recon/replication/object/more: %s" % (kind, status))

    # Debian's swift-recon, for each server type, as an operator runs it.
    for kind in ("object", "container", "account"):
        run = subprocess.run(["/usr/bin/python3", "/usr/bin/swift-recon", "--swiftdir", etc,
                              kind, "-a", "-r", "-d", "-q", "-u", "-l", "--md5", "-T",
                              "--sockstat", "--driveaudit"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=120)
        out = run.stdout
        check(run.returncode == 0 and "Traceback" not in out,
              "swift-recon %s exited %d: %s" % (kind, run.returncode, out[-1500:]))
        check(out.count("4/4 hosts matched, 0 error[s] while checking hosts.") >= 1,
              "swift-recon %s: the ring md5s match on every host: %s" % (kind, out[-1500:]))
        check("Not mounted" not in out, "swift-recon %s: every device mounted" % kind)
        check("[1m_load_avg]" in out and "reported: 4" in out,
              "swift-recon %s: load averages of the 4 hosts" % kind)
        if kind == "object":
            print("\n".join(out.splitlines()[:60]))
    print("recon check:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
