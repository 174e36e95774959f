#!/usr/bin/env python3
"""/info of an Apus proxy and of a stock swift-proxy-server (Swift 2.30.1) with the same
pipeline on the same cluster (tests/support/cluster.py): Swift's all-in-one pipeline, every
middleware Swift's functional suite looks for in /info, plus s3api, domain_remap and
etag_quoter. The suite decides what to run from /info, so each section and value must be
Swift's, but for this deliberate difference:

- swift.allow_open_expired: Apus serves X-Open-Expired as Swift 2.34+ does, and says so.

usage: info_test.py <build-dir>
"""
import http.client
import json
import os
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402


BIN = os.path.join(os.path.abspath(sys.argv[1]), "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache domain_remap "
            "listing_formats bulk tempurl formpost s3api ratelimit crossdomain container_sync "
            "tempauth staticweb copy container-quotas account-quotas slo dlo versioned_writes "
            "symlink etag-quoter proxy-logging proxy-server")
FILTERS = "".join("[filter:%s]\nuse = egg:swift#%s\n" % (f, f) for f in (
    "bulk", "tempurl", "formpost", "s3api", "ratelimit", "crossdomain", "container_sync",
    "staticweb", "copy", "slo", "dlo", "symlink")) + (
    "[filter:domain_remap]\nuse = egg:swift#domain_remap\nstorage_domain = example.net\n"
    "[filter:etag-quoter]\nuse = egg:swift#etag_quoter\n"
    "[filter:container-quotas]\nuse = egg:swift#container_quotas\n"
    "[filter:account-quotas]\nuse = egg:swift#account_quotas\n"
    "[filter:versioned_writes]\nuse = egg:swift#versioned_writes\n"
    "allow_versioned_writes = true\nallow_object_versioning = true\n")
EXPECTED_DIFFERENCES = {("swift", "allow_open_expired"): (False, None)}


def info(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", "/info")
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def main():
    failures = []
    with procs.TempDir("apus-info-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        apus = cluster.start_proxy("proxy-info", pipeline=PIPELINE, filters=FILTERS)
        swift = cluster.start_stock_proxy("proxy-info")
        (sa, ia), (ss, isw) = info(apus), info(swift)
    if sa != 200 or ss != 200:
        failures.append("status apus %d, swift %d" % (sa, ss))
    if sorted(ia) != sorted(isw):
        failures.append("sections: apus %s, swift %s" % (sorted(ia), sorted(isw)))
    for section in sorted(set(ia) & set(isw)):
        a, s = dict(ia[section]), dict(isw[section])
        for (sec, key), (want_apus, want_swift) in EXPECTED_DIFFERENCES.items():
            if sec == section:
                if a.get(key) != want_apus or s.get(key) != want_swift:
                    failures.append("%s.%s: apus %r, swift %r, expected %r and %r" % (
                        section, key, a.get(key), s.get(key), want_apus, want_swift))
                a.pop(key, None)
                s.pop(key, None)
        if a != s:
            failures.append("%s:\n  apus  %s\n  swift %s" % (
                section, json.dumps(a, sort_keys=True), json.dumps(s, sort_keys=True)))
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("info: OK (%d sections)" % len(ia))


if __name__ == "__main__":
    main()
