#!/usr/bin/env python3
"""bench/report.py renders the fixture A/B results: one self-contained page (nothing fetched
from elsewhere, no scripts) with every scenario, its medians and ratio, both charts, the
idle-cluster CPU and the configurations (escaped).

usage: report_test.py <source-dir>
"""
import os
import re
import subprocess
import sys
import tempfile

top = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "report.html")
    subprocess.run(["/usr/bin/python3", os.path.join(top, "bench", "report.py"),
                    os.path.join(top, "tests", "bench", "fixture_ab.json"), out], check=True)
    page = open(out).read()
check(page.startswith("<!DOCTYPE html>"), "an HTML page")
check("4KiB GET c32" in page and "16MiB PUT c4" in page, "every scenario is shown")
# Medians: apus 6000 against swift 610 ops/s is 9.84x; 16 MiB PUT 20 against 10: 2.00x.
check("9.84x" in page and "2.00x" in page, "ratios of the medians")
check(page.count("<svg") == 2, "throughput and latency charts")
check("<script" not in page.lower(), "no scripts")
check(not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page) and "@import" not in page and
      "url(" not in page, "nothing loaded from elsewhere")
check("&lt;tag&gt;" in page and "<tag>" not in page, "configuration text is escaped")
check("Idle cluster" in page and "0.050" in page, "idle CPU medians")
check(">1</td></tr>" in page, "errors are shown")
print("report test:", "%d failures" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
