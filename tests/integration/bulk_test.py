#!/usr/bin/env python3
"""bulk (issue 13) against the test cluster of tests/support/cluster.py, with bulk in the
pipeline as Swift's sample config puts it (before tempauth):

1. extract-archive of a tar.gz at the account's root: files land in two containers (created on
   the way), byte for byte, with the request's X-Object-Meta-* and the pax xattrs
   (user.mime_type, user.meta.*); top-level files, directories and links are skipped.
2. extract-archive of a tar and a tar.bz2 below /container/prefix, with XML and text answers;
   a bad archive ("not a gzip file"), an unsupported format (400), an unacceptable Accept (406
   inside the 200 answer), a non-UTF-8 name (412 in Errors), max_containers_per_extraction.
3. bulk-delete (POST at the account, and DELETE at an object's path as Swift's functional test
   does, with Expect: 100-continue): objects then containers, a missing item (not found), a
   non-empty container (409 in Errors, 400 overall), in JSON, XML and text; a Content-Type
   other than text/plain (406); max_deletes_per_request (413).
4. Keep-alive whitespace with yield_frequency = 0: the answer starts with a space and the report
   follows "\\r\\n\\r\\n".
5. /info lists bulk_upload and bulk_delete with the configured limits.
6. Memory: a 96 MiB tar.gz extracted through a proxy raises its peak RSS by far less than the
   archive (the stream holds a few chunks, never the archive).

usage: bulk_test.py <build-dir>
"""
import bz2
import gzip
import http.client
import io
import json
import os
import random
import sys
import tarfile
from xml.dom import minidom

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def auth(port):
    status, headers, _ = procs.request(port, "GET", "/auth/v1.0",
                                       {"X-Auth-User": "test:tester", "X-Auth-Key": "testing"},
                                       timeout=10)
    if status != 200:
        raise RuntimeError("auth at port %d: %d" % (port, status))
    return headers["x-storage-url"].split(":%d" % port, 1)[1], headers["x-auth-token"]


def req(port, token, method, path, headers=None, body=None, timeout=60):
    h = {"X-Auth-Token": token}
    h.update(headers or {})
    return procs.request(port, method, path, h, body, timeout=timeout)


BULK_PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk "
                 "tempauth proxy-server")


def bulk_proxy(cluster, name, options=""):
    return cluster.start_proxy(name, pipeline=BULK_PIPELINE,
                               filters="[filter:bulk]\nuse = egg:swift#bulk\n" + options)


def make_tar(entries, mode="w", fmt=tarfile.PAX_FORMAT):
    """entries: (name, bytes or None for a directory, pax headers or None, 'sym' for a link)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=fmt, encoding="utf-8",
                      errors="surrogateescape") as tf:
        for name, data, pax, kind in entries:
            ti = tarfile.TarInfo(name)
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = "elsewhere"
                tf.addfile(ti)
            else:
                ti.size = len(data)
                if pax:
                    ti.pax_headers = pax
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def listing(port, token, url, container):
    status, _, body = req(port, token, "GET", "%s/%s?format=json" % (url, container))
    return status, [o["name"] for o in json.loads(body)] if status == 200 else []


def extract_at_root(cluster, port, url, token):
    big = random.Random(1).randbytes(1 << 20)
    tar = make_tar([
        ("c1", None, None, "dir"),
        ("c1/a.txt", b"alpha", None, None),
        ("./c1/dir/b.bin", big, None, None),
        ("c2/x", b"xray", {"SCHILY.xattr.user.mime_type": "text/x-xray",
                           "SCHILY.xattr.user.meta.lunch": "burger"}, None),
        ("top-level-file", b"ignored", None, None),
        ("c2/link", None, None, "sym"),
    ], mode="w:gz")
    status, headers, body = req(port, token, "PUT", url + "?extract-archive=tar.gz",
                                {"Accept": "application/json", "X-Object-Meta-Color": "blue"},
                                tar)
    check(status == 200, "extract at root: status %d" % status)
    check(headers.get("content-type") == "application/json",
          "extract at root: content type %r" % headers.get("content-type"))
    report = json.loads(body)
    check(report == {"Response Status": "201 Created", "Response Body": "",
                     "Number Files Created": 3, "Errors": []},
          "extract at root: report %r" % report)
    check(list(json.loads(body).keys()) ==
          ["Response Status", "Response Body", "Number Files Created", "Errors"],
          "extract at root: key order %r" % body)
    check(listing(port, token, url, "c1") == (200, ["a.txt", "dir/b.bin"]),
          "extract at root: c1 listing %r" % (listing(port, token, url, "c1"),))
    check(listing(port, token, url, "c2") == (200, ["x"]),
          "extract at root: c2 listing %r" % (listing(port, token, url, "c2"),))
    status, _, data = req(port, token, "GET", url + "/c1/dir/b.bin")
    check(status == 200 and data == big, "extract at root: big file bytes (%d)" % status)
    status, h, data = req(port, token, "GET", url + "/c2/x")
    check(data == b"xray", "extract at root: c2/x bytes")
    check(h.get("content-type") == "text/x-xray", "xattr mime_type: %r" % h.get("content-type"))
    check(h.get("x-object-meta-lunch") == "burger", "xattr meta: %r" % h)
    check(h.get("x-object-meta-color") == "blue", "request meta: %r" % h)
    status, h, _ = req(port, token, "HEAD", url + "/c1/a.txt")
    check(h.get("content-type") == "text/plain", "guessed type: %r" % h.get("content-type"))


def extract_below_container(cluster, port, url, token):
    tar = make_tar([("one", b"1", None, None), ("sub/two", b"22", None, None)])
    status, headers, body = req(port, token, "PUT", url + "/c3/pre/?extract-archive=tar",
                                {"Accept": "application/xml"}, tar)
    check(status == 200, "extract tar below: status %d" % status)
    check(body.startswith(b"<extract>\n") and
          b"<number_files_created>2</number_files_created>" in body and
          b"<response_status>201 Created</response_status>" in body,
          "extract tar below: xml %r" % body)
    check(listing(port, token, url, "c3") == (200, ["pre/one", "pre/sub/two"]),
          "extract tar below: listing %r" % (listing(port, token, url, "c3"),))
    tbz = bz2.compress(make_tar([("three", b"333", None, None)]))
    status, headers, body = req(port, token, "PUT", url + "/c3?extract-archive=.TAR.BZ2.", {},
                                tbz)
    check(headers.get("content-type") == "text/plain", "text answer type %r" % headers)
    check(body == b"Number Files Created: 1\nResponse Body: \nResponse Status: 201 Created\n"
          b"Errors:\n", "extract tar.bz2: text %r" % body)
    # Chunked upload.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("PUT", url + "/c3/chunked?extract-archive=tar.gz")
    conn.putheader("X-Auth-Token", token)
    conn.putheader("Accept", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    data = gzip.compress(make_tar([("f", b"chunky", None, None)]))
    for i in range(0, len(data), 100):
        piece = data[i:i + 100]
        conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    report = json.loads(resp.read())
    conn.close()
    check(report["Number Files Created"] == 1, "chunked extract: %r" % report)

    # Failures.
    status, _, body = req(port, token, "PUT", url + "/c3?extract-archive=tar.gz",
                          {"Accept": "application/json"}, make_tar([("a", b"1", None, None)]))
    report = json.loads(body)
    check(report["Response Status"] == "400 Bad Request" and
          report["Response Body"] == "Invalid Tar File: not a gzip file",
          "not a gzip file: %r" % report)
    status, h, body = req(port, token, "PUT", url + "/c3?extract-archive=zip", {}, b"x")
    check(status == 400 and body == b"Unsupported archive format", "zip: %d %r" % (status, body))
    status, h, body = req(port, token, "PUT", url + "/c3?extract-archive=tar",
                          {"Accept": "image/png"}, tar)
    check(status == 200 and b"Response Status: 406 Not Acceptable\n" in body and
          h.get("content-type") == "text/html; charset=UTF-8",
          "406 extract: %d %r %r" % (status, h, body))
    bad = make_tar([("good/ok", b"1", None, None),
                    (b"bad\xde/x".decode("utf-8", "surrogateescape"), b"2", None, None)],
                   fmt=tarfile.GNU_FORMAT)
    status, _, body = req(port, token, "PUT", url + "?extract-archive=tar",
                          {"Accept": "application/json"}, bad)
    report = json.loads(body)
    check(report["Number Files Created"] == 1 and
          report["Errors"] == [["bad%DE/x", "412 Precondition Failed"]] and
          report["Response Status"] == "400 Bad Request", "412 name: %r" % report)


def max_containers(cluster, url, token):
    port = bulk_proxy(cluster, "proxy-bulk-limits",
                      "max_containers_per_extraction = 1\nmax_deletes_per_request = 2\n")
    tar = make_tar([("m1/a", b"1", None, None), ("m2/b", b"2", None, None)])
    status, _, body = req(port, token, "PUT", url + "?extract-archive=tar",
                          {"Accept": "application/json"}, tar)
    report = json.loads(body)
    check(report["Response Status"] == "400 Bad Request" and
          report["Response Body"] == "More than 1 containers to create from tar." and
          report["Number Files Created"] == 1, "max containers: %r" % report)
    status, _, body = req(port, token, "POST", url + "?bulk-delete",
                          {"Accept": "application/json", "Content-Type": "text/plain"},
                          b"a\nb\nc\n")
    report = json.loads(body)
    check(report["Response Status"] == "413 Request Entity Too Large" and
          report["Response Body"] == "Maximum Bulk Deletes: 2 per request",
          "max deletes: %r" % report)
    status, _, body = procs.request(port, "GET", "/info")
    info = json.loads(body)
    check(info.get("bulk_upload") == {"max_containers_per_extraction": 1,
                                      "max_failed_extractions": 1000} and
          info.get("bulk_delete") == {"max_deletes_per_request": 2, "max_failed_deletes": 1000},
          "info: %r" % {k: info.get(k) for k in ("bulk_upload", "bulk_delete")})


def bulk_delete(cluster, port, url, token):
    # c1 holds a.txt and dir/b.bin, c2 holds x (so c2 cannot go).
    body = "\n".join(["/c1/a.txt", "c1/dir%2Fb.bin", "/c1/missing", "c2", "c1", ""]).encode()
    status, h, data = req(port, token, "POST", url + "?bulk-delete",
                          {"Accept": "application/json", "Content-Type": "text/plain"}, body)
    report = json.loads(data)
    check(status == 200 and report == {
        "Response Status": "400 Bad Request", "Response Body": "", "Number Deleted": 3,
        "Number Not Found": 1, "Errors": [["c2", "409 Conflict"]]}, "bulk delete: %r" % report)
    check(listing(port, token, url, "c1")[0] == 404, "c1 is gone")
    check(listing(port, token, url, "c2") == (200, ["x"]), "c2 stays")
    # XML, at an object's path with Expect: 100-continue, as Swift's functional test.
    status, h, data = req(port, token, "DELETE", url + "/c2/x?bulk-delete",
                          {"Accept": "application/xml", "Content-Type": "text/plain",
                           "Expect": "100-continue"}, b"c2/x")
    tree = minidom.parseString(data)
    check(tree.documentElement.tagName == "delete" and
          tree.getElementsByTagName("response_status")[0].childNodes[0].data == "200 OK" and
          tree.getElementsByTagName("number_deleted")[0].childNodes[0].data == "1",
          "xml delete: %r" % data)
    # Text, default Accept.
    status, h, data = req(port, token, "DELETE", url + "?bulk-delete", {}, b"c2\n")
    check(h.get("content-type") == "text/plain" and
          data == b"Number Deleted: 1\nNumber Not Found: 0\nResponse Body: \n"
          b"Response Status: 200 OK\nErrors:\n", "text delete: %r" % data)
    status, h, data = req(port, token, "DELETE", url + "?bulk-delete",
                          {"Accept": "application/json"}, b"\n\n")
    report = json.loads(data)
    check(report["Response Status"] == "400 Bad Request" and
          report["Response Body"] == "Invalid bulk delete.", "empty delete: %r" % report)
    status, h, data = req(port, token, "POST", url + "?bulk-delete",
                          {"Accept": "application/json", "Content-Type": "application/json"},
                          b"c3")
    report = json.loads(data)
    check(report["Response Status"] == "406 Not Acceptable", "406 delete: %r" % report)
    # An empty Content-Type is as good as none (Swift tests it for truth).
    status, h, data = req(port, token, "POST", url + "?bulk-delete",
                          {"Accept": "application/json", "Content-Type": ""}, b"c3/missing")
    report = json.loads(data)
    check(report["Response Status"] == "200 OK" and report["Number Not Found"] == 1,
          "empty Content-Type delete: %r" % report)


def heartbeat(cluster, url, token):
    port = bulk_proxy(cluster, "proxy-bulk-yield", "yield_frequency = 0\n")
    tar = make_tar([("hb/%d" % i, b"x" * 10, None, None) for i in range(5)])
    status, _, body = req(port, token, "PUT", url + "?extract-archive=tar",
                          {"Accept": "application/json"}, tar)
    check(status == 200 and body.startswith(b" ") and b"\r\n\r\n{" in body,
          "heartbeat: %r" % body[:40])
    report = json.loads(body)
    check(report["Number Files Created"] == 5, "heartbeat report: %r" % report)
    status, _, body = req(port, token, "POST", url + "?bulk-delete",
                          {"Accept": "application/xml"},
                          "\n".join("hb/%d" % i for i in range(5)).encode())
    check(body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n') and
          b"\r\n\r\n<delete>" in body, "xml heartbeat: %r" % body[:80])


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def memory(cluster, url, token):
    port = bulk_proxy(cluster, "proxy-bulk-memory")
    pid = cluster.ps.procs[-1][0].pid  # the proxy just started (one process, threads)
    size = 96 << 20
    data = random.Random(2).randbytes(size)
    tgz = gzip.compress(make_tar([("mem/big", data, None, None)]), compresslevel=1)
    before = peak_rss_kib(pid)
    status, _, body = req(port, token, "PUT", url + "?extract-archive=tar.gz",
                          {"Accept": "application/json"}, tgz, timeout=300)
    after = peak_rss_kib(pid)
    report = json.loads(body)
    check(report["Number Files Created"] == 1, "memory: %r" % report)
    grew = (after - before) / 1024.0
    print("memory: %d MiB archive, proxy peak RSS %.1f -> %.1f MiB (+%.1f MiB)"
          % (len(tgz) >> 20, before / 1024.0, after / 1024.0, grew))
    check(grew < 32, "memory: peak RSS grew by %.1f MiB for a %d MiB archive"
          % (grew, len(tgz) >> 20))
    status, h, _ = req(port, token, "HEAD", url + "/mem/big")
    check(h.get("content-length") == str(size), "memory: stored size %r" % h)


def main():
    with procs.TempDir("apus-bulk-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        port = bulk_proxy(cluster, "proxy-bulk")
        url, token = auth(port)
        steps = (extract_at_root, extract_below_container, bulk_delete)
        only = os.environ.get("APUS_STEPS")
        for step in steps:
            if only and step.__name__ not in only.split(","):
                continue
            print("---", step.__name__)
            try:
                step(cluster, port, url, token)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
        for step in (max_containers, heartbeat, memory):
            if only and step.__name__ not in only.split(","):
                continue
            print("---", step.__name__)
            try:
                step(cluster, url, token)
            except Exception as e:  # noqa: BLE001
                check(False, "%s raised %r" % (step.__name__, e))
    print("bulk:", "%d failures" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
