#!/usr/bin/env python3
"""A modern S3 client against Apus (issue 15): the AWS SDK for JavaScript v3, a 2025 release
whose default integrity checks are on (CRC32 on every upload, in a header or an aws-chunked
trailer over HTTP chunked; CRC32 parts and checksum elements in multipart uploads), runs
tests/s3/sdk_js/sdk_test.mjs against an Apus proxy with s3api: single and multipart uploads,
listings, downloads compared byte for byte, DeleteObjects (checksum instead of Content-MD5).
The SDK comes from the npm registry once (tests/s3/fetch_sdk_js.sh, like the apt packages);
the test itself only talks to 127.0.0.1.

usage: s3_sdk_js_test.py <build-dir>
"""
import os
import shutil
import subprocess
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api "
            "tempauth copy slo proxy-logging proxy-server")
FILTERS = ("[filter:s3api]\nuse = egg:swift#s3api\n[filter:copy]\nuse = egg:swift#copy\n"
           "[filter:slo]\nuse = egg:swift#slo\n")


def main():
    if not shutil.which("node"):
        print("s3_sdk_js: node is missing (scripts/install-deps installs it)")
        return 1
    sdk = subprocess.run([os.path.join(TOP, "tests", "s3", "fetch_sdk_js.sh")],
                         check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    with procs.TempDir("apus-sdk-js-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        port = cluster.start_proxy("proxy-sdk-js", pipeline=PIPELINE, filters=FILTERS)
        # The script beside the SDK's node_modules, which ES modules resolve from the script.
        os.symlink(os.path.join(sdk, "node_modules"), os.path.join(root, "node_modules"))
        script = os.path.join(root, "sdk_test.mjs")
        shutil.copy(os.path.join(TOP, "tests", "s3", "sdk_js", "sdk_test.mjs"), script)
        run = subprocess.run(["node", script, "http://127.0.0.1:%d" % port, "test:tester",
                              "testing"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=240)
        print(run.stdout)
        if run.returncode != 0 or "sdk-js: OK" not in run.stdout:
            print("s3_sdk_js: FAILED (node exited %d)" % run.returncode)
            return 1
    print("s3_sdk_js: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
