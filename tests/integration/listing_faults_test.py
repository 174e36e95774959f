#!/usr/bin/env python3
"""Container and account servers with real processes:

1. Crash: `kill -9` of apus-container-server in the middle of a burst of object-row updates;
   after a restart the container's counts equal the rows its listing holds, and every row
   acknowledged before the burst is there, though object rows are not fsynced (Swift's
   .pending file is not either; db_sync_object_rows).
2. Updater: an account server whose device is gone (507) when a container is created and
   filled gets the container's counts once the device is back, from the container server's own
   updater sweep. (The account server runs throughout, so no other process can take its port.)
3. Random device names (issue 12): requests naming devices that do not exist get 507 and make
   no threads (a pool per name once made thousands).
4. A full disk (issue 12; needs root for a tmpfs): a container write that meets ENOSPC in
   RocksDB's WAL gets 507, and writes work again once space returns (RocksDB had stayed
   read-only until a restart).

usage: listing_faults_test.py <build-dir>
"""
import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write_conf(root, name, server, port, extra="", devices="dev"):
    path = os.path.join(root, "etc", name + ".conf")
    with open(path, "w") as f:
        f.write("[DEFAULT]\ndevices = %s/%s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                "bind_port = %d\nswift_dir = %s/etc\nworkers = 2\nlog_file = %s/%s.log\n"
                "fallocate_reserve = 0\n\n[pipeline:main]\npipeline = %s\n\n"
                "[app:%s]\nuse = egg:swift#%s\n%s"
                % (root, devices, port, root, root, name, server, server, server.split("-")[0],
                   extra))
    return path


def write_swift_conf(root):
    with open(os.path.join(root, "etc", "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = list\nswift_hash_path_suffix = ings\n")


def container_stats(port, path):
    status, h, _ = procs.request(port, "HEAD", path)
    if status != 204:
        return None
    return int(h["x-container-object-count"]), int(h["x-container-bytes-used"])


def full_listing(port, path):
    rows, marker = [], ""
    while True:
        status, _, body = procs.request(
            port, "GET", path + "?format=json&marker=" + marker)
        if status != 200:
            return rows
        page = json.loads(body)
        if not page:
            return rows
        rows.extend(page)
        marker = page[-1]["name"]


def merges_by_phase(metrics_port):
    """{phase: count} of apus_db_phase_seconds from a server's /metrics."""
    _, _, body = procs.request(metrics_port, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("apus_db_phase_seconds_count{"):
            phase = line.split('phase="', 1)[1].split('"', 1)[0]
            out[phase] = float(line.rsplit(" ", 1)[1])
    return out


def crash_during_burst(root, ps):
    port, metrics_port = procs.free_port(), procs.free_port()
    conf = write_conf(root, "crash-container", "container-server", port,
                      "metrics_bind_port = %d\n" % metrics_port)
    log = os.path.join(root, "crash.out")
    server = ps.start([os.path.join(BIN, "apus-container-server"), conf], log)
    procs.wait_for_port(port, proc=server, log_path=log)
    path = "/sda1/1/AUTH_crash/c"
    status, _, _ = procs.request(port, "PUT", path, {"X-Timestamp": "1700000000.00000"})
    check(status == 201, "container PUT before the burst: %d" % status)
    # Object rows are not fsynced by default (db_sync_object_rows = false, as Swift's .pending
    # file), the container's own writes are: acknowledged rows must still survive the crash of
    # the process, since they are in RocksDB's WAL in the page cache.
    before = merges_by_phase(metrics_port)
    acked = []
    for i in range(50):
        name = "acked-%02d" % i
        status, _, _ = procs.request(port, "PUT", path + "/" + name,
                                     {"X-Timestamp": "1700000000.%05d" % (i + 1), "X-Size": "1",
                                      "X-Content-Type": "a/b", "X-Etag": "e"})
        if status == 201:
            acked.append(name)
    after = merges_by_phase(metrics_port)
    check(len(acked) == 50, "object rows acknowledged before the burst: %d" % len(acked))
    unsynced = ("row_merge_unsynced", "row_merge_in_loop")  # on a disk pool, on the event loop
    merged = sum(after.get(p, 0) - before.get(p, 0) for p in unsynced)
    check(merged == 50 and after.get("row_merge", 0) == before.get("row_merge", 0),
          "object rows merged without the WAL's fsync: %r -> %r" % (before, after))
    # Once a pool has checked the device, rows need no trip to it (Waiting::kNever).
    check(after.get("row_merge_in_loop", 0) > before.get("row_merge_in_loop", 0),
          "no object row merged on the event loop: %r -> %r" % (before, after))

    stop = threading.Event()

    def burst(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            name = "o%04d" % rng.randrange(400)
            ts = "%.5f" % (1700000001 + rng.random() * 1000)
            headers = {"X-Timestamp": ts}
            method = "DELETE" if rng.random() < 0.3 else "PUT"
            if method == "PUT":
                headers.update({"X-Size": str(rng.randrange(1000)), "X-Content-Type": "a/b",
                                "X-Etag": "e"})
            try:
                procs.request(port, method, path + "/" + name, headers, timeout=2)
            except OSError:
                pass  # the server died under us: expected

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    stop.set()
    for t in threads:
        t.join()

    server = ps.start([os.path.join(BIN, "apus-container-server"), conf], log)
    procs.wait_for_port(port, proc=server, log_path=log)
    stats = container_stats(port, path)
    rows = full_listing(port, path)
    print("after kill -9: %r from HEAD, %d rows listed" % (stats, len(rows)))
    listed = {r["name"] for r in rows}
    check(all(name in listed for name in acked),
          "every object row acknowledged before kill -9 is listed after it (%d of %d)"
          % (sum(name in listed for name in acked), len(acked)))
    check(stats is not None and len(rows) > 0, "container readable after the crash: %r" % (stats,))
    if stats:
        check(stats[0] == len(rows), "object count %d equals rows %d" % (stats[0], len(rows)))
        check(stats[1] == sum(r["bytes"] for r in rows),
              "bytes used %d equal the rows' sum %d" % (stats[1], sum(r["bytes"] for r in rows)))
    ps.stop(server)


def updater_catches_up(root, ps):
    account_port = procs.free_port()
    builder = os.path.join(root, "etc", "account.builder")
    for args in (["create", "4", "1", "0"],
                 ["add", "r1z1-127.0.0.1:%d/sda1" % account_port, "100"],
                 ["rebalance"]):
        subprocess.run([os.path.join(BIN, "apus-ring-builder"), builder] + args, check=False,
                       stdout=subprocess.DEVNULL)
    check(os.path.exists(os.path.join(root, "etc", "account.ring.gz")), "account ring built")
    account_conf = write_conf(root, "upd-account", "account-server", account_port,
                              devices="acct-dev")
    os.makedirs(os.path.join(root, "acct-dev"))  # no device yet: every account request is 507
    alog = os.path.join(root, "upd-account.out")
    account = ps.start([os.path.join(BIN, "apus-account-server"), account_conf], alog)
    procs.wait_for_port(account_port, proc=account, log_path=alog)
    container_port = procs.free_port()
    conf = write_conf(root, "upd-container", "container-server", container_port,
                      "\n[container-updater]\ninterval = 1\ncontainers_per_second = 0\n"
                      # A sweep that meets the missing device while c1 fills must not put
                      # the account aside for Swift's 60 s (a race under load).
                      "account_suppression_time = 0\n")
    log = os.path.join(root, "upd-container.out")
    server = ps.start([os.path.join(BIN, "apus-container-server"), conf], log)
    procs.wait_for_port(container_port, proc=server, log_path=log)

    account_headers = {"X-Account-Host": "127.0.0.1:%d" % account_port,
                       "X-Account-Device": "sda1", "X-Account-Partition": "0"}
    status, _, _ = procs.request(container_port, "PUT", "/sda1/2/AUTH_upd/c1",
                                 dict(account_headers, **{"X-Timestamp": "1700000000.00000"}))
    check(status == 201, "container PUT with the account device gone: %d" % status)
    for i in range(5):
        procs.request(container_port, "PUT", "/sda1/2/AUTH_upd/c1/o%d" % i,
                      {"X-Timestamp": "1700000001.00000", "X-Size": "10",
                       "X-Content-Type": "a/b", "X-Etag": "e"})

    # The account's device comes back with the account already in it, as a disk remounted
    # from a healthy node would. (Made in place, the device would show an account server that
    # answers 404 for the account until its PUT: a sweep in that window quarantines c1, as
    # Swift's updater does when every account replica says the account is gone.) The account
    # is made on a second server over a staging directory, which then becomes the device.
    # The partition is the ring's (part power 4; the hash secrets of write_swift_conf()).
    digest = hashlib.md5(("list" + "/AUTH_upd" + "ings").encode()).digest()
    ring_part = str(struct.unpack(">I", digest[:4])[0] >> (32 - 4))
    os.makedirs(os.path.join(root, "acct-stage", "sda1"))
    stage_port = procs.free_port()
    stage_conf = write_conf(root, "upd-account-stage", "account-server", stage_port,
                            devices="acct-stage")
    stage_log = os.path.join(root, "upd-account-stage.out")
    stage = ps.start([os.path.join(BIN, "apus-account-server"), stage_conf], stage_log)
    procs.wait_for_port(stage_port, proc=stage, log_path=stage_log)
    status, _, _ = procs.request(stage_port, "PUT", "/sda1/%s/AUTH_upd" % ring_part,
                                 {"X-Timestamp": "1699999999.00000"})
    check(status == 201, "account PUT: %d" % status)
    ps.stop(stage)
    os.rename(os.path.join(root, "acct-stage", "sda1"), os.path.join(root, "acct-dev", "sda1"))
    deadline = time.monotonic() + 20
    listing = []
    while time.monotonic() < deadline:
        status, _, body = procs.request(account_port, "GET",
                                        "/sda1/%s/AUTH_upd?format=json" % ring_part)
        listing = json.loads(body) if status == 200 else []
        if listing and listing[0].get("count") == 5:
            break
        time.sleep(0.5)
    print("account listing after the updater: %r" % listing)
    check(listing and listing[0]["name"] == "c1" and listing[0]["count"] == 5 and
          listing[0]["bytes"] == 50, "the updater reported c1's counts: %r" % listing)
    ps.stop(server)
    ps.stop(account)


def thread_count(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def random_devices(root, ps):
    rng = random.Random(12)
    for name, server, path in (("rnd-container", "container-server", "/1/AUTH_rnd/c"),
                               ("rnd-account", "account-server", "/1/AUTH_rnd")):
        port = procs.free_port()
        conf = write_conf(root, name, server, port)
        log = os.path.join(root, name + ".out")
        proc = ps.start([os.path.join(BIN, "apus-" + server), conf], log)
        procs.wait_for_port(port, proc=proc, log_path=log)
        # A real device first, so that its own pool exists before the count.
        status, _, _ = procs.request(port, "PUT", "/sda1" + path, {"X-Timestamp": "1700000000"})
        check(status == 201, "%s: PUT on a real device: %d" % (server, status))
        before = thread_count(proc.pid)
        statuses = set()
        for i in range(400):
            device = "nodev%08x" % rng.getrandbits(32)
            method = ("GET", "HEAD", "PUT", "POST", "DELETE")[i % 5]
            status, _, _ = procs.request(port, method, "/" + device + path,
                                         {"X-Timestamp": "1700000001"})
            statuses.add(status)
        after = thread_count(proc.pid)
        print("%s: %d threads before 400 requests for random devices, %d after, answers %r"
              % (server, before, after, sorted(statuses)))
        check(statuses == {507}, "%s: random devices answered %r" % (server, sorted(statuses)))
        check(after <= before + 2, "%s: threads grew from %d to %d" % (server, before, after))
        status, _, _ = procs.request(port, "HEAD", "/sda1" + path)
        check(status == 204, "%s: the real device still answers: %d" % (server, status))
        ps.stop(proc)


def full_disk(root, ps):
    mnt = os.path.join(root, "small")
    os.makedirs(mnt)
    # Bigger than RocksDB's write buffer (64 MiB): it resumes once that much is free.
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", mnt],
                      stderr=subprocess.DEVNULL).returncode != 0:
        print("SKIP full disk: cannot mount a tmpfs here")
        return
    server = None
    try:
        os.makedirs(os.path.join(mnt, "sda1"))
        port = procs.free_port()
        conf = write_conf(root, "full-container", "container-server", port, devices="small")
        log = os.path.join(root, "full-container.out")
        server = ps.start([os.path.join(BIN, "apus-container-server"), conf], log)
        procs.wait_for_port(port, proc=server, log_path=log)
        path = "/sda1/1/AUTH_full/c"
        # Opens the store while there is room but writes nothing: RocksDB preallocates its WAL
        # (70 MiB) at the first write, which would leave room for every later write here.
        status, _, _ = procs.request(port, "HEAD", path)
        check(status == 404, "HEAD before the container exists: %d" % status)
        filler = os.path.join(mnt, "filler")
        # The disk stays full: whatever RocksDB frees (a reopen drops its old WAL) is taken
        # again at once.
        stop_hog = threading.Event()

        def hog():
            with open(filler, "ab", buffering=0) as f:
                st = os.statvfs(mnt)
                try:
                    os.posix_fallocate(f.fileno(), 0, max(0, st.f_bavail * st.f_frsize - (1 << 20)))
                except OSError:
                    pass  # the loop below fills it anyway
                while not stop_hog.is_set():
                    try:
                        f.write(b"x" * 4096)
                    except OSError:
                        time.sleep(0.0005)

        hog_thread = threading.Thread(target=hog)
        hog_thread.start()
        statuses = []
        try:
            time.sleep(0.5)
            # Rows with long names, so that the WAL needs new pages soon whatever it had left.
            for i in range(20):
                for rpath, headers in (
                        (path, {"X-Timestamp": "1700000000.00000"}),
                        ("%s/full%02d-%s" % (path, i, "n" * 900), {
                            "X-Timestamp": "1700000001.00000", "X-Size": "1",
                            "X-Content-Type": "a/b", "X-Etag": "e"})):
                    try:
                        status, _, _ = procs.request(port, "PUT", rpath, headers)
                    except Exception:  # the server died (RocksDB aborted before issue 12)
                        status = 0
                    statuses.append(status)
                time.sleep(0.1)
                if server.poll() is not None:
                    break
        finally:
            stop_hog.set()
            hog_thread.join()
        print("container and row PUTs on a full disk:", statuses)
        check(507 in statuses and set(statuses) <= {201, 202, 404, 507},
              "writes on a full disk answer 507 (or land): %r" % statuses)
        if server.poll() is not None:
            check(False, "the container server died on the full disk")
            return
        os.unlink(filler)
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            status, _, _ = procs.request(port, "PUT", path, {"X-Timestamp": "1700000000.00000"})
            if status in (201, 202):
                break
            time.sleep(0.5)
        print("container PUT %.1f s before the deadline once space is back: %s"
              % (deadline - time.monotonic(), status))
        check(status in (201, 202), "the store takes writes again once space is back: %s"
              % status)
        status, _, _ = procs.request(port, "PUT", path + "/o", {
            "X-Timestamp": "1700000001.00000", "X-Size": "5", "X-Content-Type": "a/b",
            "X-Etag": "e"})
        check(status == 201, "an object row after recovery: %d" % status)
        stats = container_stats(port, path)
        rows = full_listing(port, path)
        check(stats is not None and stats[0] == len(rows) and any(r["name"] == "o" for r in rows),
              "counts after recovery %r match the %d rows listed" % (stats, len(rows)))
    finally:
        if server is not None:
            ps.stop(server)
        subprocess.run(["umount", mnt], check=False)


def main():
    with procs.TempDir("apus-listing-faults-") as root, procs.Processes() as ps:
        if os.environ.get("APUS_KEEP_LOGS"):
            print("logs in", root)
        os.makedirs(os.path.join(root, "etc"))
        os.makedirs(os.path.join(root, "dev", "sda1"))
        write_swift_conf(root)
        random_devices(root, ps)
        full_disk(root, ps)
        crash_during_burst(root, ps)
        updater_catches_up(root, ps)
    print("listing faults:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
