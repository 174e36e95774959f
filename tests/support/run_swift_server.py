#!/usr/bin/env python3
"""Runs a stock Swift server (Debian's python3-swift) with its swift.conf taken from a test's own
directory instead of /etc/swift, which tests must not touch.

usage: run_swift_server.py SWIFT_DIR SERVER CONF   (SERVER: object, container, account, proxy)
"""
import sys

from swift.common import constraints, storage_policy, utils

swift_dir, server, conf = sys.argv[1:4]
utils.set_swift_dir(swift_dir)            # hash path prefix/suffix from SWIFT_DIR/swift.conf
storage_policy.reload_storage_policies()  # and its storage policies
# Its [swift-constraints] too: swift.common.constraints reads /etc/swift/swift.conf when first
# imported (swift.common.wsgi imports it), which left stock proxies advertising a 5 GiB
# max_file_size and the functional suite's testFileSizeLimit filling the disk.
constraints.reload_constraints()
from swift.common.wsgi import run_wsgi  # noqa: E402 (after the constraints are this test's)
if server == "object":
    from swift.obj import server as module
    kwargs = {"global_conf_callback": module.global_conf_callback}
else:
    kwargs = {}
sys.exit(run_wsgi(conf, server + "-server", **kwargs))
