#!/usr/bin/env python3
"""apus-db-import (issue 17): Swift 2.30.1's own brokers write container and account databases
(rows committed and rows still in the .pending file, deleted rows, metadata, a second storage
policy, names beyond ASCII) on a device; apus-db-import loads them into Apus stores; Apus's
container and account servers on that device then list, count and describe exactly what
Swift's brokers do (read from a copy of the files). A second import changes nothing.

usage: db_import_interop.py <build-dir>
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from urllib.parse import quote

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


# Made by Swift's brokers in a process of its own (its swift.conf is the test's). Prints the
# database paths as JSON.
WRITER = r'''
import json, os, sys, time
from swift.common import utils, storage_policy
utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()
from swift.common.utils import Timestamp, hash_path, storage_directory
from swift.common.ring.utils import parse_builder_ring_filename_args  # noqa: F401
from swift.container.backend import ContainerBroker
from swift.account.backend import AccountBroker
dev = sys.argv[2]
now = time.time()
def ts(i):
    return Timestamp(now + i).internal
def path(kind, part, *names):
    h = hash_path(*names)
    d = os.path.join(dev, storage_directory(kind, part, h))
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, h + '.db')
out = {}
for cname, policy in (('plain', 0), ('caf\u00e9 \u2603', 1)):
    p = path('containers', 7, 'AUTH_imp', cname)
    b = ContainerBroker(p, account='AUTH_imp', container=cname)
    b.initialize(ts(0), storage_policy_index=policy)
    for i in range(40):
        b.put_object('obj-%03d-\u00e9' % i, ts(1 + i), i * 10, 'text/plain', 'e%031d' % i,
                     storage_policy_index=policy)
    b.get_info()  # commits the pending rows
    for i in range(0, 40, 7):
        b.delete_object('obj-%03d-\u00e9' % i, ts(100 + i), storage_policy_index=policy)
    for i in range(40, 50):  # left in .pending
        b.put_object('obj-%03d-\u00e9' % i, ts(200 + i), 5, 'image/png', 'f%031d' % i,
                     storage_policy_index=policy)
    b.update_metadata({'X-Container-Meta-Colour': ['teal', ts(300)],
                       'X-Container-Read': ['.r:*', ts(300)]})
    b.merge_syncs([{'remote_id': 'peer-1', 'sync_point': 17}])
    out[cname] = p
a = AccountBroker(path('accounts', 3, 'AUTH_imp'), account='AUTH_imp')
a.initialize(ts(0))
a.put_container('plain', ts(1), '0', 33, 1234, 0)
a.get_info()
a.put_container('gone', ts(2), ts(3), 0, 0, 0)
a.put_container('caf\u00e9 \u2603', ts(4), '0', 44, 99, 1)  # stays in .pending
a.update_metadata({'X-Account-Meta-Owner': ['me', ts(5)]})
out['account'] = a.db_file
print(json.dumps(out))
'''

# Swift's view of a copy of the files (commits the pending rows there).
READER = r'''
import json, sys
from swift.common import utils, storage_policy
utils.set_swift_dir(sys.argv[1]); storage_policy.reload_storage_policies()
from swift.container.backend import ContainerBroker
from swift.account.backend import AccountBroker
paths = json.loads(sys.argv[2])
out = {}
for name, p in paths.items():
    if name == 'account':
        b = AccountBroker(p)
        info = b.get_info()
        rows = [r[0] for r in b.list_containers_iter(10000, '', None, None, None)]
        out[name] = {'count': info['container_count'], 'objects': info['object_count'],
                     'bytes': info['bytes_used'], 'rows': rows,
                     'meta': {k: v[0] for k, v in b.metadata.items()}}
    else:
        b = ContainerBroker(p)
        info = b.get_info()
        rows = [[r[0], r[2], r[3], r[4]] for r in b.list_objects_iter(
            10000, '', None, None, None, storage_policy_index=info['storage_policy_index'])]
        out[name] = {'count': info['object_count'], 'bytes': info['bytes_used'],
                     'policy': info['storage_policy_index'], 'rows': rows,
                     'meta': {k: v[0] for k, v in b.metadata.items()}}
print(json.dumps(out))
'''


def run(args):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (args[:3], r.stdout))
    return r.stdout


def start_server(ps, root, kind):
    port = procs.free_port()
    conf = os.path.join(root, kind + ".conf")
    with open(conf, "w") as f:
        f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                "bind_port = %d\nworkers = 1\nswift_dir = %s\nlog_file = %s/%s.log\n\n"
                "[pipeline:main]\npipeline = %s-server\n\n[app:%s-server]\nuse = egg:swift#%s\n"
                "\n[container-updater]\nenabled = false\n"
                % (os.path.join(root, "srv"), port, root, root, kind, kind, kind, kind))
    log = os.path.join(root, kind + ".out")
    proc = ps.start([os.path.join(BIN, "apus-%s-server" % kind), conf], log)
    procs.wait_for_port(port, proc=proc, log_path=log)
    return port, proc


def verify(ps, root, want, attempt):
    """Apus's servers on the imported device answer as Swift's brokers read the files."""
    cport, cproc = start_server(ps, root, "container")
    aport, aproc = start_server(ps, root, "account")
    for cname in ("plain", "caf\u00e9 \u2603"):
        path = "/sda/7/AUTH_imp/" + quote(cname)
        status, headers, body = procs.request(
            cport, "GET", path + "?format=json",
            headers={"X-Backend-Storage-Policy-Index": str(want[cname]["policy"])})
        check(status == 200, "%s: GET %s: %d" % (attempt, cname, status))
        rows = [[r["name"], r["bytes"], r["content_type"], r["hash"]]
                for r in json.loads(body)] if status == 200 else []
        check(rows == want[cname]["rows"], "%s: %s lists as Swift: %r vs %r"
              % (attempt, cname, rows[:3], want[cname]["rows"][:3]))
        check(headers.get("x-container-object-count") == str(want[cname]["count"]) and
              headers.get("x-container-bytes-used") == str(want[cname]["bytes"]),
              "%s: %s counts as Swift: %r vs %r" % (attempt, cname, headers, want[cname]))
        check(headers.get("x-backend-storage-policy-index") == str(want[cname]["policy"]),
              "%s: %s keeps its policy: %r" % (attempt, cname, headers))
        check(headers.get("x-container-meta-colour") == "teal" and
              headers.get("x-container-read") == ".r:*",
              "%s: %s metadata: %r" % (attempt, cname, headers))
    status, headers, body = procs.request(aport, "GET", "/sda/3/AUTH_imp?format=json")
    names = [r["name"] for r in json.loads(body)] if status == 200 else None
    check(names == want["account"]["rows"], "%s: the account lists as Swift: %r vs %r"
          % (attempt, names, want["account"]["rows"]))
    check(headers.get("x-account-container-count") == str(want["account"]["count"]) and
          headers.get("x-account-object-count") == str(want["account"]["objects"]) and
          headers.get("x-account-bytes-used") == str(want["account"]["bytes"]),
          "%s: the account counts as Swift: %r vs %r" % (attempt, headers, want["account"]))
    check(headers.get("x-account-meta-owner") == "me",
          "%s: account metadata: %r" % (attempt, headers))
    ps.stop(cproc)  # RocksDB has one writer: the next import needs the stores free
    ps.stop(aproc)


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        with open(os.path.join(root, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_prefix = imp\nswift_hash_path_suffix = ort\n\n"
                    "[storage-policy:0]\nname = gold\ndefault = yes\n\n"
                    "[storage-policy:1]\nname = silver\n")
        dev = os.path.join(root, "srv", "sda")
        os.makedirs(dev)
        paths = json.loads(run(["/usr/bin/python3", "-c", WRITER, root, dev]))
        check(os.path.getsize(paths["plain"] + ".pending") > 0, "rows left in .pending")
        copy = os.path.join(root, "copy")
        shutil.copytree(dev, copy)
        copied = {k: p.replace(dev, copy) for k, p in paths.items()}
        want = json.loads(run(["/usr/bin/python3", "-c", READER, root, json.dumps(copied)]))

        for attempt in ("first", "second"):
            for kind in ("container", "account"):
                out = run([os.path.join(BIN, "apus-db-import"), kind, os.path.join(root, "srv")])
                check(" 0 failed" in out, "%s import of %ss: %s" % (attempt, kind, out))
            verify(ps, root, want, attempt)

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("db import interop: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
