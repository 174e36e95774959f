#!/usr/bin/env python3
"""What the all-in-one's servers said during a failed functional run, for failures seen only in
CI (where the logs are gone afterwards):

- their ERROR, WARNING and CRITICAL lines (the updaters' periodic INFO summaries left out);
- container and account requests whose replicas answered differently (one transaction, say
  204 from two container replicas and 409 from the third: without DB replication, a replica
  that refused a container DELETE keeps the container, and so does the account replica it
  reports to);
- the slowest requests of each kind of server (a stalled server makes updates late).

usage: server_log_summary.py LOG_DIR
"""
import collections
import glob
import os
import re
import sys

ACCESS = re.compile(r'\] "(?P<method>[A-Z]+) (?P<path>\S+)" (?P<status>\d{3}) .*" '
                    r'(?P<seconds>[0-9.]+) "[^"]*" \d+ \S+$')
TXN = re.compile(r'"(tx[0-9a-f]{21}-[0-9a-f]{10}\S*)"')
LEVEL = re.compile(r' (ERROR|WARNING|CRITICAL): ')


def main(log_dir):
    problems, requests = [], []
    for path in sorted(glob.glob(os.path.join(log_dir, "*.log"))):
        server = os.path.basename(path)[:-len(".log")]
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if LEVEL.search(line):
                    problems.append(line)
                    continue
                m = ACCESS.search(line)
                if not m:
                    continue
                txn = TXN.search(line)
                requests.append((server, m["method"], m["path"], int(m["status"]),
                                 float(m["seconds"]), txn.group(1) if txn else None, line))
    print("--- server errors and warnings (last 40 of %d)" % len(problems))
    for line in problems[-40:]:
        print(line[:400])

    by_call = collections.defaultdict(list)
    for server, method, path, status, _, txn, _ in requests:
        kind = server.rsplit("-", 1)[0]
        if txn and kind in ("container-server", "account-server"):
            # The replicas of one call share the path after the device.
            by_call[(txn, kind, method, path.split("/", 2)[-1])].append((server, status))
    # A server answering twice in one transaction is a retry (an account HEAD after a 404).
    split = [(call, answers) for call, answers in by_call.items()
             if len(answers) > 1 and len({server for server, _ in answers}) == len(answers)
             and len({s // 100 if s != 409 else s for _, s in answers}) > 1]
    print("--- replicas that answered one request differently: %d" % len(split))
    for (txn, kind, method, path), answers in split[-20:]:
        print("%s %s %s %s: %s" % (txn, kind, method, path[:120],
                                   ", ".join("%s %d" % a for a in sorted(answers))))

    print("--- slowest requests per kind of server")
    slowest = collections.defaultdict(list)
    for server, method, path, status, seconds, _, _ in requests:
        slowest[server.rsplit("-", 1)[0]].append((seconds, server, method, status, path))
    for kind in sorted(slowest):
        for seconds, server, method, status, path in sorted(slowest[kind])[-3:]:
            print("%8.3fs %s %s %d %s" % (seconds, server, method, status, path[:120]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
