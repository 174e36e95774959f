#!/usr/bin/env python3
"""apus-object-auditor beside Swift 2.30.1's object auditor (issue 16): one device is filled
with objects written by a stock swift-object-server, some of them then damaged on disk (a byte
flipped, a file cut short, the metadata checksum wrong, the metadata's name missing, a hash
directory that is a file, a hash directory whose object's name does not hash to it), and copied
twice; each auditor runs an ALL pass over its copy. Both must quarantine the same objects and
leave the rest in place, but one: an object whose metadata lost its name. Swift's auditor opens
objects by hash and takes their name from the metadata first, so that one ends in a KeyError it
logs, and the object stays; Apus quarantines it, as Swift does when the object is opened by
name.

usage: auditor_interop.py <build-dir>
"""
import os
import shutil
import subprocess
import sys
import time
import urllib.parse

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def data_files(device_dir):
    out = {}
    for dirpath, _, files in os.walk(os.path.join(device_dir, "objects")):
        for f in files:
            if f.endswith(".data"):
                out[os.path.basename(dirpath)] = os.path.join(dirpath, f)
    return out


def damage(device_dir, names_by_hash):
    """Damages some objects; returns what was done, by hash."""
    from swift.obj.diskfile import read_metadata, write_metadata
    files = data_files(device_dir)
    by_name = {names_by_hash[h]: (h, p) for h, p in files.items()}
    done = {}
    h, p = by_name["/AUTH_test/c/flipped"]
    with open(p, "r+b") as f:
        f.seek(3)
        b = f.read(1)
        f.seek(3)
        f.write(bytes([b[0] ^ 1]))
    done[h] = "flipped"
    h, p = by_name["/AUTH_test/c/short"]
    with open(p, "r+b") as f:
        f.truncate(5)
    done[h] = "short"
    h, p = by_name["/AUTH_test/c/checksum"]
    os.setxattr(p, "user.swift.metadata_checksum", b"0" * 32)
    done[h] = "checksum"
    h, p = by_name["/AUTH_test/c/noname"]
    md = read_metadata(p)
    del md["name"]
    for attr in os.listxattr(p):
        if attr.startswith("user.swift.metadata"):
            os.removexattr(p, attr)
    with open(p, "r+b") as f:
        write_metadata(f, md)
    done[h] = "noname"
    h, p = by_name["/AUTH_test/c/misplaced"]
    d = os.path.dirname(p)
    other = ("0" if h[0] != "0" else "1") + h[1:]
    os.rename(d, os.path.join(os.path.dirname(d), other))
    done[other] = "misplaced"
    h, p = by_name["/AUTH_test/c/dirfile"]
    d = os.path.dirname(p)
    shutil.rmtree(d)
    with open(d, "w") as f:
        f.write("not a directory")
    done[h] = "dirfile"
    return done


def quarantined(device_dir):
    q = os.path.join(device_dir, "quarantined", "objects")
    return sorted(n.split("-")[0] for n in os.listdir(q)) if os.path.isdir(q) else []


def main():
    with procs.TempDir("apus-auditor-interop-") as root, procs.Processes() as ps:
        etc = os.path.join(root, "etc")
        os.makedirs(etc)
        with open(os.path.join(etc, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = apus-test\n"
                    "swift_hash_path_suffix = audit\n\n[storage-policy:0]\nname = gold\ndefault = yes\n")
        source = os.path.join(root, "source")
        os.makedirs(os.path.join(source, "sda1"))
        port = procs.free_port()
        conf = os.path.join(etc, "source-object-server.conf")
        with open(conf, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                    "bind_port = %d\nswift_dir = %s\nworkers = 0\n\n[pipeline:main]\n"
                    "pipeline = object-server\n\n[app:object-server]\nuse = egg:swift#object\n"
                    % (source, port, etc))
        server = ps.start(["/usr/bin/python3", os.path.join(SUPPORT, "run_swift_server.py"), etc,
                           "object", conf], os.path.join(root, "source.out"))
        procs.wait_for_port(port, proc=server)
        names = ["flipped", "short", "checksum", "noname", "misplaced", "dirfile", "good", "empty",
                 "big"]
        for i, name in enumerate(names):
            body = b"" if name == "empty" else (os.urandom(300000) if name == "big"
                                                else b"body of %s" % name.encode())
            status = procs.request(port, "PUT", "/sda1/%d/AUTH_test/c/%s" % (i % 3, name),
                                   {"X-Timestamp": "%.5f" % (time.time() + i),
                                    "Content-Type": "text/plain",
                                    "Content-Length": str(len(body))}, body)[0]
            check(status == 201, "PUT %s: %d" % (name, status))
        from swift.common import utils
        utils.set_swift_dir(etc)
        names_by_hash = {os.path.basename(os.path.dirname(p)): None
                         for p in data_files(os.path.join(source, "sda1")).values()}
        from swift.obj.diskfile import read_metadata
        for h, p in data_files(os.path.join(source, "sda1")).items():
            names_by_hash[h] = read_metadata(p)["name"]
        damaged = damage(os.path.join(source, "sda1"), names_by_hash)
        for side in ("swift", "apus"):
            shutil.copytree(source, os.path.join(root, side), symlinks=True)
        # Swift's auditor: one ALL pass over its copy.
        script = (
            "import sys\n"
            "from swift.common import utils, storage_policy\n"
            "utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()\n"
            "from swift.obj.auditor import ObjectAuditor\n"
            "conf = {'devices': sys.argv[2], 'mount_check': 'false', 'swift_dir': sys.argv[1],\n"
            "        'recon_cache_path': sys.argv[3], 'files_per_second': '1000',\n"
            "        'bytes_per_second': '100000000'}\n"
            "ObjectAuditor(conf).run_once(mode='once', zero_byte_fps=0)\n")
        run = subprocess.run(["/usr/bin/python3", "-c", script, etc, os.path.join(root, "swift"),
                              root], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=300)
        check(run.returncode == 0, "Swift's auditor ran: %s" % run.stdout[-2000:])
        apus_conf = os.path.join(etc, "apus-auditor.conf")
        with open(apus_conf, "w") as f:
            f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nswift_dir = %s\n"
                    "log_file = %s/apus-auditor.log\n\n[object-auditor]\nrecon_cache_path = %s\n"
                    "files_per_second = 1000\nbytes_per_second = 100000000\n"
                    % (os.path.join(root, "apus"), etc, root, root))
        run = subprocess.run([os.path.join(BUILD, "bin", "apus-object-auditor"), apus_conf,
                              "--once"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=300)
        check(run.returncode == 0, "Apus's auditor ran: %s" % run.stdout)
        swift_q = quarantined(os.path.join(root, "swift", "sda1"))
        apus_q = quarantined(os.path.join(root, "apus", "sda1"))
        print("damaged:", sorted(damaged.values()))
        print("Swift quarantined %d, Apus %d" % (len(swift_q), len(apus_q)))
        noname = [h for h, what in damaged.items() if what == "noname"]
        check(sorted(swift_q + noname) == apus_q,
              "the same objects quarantined, and the nameless one by Apus: swift %r, apus %r"
              % ([damaged.get(h, h) for h in swift_q], [damaged.get(h, h) for h in apus_q]))
        check(apus_q == sorted(damaged), "Apus: every damaged object, and only those: %r"
              % [damaged.get(h, h) for h in apus_q])
        check(sorted(data_files(os.path.join(root, "swift", "sda1"))) ==
              sorted(list(data_files(os.path.join(root, "apus", "sda1"))) + noname),
              "the same objects left in place, but the nameless one")
    print("auditor interop:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
