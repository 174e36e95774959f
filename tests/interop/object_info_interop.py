#!/usr/bin/env python3
"""Swift's operator tools on Apus data (issue 18): Debian's swift-object-info reads the .data
files Apus object servers write, and apus-object-info prints the same report, byte for byte (metadata in Swift's pickled xattrs, the ETag checked against
the file, the ring locations), for a plain object, one with user and system metadata, and an
X-Delete-At object, an encrypted one's crypto details; its `-P` (policy) and `-n` (ETag not
checked) forms, and a corrupted copy whose ETag no longer matches.

usage: object_info_interop.py <build-dir>
"""
import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402
from swiftclient import client as swift  # noqa: E402

BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def object_info(cluster, path, *args):
    """swift-object-info's exit status and report; apus-object-info must give the same."""
    outs = []
    for program in ("/usr/bin/swift-object-info", os.path.join(BIN, "apus-object-info")):
        run = subprocess.run([program, "--swift-dir", cluster.etc] + list(args) + [path],
                             capture_output=True, text=True, timeout=60)
        outs.append((run.returncode, run.stdout + run.stderr))
    check(outs[0] == outs[1], "apus-object-info %s prints what swift-object-info does:\n"
          "--- swift\n%s\n--- apus\n%s" % (" ".join(args), outs[0][1], outs[1][1]))
    return outs[0]


def main():
    with tempfile.TemporaryDirectory() as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        url, token = cluster.connect()
        swift.put_container(url, token, "c")
        body = b"hello from apus\n" * 100
        etag = hashlib.md5(body).hexdigest()
        delete_at = int(time.time()) + 86400
        swift.put_object(url, token, "c", "o", body, content_type="text/x-apus",
                         headers={"X-Object-Meta-Color": "blue",
                                  "X-Delete-At": str(delete_at)})
        part, nodes = cluster.placement("c", "o")
        files = sorted(glob.glob(os.path.join(root, "node%d" % nodes[0], "sd%d" % nodes[0],
                                              "objects", str(part), "*", "*", "*.data")))
        if not check(len(files) == 1, "one .data file on a primary: %r" % files):
            return 1
        code, out = object_info(cluster, files[0])
        check(code == 0, "swift-object-info exits 0: %d %s" % (code, out[-500:]))
        for want in ("Path: /AUTH_test/c/o", "Account: AUTH_test", "Container: c",
                     "Object: o", "Content-Type: text/x-apus", "X-Object-Meta-Color: blue",
                     "X-Delete-At: %d" % delete_at, "ETag: %s (valid)" % etag,
                     "Content-Length: %d (valid)" % len(body), "Partition\t%d" % part):
            check(want in out, "swift-object-info prints %r" % want)
        # The ring's view: every primary of the object is named.
        for n in nodes:
            check("127.0.0.1:%d" % cluster.ports["object"][n] in out,
                  "the primary on node %d is listed" % n)
        code, out = object_info(cluster, files[0], "-n")
        check(code == 0 and "ETag: %s (not checked)" % etag in out,
              "swift-object-info -n (ETag not checked): %d" % code)
        code, out = object_info(cluster, files[0], "-P", "gold")
        check(code == 0 and "ETag: %s (valid)" % etag in out, "swift-object-info -P gold")

        # A corrupted copy: swift-object-info sees the ETag no longer matches, as Swift's does.
        bad = os.path.join(root, "bad.data")
        with open(files[0], "rb") as src, open(bad, "wb") as dst:
            data = bytearray(src.read())
            data[0] ^= 1
            dst.write(data)
        for name in os.listxattr(files[0]):
            os.setxattr(bad, name, os.getxattr(files[0], name))
        code, out = object_info(cluster, bad)
        check("ETag: %s doesn't match file hash" % etag in out,
              "a corrupted copy's ETag does not match: %s" % out[-300:])

        # System and transient system metadata (sent to an object server as a proxy would),
        # with and without --drop-prefixes.
        n = nodes[0]
        status, _, _ = procs.request(
            cluster.ports["object"][n], "PUT", "/sd%d/%d/AUTH_test/c/o" % (n, part),
            headers={"X-Timestamp": "%.5f" % time.time(), "Content-Type": "text/plain",
                     "X-Object-Sysmeta-Shade": "teal", "X-Object-Transient-Sysmeta-Tag": "t",
                     "X-Object-Meta-Zeta": "z", "X-Object-Meta-Alpha": "a",
                     "X-Backend-Storage-Policy-Index": "0"}, body=b"sysmeta")
        check(status == 201, "a backend PUT with sysmeta: %d" % status)
        files = sorted(glob.glob(os.path.join(root, "node%d" % n, "sd%d" % n, "objects",
                                              str(part), "*", "*", "*.data")))
        code, out = object_info(cluster, files[-1])
        check("X-Object-Sysmeta-Shade: teal" in out and "X-Object-Transient-Sysmeta-Tag: t"
              in out, "system metadata printed")
        code, out = object_info(cluster, files[-1], "--drop-prefixes")
        check("  Shade: teal" in out, "--drop-prefixes drops the prefixes")

        # An encrypted object's crypto metadata (as Swift's encrypter writes it, with
        # dump_crypto_meta): both print it decoded, indented, keys sorted.
        from swift.common.middleware.crypto.crypto_utils import dump_crypto_meta
        body_meta = dump_crypto_meta({
            "iv": b"0123456789abcdef", "cipher": "AES_CTR_256",
            "body_key": {"key": b"k" * 32, "iv": b"fedcba9876543210"},
            "key_id": {"v": "2", "path": "/AUTH_test/c/o\u00e9"}})
        meta_meta = dump_crypto_meta({"iv": b"i" * 16, "cipher": "AES_CTR_256",
                                      "key_id": {"v": "2", "path": "/AUTH_test/c/o"}})
        status, _, _ = procs.request(
            cluster.ports["object"][n], "PUT", "/sd%d/%d/AUTH_test/c/o" % (n, part),
            headers={"X-Timestamp": "%.5f" % time.time(), "Content-Type": "text/plain",
                     "X-Object-Sysmeta-Crypto-Body-Meta": body_meta,
                     "X-Object-Transient-Sysmeta-Crypto-Meta": meta_meta,
                     "X-Backend-Storage-Policy-Index": "0"}, body=b"encrypted")
        check(status == 201, "a backend PUT with crypto metadata: %d" % status)
        files = sorted(glob.glob(os.path.join(root, "node%d" % n, "sd%d" % n, "objects",
                                              str(part), "*", "*", "*.data")))
        code, out = object_info(cluster, files[-1])
        check(code == 0 and "Data crypto details: {\n  \"body_key\": {" in out and
              "Metadata crypto details: {" in out, "crypto details printed: %s" % out[-600:])
        code, out = object_info(cluster, files[-1], "--drop-prefixes")
        check("crypto details" not in out, "not with --drop-prefixes, as Swift")

        code, out = object_info(cluster, os.path.join(root, "missing.data"))
        check(code == 1 and "Data file doesn't exist" in out, "a missing file: %d" % code)

    if failures:
        print("%d failed" % len(failures))
        return 1
    print("swift-object-info on Apus data: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
