#!/usr/bin/env python3
"""Compares a pytest JUnit report of Swift's functional suite with the list of tests known to
fail on Apus, and prints the counts.

known_failures.txt: one entry a line, `<pattern>  # <reason>`; a pattern is a test id
(`test.functional.test_object.TestObject.test_copy`) or an fnmatch pattern over test ids
(`test.functional.test_slo.*`). A failure or error matching no entry fails the run; so does a
listed exact id that passes now (the list only shrinks: take it out).

usage: compare_failures.py JUNIT_XML KNOWN_FAILURES
"""
import fnmatch
import sys
import xml.etree.ElementTree as ET


def load_known(path):
    entries = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        entries.append((pattern.strip(), reason.strip()))
    return entries


def main():
    junit, known_path = sys.argv[1:3]
    known = load_known(known_path)
    passed, failed, skipped = [], [], []
    for case in ET.parse(junit).iter("testcase"):
        tid = "%s.%s" % (case.get("classname"), case.get("name"))
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(tid)
        elif case.find("skipped") is not None:
            skipped.append(tid)
        else:
            passed.append(tid)
    unexpected = [t for t in failed if not any(fnmatch.fnmatchcase(t, p) for p, _ in known)]
    fixed = [p for p, _ in known if not any(c in p for c in "*?[") and p in passed]
    print("Swift functional suite on Apus: %d passed, %d failed (%d known), %d skipped"
          % (len(passed), len(failed), len(failed) - len(unexpected), len(skipped)))
    for t in unexpected:
        print("UNEXPECTED FAILURE:", t)
    for t in fixed:
        print("PASSES NOW, take it off the known list:", t)
    bad = len(unexpected) + len(fixed)
    print("%d passed, %d failed" % (len(passed), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
