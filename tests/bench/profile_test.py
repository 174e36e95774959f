#!/usr/bin/env python3
"""bench/profile_scenario.py's accounting, on made-up inputs (no perf, no cluster): `perf
script` output is parsed into samples, each kernel one put under the system call on its stack;
processes are grouped by name; the CPU between two samples of /proc is split by group (a kernel
worker that renamed itself is still itself); and the report gives each group's time per
operation.

usage: profile_test.py <source-dir>
"""
import os
import subprocess
import sys

top = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(top, "bench"))
import profile_scenario as profile  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


check(hasattr(profile, "perf_samples"), "bench/profile_scenario.py is imported")

PERF_SCRIPT = """\
  101/102  100.000100:
\tffffffff81000001 pvm_irq_enable+0x10 ([kernel.kallsyms])
\tffffffff81000002 ext4_sync_file ([kernel.kallsyms])
\tffffffff81000003 __x64_sys_fsync ([kernel.kallsyms])
\tffffffff81000004 do_syscall_64 ([kernel.kallsyms])
\t7f0000000001 fsync (/usr/lib/x86_64-linux-gnu/libc.so.6)

  101/103  100.000200:
\t55000001 apus::object::ObjectServer::handle (/work/build/bin/apus-object-server)

  0/0  100.000300:
\tffffffff81000005 pvm_safe_halt_hc ([kernel.kallsyms])

  7/7  100.000400:
\tffffffff81000006 iowrite16 ([kernel.kallsyms])
"""


def fake_run(argv, **kwargs):
    check(argv[:2] == ["perf", "script"] and "100.000000,101.000000" in argv,
          "perf script is asked for the window only: %r" % argv)
    return subprocess.CompletedProcess(argv, 0, stdout=PERF_SCRIPT, stderr="")


real_run = profile.subprocess.run
profile.subprocess.run = fake_run
try:
    samples = profile.perf_samples("perf.data", 100.0, 101.0)
finally:
    profile.subprocess.run = real_run
check(samples == [(101, 102, "pvm_irq_enable", "[kernel.kallsyms]", "fsync"),
                  (101, 103, "apus::object::ObjectServer::handle", "apus-object-server", None),
                  (0, 0, "pvm_safe_halt_hc", "[kernel.kallsyms]", None),
                  (7, 7, "iowrite16", "[kernel.kallsyms]", None)],
      "samples parsed, kernel ones under their system call: %r" % samples)

check(profile.group_of("apus-object-ser", "") == "object servers", "Apus object server grouped")
swift_container = "/usr/bin/python3 run_swift_server.py etc container container-server-1.conf"
check(profile.group_of("python3", swift_container) == "container servers",
      "Swift's container server grouped by its command line")
check(profile.group_of("kworker/u4:2-events", "") == "kernel: workers and softirqs",
      "kernel workers grouped")

# Two /proc samples 1 s apart: the object server used 0.6 s, a kernel worker 0.2 s though it
# renamed itself, a process born in between 0.1 s; the machine idled 0.9 s, waited 0.2 s.
before = (10.0, {101: ("apus-object-ser", "", 5.0), 7: ("kworker/0:1-events", "", 1.0)},
          (50.0, 3.0))
after = (11.0, {101: ("apus-object-ser", "", 5.6), 7: ("kworker/0:1-mm_percpu_wq", "", 1.2),
                200: ("apus-bench", "", 0.1)}, (50.9, 3.2))
groups, pid_group, window = profile.cpu_by_group([before, after], 10.0, 11.0)
check(abs(window - 1.0) < 1e-9, "window from the samples")
check(abs(groups["object servers"] - 0.6) < 1e-9 and
      abs(groups["kernel: workers and softirqs"] - 0.2) < 1e-9 and
      abs(groups["client (apus-bench)"] - 0.1) < 1e-9 and
      abs(groups["idle"] - 0.9) < 1e-9 and abs(groups["iowait"] - 0.2) < 1e-9,
      "CPU split by group: %r" % dict(groups))
check(pid_group[101] == "object servers", "pids mapped to their group")

text = profile.report("title", 100, window, groups, samples * 10, pid_group, 3)
check("| object servers | 6.000 |" in text, "object servers' ms per operation: %s" % text)
check("fsync 50.0%" in text, "the object server's kernel samples by system call")
check("pvm_safe_halt_hc" not in text, "the idle task's samples are not detailed")
print("profile test:", "%d failures" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
