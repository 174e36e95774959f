#!/usr/bin/env python3
"""Compares a pytest JUnit report of Swift's functional suite with the list of tests known to
fail on Apus, and prints the counts.

known_failures.txt: one entry a line, `<pattern>  # <reason>`; a pattern is a test id
(`test.functional.test_object.TestObject.test_copy`) or an fnmatch pattern over test ids
(`test.functional.test_slo.*`). A failure or error matching no entry fails the run; so does a
listed exact id that passes now (the list only shrinks: take it out).

With --mixed (a mixed Swift/Apus cluster), a listed test that passes is fine: the Swift side
may provide what Apus lacks.

With --baseline (stock Swift alone, APUS_FUNCTIONAL_MIX=stock), only the counts are printed:
the run is the reference Apus is compared with (compare_stock.py), not a test of Apus.

--suite=NAME names the suite in the counts line (default: Swift functional suite).
--clues=DIR: an unexpected failure's DIR/<test id>/clues.txt, when there is one, is printed
under it (the probe harness writes what the servers did there).

usage: compare_failures.py [--mixed | --baseline] [--suite=NAME] [--clues=DIR] JUNIT_XML
                           KNOWN_FAILURES
"""
import fnmatch
import os
import re
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


def shorten(line, width=200):
    """`line` cut to `width`: long URLs in their middle first (swiftclient's exceptions put the
    HTTP status after the URL), then the line after its first three quarters."""
    line = re.sub(r"https?://\S{50,}", lambda m: m[0][:30] + "..." + m[0][-20:], line)
    if len(line) <= width:
        return line
    head = (width - 5) * 3 // 4
    return line[:head] + " ... " + line[-(width - 5 - head):]


def clues_of(clues_dir, test_id):
    try:
        with open(os.path.join(clues_dir, test_id, "clues.txt")) as f:
            return [line.rstrip("\n") for line in f][:8]
    except (OSError, TypeError):
        return []


def main():
    args = sys.argv[1:]
    mixed = "--mixed" in args
    baseline = "--baseline" in args
    suite = ([a[8:] for a in args if a.startswith("--suite=")] or ["Swift functional suite"])[-1]
    clues_dir = ([a[8:] for a in args if a.startswith("--clues=")] or [None])[-1]
    junit, known_path = [a for a in args if not a.startswith("--")][:2]
    known = load_known(known_path)
    passed, failed, skipped = [], [], []
    why = {}
    for case in ET.parse(junit).iter("testcase"):
        tid = "%s.%s" % (case.get("classname"), case.get("name"))
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed.append(tid)
            lines = [l for l in (problem.text or problem.get("message") or "").splitlines()
                     if l.startswith("E ")]
            why[tid] = "\n    ".join(shorten(l) for l in lines[:6])
        elif case.find("skipped") is not None:
            skipped.append(tid)
        else:
            passed.append(tid)
    if baseline:
        print("%s on stock Swift: %d passed, %d failed, %d skipped"
              % (suite, len(passed), len(failed), len(skipped)))
        print("%d passed, 0 failed" % len(passed))
        return 0
    unexpected = [t for t in failed if not any(fnmatch.fnmatchcase(t, p) for p, _ in known)]
    fixed = [] if mixed else [p for p, _ in known
                              if not any(c in p for c in "*?[") and p in passed]
    print("%s on Apus: %d passed, %d failed (%d known), %d skipped"
          % (suite, len(passed), len(failed), len(failed) - len(unexpected), len(skipped)))
    for t in unexpected:
        print("UNEXPECTED FAILURE:", t)
        if why.get(t):
            print("    " + why[t])
        for clue in clues_of(clues_dir, t):
            print("    | " + clue)
    for t in fixed:
        print("PASSES NOW, take it off the known list:", t)
    bad = len(unexpected) + len(fixed)
    print("%d passed, %d failed" % (len(passed), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
