#!/usr/bin/env python3
"""Which tests of Swift's functional suite stock Swift passes and Apus does not, from the JUnit
reports of two runs of run_functional.sh (APUS_FUNCTIONAL_KEEP=FILE keeps a report): one on
Apus, one with APUS_FUNCTIONAL_MIX=stock. Prints, per test file, how many tests each side
passes and the ids stock passes and Apus fails or skips; exits 1 when there are any.

usage: compare_stock.py APUS_JUNIT STOCK_JUNIT [--only SUBSTRING]
"""
import collections
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    """test id -> "passed", "failed" or "skipped"."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        tid = "%s.%s" % (case.get("classname"), case.get("name"))
        if case.find("failure") is not None or case.find("error") is not None:
            out[tid] = "failed"
        elif case.find("skipped") is not None:
            out[tid] = "skipped"
        else:
            out[tid] = "passed"
    return out


def test_file(tid):
    parts = tid.split(".")
    return ".".join(parts[:3]) if len(parts) > 3 else tid


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--only")]
    only = ""
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
        args = [a for a in args if a != only]
    apus, stock = outcomes(args[0]), outcomes(args[1])
    per_file = collections.defaultdict(lambda: [0, 0, []])
    for tid, result in stock.items():
        if only not in tid:
            continue
        f = per_file[test_file(tid)]
        f[1] += result == "passed"
        f[0] += apus.get(tid) == "passed"
        if result == "passed" and apus.get(tid) != "passed":
            f[2].append((tid, apus.get(tid, "not run")))
    missing = 0
    print("%-50s %8s %8s %8s" % ("file", "apus", "stock", "behind"))
    for name in sorted(per_file):
        a, s, behind = per_file[name]
        print("%-50s %8d %8d %8d" % (name, a, s, len(behind)))
        missing += len(behind)
    for name in sorted(per_file):
        for tid, result in per_file[name][2]:
            print("BEHIND (%s on Apus): %s" % (result, tid))
    print("stock passes %d tests that Apus does not" % missing)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
