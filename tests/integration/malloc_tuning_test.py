#!/usr/bin/python3
"""A server starts itself again with glibc's per-thread malloc cache enlarged
(common::tune_malloc): its environment, as the kernel shows it, then holds GLIBC_TUNABLES with
glibc.malloc.tcache_count=256, added to what the operator's environment had, under the same
pid and name; an operator's own tcache_count is kept, and a preloaded library turns it off. Uses
apus-object-server on a bare device directory.

usage: malloc_tuning_test.py <build-dir>
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402

BUILD = sys.argv[1]
WANT = "glibc.malloc.tcache_count=256"


def tunables_of(pid):
    """GLIBC_TUNABLES as the kernel gave it to the process's last exec. glibc, parsing it at
    start, writes a NUL over each ':' of that memory (getenv sees a copy): the tunables after
    the first show as entries of their own, glued back here."""
    with open("/proc/%d/environ" % pid, "rb") as f:
        items = [item.decode() for item in f.read().split(b"\0")]
    for i, item in enumerate(items):
        if item.startswith("GLIBC_TUNABLES="):
            parts = [item.split("=", 1)[1]]
            for x in items[i + 1:]:
                if not x.startswith("glibc."):
                    break
                parts.append(x)
            return ":".join(parts)
    return None


def write_config(root, port):
    etc = os.path.join(root, "etc")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = a\nswift_hash_path_suffix = b\n\n"
                "[storage-policy:0]\nname = gold\ndefault = yes\n")
    os.makedirs(os.path.join(root, "srv", "sda1"), exist_ok=True)
    path = os.path.join(etc, "object-server-%d.conf" % port)
    with open(path, "w") as f:
        f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                "bind_port = %d\nswift_dir = %s\nworkers = 1\nlog_file = %s/object.log\n\n"
                "[pipeline:main]\npipeline = object-server\n\n"
                "[app:object-server]\nuse = egg:swift#object\n"
                % (os.path.join(root, "srv"), port, etc, root))
    return path


def main():
    failures = []
    preload = "libm.so.6"  # any library the loader finds; what it is does not matter
    cases = [
        # (GLIBC_TUNABLES in the environment, LD_PRELOAD, what the server should run with)
        (None, None, WANT),
        ("glibc.malloc.trim_threshold=33554432", None,
         "glibc.malloc.trim_threshold=33554432:" + WANT),
        ("glibc.malloc.tcache_count=7", None, "glibc.malloc.tcache_count=7"),
        # A preloaded library may be an allocator of its own: no exec, no variable.
        (None, preload, None),
    ]
    with procs.TempDir("apus-malloc-") as root, procs.Processes() as ps:
        for had, preloaded, want in cases:
            env = dict(os.environ)
            env.pop("GLIBC_TUNABLES", None)
            env.pop("LD_PRELOAD", None)
            if had is not None:
                env["GLIBC_TUNABLES"] = had
            if preloaded is not None:
                env["LD_PRELOAD"] = preloaded
            port = procs.free_port()
            log = os.path.join(root, "object-%d.out" % port)
            proc = ps.start([os.path.join(BUILD, "bin", "apus-object-server"),
                             write_config(root, port)], log, env=env)
            procs.wait_for_port(port, proc=proc, log_path=log)
            with open("/proc/%d/comm" % proc.pid) as f:
                name = f.read().strip()
            if name != "apus-object-ser":  # the kernel keeps 15 bytes of it
                failures.append("serving as %r after the exec, not as its program" % name)
            got = tunables_of(proc.pid)
            if got != want:
                failures.append("started with GLIBC_TUNABLES=%r, LD_PRELOAD=%r: serving with "
                                "%r, wanted %r" % (had, preloaded, got, want))
            status, _, _ = procs.request(port, "GET", "/sda1/0/a/c/o")
            if status != 404:
                failures.append("GET of a missing object: %r" % status)
            ps.stop(proc)
            if proc.returncode != 0:
                failures.append("exit status %r after SIGTERM" % proc.returncode)
    for f in failures:
        print("FAIL:", f)
    print("malloc tuning: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
