#!/usr/bin/env python3
"""Runs ceph's S3 compatibility suite (s3-tests, the tarball in shared/testdata; its
s3tests/functional/test_s3.py and test_headers.py) against an Apus proxy with s3api, and
compares the failures with tests/s3/known_failures.txt (tests/functional/compare_failures.py:
a failure not listed fails the run, and so does a listed exact test id that passes now).

The cluster is tests/support/cluster.py's (Apus storage servers, memcached, free loopback
ports) with one more proxy whose pipeline has s3api before tempauth; the suite's three users are
tempauth users of three accounts (access key `account:user`, secret the tempauth key), and its
IAM sections are dummies (IAM and STS are out of scope).

  run_s3tests.py BUILD_DIR [--subset] [--stock] [pytest args...]

--subset runs only the tests named in tests/s3/ci_subset.txt (what CI runs: about 75 s here,
the whole suite about 12.5 minutes on 2 cores); --stock runs the same tests against stock Swift
2.30.1's proxy (Debian's swift-proxy-server, same pipeline and config, in front of the same Apus
storage servers) and prints its counts only (the baseline, not a test of Apus). APUS_S3TESTS_KEEP=DIR keeps the JUnit XML, pytest's log and the servers' logs there;
APUS_S3TESTS_TIMEOUT sets the seconds one test may take (default 120).
Prints passed, failed and skipped, and ends with "N passed, N failed".

Only /usr/bin/python3 runs this (Debian's python3-swift, pytest, boto3, munch, isodate).
"""
import base64
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

# shared/ lies beside the checkout (a worktree's, or CI's fresh clone's).
SUITE_TARBALL = os.environ.get("APUS_S3TESTS_TARBALL") or next(
    (p for p in (os.path.join(TOP, "..", "shared", "testdata", "s3-tests-8f0ae7b.tar.gz"),
                 "/work/shared/testdata/s3-tests-8f0ae7b.tar.gz") if os.path.exists(p)),
    os.path.join(TOP, "..", "shared", "testdata", "s3-tests-8f0ae7b.tar.gz"))
SUITE_REV = "8f0ae7b"
CACHE = os.environ.get("APUS_S3TESTS_CACHE", "/var/cache/apus/s3-tests/" + SUITE_REV)
FILES = ["s3tests/functional/test_s3.py", "s3tests/functional/test_headers.py"]
KNOWN = os.path.join(HERE, "known_failures.txt")
SUBSET = os.path.join(HERE, "ci_subset.txt")
COMPARE = os.path.join(TOP, "tests", "functional", "compare_failures.py")

PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api "
            "tempauth copy slo versioned_writes symlink keymaster encryption proxy-logging "
            "proxy-server")
# The suite's users: main and alt in accounts of their own (cross-account ACL tests), and the
# tenant user in a third. cluster.py's tempauth already has test:tester / testing.
USERS = {"s3 main": ("test", "tester", "testing"),
         "s3 alt": ("test2", "tester2", "testing2"),
         "s3 tenant": ("test3", "tester3", "testing3")}
FILTERS = ("user_test2_tester2 = testing2 .admin\nuser_test3_tester3 = testing3 .admin\n"
           # S3's semantics: ACLs checked by s3api, bucket names global (cross-account grants,
           # public buckets, anonymous requests).
           "[filter:s3api]\nuse = egg:swift#s3api\ns3_acl = true\nglobal_bucket_namespace = true\n"
           "[filter:copy]\nuse = egg:swift#copy\n[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:symlink]\nuse = egg:swift#symlink\n"
           "[filter:versioned_writes]\nuse = egg:swift#versioned_writes\n"
           "allow_object_versioning = true\n"
           # Encryption at rest, and the suite's two SSE-KMS key ids in the keymaster's local
           # key store (stock Swift ignores those options).
           "[filter:keymaster]\nuse = egg:swift#keymaster\n"
           "encryption_root_secret = %s\nsse_kms_key_testkey-1 = %s\nsse_kms_key_testkey-2 = %s\n"
           "[filter:encryption]\nuse = egg:swift#encryption\n"
           % tuple(base64.b64encode(bytes([n]) * 32).decode() for n in (1, 2, 3)))


def suite_dir():
    """The suite extracted once into CACHE (atomically: a half-extracted tree is never used)."""
    marker = os.path.join(CACHE, "s3-tests", FILES[0])
    if os.path.exists(marker):
        return os.path.join(CACHE, "s3-tests")
    parent = os.path.dirname(CACHE)
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".s3-tests.", dir=parent)
    os.chmod(work, 0o755)
    try:
        with tarfile.open(SUITE_TARBALL) as tar:
            for member in tar.getmembers():  # the tarball is ours, but stay inside work
                if member.name.startswith("/") or ".." in member.name.split("/"):
                    raise RuntimeError("unexpected path in the suite: %s" % member.name)
            tar.extractall(work)
        if not os.path.exists(os.path.join(work, "s3-tests", FILES[0])):
            raise RuntimeError("%s has no s3-tests/%s" % (SUITE_TARBALL, FILES[0]))
        if os.path.exists(CACHE):
            shutil.rmtree(CACHE)
        os.rename(work, CACHE)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return os.path.join(CACHE, "s3-tests")


def write_conf(path, port):
    """The suite's config: every S3 user a tempauth user; the IAM sections it reads at start are
    dummies (no test of the two files run here needs IAM to work)."""
    out = ["[DEFAULT]", "host = 127.0.0.1", "port = %d" % port, "is_secure = False",
           "ssl_verify = False", "", "[fixtures]", "bucket prefix = apus-{random}-",
           "iam name prefix = s3-tests-", "iam path prefix = /s3-tests/", ""]
    for section, (account, user, key) in USERS.items():
        uid = "%s:%s" % (account, user)
        # s3api's owner ID and display name are both the access key (tempauth's account:user).
        out += ["[%s]" % section, "display_name = %s" % uid, "user_id = %s" % uid,
                "email = %s@example.com" % user, "access_key = %s" % uid,
                "secret_key = %s" % key]
        if section == "s3 tenant":
            out.append("tenant = %s" % account)
        out.append("")
    for section, n in (("iam", "1"), ("iam root", "2"), ("iam alt root", "3")):
        out += ["[%s]" % section, "email = iam%s@example.com" % n, "user_id = iam%s" % n,
                "access_key = IAMDUMMY%s" % n, "secret_key = iamdummysecret%s" % n,
                "display_name = iam%s" % n, ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def subset_args():
    ids = []
    for line in open(SUBSET):
        line = line.split("#", 1)[0].strip()
        if line:
            ids.append(line)
    return ids


def merge_duplicates(junit):
    """A test that fails and then errors in its teardown has two <testcase> entries: one is
    kept (the failure), so each test counts once."""
    tree = ET.parse(junit)
    seen = {}
    for suite in tree.iter("testsuite"):
        for case in list(suite.iter("testcase")):
            tid = (case.get("classname"), case.get("name"))
            bad = case.find("failure") is not None or case.find("error") is not None
            if tid not in seen:
                seen[tid] = (suite, case, bad)
                continue
            first_suite, first, first_bad = seen[tid]
            if bad and not first_bad:
                first_suite.remove(first)
                seen[tid] = (suite, case, bad)
            else:
                suite.remove(case)
    tree.write(junit)


def terminated(signum, frame):
    raise SystemExit("terminated by signal %d" % signum)  # the servers are stopped on the way out


def main():
    signal.signal(signal.SIGTERM, terminated)
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        print("0 passed, 1 failed")
        return 2
    build = os.path.abspath(args.pop(0))
    subset = "--subset" in args
    stock = "--stock" in args
    extra = [a for a in args if a not in ("--subset", "--stock")]
    started = time.monotonic()
    try:
        suite = suite_dir()
    except Exception as e:  # noqa: BLE001 (reported, and the run fails)
        print("cannot extract the s3-tests suite: %s" % e)
        print("0 passed, 1 failed")
        return 1
    tests = subset_args() if subset else list(FILES)
    keep = os.environ.get("APUS_S3TESTS_KEEP")
    with procs.TempDir("apus-s3tests-") as root, procs.Processes() as ps:
        cluster = Cluster(os.path.join(build, "bin"), root, ps)
        port = cluster.start_proxy("proxy-s3api", pipeline=PIPELINE, filters=FILTERS)
        if stock:
            port = cluster.start_stock_proxy("proxy-s3api")
        conf = os.path.join(root, "s3tests.conf")
        write_conf(conf, port)
        junit = os.path.join(root, "junit.xml")
        log = os.path.join(root, "pytest.log")
        env = dict(os.environ)
        env.update({
            "S3TEST_CONF": conf,
            # Nothing of the machine's own AWS setup (profiles, regions, endpoints) applies.
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_DEFAULT_REGION": "us-east-1",
            "PYTHONPATH": HERE + os.pathsep + env.get("PYTHONPATH", ""),
            "APUS_S3TESTS_TIMEOUT": env.get("APUS_S3TESTS_TIMEOUT", "120"),
        })
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                  "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION"):
            env.pop(k, None)
        pytest_started = time.monotonic()
        with open(log, "w") as out:
            rc = subprocess.call(["/usr/bin/python3", "-m", "pytest", "-q", "-p",
                                  "no:cacheprovider", "-p", "s3tests_plugin", "-o",
                                  "junit_family=xunit1", "--junitxml=" + junit]
                                 + tests + extra, cwd=suite, env=env, stdout=out,
                                 stderr=subprocess.STDOUT)
        pytest_seconds = time.monotonic() - pytest_started
        with open(log, errors="replace") as f:
            tail = f.read().splitlines()[-3:]
        print("\n".join(tail))
        if keep:
            os.makedirs(keep, exist_ok=True)
            for name in ("junit.xml", "pytest.log", "s3tests.conf"):
                if os.path.exists(os.path.join(root, name)):
                    shutil.copy(os.path.join(root, name), keep)
            for name in os.listdir(root):
                if name.endswith((".log", ".out")) and name != "pytest.log":
                    shutil.copy(os.path.join(root, name), keep)
        if not os.path.exists(junit):
            print("pytest wrote no report (exit %d); its log:" % rc)
            with open(log, errors="replace") as f:
                print(f.read()[-3000:])
            print("0 passed, 1 failed")
            return 1
        merge_duplicates(junit)
        print("pytest took %.0f s (%.0f s in all)" % (pytest_seconds,
                                                     time.monotonic() - started))
        compare = ["/usr/bin/python3", COMPARE, "--suite=ceph s3-tests" +
                   (" (CI subset)" if subset else "")]
        if stock:
            compare.append("--baseline")
        return subprocess.call(compare + [junit, KNOWN])


if __name__ == "__main__":
    sys.exit(main())
