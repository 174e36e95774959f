#!/usr/bin/env python3
"""apus-object-updater delivering async pendings written by apus-object-server (async mode)
and by Swift's own code, to container servers found through a ring built by
swift-ring-builder; a replica that is down gets the update on a later pass, after it comes
back; and Swift's swift-object-updater delivers what Apus saved.

usage: object_updater_test.py <build-dir>
"""
import os
import subprocess
import sys
import threading
from urllib.parse import quote

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import procs  # noqa: E402
from object_server_interop import FakeContainerServer  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def pendings(root):
    out = []
    for dirpath, _, files in os.walk(os.path.join(root, "dev")):
        if "async_pending" in dirpath:
            out.extend(os.path.join(dirpath, f) for f in files)
    return sorted(out)


def main():
    with procs.TempDir("apus-updater-") as root, procs.Processes() as ps:
        etc = os.path.join(root, "etc")
        os.makedirs(etc)
        os.makedirs(os.path.join(root, "dev", "sda1"))
        with open(os.path.join(etc, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = upd\nswift_hash_path_suffix = ater\n")
        up, down = FakeContainerServer(procs.free_port()), FakeContainerServer(procs.free_port())
        down.status = 503
        for srv in (up, down):
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        builder = os.path.join(etc, "container.builder")
        for args in (["create", "4", "2", "0"],
                     ["add", "r1z1-127.0.0.1:%d/sdc1" % up.server_port, "100"],
                     ["add", "r1z2-127.0.0.1:%d/sdd1" % down.server_port, "100"],
                     ["rebalance"]):
            subprocess.run(["/usr/bin/swift-ring-builder", builder] + args, check=False,
                           stdout=subprocess.DEVNULL)
        port = procs.free_port()
        conf = os.path.join(etc, "object-server.conf")
        with open(conf, "w") as f:
            f.write("[DEFAULT]\ndevices = %s/dev\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nlog_file = %s/log\n\n"
                    "[pipeline:main]\npipeline = object-server\n\n"
                    "[app:object-server]\nuse = egg:swift#object\n"
                    "container_update_mode = async\n\n"
                    "[object-updater]\nconcurrency = 4\ninterval = 1\n"
                    "objects_per_second = 0\n" % (root, port, etc, root))
        server = ps.start([os.path.join(BUILD, "bin", "apus-object-server"), conf],
                          os.path.join(root, "server.out"))
        procs.wait_for_port(port, proc=server, log_path=os.path.join(root, "server.out"))
        cont = {"X-Container-Host": "127.0.0.1:1", "X-Container-Device": "sdz",
                "X-Container-Partition": "1"}
        for i in range(5):
            status, _, _ = procs.request(port, "PUT", "/sda1/0/acc/cont/obj%d" % i,
                                         dict(cont, **{"X-Timestamp": "1700000001.%05d" % i,
                                                       "Content-Type": "text/plain"}), b"data")
            check(status == 201, "PUT in async mode answered %d" % status)
        # A newer change of obj0 supersedes its first pending.
        procs.request(port, "DELETE", "/sda1/0/acc/cont/obj0",
                      dict(cont, **{"X-Timestamp": "1700000002.00000"}))
        check(len(pendings(root)) == 6, "async mode saved 6 pendings: %d" % len(pendings(root)))

        # One written by Swift's own code (as its object server would).
        from swift.common import storage_policy, utils
        from swift.common.header_key_dict import HeaderKeyDict
        from swift.obj.diskfile import DiskFileRouter
        utils.set_swift_dir(etc)
        storage_policy.reload_storage_policies()
        mgr = DiskFileRouter({"devices": os.path.join(root, "dev"), "mount_check": "false"},
                             utils.get_logger({}))[storage_policy.POLICIES[0]]
        mgr.pickle_async_update("sda1", "acc", "cont", "from-swift", {
            "op": "PUT", "account": "acc", "container": "cont", "obj": "from-swift",
            "headers": HeaderKeyDict({"X-Size": "3", "X-Content-Type": "a/b",
                                      "X-Etag": "x", "X-Timestamp": "1700000003.00000",
                                      "X-Trans-Id": "tx-swift"})},
            utils.Timestamp("1700000003.00000"), storage_policy.POLICIES[0])

        updater = [os.path.join(BUILD, "bin", "apus-object-updater"), conf, "--once"]
        subprocess.run(updater, check=True)
        check(len(pendings(root)) == 6,
              "superseded pending removed, the rest kept while a replica is down: %r" %
              pendings(root))
        got = {(m, p) for m, p, _ in up.updates}
        check(len(got) == 6, "the live replica got all 6 updates: %r" % sorted(got))
        check(all(h.get("User-Agent", "").startswith("object-updater ") for _, _, h in up.updates),
              "User-Agent object-updater")
        deletes = [p for m, p, _ in up.updates if m == "DELETE"]
        check(len(deletes) == 1 and deletes[0].endswith("/acc/cont/obj0"),
              "obj0's newest change (a DELETE) was sent: %r" % deletes)
        swift_one = [h for _, p, h in up.updates if p.endswith("/from-swift")]
        check(swift_one and swift_one[0].get("X-Trans-Id") == "tx-swift",
              "Swift's pending delivered with its headers: %r" % swift_one)

        # The second replica comes back; the next pass delivers only to it and cleans up.
        sent_before = len(up.updates)
        down.status = 201
        subprocess.run(updater, check=True)
        check(len(up.updates) == sent_before, "no resend to the replica that had them")
        check(len(down.updates) >= 6, "the recovered replica got the updates: %d" %
              len(down.updates))
        check(pendings(root) == [], "all delivered pendings removed: %r" % pendings(root))

        # Swift's own updater delivers what Apus saved.
        procs.request(port, "PUT", "/sda1/0/acc/cont/for-swift-updater",
                      dict(cont, **{"X-Timestamp": "1700000009.00000",
                                    "Content-Type": "text/plain"}), b"zz")
        check(len(pendings(root)) == 1, "one more pending saved")
        from swift.obj.updater import ObjectUpdater as SwiftUpdater
        before_up, before_down = len(up.updates), len(down.updates)
        SwiftUpdater({"devices": os.path.join(root, "dev"), "mount_check": "false",
                      "swift_dir": etc, "concurrency": "1", "objects_per_second": "0"},
                     logger=utils.get_logger({})).run_once()
        check(len(up.updates) == before_up + 1 and len(down.updates) == before_down + 1,
              "Swift's updater delivered Apus's pending to both replicas")
        check(pendings(root) == [], "and removed it: %r" % pendings(root))
        # The container was sharded (a Swift root answers 301 to its shard): the updater follows
        # the redirect at once, to the shard's replicas, and removes the pending.
        shard = ".shards_acc/cont-caf\u00e9-1"
        up.shard = down.shard = shard
        procs.request(port, "PUT", "/sda1/0/acc/cont/moved",
                      dict(cont, **{"X-Timestamp": "1700000010.00000",
                                    "Content-Type": "text/plain"}), b"m")
        before_up, before_down = len(up.updates), len(down.updates)
        subprocess.run(updater, check=True)
        sent = [p for _, p, _ in up.updates[before_up:] + down.updates[before_down:]]
        shard_path = "/" + quote(shard) + "/moved"
        check(sum(p.endswith("/acc/cont/moved") for p in sent) == 2 and
              sum(p.endswith(shard_path) for p in sent) == 2,
              "the root's replicas redirected the update to the shard's: %r" % sent)
        check(pendings(root) == [], "the redirected update delivered: %r" % pendings(root))
        with open(os.path.join(root, "log")) as f:
            check("1 redirects" in f.read(), "the pass counted the redirect")
        up.shard = down.shard = None
        up.shutdown()
        down.shutdown()
    print("object updater test:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
