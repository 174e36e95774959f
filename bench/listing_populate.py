#!/usr/bin/env python3
"""Fills a container with N object rows through the container server's UPDATE verb (Swift's
merge_items RPC), the same rows on every server named, and prints the seconds each took.

Rows are named d<NNN>/o<NNNNNNNN> (1000 "directories"), so listings with prefix and delimiter
have work to do. Used by bench/listing_bench.sh.

usage: listing_populate.py N PATH PORT [PORT...]   (PATH: /<dev>/<part>/<account>/<container>)
"""
import http.client
import json
import sys
import time

BATCH = 10000


def rows(start, stop):
    return [{"name": "d%03d/o%08d" % (i % 1000, i), "created_at": "1700000000.00000",
             "size": 1000 + i % 100, "content_type": "application/octet-stream",
             "etag": "d41d8cd98f00b204e9800998ecf8427e", "deleted": 0,
             "storage_policy_index": 0} for i in range(start, stop)]


def main():
    n, path, ports = int(sys.argv[1]), sys.argv[2], [int(p) for p in sys.argv[3:]]
    took = {p: 0.0 for p in ports}
    for start in range(0, n, BATCH):
        body = json.dumps(rows(start, min(n, start + BATCH))).encode()
        for port in ports:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            t0 = time.monotonic()
            conn.request("UPDATE", path, body, {"X-Timestamp": "1700000000.00000",
                                                "Content-Length": str(len(body))})
            resp = conn.getresponse()
            resp.read()
            took[port] += time.monotonic() - t0
            conn.close()
            if resp.status != 202:
                sys.exit("UPDATE to port %d answered %d" % (port, resp.status))
    print(json.dumps({str(p): round(t, 3) for p, t in took.items()}))


if __name__ == "__main__":
    main()
