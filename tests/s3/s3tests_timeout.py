"""A pytest plugin for run_s3tests.py: one test may take APUS_S3TESTS_TIMEOUT seconds (default
120), then it fails with TimeoutError instead of hanging the run (Debian has no pytest-timeout).
A SIGALRM in the main thread; the suite's own threads are left alone."""
import os
import signal

import pytest


class S3TestTimedOut(Exception):
    pass


def _expired(signum, frame):
    raise S3TestTimedOut("the test took longer than %s s" % os.environ.get(
        "APUS_S3TESTS_TIMEOUT", "120"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    seconds = float(os.environ.get("APUS_S3TESTS_TIMEOUT", "120"))
    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
