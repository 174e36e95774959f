#!/usr/bin/env python3
"""apus-container-server + apus-account-server beside stock swift-container-server +
swift-account-server (Debian's 2.30.1): a differential test.

Each side is a pair of servers on its own devices directory: container PUT/DELETE requests name
the same side's account server in X-Account-Host, so every account learns its container rows
through the real container -> account update. A seeded random sequence of backend requests
(account, container and object-row mutations with out-of-order timestamps, bad requests, and
listings with every combination of format/limit/marker/end_marker/prefix/delimiter/path/reverse)
goes to both sides; status line, headers (except IGNORED) and body must be equal, byte for byte.

The sequence depends only on --seed and --ops, never on the responses, so two runs send the same
requests; the digests printed at the end make that easy to check.

usage: listing_server_interop.py <build-dir> [--ops N] [--seed S]
Run with /usr/bin/python3 (Debian's python3-swift lives there). Not in --help, for checking the
test itself: --swift-vs-swift (two independent Swift pairs; must report no difference),
--trace FILE (every request and Swift's answer), --show N (differing requests printed, 30).
"""
import argparse
import concurrent.futures
import hashlib
import http.client
import os
import random
import re
import sys
import time
import zlib
from urllib.parse import quote

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402

# Differences we know of and have not closed yet (each is work left in an issue). Any difference
# whose description contains one of these strings is printed but does not fail the test.
KNOWN_DIFFERENCES = set()

# Response headers never compared, each with the reason.
IGNORED = {
    "date": "wall clock of the response",
    "x-trans-id": "per-request id (not sent by the backend servers, ignored if one adds it)",
    "connection": "connection handling is not part of the protocol being compared",
    "x-timestamp": "created_at: wall-clock time the container/account DB was made, not a "
                   "request timestamp",
    "x-backend-timestamp": "container created_at again (internal form), wall clock",
}

# Header values that are wall-clock times on both sides compare equal: an account auto-created
# by a container update ('.'-accounts) gets put_timestamp = now, so its X-PUT-Timestamp is the
# wall clock. A wall-clock value on one side only is still a difference.
TIMESTAMP_RE = re.compile(r"^\d{10}\.\d{5}(_[0-9a-f]{16})?$")
RUN_START = time.time()

BASE_TIME = 1700000000.0

ACCOUNTS = ["AUTH_a", "AUTH_b", "AUTH_del", ".dot"]
MISSING_ACCOUNT = "AUTH_never"        # never created: container PUTs there get 404
DOOMED_ACCOUNT = "AUTH_del"           # the only account that is ever DELETEd
CONTAINERS = ["c1", "c2", "c-3", "c.4", "caf\u00e9", "\u2603", "empty", "p1", "tmp", "q&\"<'"]
CHURN_OBJECTS = ["x", "y/z"]           # the only rows "tmp" gets, so it is often empty
RESERVED_CONTAINER = "\x00vers"       # only with X-Backend-Allow-Reserved-Names
OBJECTS = [
    "a", "a/", "a/b", "a/b/", "a/b/c", "a/b/c/", "a/b/c/d", "a//b", "a/b0", "a/b-c", "a-b",
    "a-b-c", "a.b", "a.b/c", "ab", "b", "b/", "b/c", "bb/c", "b-/x", "ab/b/x",
    "caf\u00e9", "caf\u00e9/x", "caf\u00e9-b", "\u2603", "\u2603/x", "\u2603/x/y",
    "\u00e9/b/c", "z", "zz/b/x", "x b", "per%cent", "q?x=1", "semi;colon", "amp&lt<gt>",
    "quo\"te'", "/lead", "//", "emoji\U0001F600", "tab\tx", "\u00ff\u0100", "~tilde",
    "q\"&</x", "t\tb/c", "nl\n/x",
]
RESERVED_OBJECTS = ["\x00o1", "\x00o/2", "\x00"]
MARKERS = OBJECTS + ["", "a/b/", "caf", "zzz", "\u2603/", "a/c", "b0"]
PREFIXES = ["", "a", "a/", "a/b", "a/b/", "b", "caf", "\u2603", "c", "z", "a-", "\u00e9"]
DELIMITERS = ["/", "-", "b/", ".", "\u00e9", "//", "/b"]
PATHS = ["a", "a/", "", "a/b", "\u2603", "b/", "nothing"]
CONTENT_TYPES = [
    "text/plain", "application/octet-stream", "image/jpeg;swift_bytes=1234",
    "application/json;swift_bytes=0", "text/plain; charset=utf-8", "text/caf\xc3\xa9",
    "application/x-www-form-urlencoded;swift_bytes=99999999999", "a/b;swift_bytes=x",
    "multipart/mixed; boundary=x;swift_bytes=7", "text/plain;flag", "x/y; a=1 ; junk",
    'text/plain; charset="utf-8"', "a/b;c=d e", "t/p;swift_bytes=1;swift_bytes=2",
]
ACCEPTS = [
    "application/json", "application/xml", "text/xml", "text/plain", "*/*", "text/*",
    "application/json;q=0.2, application/xml;q=0.9", "image/png", "application/json;q=x",
    "text/plain;q=0.1, text/xml", "",
]


def part_of(*names):
    return zlib.crc32("/".join(names).encode("utf-8")) % 8


def write_configs(root, sides):
    """sides: {side name: (container port, account port)} -> {side: {server: conf path}}"""
    etc = os.path.join(root, "etc")
    os.makedirs(etc)
    with open(os.path.join(etc, "swift.conf"), "w") as f:
        f.write("[swift-hash]\nswift_hash_path_prefix = apus-test\n"
                "swift_hash_path_suffix = interop\n\n"
                "[storage-policy:0]\nname = gold\ndefault = yes\n\n"
                "[storage-policy:1]\nname = silver\n")
    confs = {}
    for side, ports in sides.items():
        devices = os.path.join(root, side)
        os.makedirs(os.path.join(devices, "sda1"))
        for server, port in zip(("container", "account"), ports):
            if side.startswith("apus"):
                extra = "workers = 2\nlog_file = %s/%s-%s.log\n" % (root, side, server)
            else:
                extra = "workers = 0\n"
            path = os.path.join(etc, "%s-%s-server.conf" % (side, server))
            with open(path, "w") as f:
                f.write("[DEFAULT]\ndevices = %s\nmount_check = false\nbind_ip = 127.0.0.1\n"
                        "bind_port = %d\nswift_dir = %s\nlog_name = %s-%s\n"
                        "fallocate_reserve = 0\n%s\n"
                        "[pipeline:main]\npipeline = %s-server\n\n"
                        "[app:%s-server]\nuse = egg:swift#%s\n"
                        % (devices, port, etc, side, server, extra, server, server, server))
                if side.startswith("apus"):
                    # The sequence's timestamps are from 2023, older than reclaim_age. Swift's
                    # servers never reclaim (its replicator daemons do, and none runs here);
                    # Apus's servers reclaim on a thread of their own, so it is held off.
                    f.write("\n[%s-replicator]\nreclaim_age = 3153600000\n\n"
                            "[container-updater]\nenabled = false\n" % server)
            confs.setdefault(side, {})[server] = path
    return confs


class Request:
    """One backend request; ACCOUNT_HOST in a header value is replaced per side."""
    __slots__ = ("server", "method", "path", "headers", "body")

    def __init__(self, server, method, path, headers=None, body=None):
        self.server, self.method, self.path = server, method, path
        self.headers, self.body = dict(headers or {}), body

    def describe(self):
        h = {k: v for k, v in self.headers.items() if v != ACCOUNT_HOST}
        return "%s %s %s %r" % (self.server, self.method, self.path, h)


ACCOUNT_HOST = "<account-host>"


class Generator:
    """The random sequence. It keeps its own idea of timestamps already used (to send older,
    equal and newer ones on purpose) but never looks at a response."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.clock = BASE_TIME
        self.last_ts = {}    # target key -> last timestamp (float) sent for it

    # -- timestamps --------------------------------------------------------------------------
    def tick(self):
        self.clock += self.rng.choice((0.00001, 0.01, 0.5, 1.0, 3.0))
        return self.clock

    def ts_for(self, key):
        """A timestamp for a target: mostly newer than anything so far, sometimes older than
        the target's last one, sometimes equal to it. Returns the header value."""
        rng = self.rng
        last = self.last_ts.get(key)
        r = rng.random()
        if last is not None and r < 0.12:
            t = last - rng.choice((0.00001, 0.5, 7.0, 100.0))
        elif last is not None and r < 0.22:
            t = last
        else:
            t = self.tick()
        t = max(t, BASE_TIME - 1000)
        self.last_ts[key] = max(t, last or 0)
        return self.format_ts(t)

    def format_ts(self, t):
        r = self.rng.random()
        if r < 0.04:
            return "%.5f_%016x" % (t, self.rng.choice((1, 2, 0xff)))
        if r < 0.06:
            return "%d" % int(t)
        if r < 0.08:
            return "%.2f" % t
        return "%.5f" % t

    # -- helpers -------------------------------------------------------------------------------
    def account(self):
        return self.rng.choice(("AUTH_a", "AUTH_a", "AUTH_b", "AUTH_b", ".dot", ".dot",
                                DOOMED_ACCOUNT))

    def container(self):
        return self.rng.choice(("c1", "c1", "c1", "c2", "c2") + tuple(CONTAINERS))

    def cpath(self, a, c, o=None):
        p = "/sda1/%d/%s/%s" % (part_of(a, c), quote(a), quote(c))
        if o is not None:
            p += "/" + quote(o)
        return p

    def apath(self, a):
        return "/sda1/%d/%s" % (part_of(a), quote(a))

    def account_headers(self, a):
        return {"X-Account-Host": ACCOUNT_HOST, "X-Account-Device": "sda1",
                "X-Account-Partition": str(part_of(a))}

    def meta(self, kind, h):
        rng = self.rng
        for name in rng.sample(("Color", "Size", "Uni", "Empty-Later"), rng.randint(0, 2)):
            v = rng.choice(("blue", "red", "", "caf\xc3\xa9", "x" * 300, "  spaced  "))
            h["X-%s-Meta-%s" % (kind, name)] = v
        if rng.random() < 0.2:
            h["X-%s-Sysmeta-Owner" % kind] = rng.choice(("sys", "", "other"))

    # -- account requests ----------------------------------------------------------------------
    def account_put(self, a=None):
        a = a or self.account()
        h = {"X-Timestamp": self.ts_for(("acct-put", a))}
        self.meta("Account", h)
        return Request("account", "PUT", self.apath(a), h)

    def account_post(self):
        a = self.account()
        h = {"X-Timestamp": self.ts_for(("acct-meta", a))}
        self.meta("Account", h)
        if self.rng.random() < 0.05:    # too much metadata in total
            for i in range(20):
                h["X-Account-Meta-Big%02d" % i] = "v" * 250
        return Request("account", "POST", self.apath(a), h)

    def account_delete(self):
        a = self.rng.choice((DOOMED_ACCOUNT, MISSING_ACCOUNT))
        return Request("account", "DELETE", self.apath(a),
                       {"X-Timestamp": self.ts_for(("acct-put", a))})

    def account_head(self):
        a = self.rng.choice(ACCOUNTS + [MISSING_ACCOUNT])
        return Request("account", "HEAD", self.apath(a) + self.format_query(),
                       self.format_headers({}))

    def account_row_put(self):
        """A container row sent straight to the account server, as a container server would."""
        a = self.account()
        c = self.rng.choice(("acct-only-1", "acct-only-2", "c-3"))
        put = self.ts_for(("row-put", a, c))
        delete = self.rng.choice(("0", self.ts_for(("row-put", a, c))))
        h = {"X-Put-Timestamp": put, "X-Delete-Timestamp": delete,
             "X-Object-Count": str(self.rng.choice((0, 0, 3))),
             "X-Bytes-Used": str(self.rng.choice((0, 12, 1 << 40))),
             "X-Backend-Storage-Policy-Index": self.rng.choice(("0", "1")),
             "X-Trans-Id": "tx-direct"}
        return Request("account", "PUT", "%s/%s" % (self.apath(a), quote(c)), h)

    # -- container requests --------------------------------------------------------------------
    def container_put(self, a=None, c=None):
        rng = self.rng
        a = a or (MISSING_ACCOUNT if rng.random() < 0.03 else self.account())
        c = c or self.container()
        h = {"X-Timestamp": self.ts_for(("cont", a, c))}
        if rng.random() < 0.93:
            h.update(self.account_headers(a))
        r = rng.random()
        if r < 0.3:
            h["X-Backend-Storage-Policy-Index"] = rng.choice(("0", "1", "1"))
        elif r < 0.45:
            h["X-Backend-Storage-Policy-Default"] = rng.choice(("0", "1"))
        elif r < 0.5:
            h["X-Backend-Storage-Policy-Index"] = rng.choice(("0", "1"))
            h["X-Backend-Storage-Policy-Default"] = rng.choice(("0", "1"))
        if c == "p1" and "X-Backend-Storage-Policy-Index" not in h and r < 0.9:
            h["X-Backend-Storage-Policy-Index"] = "1"
        self.meta("Container", h)
        if rng.random() < 0.1:
            h["X-Container-Read"] = rng.choice((".r:*", ".r:*,.rlistings", ""))
        if rng.random() < 0.05:
            h["X-Account-Override-Deleted"] = "yes"
        self.sync_to(h)
        if rng.random() < 0.03:
            for i in range(20):
                h["X-Container-Meta-Big%02d" % i] = "v" * 250
        return Request("container", "PUT", self.cpath(a, c), h)

    def container_post(self):
        rng = self.rng
        a, c = self.account(), self.container()
        h = {"X-Timestamp": self.ts_for(("cont", a, c))}
        self.meta("Container", h)
        if rng.random() < 0.3:
            h["X-Container-Read"] = rng.choice((".r:*", "AUTH_b:*", ""))
        if rng.random() < 0.2:
            h["X-Container-Write"] = rng.choice(("AUTH_b", ""))
        if rng.random() < 0.1:
            h["X-Container-Sync-Key"] = rng.choice(("secret", ""))
        if rng.random() < 0.05:
            h["X-Versions-Location"] = "vers"     # not saved: allow_versions is off
        self.sync_to(h)
        return Request("container", "POST", self.cpath(a, c), h)

    def sync_to(self, h):
        """Sometimes an X-Container-Sync-To, valid or not (only ever a header value)."""
        if self.rng.random() < 0.05:
            h["X-Container-Sync-To"] = self.rng.choice((
                "http://127.0.0.1/v1/AUTH_b/c", "https://127.0.0.1:8080/v1/a/c/", "ftp://x/y",
                "http://127.0.0.1", "http://other.invalid/v1/a/c",
                "http://127.0.0.1/v1/a/c?x=1", "http://127.0.0.1/v1/a;p", "//realm/cl/a/c",
                "//bad/format", "", "nonsense"))

    def container_delete(self):
        rng = self.rng
        a = self.account()
        c = rng.choice(("empty", "empty", "tmp", "tmp", "tmp", "c-3") + tuple(CONTAINERS))
        h = {"X-Timestamp": self.ts_for(("cont", a, c))}
        if rng.random() < 0.93:
            h.update(self.account_headers(a))
        return Request("container", "DELETE", self.cpath(a, c), h)

    def container_head(self):
        a, c = self.account(), self.container()
        return Request("container", "HEAD", self.cpath(a, c) + self.format_query(),
                       self.format_headers({}))

    # -- object rows ---------------------------------------------------------------------------
    def object_name(self, a, c):
        if c == "tmp":
            return self.rng.choice(CHURN_OBJECTS)
        if c == RESERVED_CONTAINER or (a.startswith(".") and self.rng.random() < 0.05):
            return self.rng.choice(RESERVED_OBJECTS)
        return self.rng.choice(OBJECTS)

    def row_target(self):
        rng = self.rng
        if rng.random() < 0.4:      # one dense container makes the listings interesting
            return "AUTH_a", "c1", self.object_name("AUTH_a", "c1")
        a = self.account()
        if rng.random() < 0.04:
            c = RESERVED_CONTAINER
        else:
            c = self.container()
            if c == "empty":         # "empty" gets no rows (bad requests aside)
                c = "tmp"
        return a, c, self.object_name(a, c)

    def object_put(self):
        rng = self.rng
        a, c, o = self.row_target()
        key = ("obj", a, c, o)
        ts = self.ts_for(key)
        h = {"X-Timestamp": ts,
             "X-Size": str(rng.choice((0, 1, 5, 1234, 99999, 1 << 40))),
             "X-Content-Type": rng.choice(CONTENT_TYPES),
             "X-Etag": rng.choice(("d41d8cd98f00b204e9800998ecf8427e",
                                   "%032x" % rng.getrandbits(128),
                                   "0123456789abcdef0123456789abcdef; slo_etag=\"x\"")),
             }
        r = rng.random()
        if r < 0.15:
            h["X-Content-Type-Timestamp"] = self.format_ts(self.last_ts[key] +
                                                           rng.choice((0, 0.5, 2)))
        if r < 0.1 or 0.9 < r:
            h["X-Meta-Timestamp"] = self.format_ts(self.last_ts[key] + rng.choice((0, 1, 3)))
        if 0.3 < r < 0.34:   # a POST-like update of an older row: ctype/meta newer than data
            h["X-Timestamp"] = self.format_ts(self.last_ts[key] - 5)
            h["X-Content-Type-Timestamp"] = self.format_ts(self.tick())
        pol = rng.random()
        if pol < 0.55:
            h["X-Backend-Storage-Policy-Index"] = "1" if c == "p1" else "0"
        elif pol < 0.65:
            h["X-Backend-Storage-Policy-Index"] = "1"
        if c == RESERVED_CONTAINER or o.startswith("\x00"):
            h["X-Backend-Allow-Reserved-Names"] = "true"
        return Request("container", "PUT", self.cpath(a, c, o), h)

    def object_delete(self):
        rng = self.rng
        a, c, o = self.row_target()
        h = {"X-Timestamp": self.ts_for(("obj", a, c, o))}
        if rng.random() < 0.6:
            h["X-Backend-Storage-Policy-Index"] = "1" if c == "p1" else "0"
        return Request("container", "DELETE", self.cpath(a, c, o), h)

    # -- listings ------------------------------------------------------------------------------
    def format_headers(self, h):
        rng = self.rng
        if rng.random() < 0.3:
            h["Accept"] = rng.choice(ACCEPTS)
        return h

    def format_query(self):
        if self.rng.random() < 0.2:
            return "?format=" + self.rng.choice(("json", "xml", "plain", "bogus"))
        return ""

    def listing(self):
        rng = self.rng
        params = []
        h = {}
        r = rng.random()
        if r < 0.6:
            params.append(("format", rng.choice(("json", "json", "xml", "plain", "JSON", "bogus"))))
        elif r < 0.85:
            h["Accept"] = rng.choice(ACCEPTS)
        if rng.random() < 0.1:
            h["Accept"] = rng.choice(ACCEPTS)     # with format= too: format wins
        lim = rng.random()
        if lim < 0.5:
            params.append(("limit", rng.choice(("1", "2", "5", "5", "0", "abc", "-1", "10000"))))
        if rng.random() < 0.3:
            params.append(("marker", rng.choice(MARKERS)))
        if rng.random() < 0.2:
            params.append(("end_marker", rng.choice(MARKERS)))
        if rng.random() < 0.35:
            params.append(("prefix", rng.choice(PREFIXES)))
        if rng.random() < 0.4:
            params.append(("delimiter", rng.choice(DELIMITERS)))
        if rng.random() < 0.25:
            params.append(("reverse", rng.choice(("on", "true", "1", "off", "no"))))
        if rng.random() < 0.15:
            h["X-Backend-Allow-Reserved-Names"] = "true"
        if rng.random() < 0.7:
            a, c = self.account(), self.container()
            if rng.random() < 0.5:
                a, c = "AUTH_a", "c1"
            if rng.random() < 0.03:
                c = RESERVED_CONTAINER
            if rng.random() < 0.2:
                params.append(("path", rng.choice(PATHS)))
            if rng.random() < 0.08:
                h["X-Backend-Storage-Policy-Index"] = rng.choice(("0", "1"))
            if rng.random() < 0.03:
                h["X-Backend-Record-Type"] = rng.choice(("object", "auto"))
            server, path = "container", self.cpath(a, c)
        else:
            a = rng.choice(ACCOUNTS + [MISSING_ACCOUNT])
            if rng.random() < 0.03:
                params.append(("path", "a"))      # not an account parameter: ignored
            server, path = "account", self.apath(a)
        rng.shuffle(params)
        if params:
            path += "?" + "&".join("%s=%s" % (k, quote(v, safe="")) for k, v in params)
        return Request(server, "GET", path, h)

    # -- bad requests --------------------------------------------------------------------------
    def bad(self):
        return self.rng.choice(self.bad_cases())()

    def bad_cases(self):
        """Requests either server refuses, each as a function that makes it."""
        a, c = self.account(), self.container()
        ts = {"X-Timestamp": self.format_ts(self.tick())}
        cases = [
            lambda: Request("container", "PUT", self.cpath(a, c), {}),
            lambda: Request("container", "PUT", self.cpath(a, c), {"X-Timestamp": "bad"}),
            lambda: Request("container", "PUT", self.cpath(a, c), {"X-Timestamp": "-1"}),
            lambda: Request("container", "POST", self.cpath(a, c), {}),
            lambda: Request("container", "DELETE", self.cpath(a, c), {}),
            lambda: Request("container", "DELETE", self.cpath(a, c, "a"), {}),
            lambda: Request("container", "PUT", self.cpath(a, c, "a"),
                            {"X-Timestamp": "1.2.3", "X-Size": "0",
                             "X-Content-Type": "t/p", "X-Etag": "e"}),
            lambda: Request("container", "PUT", self.cpath(a, c), dict(
                ts, **{"X-Backend-Storage-Policy-Index": "9"})),
            lambda: Request("container", "PUT", self.cpath(a, c), dict(
                ts, **{"X-Backend-Storage-Policy-Index": "x"})),
            lambda: Request("container", "PUT", self.cpath(a, c, "o"), dict(
                ts, **{"X-Backend-Storage-Policy-Index": "9", "X-Size": "0",
                       "X-Content-Type": "t/p", "X-Etag": "e"})),
            lambda: Request("container", "GET", self.cpath(a, c) + "?limit=10001"),
            lambda: Request("container", "GET", self.cpath(a, c) + "?limit=10001&format=json"),
            lambda: Request("account", "GET", self.apath(a) + "?limit=10001"),
            lambda: Request("container", "GET", self.cpath(a, c) + "?marker=%FF"),
            lambda: Request("account", "GET", self.apath(a) + "?prefix=%FF&format=json"),
            lambda: Request("container", "GET", self.cpath(a, c),
                            {"X-Backend-Storage-Policy-Index": "9"}),
            lambda: Request("container", "GET", "/sda1/0"),
            # mount_check is off: a device is a directory under devices
            lambda: Request("container", "GET", "/nodev/0/AUTH_a/c1"),
            lambda: Request("container", "PUT", "/nodev/0/AUTH_a/c1/o", dict(
                ts, **{"X-Size": "0", "X-Content-Type": "t/p", "X-Etag": "e"})),
            lambda: Request("account", "HEAD", "/nodev/0/AUTH_a"),
            lambda: Request("account", "PUT", "/sd%20a1/0/AUTH_a", ts),
            lambda: Request("container", "GET", "/sda1/../AUTH_a/c1"),
            lambda: Request("container", "PUT", "/sda1/0", ts),
            lambda: Request("container", "HEAD", "/sda1"),
            lambda: Request("account", "GET", "/sda1/0"),
            lambda: Request("account", "PUT", "/sda1", ts),
            lambda: Request("account", "GET", "/sda1/0/AUTH_a/c1/o"),
            lambda: Request("container", "GET", self.cpath("AUTH_a", "c1") + "/"),
            # Swift keeps a DB under its partition: another partition is another (missing) DB
            lambda: Request("container", "HEAD", "/sda1/%d/AUTH_a/c1" % (
                (part_of("AUTH_a", "c1") + 1) % 8)),
            lambda: Request("account", "HEAD", "/sda1/%d/AUTH_a" % ((part_of("AUTH_a") + 1) % 8)),
            lambda: Request("container", "GET", "/sda1/0/%FF/c1"),
            lambda: Request("account", "HEAD", "/sda1/0/AUTH_%FF"),
            lambda: Request("container", "PUT", self.cpath("AUTH_a", "c1", "a\x00b"), dict(
                ts, **{"X-Size": "0", "X-Content-Type": "t/p", "X-Etag": "e"})),
            lambda: Request("container", "PUT", self.cpath("AUTH_a", "c1", "\x00o"), dict(
                ts, **{"X-Size": "0", "X-Content-Type": "t/p", "X-Etag": "e"})),
            lambda: Request("container", "PUT", self.cpath("AUTH_a", RESERVED_CONTAINER, "o"),
                            dict(ts, **{"X-Size": "0", "X-Content-Type": "t/p",
                                        "X-Etag": "e"})),
            lambda: Request("container", "PUT", self.cpath("AUTH_a", "c\x00x"), ts),
            lambda: Request("account", "PUT", self.apath("AUTH_\x00x"), ts),
            lambda: Request("container", "PUT", self.cpath(MISSING_ACCOUNT, "c1", "o"), dict(
                ts, **{"X-Size": "0", "X-Content-Type": "t/p", "X-Etag": "e"})),
            lambda: Request("container", "DELETE", self.cpath(MISSING_ACCOUNT, "c1", "o"), ts),
            lambda: Request("container", "POST", self.cpath(MISSING_ACCOUNT, "c1"), ts),
            lambda: Request("account", "POST", self.apath(MISSING_ACCOUNT), ts),
            lambda: Request("account", "POST", self.apath(a), {}),
            lambda: Request("account", "DELETE", self.apath(a), {}),
            lambda: Request("account", "PUT", self.apath(a), {"X-Timestamp": "junk"}),
            lambda: Request("container", "FOO", self.cpath(a, c), ts),
            lambda: Request("account", "COPY", self.apath(a), ts),
            lambda: Request("container", "OPTIONS", self.cpath(a, c)),
            lambda: Request("account", "OPTIONS", self.apath(a)),
            lambda: Request("container", "GET", self.cpath(a, c), {"Accept": "image/png"}),
            lambda: Request("account", "GET", self.apath(a), {"Accept": "text/plain;q=1;q=2"}),
            lambda: Request("container", "PUT", self.cpath(a, c), dict(
                ts, **{"X-Account-Host": ACCOUNT_HOST, "X-Account-Device": "sda1,sdb1",
                       "X-Account-Partition": str(part_of(a))})),
            # issue 12 exactness: 405s (and their Allow, if any), text/plain error bodies,
            # Accept-Ranges on listings and HEADs, bad UTF-8 in every listing parameter
            lambda: Request("container", "PATCH", self.cpath(a, c), ts),
            lambda: Request("container", "COPY", self.cpath(a, c, "o"), ts),
            lambda: Request("account", "UPDATE", self.apath(a), ts),
            lambda: Request("account", "OPTIONS", "/sda1/0/AUTH_a/c1/o"),
            lambda: Request("container", "GET", self.cpath(a, c) + "?format=%FF"),
            lambda: Request("container", "HEAD", self.cpath(a, c) + "?format=%FF"),
            lambda: Request("account", "HEAD", self.apath(a) + "?format=%FF"),
            lambda: Request("container", "GET", self.cpath(a, c) + "?path=%FF"),
            lambda: Request("container", "GET", self.cpath(a, c) + "?end_marker=%FF&limit=x"),
            lambda: Request("account", "GET", self.apath(a) + "?delimiter=%FF&format=xml"),
            lambda: Request("container", "GET", self.cpath("AUTH_a", "c1") + "?format=json",
                            {"Range": "bytes=0-1"}),
            lambda: Request("account", "HEAD", self.apath("AUTH_a"), {"Range": "bytes=0-1"}),
            lambda: Request("container", "PUT", self.cpath(a, c), dict(
                ts, **{"X-Backend-Storage-Policy-Index": "1.5"})),
            lambda: Request("container", "POST", self.cpath(a, c), dict(
                ts, **{"X-Container-Meta-" + "k" * 129: "v"})),
            lambda: Request("account", "POST", self.apath(a), dict(
                ts, **{"X-Account-Meta-Big": "v" * 257})),
        ]
        return cases

    # -- the sequence --------------------------------------------------------------------------
    def setup(self):
        """Accounts and most containers exist before the random part starts."""
        reqs = [self.account_put(a) for a in ("AUTH_a", "AUTH_b", DOOMED_ACCOUNT)]
        for a in ACCOUNTS:
            for c in CONTAINERS:
                if self.rng.random() < 0.8 or c in ("c1", "c2"):
                    reqs.append(self.container_put(a, c))
        for a in ("AUTH_a", ".dot"):
            h = {"X-Timestamp": self.format_ts(self.tick()),
                 "X-Backend-Allow-Reserved-Names": "true"}
            h.update(self.account_headers(a))
            reqs.append(Request("container", "PUT", self.cpath(a, RESERVED_CONTAINER), h))
        return reqs

    MUTATIONS = [
        (30, "object_put"), (10, "object_delete"), (6, "container_put"), (4, "container_post"),
        (3, "container_delete"), (3, "container_head"), (2, "account_put"),
        (2, "account_post"), (2, "account_head"), (1, "account_row_put"), (5, "bad"),
    ]

    def sequence(self, ops):
        """Yields (op number, Request)."""
        for req in self.setup():
            yield 0, req
        # Every refusal once, whatever the random part picks later.
        for make in self.bad_cases():
            yield 0, make()
        names = [n for w, n in self.MUTATIONS for _ in range(w)]
        n = 0
        next_listing = self.rng.randint(1, 5)
        while n < ops:
            n += 1
            if self.rng.random() < 0.003:
                yield n, self.account_delete()
            else:
                yield n, getattr(self, self.rng.choice(names))()
            next_listing -= 1
            if next_listing == 0:
                next_listing = self.rng.randint(1, 5)
                for _ in range(self.rng.randint(1, 3)):
                    yield n, self.listing()


def normalize(value):
    if TIMESTAMP_RE.match(value):
        t = float(value.split("_")[0])
        if RUN_START - 60 <= t <= time.time() + 60:
            return "<wall clock>"
    return value


def response_view(resp):
    status, reason, headers, body = resp
    return (status, reason,
            {k: normalize(v) for k, v in headers.items() if k not in IGNORED}, body)


def send(port, account_port, req):
    headers = {k: ("127.0.0.1:%d" % account_port if v == ACCOUNT_HOST else v)
               for k, v in req.headers.items()}
    # Header values are sent as latin-1 bytes: UTF-8 values are written already encoded.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(req.method, req.path, skip_host=False, skip_accept_encoding=True)
    if req.body is not None:
        headers.setdefault("Content-Length", str(len(req.body)))
    elif req.method in ("PUT", "POST"):
        headers.setdefault("Content-Length", "0")
    for k, v in headers.items():
        conn.putheader(k, v.encode("latin-1"))
    conn.endheaders()
    if req.body:
        conn.send(req.body)
    resp = conn.getresponse()
    body = resp.read()
    result = (resp.status, resp.reason, {k.lower(): v for k, v in resp.getheaders()}, body)
    conn.close()
    return result


def send_safely(side_ports, req):
    try:
        return send(side_ports[req.server], side_ports["account"], req)
    except (OSError, http.client.HTTPException) as err:
        return (0, "no response: %r" % err, {}, b"")


def compare(a, b, names):
    """Returns a list of difference descriptions."""
    sa, ra, ha, ba = response_view(a)
    sb, rb, hb, bb = response_view(b)
    diffs = []
    if (sa, ra) != (sb, rb):
        diffs.append("status %s %d %r, %s %d %r" % (names[0], sa, ra, names[1], sb, rb))
    for h in sorted(set(ha) | set(hb)):
        if ha.get(h) != hb.get(h):
            diffs.append("header %s: %s %r, %s %r" % (h, names[0], ha.get(h), names[1],
                                                       hb.get(h)))
    if ba != bb:
        diffs.append("body %s %r, %s %r" % (names[0], ba[:300], names[1], bb[:300]))
    return diffs


def start_side(ps, root, side, confs, ports, build):
    servers = []
    for server in ("account", "container"):
        log = os.path.join(root, "%s-%s.out" % (side, server))
        if side.startswith("apus"):
            argv = [os.path.join(build, "bin", "apus-%s-server" % server), confs[server]]
        else:
            argv = ["/usr/bin/python3", os.path.join(SUPPORT, "run_swift_server.py"),
                    os.path.join(root, "etc"), server, confs[server]]
        servers.append((ps.start(argv, log), ports[server], log))
    for proc, port, log in servers:
        procs.wait_for_port(port, proc=proc, log_path=log)
    return [(proc, log) for proc, _, log in servers]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--swift-vs-swift", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--show", type=int, default=30, help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)   # write requests and responses
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    names = ("swift", "swift-b") if args.swift_vs_swift else ("swift", "apus")
    if not args.swift_vs_swift:
        for server in ("container", "account"):
            binary = os.path.join(build, "bin", "apus-%s-server" % server)
            if not os.access(binary, os.X_OK):
                print("missing %s" % binary)
                return 1
    started = time.monotonic()
    with procs.TempDir("apus-listing-interop-") as root, procs.Processes() as ps:
        ports = {side: {"container": procs.free_port(), "account": procs.free_port()}
                 for side in names}
        confs = write_configs(root, {side: (p["container"], p["account"])
                                     for side, p in ports.items()})
        servers = []
        for side in names:
            servers += start_side(ps, root, side, confs[side], ports[side], build)

        compared = 0
        diffs = []            # (step, op, request description, [differences], all known)
        unknown = 0           # requests with a difference not in KNOWN_DIFFERENCES
        req_digest, resp_digest = hashlib.sha256(), hashlib.sha256()
        gen = Generator(args.seed)
        trace = open(args.trace, "w") if args.trace else None
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        statuses = {}
        for step, (op, req) in enumerate(gen.sequence(args.ops)):
            req_digest.update(repr((req.describe(), req.body)).encode("utf-8", "replace"))
            # The two sides are independent: ask them at the same time.
            second = pool.submit(send_safely, ports[names[1]], req)
            results = [send_safely(ports[names[0]], req), second.result()]
            dead = [(proc, log) for proc, log in servers if proc.poll() is not None]
            if dead:
                diffs.append((step, op, req.describe(), [
                    "server exited with %s, log %s:\n%s" % (
                        proc.returncode, log, open(log, errors="replace").read()[-2000:])
                    for proc, log in dead], False))
                unknown += 1
                break
            view = response_view(results[0])
            resp_digest.update(repr(view).encode("utf-8", "replace"))
            statuses[view[0]] = statuses.get(view[0], 0) + 1
            if trace:
                trace.write("%d %s\n  -> %r\n" % (step, req.describe(), view))
            compared += 1
            found = compare(results[0], results[1], names)
            if found:
                known = all(any(k in d for k in KNOWN_DIFFERENCES) for d in found)
                unknown += not known
                diffs.append((step, op, req.describe(), found, known))
        elapsed = time.monotonic() - started
        pool.shutdown()
        if trace:
            trace.close()

        for step, op, what, found, known in diffs[:args.show]:
            print("%sstep %d (op %d) %s" % ("KNOWN DIFFERENCE: " if known else "", step, op,
                                            what))
            for d in found:
                print("    " + d)
        if len(diffs) > args.show:
            print("... %d more requests with differences" % (len(diffs) - args.show))
        kinds = {}
        for _, _, what, found, _ in diffs:
            for d in found:
                kind = "%s %s: %s" % (what.split()[0], what.split()[1], d.split(":")[0]
                                      if d.startswith("header") else d.split()[0])
                kinds[kind] = kinds.get(kind, 0) + 1
        if kinds:
            print("differences by kind:")
            for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
                print("  %5d  %s" % (n, kind))
        print("%s statuses: %s" % (names[0], ", ".join(
            "%d x%d" % kv for kv in sorted(statuses.items()))))
        print("requests digest %s" % req_digest.hexdigest()[:16])
        print("%s responses digest %s" % (names[0], resp_digest.hexdigest()[:16]))
        print("listing server interop (%s vs %s, %d ops, seed %d): %d requests compared, "
              "%d differ (%d not known, %d differences in all), %.1f s"
              % (names[0], names[1], args.ops, args.seed, compared, len(diffs), unknown,
                 sum(len(d[3]) for d in diffs), elapsed))
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
