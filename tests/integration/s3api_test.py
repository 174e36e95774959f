#!/usr/bin/env python3
"""s3api (issue 15) on a real cluster (tests/support/cluster.py): an Apus proxy and a stock
swift-proxy-server (Swift 2.30.1's s3api) with the same pipeline (s3api, then tempauth) on the
same config, storage and memcached. Each request is signed for each proxy by botocore (Debian's,
as boto3 signs) and sent to both; status, the headers that matter and the XML bodies
(RequestId aside) must be the same:

- ListBuckets (empty account, then with buckets, names S3 would not allow skipped);
- bucket PUT (new; again: BucketAlreadyOwnedByYou; with a CreateBucketConfiguration of this
  location, of another one, and malformed; canned x-amz-acl, and a bad one), HEAD (there and
  not), DELETE (empty, not empty, not there); invalid bucket names;
- authentication: Version 4 header and presigned, Version 2 header and presigned, a wrong
  secret, an unknown access key, a skewed date, an expired presigned URL, an unsigned
  x-amz-meta header;
- ListObjects v1 and v2: prefix, delimiter, markers, max-keys (and bad ones), truncation,
  encoding-type=url, continuation tokens (and a bad one), fetch-owner, a missing bucket;
- object PUT, GET, HEAD, DELETE (Content-MD5, ranges, conditionals, response-* overrides,
  refused headers);
- multipart uploads: create, upload part (and copy, with ranges), list parts, complete (with
  its checks), abort, list uploads, the object completed, a bucket DELETE with uploads left;
- a request without S3 credentials passes on to Swift's API untouched.

Apus only (Swift 2.30.1 has no answer to compare with): a body other than the one whose
SHA-256 was signed, aws-chunked uploads (signed chunks; bad, truncated, mis-sized bodies), and
checksums kept and returned (x-amz-checksum-mode; composite checksums of multipart uploads),
object and bucket tags (tagging()), conditional PutObject (conditional_puts()), delete
markers as S3 shows them (delete_markers()), ListBuckets in pages (list_buckets_pages()), and reads of one
part (part_reads()).

Then the same operations through boto3's client against the Apus proxy only, as a user would.

usage: s3api_test.py <build-dir>
"""
import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import struct
import sys
import time
import zlib
from unittest import mock
from urllib.parse import quote, urlsplit

import botocore.auth
import botocore.exceptions
import boto3
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support")
sys.path.insert(0, SUPPORT)
import procs  # noqa: E402
from cluster import Cluster  # noqa: E402


BUILD = os.path.abspath(sys.argv[1])
BIN = os.path.join(BUILD, "bin")
PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api "
            "tempauth copy slo versioned_writes symlink proxy-logging proxy-server")
# Continues [filter:tempauth] (cluster.py ends the file with it): a second user, so each proxy
# works in an account of its own and both see the same state.
FILTERS = ("user_test2_tester2 = testing2 .admin\n[filter:s3api]\nuse = egg:swift#s3api\n"
           "[filter:copy]\nuse = egg:swift#copy\n[filter:slo]\nuse = egg:swift#slo\n"
           "[filter:symlink]\nuse = egg:swift#symlink\n"
           "[filter:versioned_writes]\nuse = egg:swift#versioned_writes\n"
           "allow_object_versioning = true\n")
USERS = {"apus": ("test:tester", "testing", "AUTH_test"),
         "swift": ("test2:tester2", "testing2", "AUTH_test2")}
# Content-Length is compared for object answers only: Swift sends its error documents chunked,
# and listings name each side's own user.
COMPARED = ("content-type", "location", "x-amz-meta-color", "x-amz-meta-mixed-case", "etag",
            "content-range", "cache-control")
failures = []
checked = [0]


def check(cond, what):
    checked[0] += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def signed(port, method, path, headers=None, body=b"", creds=None, kind="v4", when=None,
           expires=60):
    """(path with query, headers) of a request signed for the proxy on `port`."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    req = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
    signers = {"v4": lambda: botocore.auth.S3SigV4Auth(creds, "s3", "us-east-1"),
               "v4q": lambda: botocore.auth.S3SigV4QueryAuth(creds, "s3", "us-east-1",
                                                             expires=expires),
               "v2": lambda: botocore.auth.HmacV1Auth(creds),
               "v2q": lambda: botocore.auth.HmacV1QueryAuth(creds, expires=expires)}
    signer = signers[kind]()
    if when is None:
        signer.add_auth(req)
    else:
        class Frozen(datetime.datetime):
            @classmethod
            def utcnow(cls):
                return when

        with mock.patch.object(botocore.auth.datetime, "datetime", Frozen), \
                mock.patch("time.time", return_value=when.replace(
                    tzinfo=datetime.timezone.utc).timestamp()):
            signer.add_auth(req)
    prepared = req.prepare()
    u = urlsplit(prepared.url)
    h = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in prepared.headers.items()}
    h["Host"] = "127.0.0.1:%d" % port
    return u.path + ("?" + u.query if u.query else ""), h


def send(port, method, target, headers, body=b""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        headers = dict(headers)
        if body or method in ("PUT", "POST"):
            headers.setdefault("Content-Length", str(len(body)))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body or None)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def normalized(body):
    # (Swift's CompleteMultipartUpload writes its errors without a RequestId, which S3 and Apus
    # always send.)
    body = re.sub(rb"<RequestId>[^<]*</RequestId>", b"", body)
    # Version ids are the times of each side's own writes. (Swift 2.30.1 always says "null" for
    # NextVersionIdMarker, reading a key its listing does not have; Apus gives the version's id,
    # as AWS and later Swift do.)
    body = re.sub(rb"<VersionId>[0-9.]+</", rb"<VersionId>V</", body)
    body = re.sub(rb"<NextVersionIdMarker>([0-9.]+|null)</", rb"<NextVersionIdMarker>V</", body)
    body = re.sub(rb"<LastModified>[^<]*</LastModified>", b"<LastModified/>", body)
    body = re.sub(rb"<Initiated>[^<]*</Initiated>", b"<Initiated/>", body)
    body = re.sub(rb"<(UploadId|NextUploadIdMarker)>[^<]+</", rb"<\1>U</", body)
    body = re.sub(rb"<Location>http://[^/<]*", b"<Location>http://HOST", body)
    return body.replace(b"test2:tester2", b"test:tester").replace(b"test2:reader", b"test:reader")


def apus_caller(port):
    """call(method, path, headers=None, body=b"") -> (status, headers, body): a request signed
    (Version 4) for test:tester and sent to the proxy at `port`."""
    creds = Credentials(*USERS["apus"][:2])

    def call(method, path, headers=None, body=b""):
        target, h = signed(port, method, path, headers, body, creds=creds)
        return send(port, method, target, h, body)
    return call


def boto3_client(port):
    """boto3's S3 client for test:tester on the proxy at `port` (path-style, no retries)."""
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port,
                        aws_access_key_id="test:tester", aws_secret_access_key="testing",
                        region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 0}))


def client_error(fn, **kw):
    """(HTTP status, S3 error code) of the boto3 call fn(**kw); (200, None) when it succeeds."""
    try:
        fn(**kw)
    except botocore.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]
    return 200, None


class Pair:
    def __init__(self, ports):
        self.ports = ports

    def both(self, what, method, path, headers=None, body=b"", compare_body=True, creds=None,
             skip=(), extra=(), **sign):
        answers = {}
        for side, port in self.ports.items():
            user, key, _ = USERS[side]
            c = creds or Credentials(user, key)
            if callable(creds):
                c = creds(side)
            elif creds and creds.access_key == "test:tester":
                c = Credentials(user, creds.secret_key)
            # A path, headers or body may depend on the side (each has its own upload ids and
            # users).
            p = path(side) if callable(path) else path
            b = body(side) if callable(body) else body
            hd = headers(side) if callable(headers) else headers
            target, h = signed(port, method, p, hd, b, creds=c, **sign)
            answers[side] = send(port, method, target, h, b)
        (sa, ha, ba), (ss, hs, bs) = answers["apus"], answers["swift"]
        check(sa == ss, "%s: status apus %d, swift %d (%r / %r)" % (what, sa, ss, ba, bs))
        for k in COMPARED + tuple(extra):
            if k in skip:
                continue
            check(ha.get(k) == hs.get(k), "%s: %s apus %r, swift %r" % (what, k, ha.get(k),
                                                                        hs.get(k)))
        if compare_body:
            check(normalized(ba) == normalized(bs),
                  "%s: body\n  apus  %r\n  swift %r" % (what, ba, bs))
        check(ha.get("x-amz-request-id", "x") != "x" or sa < 300 and method == "HEAD",
              "%s: apus sends x-amz-request-id" % what)
        return answers["apus"]

    def swift_api(self, method, path, body=b"", side=None):
        """A Swift API request to the Apus proxy as the owner of each side's account (or of
        `side`'s); `path` is below the account. The last answer."""
        answer = None
        for s in ([side] if side else USERS):
            user, key, account = USERS[s]
            _, h, _ = send(self.ports["apus"], "GET", "/auth/v1.0",
                           {"X-Auth-User": user, "X-Auth-Key": key, "Host": "x"})
            answer = send(self.ports["apus"], method, "/v1/" + account + path,
                          {"X-Auth-Token": h["x-auth-token"], "Host": "x"}, body)
        return answer


def buckets(pair):
    pair.both("ListBuckets of an empty account", "GET", "/")
    pair.both("PUT bucket", "PUT", "/bucket1")
    pair.both("PUT bucket again", "PUT", "/bucket1")
    here = (b"<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint>"
            b"</CreateBucketConfiguration>")
    there = here.replace(b"us-east-1", b"eu-west-1")
    pair.both("PUT bucket in this location", "PUT", "/bucket2", body=here)
    pair.both("PUT bucket in another location", "PUT", "/bucket3", body=there)
    pair.both("PUT bucket with malformed XML", "PUT", "/bucket3", body=b"<Create")
    pair.both("PUT bucket with public-read", "PUT", "/public1", {"x-amz-acl": "public-read"})
    pair.both("PUT bucket with a bad canned ACL", "PUT", "/public2", {"x-amz-acl": "nonsense"})
    _, ch, _ = pair.swift_api("HEAD", "/public1", side="apus")
    check(ch.get("x-container-read") == ".r:*,.rlistings",
          "public-read sets X-Container-Read: %r" % ch.get("x-container-read"))
    pair.swift_api("PUT", "/Not_S3_Name")
    pair.both("ListBuckets", "GET", "/")
    # Swift's HEAD bucket passes on the Content-Type its proxy app gives a container HEAD made
    # without listing_formats (application/json); Apus's app says text/plain there. No S3
    # client reads it (S3 itself answers application/xml).
    pair.both("HEAD bucket", "HEAD", "/bucket1", compare_body=False, skip=("content-type",))
    pair.both("HEAD missing bucket", "HEAD", "/nosuchbucket", compare_body=False)
    for name in ("ab", "Upper", "a..b", "192.168.1.1", "a" * 64, "-ab"):
        pair.both("invalid bucket name %r" % name, "PUT", "/" + name)
    pair.swift_api("PUT", "/bucket2/obj", b"x")
    pair.both("DELETE non-empty bucket", "DELETE", "/bucket2")
    pair.swift_api("DELETE", "/bucket2/obj")
    pair.both("DELETE bucket", "DELETE", "/bucket2")
    pair.both("DELETE missing bucket", "DELETE", "/bucket2")
    pair.both("POST bucket", "POST", "/bucket1", compare_body=False)
    pair.both("GETPUT bucket", "GETPUT", "/bucket1")
    pair.both("GetBucketLocation", "GET", "/bucket1?location")
    pair.both("GetBucketLocation of a missing bucket", "GET", "/nosuchbucket?location")
    pair.both("GetBucketLocation with a key", "GET", "/bucket1/key?location")
    pair.both("GET bucket logging", "GET", "/bucket1?logging")
    pair.both("GET logging of a key", "GET", "/bucket1/key?logging")
    pair.both("PUT bucket logging", "PUT", "/bucket1?logging")
    pair.both("DELETE bucket location", "DELETE", "/bucket1?location")
    pair.both("POST bucket logging", "POST", "/bucket1?logging")


LISTED = ["a.txt", "b/1", "b/2", "b/c/3", "c d", "caf\u00e9", "d%2F", "e&<>", "zz"]


def listings(pair):
    """ListObjects v1 and v2 over the same objects in both accounts (put through Swift's API)."""
    pair.both("PUT bucket for listing", "PUT", "/listing")
    for name in LISTED:
        pair.swift_api("PUT", "/listing/" + quote(name.encode("utf-8")), b"x" * len(name))
    queries = [
        "", "?prefix=b/", "?delimiter=/", "?prefix=b/&delimiter=/", "?marker=b/2",
        "?max-keys=2", "?max-keys=2&delimiter=/", "?max-keys=0", "?max-keys=-1",
        "?max-keys=abc", "?max-keys=99999999999", "?encoding-type=url",
        "?encoding-type=url&delimiter=%26", "?encoding-type=bogus",
        "?list-type=2", "?list-type=2&max-keys=3", "?list-type=2&start-after=b",
        "?list-type=2&fetch-owner=true&max-keys=1",
        "?list-type=2&continuation-token=" + quote(base64.b64encode(b"b/2").decode()),
        "?list-type=2&delimiter=%2F&max-keys=2&encoding-type=url",
        "?prefix=", "?list-type=2&start-after=",
    ]
    for q in queries:
        # botocore signs the query as given: encoded as its clients send it.
        q = q.replace("/", "%2F")
        pair.both("ListObjects %s" % q, "GET", "/listing" + q)
    # Swift 2.30.1 ignores a continuation token that is not base64 and answers a list-type that
    # is not a number with a 500; Apus answers both as AWS (and later Swift) do: 400.
    for q, message in (("?list-type=2&continuation-token=%21%21%21",
                        b"The continuation token provided is incorrect"),
                       ("?list-type=x", b"Argument list-type must be an integer")):
        target, h = signed(pair.ports["apus"], "GET", "/listing" + q,
                           creds=Credentials(*USERS["apus"][:2]))
        s, _, b = send(pair.ports["apus"], "GET", target, h)
        check(s == 400 and b"<Code>InvalidArgument</Code>" in b and message in b,
              "ListObjects %s: %d %r" % (q, s, b))
    pair.both("ListObjects of a missing bucket", "GET", "/nosuchbucket")


def objects(pair):
    """Object PUT, GET, HEAD and DELETE."""
    pair.both("PUT bucket for objects", "PUT", "/objects")
    body = b"hello, world\n" * 100
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    # (No '_' in metadata names: Apus's HTTP server reads header names as WSGI does, '_' as
    # '-', and s3api has no raw names to check a signature over such a name with.)
    meta = {"x-amz-meta-color": "blue", "x-amz-meta-Mixed-Case": "u", "Content-Type": "text/x"}
    pair.both("PUT object", "PUT", "/objects/obj", meta, body=body)
    pair.both("PUT object with Content-MD5", "PUT", "/objects/md5", {"Content-MD5": md5},
              body=body)
    pair.both("PUT object with a wrong Content-MD5", "PUT", "/objects/badmd5",
              {"Content-MD5": base64.b64encode(b"0" * 16).decode()}, body=body)
    # Swift 2.30.1's message has a typo ("was an invalid."); Apus says what AWS says.
    s, _, b = pair.both("PUT object with an invalid Content-MD5", "PUT", "/objects/badmd5",
                        {"Content-MD5": "not base64!"}, body=body, compare_body=False)
    check(s == 400 and b"<Code>InvalidDigest</Code>" in b and
          b"The Content-MD5 you specified was invalid." in b, "invalid Content-MD5: %r" % b)
    pair.both("PUT object without Content-Type", "PUT", "/objects/untyped", body=b"x")
    pair.both("PUT empty object", "PUT", "/objects/empty", body=b"")
    pair.both("PUT object with a quoted name", "PUT", "/objects/" + quote("a b/c%d\u00e9"),
              body=b"q")
    pair.both("PUT object in a missing bucket", "PUT", "/nosuchbucket/obj", body=b"x")
    pair.both("PUT object with a key too long", "PUT", "/objects/" + "k" * 1025, body=b"x")
    obj = ("content-length",)
    pair.both("GET object", "GET", "/objects/obj", extra=obj)
    for side, port in pair.ports.items():
        target, h = signed(port, "GET", "/objects/obj", creds=Credentials(*USERS[side][:2]))
        s, h, _ = send(port, "GET", target, h)
        check(s == 200 and h.get("last-modified", "").endswith(" GMT"),
              "%s: GET object has a Last-Modified: %r" % (side, h.get("last-modified")))
    pair.both("GET object with a quoted name", "GET", "/objects/" + quote("a b/c%d\u00e9"))
    pair.both("GET empty object", "GET", "/objects/empty")
    pair.both("HEAD object", "HEAD", "/objects/obj", compare_body=False, extra=obj)
    pair.both("GET object range", "GET", "/objects/obj", {"Range": "bytes=5-20"}, extra=obj)
    pair.both("GET object bad range", "GET", "/objects/obj", {"Range": "bytes=5000-"})
    pair.both("HEAD object range", "HEAD", "/objects/obj", {"Range": "bytes=5-20"},
              compare_body=False, extra=obj)
    pair.both("HEAD object bad range", "HEAD", "/objects/obj", {"Range": "bytes=5000-"},
              compare_body=False)
    pair.both("GET response-content-type", "GET",
              "/objects/obj?response-content-type=application%2Fx-test&"
              "response-cache-control=no-cache")
    etag = '"%s"' % hashlib.md5(body).hexdigest()
    pair.both("GET If-Match", "GET", "/objects/obj", {"If-Match": etag})
    pair.both("GET If-Match other", "GET", "/objects/obj", {"If-Match": '"nope"'})
    pair.both("GET If-None-Match", "GET", "/objects/obj", {"If-None-Match": etag},
              compare_body=False)
    pair.both("GET missing key", "GET", "/objects/nosuchkey")
    pair.both("HEAD missing key", "HEAD", "/objects/nosuchkey", compare_body=False)
    pair.both("GET key in a missing bucket", "GET", "/nosuchbucket/nosuchkey")
    pair.both("POST object", "POST", "/objects/obj")
    for what, headers in (("storage class", {"x-amz-storage-class": "GLACIER"}),
                          ("If-Modified-Since", {"If-Modified-Since":
                                                 "Wed, 01 Dec 2021 00:00:00 GMT"}),
                          ("MFA", {"x-amz-mfa": "1"}),
                          ("SSE", {"x-amz-server-side-encryption": "AES256"}),
                          ("bad SSE", {"x-amz-server-side-encryption": "rot13"}),
                          ("website redirect", {"x-amz-website-redirect-location": "/x"}),
                          ("bad metadata directive", {"x-amz-metadata-directive": "MOVE"}),
                          ("copy source without key", {"x-amz-copy-source": "bucketonly"})):
        pair.both("PUT object with %s" % what, "PUT", "/objects/refused", headers, body=b"x")
    copies = (
        ("CopyObject", {"x-amz-copy-source": "/objects/obj"}),
        ("CopyObject without a leading slash", {"x-amz-copy-source": "objects/obj"}),
        ("CopyObject replacing metadata", {"x-amz-copy-source": "/objects/obj",
                                           "x-amz-metadata-directive": "REPLACE",
                                           "x-amz-meta-color": "red", "Content-Type": "a/b"}),
        ("CopyObject keeping metadata", {"x-amz-copy-source": "/objects/obj",
                                         "x-amz-meta-color": "red"}),
        ("CopyObject if-match", {"x-amz-copy-source": "/objects/obj",
                                 "x-amz-copy-source-if-match": etag}),
        ("CopyObject if-match other", {"x-amz-copy-source": "/objects/obj",
                                       "x-amz-copy-source-if-match": '"nope"'}),
        ("CopyObject if-none-match", {"x-amz-copy-source": "/objects/obj",
                                      "x-amz-copy-source-if-none-match": etag}),
        ("CopyObject of a missing key", {"x-amz-copy-source": "/objects/nosuchkey"}),
        ("CopyObject of a missing bucket", {"x-amz-copy-source": "/nosuchbucket/x"}),
        ("CopyObject with a bad parameter", {"x-amz-copy-source": "/objects/obj?x=1"}),
        ("CopyObject with a range", {"x-amz-copy-source": "/objects/obj",
                                     "x-amz-copy-source-range": "bytes=0-1"}),
    )
    for what, headers in copies:
        pair.both(what, "PUT", "/objects/copy", headers)
        pair.both(what + ": HEAD of the copy", "HEAD", "/objects/copy", compare_body=False,
                  extra=("content-length",))
    pair.both("CopyObject onto itself", "PUT", "/objects/obj", {"x-amz-copy-source": "/objects/obj"})
    pair.both("DELETE object", "DELETE", "/objects/md5")
    pair.both("DELETE missing object", "DELETE", "/objects/md5")
    pair.both("DELETE object in a missing bucket", "DELETE", "/nosuchbucket/md5")
    pair.both("GET deleted object", "GET", "/objects/md5")
    # A body that is not the one whose SHA-256 was signed: nothing is stored. (Swift 2.30.1
    # answers this with a 500; AWS and later Swift with XAmzContentSHA256Mismatch.)
    target, h = signed(pair.ports["apus"], "PUT", "/objects/tampered", body=b"signed body",
                       creds=Credentials(*USERS["apus"][:2]))
    s, _, b = send(pair.ports["apus"], "PUT", target, h, b"other body!")
    check(s == 400 and b"<Code>XAmzContentSHA256Mismatch</Code>" in b,
          "PUT of a body other than the signed one: %d %r" % (s, b))
    s, _, _ = pair.swift_api("HEAD", "/objects/tampered", side="apus")
    check(s == 404, "the tampered PUT stored nothing: HEAD %d" % s)
    s, h, b = pair.swift_api("GET", "/objects/obj", side="apus")
    check(s == 200 and b == body and h.get("x-object-meta-color") == "blue" and
          h.get("x-object-meta-mixed-case") == "u" and h.get("content-type") == "text/x",
          "S3 PUT stored as Swift's s3api stores it: %d %r" % (s, h))


def sigv4_streaming_put(port, path, payload, chunk_sizes, key=("test:tester", "testing"),
                        tamper=None, decoded_length=None, cut=0, pause_before_last=False,
                        form="STREAMING-AWS4-HMAC-SHA256-PAYLOAD", trailer=None,
                        tamper_trailer=False):
    """A PUT with an aws-chunked body signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD),
    written here from AWS's description (botocore 1.29 cannot make one). `tamper` changes the
    signature of that chunk; `cut` drops that many bytes off the end of the body."""
    now = datetime.datetime.utcnow()
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = "%s/us-east-1/s3/aws4_request" % day
    host = "127.0.0.1:%d" % port
    chunks, at = [], 0
    for size in chunk_sizes:
        chunks.append(payload[at:at + size])
        at += size
    chunks.append(b"")
    signed_chunks = form != "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": form,
               "content-encoding": "aws-chunked",
               "x-amz-decoded-content-length": str(decoded_length if decoded_length is not None
                                                   else len(payload))}
    if trailer:
        headers["x-amz-trailer"] = trailer[0]
    signed_names = sorted(headers)
    canonical = "\n".join(["PUT", path, ""] + ["%s:%s" % (k, headers[k]) for k in signed_names] +
                          ["", ";".join(signed_names), form])

    def hmac256(k, m):
        return hmac.new(k, m.encode(), hashlib.sha256).digest()
    signing_key = b"AWS4" + key[1].encode()
    for part in (day, "us-east-1", "s3", "aws4_request"):
        signing_key = hmac256(signing_key, part)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canonical.encode()).hexdigest()])
    previous = hmac.new(signing_key, sts.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (key[0], scope, ";".join(signed_names), previous))
    body = b""
    empty = hashlib.sha256(b"").hexdigest()
    for n, c in enumerate(chunks):
        if not signed_chunks:
            body += b"%x\r\n" % len(c) + c + (b"\r\n" if c else b"")
            continue
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, empty,
                         hashlib.sha256(c).hexdigest()])
        previous = hmac.new(signing_key, sts.encode(), hashlib.sha256).hexdigest()
        sig = "f" * 64 if tamper == n else previous
        body += b"%x;chunk-signature=%s\r\n" % (len(c), sig.encode()) + c
        body += b"\r\n" if c or not trailer else b""
    if trailer:
        name, value = trailer
        body += b"%s:%s\r\n" % (name.encode(), value.encode())
        if form == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER":
            canonical_trailers = "%s:%s\n" % (name, value)
            sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous,
                             hashlib.sha256(canonical_trailers.encode()).hexdigest()])
            sig = hmac.new(signing_key, sts.encode(), hashlib.sha256).hexdigest()
            if tamper_trailer:
                sig = "0" * 64
            body += b"x-amz-trailer-signature:%s\r\n" % sig.encode()
        body += b"\r\n"
    elif not signed_chunks:
        body += b"\r\n"
    if cut:
        body = body[:-cut]
    headers["content-length"] = str(len(body))
    if not pause_before_last:
        return send(port, "PUT", path, headers, body)
    # The final, empty chunk a moment after the rest, so that it arrives in a read of its own.
    final = len(b"0;chunk-signature=%s\r\n\r\n" % (b"0" * 64)) if not trailer else 20
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        conn.send(body[:-final])
        time.sleep(0.5)
        conn.send(body[-final:])
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def streaming(pair):
    """aws-chunked uploads (Swift 2.30.1 refuses them; Apus decodes the signed form)."""
    port = pair.ports["apus"]
    payload = os.urandom(20000)
    s, h, b = sigv4_streaming_put(port, "/objects/chunked", payload, [8192, 8192, 3616])
    check(s == 200 and h.get("etag") == '"%s"' % hashlib.md5(payload).hexdigest(),
          "aws-chunked PUT: %d %r %r" % (s, h, b))
    s, h, b = pair.swift_api("GET", "/objects/chunked", side="apus")
    check(s == 200 and b == payload and "aws-chunked" not in h.get("content-encoding", ""),
          "aws-chunked PUT stored the payload: %d %d bytes %r" % (s, len(b), h))
    for what, kwargs, code in (
            ("a bad chunk signature", {"tamper": 1}, b"SignatureDoesNotMatch"),
            ("a bad final chunk signature", {"tamper": 3}, b"SignatureDoesNotMatch"),
            ("a truncated body", {"cut": 100}, b"IncompleteBody"),
            ("more payload announced", {"decoded_length": 30000}, b"IncompleteBody"),
            ("less payload announced", {"decoded_length": 10000}, b"IncompleteBody")):
        s, _, b = sigv4_streaming_put(port, "/objects/badchunked", payload, [8192, 8192, 3616],
                                      **kwargs)
        check(s in (400, 403) and code in b, "aws-chunked PUT with %s: %d %r" % (what, s, b))
        s, _, _ = pair.swift_api("HEAD", "/objects/badchunked", side="apus")
        check(s == 404, "aws-chunked PUT with %s stored nothing: %d" % (what, s))
    # A bad signature on the final, empty chunk of a body larger than one read: the payload's
    # last bytes must not reach the object servers before that chunk checked out.
    big = os.urandom(3 * 1024 * 1024)
    s, _, b = sigv4_streaming_put(port, "/objects/badchunked", big, [65536] * 48, tamper=48)
    check(s == 403 and b"SignatureDoesNotMatch" in b, "bad final chunk of 3 MiB: %d %r" % (s, b))
    s, _, _ = pair.swift_api("HEAD", "/objects/badchunked", side="apus")
    check(s == 404, "bad final chunk of 3 MiB stored nothing: %d" % s)
    s, _, b = sigv4_streaming_put(port, "/objects/badchunked", big, [65536] * 48, tamper=48,
                                  pause_before_last=True)
    check(s == 403 and b"SignatureDoesNotMatch" in b,
          "bad final chunk arriving late: %d %r" % (s, b))
    s, _, _ = pair.swift_api("HEAD", "/objects/badchunked", side="apus")
    check(s == 404, "bad final chunk arriving late stored nothing: %d" % s)
    s, _, b = sigv4_streaming_put(port, "/objects/latechunked", big, [65536] * 48,
                                  pause_before_last=True)
    s2, _, got = pair.swift_api("GET", "/objects/latechunked", side="apus")
    check(s == 200 and s2 == 200 and got == big,
          "aws-chunked PUT whose final chunk arrives late: %d %d %d bytes" % (s, s2, len(got)))
    s, _, b = sigv4_streaming_put(port, "/objects/bigchunked", big, [65536] * 48)
    s2, _, got = pair.swift_api("GET", "/objects/bigchunked", side="apus")
    check(s == 200 and s2 == 200 and got == big, "3 MiB aws-chunked PUT: %d %d" % (s, s2))
    s, _, b = sigv4_streaming_put(port, "/objects/badchunked", payload, [100, 8192, 11708])
    check(s == 403 and b"<Code>InvalidChunkSizeError</Code>" in b and
          b"<Chunk>2</Chunk><BadChunkSize>100</BadChunkSize>" in b,
          "aws-chunked PUT with a small chunk first: %d %r" % (s, b))


def checksums(pair):
    """x-amz-checksum-* on object PUT, as a header and as a trailer (Swift 2.30.1 ignores
    them; Apus checks them as AWS does)."""
    port, creds = pair.ports["apus"], Credentials(*USERS["apus"][:2])
    data = os.urandom(100000)
    crc = base64.b64encode(struct.pack(">I", zlib.crc32(data))).decode()
    sha1 = base64.b64encode(hashlib.sha1(data).digest()).decode()

    def put(name, headers, body=data):
        target, h = signed(port, "PUT", "/objects/" + name, headers, body, creds=creds)
        return send(port, "PUT", target, h, body)

    s, _, b = put("crc32", {"x-amz-checksum-crc32": crc, "x-amz-sdk-checksum-algorithm": "CRC32"})
    check(s == 200, "PUT with a good x-amz-checksum-crc32: %d %r" % (s, b))
    s, _, b = put("sha1", {"x-amz-checksum-sha1": sha1})
    check(s == 200, "PUT with a good x-amz-checksum-sha1: %d %r" % (s, b))
    for what, headers, status, text in (
            ("a wrong CRC32", {"x-amz-checksum-crc32": "AAAAAA=="}, 400,
             b"<Code>BadDigest</Code><Message>The CRC32 you specified did not match the "
             b"calculated checksum.</Message>"),
            ("a CRC32 that is not one", {"x-amz-checksum-crc32": "AAAA"}, 400,
             b"Value for x-amz-checksum-crc32 header is invalid."),
            ("two checksums", {"x-amz-checksum-crc32": crc, "x-amz-checksum-sha1": sha1}, 400,
             b"Expecting a single x-amz-checksum- header. Multiple checksum Types are not "
             b"allowed."),
            ("an unknown algorithm", {"x-amz-checksum-md5": crc}, 400,
             b"The algorithm type you specified in x-amz-checksum- header is invalid."),
            ("another SDK algorithm", {"x-amz-checksum-crc32": crc,
                                       "x-amz-sdk-checksum-algorithm": "SHA1"}, 400,
             b"Value for x-amz-sdk-checksum-algorithm header is invalid."),
            ("a trailer without aws-chunked", {"x-amz-trailer": "x-amz-checksum-crc32"}, 400,
             b"<Code>MalformedTrailerError</Code>")):
        s, _, b = put("badsum", headers)
        check(s == status and text in b, "PUT with %s: %d %r" % (what, s, b))
        s, _, _ = pair.swift_api("HEAD", "/objects/badsum", side="apus")
        check(s == 404, "PUT with %s stored nothing: %d" % (what, s))
    for form in ("STREAMING-UNSIGNED-PAYLOAD-TRAILER", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"):
        s, _, b = sigv4_streaming_put(port, "/objects/trailer", data, [65536, 34464], form=form,
                                      trailer=("x-amz-checksum-crc32", crc))
        s2, _, got = pair.swift_api("GET", "/objects/trailer", side="apus")
        check(s == 200 and s2 == 200 and got == data,
              "%s with a CRC32 trailer: %d %r, GET %d" % (form, s, b, s2))
        for what, kwargs, text in (
                ("a wrong trailer", {"trailer": ("x-amz-checksum-crc32", "AAAAAA==")},
                 b"<Code>BadDigest</Code>"),
                ("a trailer that is no CRC32", {"trailer": ("x-amz-checksum-crc32", "AA")},
                 b"Value for x-amz-checksum-crc32 trailing header is invalid."),
                ("the final chunk late and a wrong trailer",
                 {"trailer": ("x-amz-checksum-crc32", "AAAAAA=="), "pause_before_last": True},
                 b"<Code>BadDigest</Code>")):
            s, _, b = sigv4_streaming_put(port, "/objects/badtrailer", data, [65536, 34464],
                                          form=form, **kwargs)
            check(s == 400 and text in b, "%s with %s: %d %r" % (form, what, s, b))
            s, _, _ = pair.swift_api("HEAD", "/objects/badtrailer", side="apus")
            check(s == 404, "%s with %s stored nothing: %d" % (form, what, s))
    s, _, b = sigv4_streaming_put(port, "/objects/badtrailer", data, [65536, 34464],
                                  form="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
                                  trailer=("x-amz-checksum-crc32", crc), tamper_trailer=True)
    check(s == 403 and b"SignatureDoesNotMatch" in b, "a bad trailer signature: %d %r" % (s, b))


def multi_delete(pair):
    """DeleteObjects (POST ?delete)."""
    pair.both("PUT bucket for deletes", "PUT", "/deletes")

    def fill():
        for name in ("a", "b", "c d", "e"):
            pair.swift_api("PUT", "/deletes/" + quote(name), b"x")

    def doc(keys, quiet=None):
        x = "<Delete>" + ("<Quiet>%s</Quiet>" % quiet if quiet else "")
        x += "".join("<Object><Key>%s</Key></Object>" % k for k in keys) + "</Delete>"
        return x.encode()

    def md5_of(body):
        return base64.b64encode(hashlib.md5(body).digest()).decode()

    fill()
    body = doc(["a", "c d", "nosuchkey"])
    # Swift labels its DeleteResult text/html (AWS: application/xml, as Apus) and lists keys in
    # the order its two concurrent deletes finish (Apus: the request's order).
    s, _, b = pair.both("DeleteObjects", "POST", "/deletes?delete", {"Content-MD5": md5_of(body)},
                        body=body, compare_body=False, skip=("content-type",))
    check(b.endswith(b"<DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                     b"<Deleted><Key>a</Key></Deleted><Deleted><Key>c d</Key></Deleted>"
                     b"<Deleted><Key>nosuchkey</Key></Deleted></DeleteResult>"),
          "DeleteObjects result: %r" % b)
    s, _, b = pair.swift_api("GET", "/deletes", side="apus")
    check(b.split() == [b"b", b"e"], "DeleteObjects left b and e: %r" % b)
    body = doc(["b", "e"], quiet="true")
    pair.both("DeleteObjects quietly", "POST", "/deletes?delete", {"Content-MD5": md5_of(body)},
              body=body, skip=("content-type",))
    fill()
    # Newer Swift and AWS take an x-amz-checksum-* header instead of Content-MD5 (AWS SDKs
    # send no Content-MD5 since 2025), and say so when both are missing.
    s, _, b = pair.both("DeleteObjects without Content-MD5", "POST", "/deletes?delete", {},
                        body=doc(["a"]), compare_body=False)
    check(s == 400 and b"<Code>InvalidRequest</Code>" in b and b"x-amz-checksum-*" in b,
          "DeleteObjects without Content-MD5: %d %r" % (s, b))
    apus = pair.ports["apus"]
    body = doc(["a"])
    crc = base64.b64encode(struct.pack(">I", zlib.crc32(body))).decode()
    bad = base64.b64encode(struct.pack(">I", zlib.crc32(body) ^ 1)).decode()
    for value, want in ((crc, b"<DeleteResult"), (bad, b"<Code>BadDigest</Code>")):
        target, h = signed(apus, "POST", "/deletes?delete", {"x-amz-checksum-crc32": value},
                           body, creds=Credentials(*USERS["apus"][:2]))
        st, _, got = send(apus, "POST", target, h, body)
        check(want in got, "DeleteObjects with x-amz-checksum-crc32 %s: %d %r" % (value, st, got))
    # A key of whitespace is a key (pugixml drops whitespace-only text unless told).
    call_body = doc([" "])
    pair.both("DeleteObjects of a key of one space", "POST", "/deletes?delete",
              {"Content-MD5": md5_of(call_body)}, body=call_body, skip=("content-type",))
    for what, b, headers in (
            ("with a wrong Content-MD5", doc(["a"]), {"Content-MD5": md5_of(b"x")}),
            ("malformed", b"<Delete><Object>", None),
            ("of another element", b"<Remove/>", None),
            ("empty", b"", None),
            ("of an empty key", doc([""]), None),
            ("of no keys", doc([]), None)):
        pair.both("DeleteObjects %s" % what, "POST", "/deletes?delete",
                  headers if headers is not None else {"Content-MD5": md5_of(b)}, body=b)
    body = doc(["a"])
    pair.both("DeleteObjects in a missing bucket", "POST", "/nosuchbucket?delete",
              {"Content-MD5": md5_of(body)}, body=body)
    pair.both("GET ?delete", "GET", "/deletes?delete")
    body = doc(["a"])
    s, _, b = pair.both("DeleteObjects with a wrong secret", "POST", "/deletes?delete",
                        {"Content-MD5": md5_of(body)}, body=body, compare_body=False,
                        creds=Credentials("test:tester", "wrong"))
    check(s == 403 and b"<Code>SignatureDoesNotMatch</Code>" in b,
          "DeleteObjects with a wrong secret: %d %r" % (s, b))


def acls(pair):
    """Bucket and object ACLs as Swift shows and sets them without s3_acl."""
    pair.both("PUT bucket for ACLs", "PUT", "/acls")
    pair.swift_api("PUT", "/acls/obj", b"x")
    pair.both("GET bucket ACL", "GET", "/acls?acl")
    pair.both("GET object ACL", "GET", "/acls/obj?acl")
    pair.both("GET ACL of a missing key", "GET", "/acls/nosuchkey?acl")
    pair.both("GET ACL of a missing bucket", "GET", "/nosuchbucket?acl")
    pair.both("PUT bucket ACL private", "PUT", "/acls?acl", {"x-amz-acl": "private"})
    pair.both("PUT bucket ACL nonsense", "PUT", "/acls?acl", {"x-amz-acl": "nonsense"})
    pair.both("PUT bucket ACL without one", "PUT", "/acls?acl")
    policy = ('<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList>'
              '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
              'xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI>'
              '</Grantee><Permission>READ</Permission></Grant>'
              '</AccessControlList></AccessControlPolicy>').encode()
    pair.both("PUT bucket ACL document", "PUT", "/acls?acl", body=policy)
    pair.both("PUT bucket ACL document and header", "PUT", "/acls?acl",
              {"x-amz-acl": "private"}, body=policy)
    pair.both("PUT bucket ACL bad document", "PUT", "/acls?acl", body=b"<AccessControlPolicy>")
    pair.both("PUT object ACL", "PUT", "/acls/obj?acl", {"x-amz-acl": "private"})
    pair.both("PUT ACL of a missing bucket", "PUT", "/nosuchbucket?acl",
              {"x-amz-acl": "private"})
    pair.both("DELETE ACL", "DELETE", "/acls?acl")
    # After public-read, Apus shows the AllUsers READ grant; Swift 2.30.1 loses the header on
    # the way and shows the owner's grant alone.
    pair.both("PUT bucket ACL public-read", "PUT", "/acls?acl", {"x-amz-acl": "public-read"})
    target, h = signed(pair.ports["apus"], "GET", "/acls?acl",
                       creds=Credentials(*USERS["apus"][:2]))
    s, _, b = send(pair.ports["apus"], "GET", target, h)
    check(s == 200 and b"<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee>"
          b"<Permission>READ</Permission>" in b, "public-read shows in the ACL: %d %r" % (s, b))


# s3_acl: each side's second user, in the same account as its owner.
READERS = {"apus": ("test:reader", "readkey"), "swift": ("test2:reader", "readkey")}


def reader(side):
    return Credentials(*READERS[side])


def acl_policy(owner, grants):
    """An AccessControlPolicy document: `grants` are (user id or group URI, permission)."""
    xsi = 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
    out = "<AccessControlPolicy><Owner><ID>%s</ID></Owner><AccessControlList>" % owner
    for who, permission in grants:
        grantee = ('<Grantee %s xsi:type="Group"><URI>%s</URI></Grantee>' % (xsi, who)
                   if who.startswith("http") else
                   '<Grantee %s xsi:type="CanonicalUser"><ID>%s</ID></Grantee>' % (xsi, who))
        out += "<Grant>%s<Permission>%s</Permission></Grant>" % (grantee, permission)
    return (out + "</AccessControlList></AccessControlPolicy>").encode()


def s3_acls(pair):
    """s3_acl = true on both sides: ACLs stored in sysmeta and checked by s3api, compared with
    Swift's s3api, and each side reading the ACLs the other wrote."""
    owner = {"apus": "test:tester", "swift": "test2:tester2"}
    pair.both("s3_acl: PUT public-read bucket", "PUT", "/aclb", {"x-amz-acl": "public-read"})
    pair.both("s3_acl: GET bucket ACL", "GET", "/aclb?acl")
    pair.both("s3_acl: PUT object with a grant", "PUT", "/aclb/granted",
              lambda side: {"x-amz-grant-read": "id=" + READERS[side][0]}, b"granted")
    pair.both("s3_acl: GET object ACL", "GET", "/aclb/granted?acl")
    pair.both("s3_acl: PUT private object", "PUT", "/aclb/private", body=b"private")
    pair.both("s3_acl: GET private object ACL", "GET", "/aclb/private?acl")
    pair.both("s3_acl: reader GETs a granted object", "GET", "/aclb/granted", creds=reader)
    pair.both("s3_acl: reader GETs a private object", "GET", "/aclb/private", creds=reader)
    pair.both("s3_acl: reader lists a public-read bucket", "GET", "/aclb", creds=reader,
              compare_body=False)
    pair.both("s3_acl: reader PUTs into a public-read bucket", "PUT", "/aclb/mine", body=b"x",
              creds=reader)
    pair.both("s3_acl: reader reads the bucket ACL", "GET", "/aclb?acl", creds=reader)
    pair.both("s3_acl: reader changes the bucket ACL", "PUT", "/aclb?acl",
              {"x-amz-acl": "public-read-write"}, creds=reader)
    pair.both("s3_acl: reader DELETEs the bucket", "DELETE", "/aclb", creds=reader)
    pair.both("s3_acl: owner grants the reader WRITE", "PUT", "/aclb?acl",
              body=lambda side: acl_policy(owner[side], [(owner[side], "FULL_CONTROL"),
                                                         (READERS[side][0], "WRITE")]))
    pair.both("s3_acl: GET the new bucket ACL", "GET", "/aclb?acl")
    pair.both("s3_acl: reader PUTs with WRITE", "PUT", "/aclb/mine", body=b"x", creds=reader)
    pair.both("s3_acl: reader lists without READ", "GET", "/aclb", creds=reader)
    pair.both("s3_acl: reader's object ACL", "GET", "/aclb/mine?acl", creds=reader)
    pair.both("s3_acl: owner reads the reader's object", "GET", "/aclb/mine")
    pair.both("s3_acl: PUT ACL of another owner", "PUT", "/aclb?acl",
              body=acl_policy("someone:else", [("someone:else", "FULL_CONTROL")]))
    pair.both("s3_acl: PUT ACL header and document", "PUT", "/aclb?acl",
              {"x-amz-acl": "private"},
              body=lambda side: acl_policy(owner[side], [(owner[side], "FULL_CONTROL")]))
    pair.both("s3_acl: PUT ACL without one", "PUT", "/aclb?acl")
    pair.both("s3_acl: PUT ACL bad document", "PUT", "/aclb?acl", body=b"<AccessControlPolicy>")
    pair.both("s3_acl: PUT ACL unknown canned", "PUT", "/aclb?acl", {"x-amz-acl": "everyone"})
    pair.both("s3_acl: PUT ACL bad group", "PUT", "/aclb?acl",
              body=lambda side: acl_policy(owner[side], [("http://example.com/all", "READ")]))
    pair.both("s3_acl: canned and grant headers", "PUT", "/aclb/both",
              {"x-amz-acl": "private", "x-amz-grant-read": "id=x"}, b"x")
    pair.both("s3_acl: object ACL to public-read", "PUT", "/aclb/private?acl",
              {"x-amz-acl": "public-read"})
    pair.both("s3_acl: the changed object ACL", "GET", "/aclb/private?acl")
    pair.both("s3_acl: reader GETs the now public object", "GET", "/aclb/private", creds=reader)
    pair.both("s3_acl: ACL of a missing key", "GET", "/aclb/nosuchkey?acl")
    pair.both("s3_acl: ACL of a missing bucket", "GET", "/nosuchaclbucket?acl")
    pair.both("s3_acl: PUT existing bucket", "PUT", "/aclb")
    pair.both("s3_acl: multipart upload with an ACL", "POST", "/aclb/mpu?uploads",
              {"x-amz-acl": "public-read"}, compare_body=False)
    # check_bucket_owner: ListBuckets shows a user of the account only what it may read.
    port = pair.ports["apus"]

    def names(creds):
        target, h = signed(port, "GET", "/", creds=creds)
        return re.findall(rb"<Name>([^<]*)</Name>", send(port, "GET", target, h)[2])
    target, h = signed(port, "PUT", "/aclpublic", {"x-amz-acl": "public-read"},
                       creds=Credentials(*USERS["apus"][:2]))
    send(port, "PUT", target, h)
    got = names(reader("apus"))
    check(b"aclpublic" in got and b"aclb" not in got,
          "s3_acl: check_bucket_owner lists what the reader may read: %r" % (got,))
    check(b"aclb" in names(Credentials(*USERS["apus"][:2])),
          "s3_acl: check_bucket_owner lists the owner's buckets")
    # Each side reads the ACLs the other side's s3api stored. (An object ACL that Apus's
    # PutObjectAcl changed is in transient sysmeta, which Swift's s3api does not read: Swift
    # copies the object onto itself instead.)
    for side, other in (("apus", "swift"), ("swift", "apus")):
        user, key, _ = USERS[side]
        changed = ("/aclb/private?acl",) if side == "swift" else ()
        for path in ("/aclb?acl", "/aclb/granted?acl") + changed:
            answers = []
            for port in (pair.ports[side], pair.ports[other]):
                target, h = signed(port, "GET", path, creds=Credentials(user, key))
                answers.append(send(port, "GET", target, h))
            check(answers[0][0] == 200 and normalized(answers[0][2]) == normalized(answers[1][2]),
                  "s3_acl: %s's ACL of %s read through %s: %r / %r" % (side, path, other,
                                                                      answers[0], answers[1]))


def global_namespace(port):
    """Apus's global bucket namespace with s3_acl: bucket names are the cluster's, another
    account's bucket is found by name, and anonymous requests get what ACLs allow. (Swift has
    neither: nothing to compare with.)"""
    main = Credentials("test:tester", "testing")
    alt = Credentials("test2:tester2", "testing2")

    def call(method, path, creds=main, headers=None, body=b""):
        if creds is None:  # anonymous
            return send(port, method, path, dict(headers or {}, Host="127.0.0.1"), body)
        target, h = signed(port, method, path, headers, body, creds=creds)
        return send(port, method, target, h, body)

    def code(answer):
        m = re.search(rb"<Code>([^<]*)</Code>", answer[2])
        return m.group(1).decode() if m else None

    s = call("PUT", "/gbucket")
    check(s[0] == 200, "global: CreateBucket %r" % (s,))
    s = call("PUT", "/gbucket", alt)
    check((s[0], code(s)) == (409, "BucketAlreadyExists"), "global: another account's name %r" % (s,))
    s = call("PUT", "/gbucket")
    check((s[0], code(s)) == (409, "BucketAlreadyOwnedByYou"), "global: one's own name %r" % (s,))
    call("PUT", "/gbucket/public", headers={"x-amz-acl": "public-read"}, body=b"public data")
    call("PUT", "/gbucket/private", body=b"private data")
    s = call("GET", "/gbucket/public", None)
    check(s[0] == 200 and s[2] == b"public data", "global: anonymous GET of a public object %r" % (s,))
    s = call("GET", "/gbucket/private", None)
    check((s[0], code(s)) == (403, "AccessDenied"), "global: anonymous GET of a private one %r" % (s,))
    s = call("GET", "/gbucket", None)
    check((s[0], code(s)) == (403, "AccessDenied"), "global: anonymous listing %r" % (s,))
    s = call("PUT", "/gbucket/anon", None, body=b"x")
    check((s[0], code(s)) == (403, "AccessDenied"), "global: anonymous PUT %r" % (s,))
    s = call("GET", "/", None)
    check((s[0], code(s)) == (403, "AccessDenied"), "global: anonymous ListBuckets %r" % (s,))
    s = call("GET", "/gbucket/public", alt)
    check(s[0] == 200 and s[2] == b"public data", "global: another account reads %r" % (s,))
    s = call("GET", "/gbucket/private", alt)
    check((s[0], code(s)) == (403, "AccessDenied"), "global: another account denied %r" % (s,))
    s = call("PUT", "/gbucket/alt", alt, body=b"x")
    check((s[0], code(s)) == (403, "AccessDenied"), "global: another account's PUT %r" % (s,))
    call("PUT", "/gbucket?acl", headers={"x-amz-acl": "public-read-write"})
    s = call("GET", "/gbucket", None)
    check(s[0] == 200 and b"<Key>public</Key>" in s[2], "global: public listing %r" % (s,))
    s = call("PUT", "/gbucket/alt", alt, body=b"from alt")
    check(s[0] == 200, "global: another account writes a public-write bucket %r" % (s,))
    s = call("PUT", "/gbucket/anon", None, body=b"from nobody")
    check(s[0] == 200, "global: anonymous writes a public-write bucket %r" % (s,))
    # The objects are in the owner's account, as Swift sees them.
    s = call("GET", "/gbucket/alt")
    check(s[0] == 403, "global: the bucket owner may not read another's private object %r" % (s,))
    s = call("HEAD", "/gbucket/anon")
    check(s[0] == 200, "global: an anonymous write is the bucket owner's %r" % (s,))
    # Swift's API is untouched: tokens, /info, and unregistered names go to Swift.
    _, h, _ = send(port, "GET", "/auth/v1.0", {"X-Auth-User": "test:tester",
                                               "X-Auth-Key": "testing", "Host": "x"})
    token = h["x-auth-token"]
    s = send(port, "GET", "/v1/AUTH_test/gbucket/alt", {"X-Auth-Token": token, "Host": "x"})
    check(s[0] == 200 and s[2] == b"from alt", "global: Swift sees the object %r" % (s,))
    s = send(port, "GET", "/info", {"Host": "x"})
    check(s[0] == 200 and b'"s3_acl": true' in s[2], "global: /info %r" % (s[0],))
    s = call("GET", "/nosuchbucketname/x", None)
    check((s[0], code(s)) == (404, "NoSuchBucket"), "global: anonymous, no bucket %r" % (s,))
    s = call("GET", "/Not_A_Bucket/x", None)
    check(s[0] != 200 and b"<Error>" not in s[2], "global: other paths are Swift's %r" % (s,))
    s = call("GET", "/gbucket/public", None, {"x-amz-expected-bucket-owner": "test:tester"})
    check(s[0] == 200, "global: the expected bucket owner %r" % (s,))
    s = call("GET", "/gbucket/public", None, {"x-amz-expected-bucket-owner": "test2:tester2"})
    check((s[0], code(s)) == (403, "AccessDenied"), "global: another bucket owner %r" % (s,))
    # A copy from another account's bucket needs READ on its source.
    call("PUT", "/gsource", alt)
    call("PUT", "/gsource/open", alt, {"x-amz-acl": "public-read"}, b"open source")
    call("PUT", "/gsource/closed", alt, body=b"closed source")
    s = call("PUT", "/gbucket/copied", headers={"x-amz-copy-source": "/gsource/open"})
    check(s[0] == 200, "global: copy from another account %r" % (s,))
    s = call("GET", "/gbucket/copied")
    check(s[2] == b"open source", "global: the copy %r" % (s,))
    s = call("PUT", "/gbucket/copied", headers={"x-amz-copy-source": "/gsource/closed"})
    check((s[0], code(s)) == (403, "AccessDenied"), "global: copy of a private source %r" % (s,))
    cors(port, call, code)
    post_uploads(port, call, code)
    public_access_block(port, call, code)
    bucket_policies(port, call, code)
    ownership_controls(port, call, code)
    object_lock(port, call, code)
    s = call("GET", "/gbucket/public?attributes",
             headers={"x-amz-object-attributes": "ETag,ObjectSize,StorageClass"})
    check(s[0] == 200 and b"<ObjectSize>11</ObjectSize>" in s[2] and
          b"<ETag>%s</ETag>" % hashlib.md5(b"public data").hexdigest().encode() in s[2] and
          b"<ObjectParts>" not in s[2], "attributes: GetObjectAttributes %r" % (s,))
    s = call("GET", "/gbucket/public?attributes", headers={"x-amz-object-attributes": "Color"})
    check((s[0], code(s)) == (400, "InvalidArgument"), "attributes: an unknown one %r" % (s,))
    # DeleteBucket frees the name.
    for key in ("public", "private", "alt", "anon", "copied"):
        call("DELETE", "/gbucket/" + key)
    s = call("DELETE", "/gbucket")
    check(s[0] == 204, "global: DeleteBucket %r" % (s,))
    s = call("PUT", "/gbucket", alt)
    check(s[0] == 200, "global: the freed name taken by another account %r" % (s,))
    s = call("GET", "/gbucket", main)
    check((s[0], code(s)) == (403, "AccessDenied"), "global: the old owner is out %r" % (s,))
    # A name whose container went without DeleteBucket (Swift's API) can be taken again.
    s = send(port, "DELETE", "/v1/AUTH_test/gsource", {"X-Auth-Token": token, "Host": "x"})
    _, h2, _ = send(port, "GET", "/auth/v1.0", {"X-Auth-User": "test2:tester2",
                                                "X-Auth-Key": "testing2", "Host": "x"})
    for key in ("open", "closed"):
        send(port, "DELETE", "/v1/AUTH_test2/gsource/" + key,
             {"X-Auth-Token": h2["x-auth-token"], "Host": "x"})
    s = send(port, "DELETE", "/v1/AUTH_test2/gsource",
             {"X-Auth-Token": h2["x-auth-token"], "Host": "x"})
    check(s[0] == 204, "global: container deleted through Swift %r" % (s,))
    s = call("PUT", "/gsource")
    check(s[0] == 200, "global: a stale name taken over %r" % (s,))
    s = call("PUT", "/gsource", alt)
    check((s[0], code(s)) == (409, "BucketAlreadyExists"), "global: and it is taken %r" % (s,))


def cors(port, call, code):
    """Bucket CORS rules (Apus only: Swift's s3api has none), the preflight they answer and the
    headers of actual cross-origin requests; and cors_preflight_allow_origin, which answers
    S3-looking preflights without a bucket (Swift's s3api option)."""
    s = call("GET", "/gbucket?cors")
    check((s[0], code(s)) == (404, "NoSuchCORSConfiguration"), "cors: none yet %r" % (s,))
    config = (b"<CORSConfiguration><CORSRule><AllowedOrigin>https://*.example</AllowedOrigin>"
              b"<AllowedMethod>GET</AllowedMethod><AllowedMethod>HEAD</AllowedMethod>"
              b"<AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader>"
              b"<MaxAgeSeconds>600</MaxAgeSeconds></CORSRule></CORSConfiguration>")
    s = call("PUT", "/gbucket?cors", body=b"<CORSConfiguration><CORSRule><AllowedOrigin>*"
             b"</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>")
    check((s[0], code(s)) == (400, "InvalidRequest"), "cors: a method S3 refuses %r" % (s,))
    s = call("PUT", "/gbucket?cors", body=config)
    check(s[0] == 200, "cors: PutBucketCors %r" % (s,))
    s = call("PUT", "/gbucket?cors", creds=Credentials("test2:tester2", "testing2"), body=config)
    check((s[0], code(s)) == (403, "AccessDenied"), "cors: only the owner configures %r" % (s,))
    s = call("GET", "/gbucket?cors")
    check(s[0] == 200 and b"<AllowedOrigin>https://*.example</AllowedOrigin>" in s[2] and
          b"<MaxAgeSeconds>600</MaxAgeSeconds>" in s[2], "cors: GetBucketCors %r" % (s,))
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "X-Amz-Date"}
    s = call("OPTIONS", "/gbucket/public", None, preflight)
    check(s[0] == 200 and s[1].get("access-control-allow-origin") == "https://app.example" and
          s[1].get("access-control-allow-methods") == "GET, HEAD" and
          s[1].get("access-control-allow-headers") == "x-amz-date" and
          s[1].get("access-control-max-age") == "600", "cors: preflight %r" % (s,))
    s = call("OPTIONS", "/gbucket/public", None, dict(preflight, Origin="https://evil.test"))
    check((s[0], code(s)) == (403, "AccessForbidden"), "cors: another origin %r" % (s,))
    s = call("OPTIONS", "/gbucket/public", None,
             dict(preflight, **{"Access-Control-Request-Method": "PUT"}))
    check((s[0], code(s)) == (403, "AccessForbidden"), "cors: another method %r" % (s,))
    s = call("OPTIONS", "/gbucket/public", None, {"Origin": "https://app.example"})
    check(s[0] == 400, "cors: a preflight without a method %r" % (s,))
    s = call("OPTIONS", "/nosuchbucketname/x", None, preflight)
    check((s[0], code(s)) == (404, "NoSuchBucket"), "cors: no bucket %r" % (s,))
    s = call("GET", "/gbucket/public", None, {"Origin": "https://app.example"})
    check(s[0] == 200 and s[1].get("access-control-allow-origin") == "https://app.example" and
          s[1].get("access-control-expose-headers") == "ETag", "cors: actual GET %r" % (s[:2],))
    s = call("GET", "/gbucket/private", None, {"Origin": "https://app.example"})
    check(s[0] == 403 and s[1].get("access-control-allow-origin") == "https://app.example",
          "cors: an error answer has them too %r" % (s[:2],))
    s = call("GET", "/gbucket/public", headers={"Origin": "https://evil.test"})
    check(s[0] == 200 and "access-control-allow-origin" not in s[1], "cors: not for others %r" % (s[:2],))
    # Swift's s3api option: preflights that look like S3's answered from the list.
    presigned = "/gbucket/public?X-Amz-Credential=x&X-Amz-Signature=y"
    s = call("OPTIONS", presigned, None, {"Origin": "https://ops.example",
                                          "Access-Control-Request-Method": "PUT"})
    check(s[0] == 200 and s[1].get("access-control-allow-origin") == "https://ops.example",
          "cors: cors_preflight_allow_origin %r" % (s[:2],))
    s = call("OPTIONS", presigned, None, {"Origin": "https://app.example",
                                          "Access-Control-Request-Method": "GET"})
    check(s[0] == 401, "cors: cors_preflight_allow_origin refuses others %r" % (s[:2],))
    s = call("DELETE", "/gbucket?cors")
    check(s[0] == 204, "cors: DeleteBucketCors %r" % (s,))
    s = call("OPTIONS", "/gbucket/public", None, preflight)
    check((s[0], code(s)) == (403, "AccessForbidden"), "cors: no rules, no CORS %r" % (s,))


def form_body(fields):
    """A multipart/form-data body of (name, value) fields ("file": the file's bytes)."""
    boundary = "apusformboundary"
    out = b""
    for name, value in fields:
        if isinstance(value, str):
            value = value.encode()
        filename = '; filename="up.txt"' if name == "file" else ""
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"%s\"%s\r\n\r\n%s\r\n"
                % (boundary.encode(), name.encode(), filename.encode(), value))
    out += b"--%s--\r\n" % boundary.encode()
    return out, {"Content-Type": "multipart/form-data; boundary=" + boundary}


def post_uploads(port, call, code):
    """Browser POST uploads (Apus only: Swift's s3api has none): a policy signed with Version
    2 and 4, its conditions, anonymous forms and the answers S3 gives."""
    def policy(conditions, seconds=600):
        expires = datetime.datetime.utcnow() + datetime.timedelta(seconds=seconds)
        doc = {"expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "conditions": conditions}
        return base64.b64encode(json.dumps(doc).encode()).decode()

    def v2(p, secret="testing"):
        return base64.b64encode(hmac.new(secret.encode(), p.encode(), hashlib.sha1).digest()).decode()

    def post(fields):
        body, headers = form_body(fields)
        return call("POST", "/gbucket", None, headers, body)

    covering = [{"bucket": "gbucket"}, ["starts-with", "$key", "up/"], {"acl": "public-read"},
                ["content-length-range", 1, 64]]
    p = policy(covering)
    signed = [("key", "up/${filename}"), ("acl", "public-read"), ("AWSAccessKeyId", "test:tester"),
              ("policy", p), ("signature", v2(p))]
    s = post(signed + [("file", "form data")])
    check(s[0] == 204 and s[1].get("etag") == '"%s"' % hashlib.md5(b"form data").hexdigest(),
          "post: a Version 2 policy upload %r" % (s[:2],))
    s = call("GET", "/gbucket/up/up.txt", None)
    check(s[0] == 200 and s[2] == b"form data", "post: the object, public-read %r" % (s,))
    s = post(signed + [("file", "x" * 65)])
    check((s[0], code(s)) == (400, "EntityTooLarge"), "post: too large %r" % (s,))
    s = post(signed + [("file", "")])
    check((s[0], code(s)) == (400, "EntityTooSmall"), "post: too small %r" % (s,))
    s = post(signed[:-1] + [("signature", v2(p, "wrong")), ("file", "x")])
    check((s[0], code(s)) == (403, "SignatureDoesNotMatch"), "post: a wrong signature %r" % (s,))
    s = post(signed + [("x-amz-meta-extra", "1"), ("file", "x")])
    check((s[0], code(s)) == (403, "AccessDenied") and b"Extra input fields" in s[2],
          "post: a field without a condition %r" % (s,))
    expired = policy(covering, -60)
    s = post(signed[:3] + [("policy", expired), ("signature", v2(expired)), ("file", "x")])
    check((s[0], code(s)) == (403, "AccessDenied") and b"Policy expired" in s[2],
          "post: an expired policy %r" % (s,))
    s = post(signed[1:] + [("file", "x")])
    check((s[0], code(s)) == (400, "InvalidArgument"), "post: no key %r" % (s,))
    # Version 4: the credential's scope signs the policy.
    date = datetime.datetime.utcnow().strftime("%Y%m%d")
    credential = "test:tester/%s/us-east-1/s3/aws4_request" % date
    p4 = policy([{"bucket": "gbucket"}, {"key": "up/v4"}, {"x-amz-credential": credential},
                 {"x-amz-algorithm": "AWS4-HMAC-SHA256"}, {"x-amz-date": date + "T000000Z"},
                 {"success_action_status": "201"}])
    key = b"AWS4testing"
    for part in (date, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    s = post([("key", "up/v4"), ("x-amz-credential", credential),
              ("x-amz-algorithm", "AWS4-HMAC-SHA256"), ("x-amz-date", date + "T000000Z"),
              ("success_action_status", "201"), ("policy", p4),
              ("x-amz-signature", hmac.new(key, p4.encode(), hashlib.sha256).hexdigest()),
              ("file", "v4 data")])
    check(s[0] == 201 and b"<Key>up/v4</Key>" in s[2] and b"<Bucket>gbucket</Bucket>" in s[2],
          "post: a Version 4 policy, 201 %r" % (s,))
    # No policy: an anonymous writer, which the public-read-write bucket takes; a redirect.
    s = post([("key", "up/anon"), ("success_action_redirect", "http://example.com/done"),
              ("file", "anonymous data")])
    check(s[0] == 303 and s[1].get("location", "").startswith(
        "http://example.com/done?bucket=gbucket&key=up%2Fanon&etag=%22"),
          "post: anonymous, redirected %r" % (s[:2],))
    call("PUT", "/gbucket?acl", headers={"x-amz-acl": "private"})
    s = post([("key", "up/anon2"), ("file", "anonymous data")])
    check((s[0], code(s)) == (403, "AccessDenied"), "post: anonymous, private bucket %r" % (s,))
    # The bucket policy decides for a form as for a PUT of its key.
    call("PUT", "/gbucket?policy", body=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject",
         "Resource": "arn:aws:s3:::gbucket/up/open*"}]}).encode())
    s = post([("key", "up/open"), ("file", "by policy")])
    check(s[0] == 204, "post: a policy's Allow %r" % (s[:2],))
    call("PUT", "/gbucket?acl", headers={"x-amz-acl": "public-read-write"})
    call("PUT", "/gbucket?policy", body=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
         "Resource": "arn:aws:s3:::gbucket/up/closed*"}]}).encode())
    s = post([("key", "up/closed"), ("file", "denied")])
    check((s[0], code(s)) == (403, "AccessDenied"), "post: a policy's Deny %r" % (s,))
    call("DELETE", "/gbucket?policy")
    call("DELETE", "/gbucket/up/open")
    for key in ("up/up.txt", "up/v4", "up/anon"):
        call("DELETE", "/gbucket/" + key)


def public_access_block(port, call, code):
    """A bucket's public access block (Apus only): public ACLs refused, public grants ignored."""
    s = call("GET", "/gbucket?publicAccessBlock")
    check((s[0], code(s)) == (404, "NoSuchPublicAccessBlockConfiguration"),
          "public block: none yet %r" % (s,))
    config = (b"<PublicAccessBlockConfiguration><BlockPublicAcls>true</BlockPublicAcls>"
              b"<IgnorePublicAcls>true</IgnorePublicAcls></PublicAccessBlockConfiguration>")
    s = call("PUT", "/gbucket?publicAccessBlock", body=config)
    check(s[0] == 200, "public block: PUT %r" % (s,))
    s = call("GET", "/gbucket?publicAccessBlock")
    check(s[0] == 200 and b"<IgnorePublicAcls>true</IgnorePublicAcls>" in s[2] and
          b"<BlockPublicPolicy>false</BlockPublicPolicy>" in s[2], "public block: GET %r" % (s,))
    s = call("PUT", "/gbucket/blocked", headers={"x-amz-acl": "public-read"}, body=b"x")
    check((s[0], code(s)) == (403, "AccessDenied"), "public block: a public object ACL %r" % (s,))
    s = call("PUT", "/gbucket?acl", headers={"x-amz-acl": "public-read"})
    check((s[0], code(s)) == (403, "AccessDenied"), "public block: a public bucket ACL %r" % (s,))
    s = call("GET", "/gbucket/public", None)
    check((s[0], code(s)) == (403, "AccessDenied"), "public block: public grants ignored %r" % (s,))
    s = call("DELETE", "/gbucket?publicAccessBlock")
    check(s[0] == 204, "public block: DELETE %r" % (s,))
    s = call("GET", "/gbucket/public", None)
    check(s[0] == 200, "public block: public again %r" % (s[0],))


def bucket_policies(port, call, code):
    """Bucket policies (Apus only: Swift's s3api has none): stored as sent, checked, and
    deciding before the ACLs (a Deny over a grant, an Allow beyond them)."""
    alt = Credentials("test2:tester2", "testing2")

    def statement(effect, principal, action, resource, condition=None):
        st = {"Effect": effect, "Principal": principal, "Action": action,
              "Resource": resource}
        if condition:
            st["Condition"] = condition
        return st

    def policy(*statements):
        return json.dumps({"Version": "2012-10-17", "Statement": list(statements)}).encode()

    call("PUT", "/gbucket?acl", headers={"x-amz-acl": "private"})  # listing by policy only
    s = call("GET", "/gbucket?policy")
    check((s[0], code(s)) == (404, "NoSuchBucketPolicy"), "policy: none yet %r" % (s,))
    for bad in (b"{", policy(statement("Allow", "*", "s3:GetObject", "arn:aws:s3:::other/*")),
                policy(statement("Allow", "*", "s3:Fly", "arn:aws:s3:::gbucket/*"))):
        s = call("PUT", "/gbucket?policy", body=bad)
        check((s[0], code(s)) == (400, "MalformedPolicy"), "policy: refused %r %r" % (bad, s))
    text = policy(
        statement("Allow", "*", "s3:GetObject", "arn:aws:s3:::gbucket/priv*",
                  {"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}),
        statement("Deny", {"AWS": "arn:aws:iam::test2:root"}, "s3:GetObject",
                  "arn:aws:s3:::gbucket/public"),
        statement("Allow", {"AWS": "*"}, "s3:ListBucket", "arn:aws:s3:::gbucket",
                  {"StringLike": {"s3:prefix": "pub*"}}))
    s = call("PUT", "/gbucket?policy", alt, body=text)
    check((s[0], code(s)) == (403, "AccessDenied"), "policy: only the owner sets it %r" % (s,))
    s = call("PUT", "/gbucket?policy", body=text)
    check(s[0] == 204, "policy: PUT %r" % (s,))
    s = call("GET", "/gbucket?policy")
    check(s[0] == 200 and s[2] == text, "policy: GET gives the text back %r" % (s,))
    s = call("GET", "/gbucket/private", None)
    check(s[0] == 200 and s[2] == b"private data", "policy: an Allow beyond the ACL %r" % (s,))
    s = call("GET", "/gbucket/public", alt)
    check((s[0], code(s)) == (403, "AccessDenied"), "policy: a Deny over a public ACL %r" % (s,))
    s = call("GET", "/gbucket/public", None)
    check(s[0] == 200, "policy: the ACL still lets others in %r" % (s[0],))
    s = call("HEAD", "/gbucket/pubmissing", None)
    check(s[0] == 404, "policy: a missing key under a listable prefix %r" % (s[0],))
    s = call("HEAD", "/gbucket/othermissing", None)
    check(s[0] == 403, "policy: a missing key outside it %r" % (s[0],))
    s = call("GET", "/gbucket?policyStatus")
    check(s[0] == 200 and b"<IsPublic>true</IsPublic>" in s[2], "policy: status %r" % (s,))
    # The owner can always undo a policy that shuts everyone out, itself included.
    call("PUT", "/gbucket?policy", body=policy(statement(
        "Deny", "*", "s3:*", ["arn:aws:s3:::gbucket", "arn:aws:s3:::gbucket/*"])))
    s = call("GET", "/gbucket/private")
    check((s[0], code(s)) == (403, "AccessDenied"), "policy: the owner denied too %r" % (s,))
    s = call("DELETE", "/gbucket?policy")
    check(s[0] == 204, "policy: DELETE by the owner still %r" % (s,))
    s = call("GET", "/gbucket/private")
    check(s[0] == 200, "policy: gone %r" % (s[0],))
    s = call("GET", "/gbucket?policy")
    check((s[0], code(s)) == (404, "NoSuchBucketPolicy"), "policy: none again %r" % (s,))
    # S3's size limit, 20 KiB, is what the four sysmeta headers hold.
    big = policy(*[statement("Allow", {"AWS": "test2:tester2"}, "s3:GetObject",
                             "arn:aws:s3:::gbucket/k%04d-%s" % (i, "x" * 60)) for i in range(100)])
    big = big[:-2] + b" " * (20 * 1024 - len(big)) + big[-2:]
    s = call("PUT", "/gbucket?policy", body=big)
    check(s[0] == 204, "policy: 20 KiB taken %r" % (s[:2],))
    s = call("GET", "/gbucket?policy")
    check(s[0] == 200 and s[2] == big, "policy: 20 KiB back as sent %r" % (s[0],))
    s = call("PUT", "/gbucket?policy", body=big + b" ")
    check((s[0], code(s)) == (400, "MalformedPolicy"), "policy: over 20 KiB %r" % (s,))
    call("DELETE", "/gbucket?policy")
    # BlockPublicPolicy refuses a public policy.
    call("PUT", "/gbucket?publicAccessBlock", body=(
        b"<PublicAccessBlockConfiguration><BlockPublicPolicy>true</BlockPublicPolicy>"
        b"</PublicAccessBlockConfiguration>"))
    s = call("PUT", "/gbucket?policy", body=policy(statement(
        "Allow", "*", "s3:GetObject", "arn:aws:s3:::gbucket/*")))
    check((s[0], code(s)) == (403, "AccessDenied"), "policy: public one blocked %r" % (s,))
    call("DELETE", "/gbucket?publicAccessBlock")
    # DeleteObjects: the policy decides each key.
    call("PUT", "/gbucket?policy", body=policy(statement(
        "Allow", {"AWS": "test2:tester2"}, "s3:DeleteObject", "arn:aws:s3:::gbucket/del/*")))
    call("PUT", "/gbucket/del/a", body=b"a")
    call("PUT", "/gbucket/keep", body=b"k")
    doc = (b"<Delete><Object><Key>del/a</Key></Object><Object><Key>keep</Key></Object></Delete>")
    s = call("POST", "/gbucket?delete", alt, {"Content-MD5": base64.b64encode(
        hashlib.md5(doc).digest()).decode()}, doc)
    check(s[0] == 200 and b"<Deleted><Key>del/a</Key></Deleted>" in s[2] and
          b"<Error><Key>keep</Key><Code>AccessDenied</Code>" in s[2],
          "policy: DeleteObjects key by key %r" % (s,))
    s = call("HEAD", "/gbucket/keep")
    check(s[0] == 200, "policy: the denied key is kept %r" % (s[0],))
    call("DELETE", "/gbucket/keep")
    call("DELETE", "/gbucket?policy")
    call("PUT", "/gbucket?acl", headers={"x-amz-acl": "public-read-write"})


def ownership_controls(port, call, code):
    """Object ownership (Apus only): BucketOwnerEnforced turns ACLs off and makes every object
    the bucket owner's; BucketOwnerPreferred gives it the objects written with
    bucket-owner-full-control."""
    alt = Credentials("test2:tester2", "testing2")

    def owner_of(path):
        s = call("GET", path + "?acl")
        m = re.search(rb"<Owner><ID>([^<]*)</ID>", s[2])
        return m.group(1).decode() if m else s

    s = call("PUT", "/gowned", headers={"x-amz-object-ownership": "Nobody"})
    check((s[0], code(s)) == (400, "InvalidArgument"), "ownership: unknown %r" % (s,))
    s = call("PUT", "/gowned", headers={"x-amz-object-ownership": "BucketOwnerEnforced",
                                        "x-amz-acl": "public-read"})
    check((s[0], code(s)) == (400, "InvalidBucketAclWithObjectOwnership"),
          "ownership: enforced with a public ACL %r" % (s,))
    s = call("PUT", "/gowned", headers={"x-amz-object-ownership": "BucketOwnerEnforced"})
    check(s[0] == 200, "ownership: CreateBucket enforced %r" % (s,))
    s = call("GET", "/gowned?ownershipControls")
    check(s[0] == 200 and b"<ObjectOwnership>BucketOwnerEnforced</ObjectOwnership>" in s[2],
          "ownership: GET %r" % (s,))
    call("PUT", "/gowned?policy", body=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:PutObject",
        "Resource": "arn:aws:s3:::gowned/*"}]}).encode())
    s = call("PUT", "/gowned/by-alt", alt, body=b"x")
    check(s[0] == 200, "ownership: alt writes by policy %r" % (s,))
    check(owner_of("/gowned/by-alt") == "test:tester", "ownership: the bucket owner's object")
    s = call("PUT", "/gowned/acl", alt, {"x-amz-acl": "private"}, b"x")
    check((s[0], code(s)) == (400, "AccessControlListNotSupported"),
          "ownership: an ACL on a write %r" % (s,))
    s = call("PUT", "/gowned/acl", alt, {"x-amz-acl": "bucket-owner-full-control"}, b"x")
    check(s[0] == 200, "ownership: bucket-owner-full-control still taken %r" % (s,))
    s = call("PUT", "/gowned?acl", headers={"x-amz-acl": "private"})
    check((s[0], code(s)) == (400, "AccessControlListNotSupported"), "ownership: PutBucketAcl %r" % (s,))
    s = call("GET", "/gowned/by-alt", alt)
    check((s[0], code(s)) == (403, "AccessDenied"), "ownership: no GetObject for alt %r" % (s,))
    s = call("PUT", "/gowned?ownershipControls", body=(
        b"<OwnershipControls><Rule><ObjectOwnership>BucketOwnerPreferred</ObjectOwnership>"
        b"</Rule></OwnershipControls>"))
    check(s[0] == 200, "ownership: PUT %r" % (s,))
    call("PUT", "/gowned/mine", alt, {"x-amz-acl": "bucket-owner-full-control"}, b"x")
    call("PUT", "/gowned/theirs", alt, body=b"x")
    check(owner_of("/gowned/mine") == "test:tester", "ownership: preferred, handed over")
    s = call("GET", "/gowned/theirs?acl", alt)
    check(s[0] == 200 and b"<ID>test2:tester2</ID>" in s[2], "ownership: preferred, kept %r" % (s,))
    s = call("DELETE", "/gowned?ownershipControls")
    check(s[0] == 204, "ownership: DELETE %r" % (s,))
    s = call("GET", "/gowned?ownershipControls")
    check((s[0], code(s)) == (404, "OwnershipControlsNotFoundError"), "ownership: none %r" % (s,))
    for key in ("by-alt", "acl", "mine", "theirs"):
        call("DELETE", "/gowned/" + key)
    call("DELETE", "/gowned?policy")
    s = call("DELETE", "/gowned")
    check(s[0] == 204, "ownership: bucket deleted %r" % (s,))


def object_lock(port, call, code):
    """S3 Object Lock (Apus only): a locked version is kept until its retention is over or its
    legal hold is off; GOVERNANCE gives way to x-amz-bypass-governance-retention."""
    def version_of(answer):
        return answer[1].get("x-amz-version-id")

    s = call("GET", "/gbucket?object-lock")
    check((s[0], code(s)) == (404, "ObjectLockConfigurationNotFoundError"),
          "lock: none on a plain bucket %r" % (s,))
    s = call("PUT", "/glocked", headers={"x-amz-bucket-object-lock-enabled": "true"})
    check(s[0] == 200, "lock: CreateBucket with Object Lock %r" % (s,))
    s = call("GET", "/glocked?versioning")
    check(b"<Status>Enabled</Status>" in s[2], "lock: versioning on %r" % (s,))
    s = call("PUT", "/glocked?versioning",
             body=b"<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>")
    check((s[0], code(s)) == (409, "InvalidBucketState"), "lock: no suspending %r" % (s,))
    s = call("PUT", "/glocked?object-lock", body=(
        b"<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule>"
        b"<DefaultRetention><Mode>GOVERNANCE</Mode><Days>1</Days></DefaultRetention></Rule>"
        b"</ObjectLockConfiguration>"))
    check(s[0] == 200, "lock: default retention %r" % (s,))
    s = call("PUT", "/glocked/kept", body=b"v1")
    v1 = version_of(s)
    s = call("HEAD", "/glocked/kept")
    check(s[1].get("x-amz-object-lock-mode") == "GOVERNANCE" and
          s[1].get("x-amz-object-lock-retain-until-date"), "lock: the default applied %r" % (s[1],))
    s = call("DELETE", "/glocked/kept?versionId=" + v1)
    check((s[0], code(s)) == (403, "AccessDenied"), "lock: the version is kept %r" % (s,))
    s = call("DELETE", "/glocked/kept")
    check(s[0] == 204 and s[1].get("x-amz-delete-marker") == "true",
          "lock: a delete marker is fine %r" % (s[1],))
    s = call("GET", "/glocked/kept?versionId=" + v1)
    check(s[0] == 200 and s[2] == b"v1", "lock: the version is still there %r" % (s[0],))
    s = call("PUT", "/glocked/held", headers={
        "x-amz-object-lock-mode": "COMPLIANCE",
        "x-amz-object-lock-retain-until-date": "2031-01-01T00:00:00Z",
        "x-amz-object-lock-legal-hold": "ON"}, body=b"held")
    held = version_of(s)
    s = call("GET", "/glocked/held?retention")
    check(s[0] == 200 and b"<Mode>COMPLIANCE</Mode>" in s[2] and
          b"<RetainUntilDate>2031-01-01T00:00:00Z</RetainUntilDate>" in s[2],
          "lock: GetObjectRetention %r" % (s,))
    s = call("PUT", "/glocked/held?retention",
             headers={"x-amz-bypass-governance-retention": "true"},
             body=b"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>2031-01-01T00:00:00Z"
                  b"</RetainUntilDate></Retention>")
    check((s[0], code(s)) == (403, "AccessDenied"), "lock: COMPLIANCE is not lifted %r" % (s,))
    s = call("DELETE", "/glocked/held?versionId=" + held,
             headers={"x-amz-bypass-governance-retention": "true"})
    check((s[0], code(s)) == (403, "AccessDenied"), "lock: COMPLIANCE has no bypass %r" % (s,))
    s = call("GET", "/glocked/held?legal-hold")
    check(b"<Status>ON</Status>" in s[2], "lock: GetObjectLegalHold %r" % (s,))
    s = call("DELETE", "/glocked/kept?versionId=" + v1,
             headers={"x-amz-bypass-governance-retention": "true"})
    check(s[0] == 204, "lock: GOVERNANCE with the bypass %r" % (s,))
    # Another account's user deletes a GOVERNANCE version with DeleteObjects, as the policy lets
    # it bypass.
    alt = Credentials("test2:tester2", "testing2")
    s = call("PUT", "/glocked/gov", headers={
        "x-amz-object-lock-mode": "GOVERNANCE",
        "x-amz-object-lock-retain-until-date": "2031-01-01T00:00:00Z"}, body=b"gov")
    gov = version_of(s)
    doc = (b"<Delete><Object><Key>gov</Key><VersionId>%s</VersionId></Object></Delete>"
           % gov.encode())
    md5 = {"Content-MD5": base64.b64encode(hashlib.md5(doc).digest()).decode(),
           "x-amz-bypass-governance-retention": "true"}
    call("PUT", "/glocked?policy", body=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "test2:tester2"},
         "Action": "s3:DeleteObjectVersion", "Resource": "arn:aws:s3:::glocked/*"}]}).encode())
    s = call("POST", "/glocked?delete", alt, md5, doc)
    check(s[0] == 200 and b"<Code>AccessDenied</Code>" in s[2],
          "lock: no bypass without the grant %r" % (s,))
    call("PUT", "/glocked?policy", body=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "test2:tester2"},
         "Action": ["s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"],
         "Resource": "arn:aws:s3:::glocked/*"}]}).encode())
    s = call("POST", "/glocked?delete", alt, md5, doc)
    check(s[0] == 200 and b"<Deleted><Key>gov</Key>" in s[2],
          "lock: bypass granted by the policy %r" % (s,))
    # The COMPLIANCE version stays until 2031, and so does its bucket: the cluster is this
    # run's own.


def versioning(pair):
    """Bucket versioning through object_versioning."""
    pair.both("PUT bucket for versioning", "PUT", "/versioned")
    pair.both("GET versioning, never set", "GET", "/versioned?versioning")
    doc = "<VersioningConfiguration><Status>%s</Status></VersioningConfiguration>"
    pair.both("PUT versioning Enabled", "PUT", "/versioned?versioning",
              body=(doc % "Enabled").encode())
    pair.both("GET versioning, enabled", "GET", "/versioned?versioning")
    pair.both("PUT versioning Suspended", "PUT", "/versioned?versioning",
              body=(doc % "Suspended").encode())
    pair.both("GET versioning, suspended", "GET", "/versioned?versioning")
    pair.both("PUT versioning bogus", "PUT", "/versioned?versioning",
              body=(doc % "Maybe").encode())
    pair.both("PUT versioning malformed", "PUT", "/versioned?versioning", body=b"<Vers")
    pair.both("GET versioning of a missing bucket", "GET", "/nosuchbucket?versioning")
    pair.both("DELETE versioning", "DELETE", "/versioned?versioning")
    pair.both("POST tagging", "POST", "/versioned?tagging")
    pair.both("PUT versioning Enabled again", "PUT", "/versioned?versioning",
              body=(doc % "Enabled").encode())
    for body in (b"one", b"two"):
        pair.both("PUT a version", "PUT", "/versioned/obj", body=body, skip=("etag",))
    pair.both("PUT another key", "PUT", "/versioned/dir/other", body=b"x")
    pair.both("DELETE the versioned key", "DELETE", "/versioned/obj")
    for q in ("", "&max-keys=1", "&max-keys=2", "&prefix=dir%2F", "&delimiter=%2F",
              "&key-marker=dir%2Fother", "&version-id-marker=null",
              "&key-marker=obj&version-id-marker=bogus", "&encoding-type=url"):
        pair.both("ListObjectVersions %s" % q, "GET", "/versioned?versions" + q)
    # Deleting the current version by its id makes the newest one left current (Swift's
    # _restore_on_delete); each side has its own version ids.
    ids = {}
    for body in (b"older", b"newer"):
        for side, port in pair.ports.items():
            target, h = signed(port, "PUT", "/versioned/restore", body=body,
                               creds=Credentials(*USERS[side][:2]))
            ids.setdefault(side, []).append(send(port, "PUT", target, h, body)[1].get(
                "x-amz-version-id"))
    pair.both("DELETE the current version by id", "DELETE",
              lambda side: "/versioned/restore?versionId=" + ids[side][1], skip=("etag",))
    s, _, b = pair.both("GET after deleting the current version", "GET", "/versioned/restore",
                        skip=("etag",))
    check(s == 200 and b == b"older", "the older version is current again: %d %r" % (s, b))
    pair.both("DELETE the last version by id", "DELETE",
              lambda side: "/versioned/restore?versionId=" + ids[side][0], skip=("etag",))
    pair.both("GET after deleting every version", "GET", "/versioned/restore")


def uploads(pair):
    """ListMultipartUploads over uploads laid out as Swift's s3api lays them out (the markers
    and parts in <bucket>+segments, put through Swift's API)."""
    pair.both("PUT bucket for uploads", "PUT", "/mpu")
    pair.both("ListMultipartUploads, no segments container", "GET", "/mpu?uploads")
    pair.swift_api("PUT", "/mpu+segments")
    for name in ("a/UPLOAD1", "a/UPLOAD1/1", "a/UPLOAD1/2", "b/UPLOAD2", "b/UPLOAD3",
                 "dir/c/UPLOAD4", "dir/d/UPLOAD5", "dir/d/UPLOAD5/1", "z z/UPLOAD6"):
        pair.swift_api("PUT", "/mpu+segments/" + quote(name), b"x")
    for q in ("", "&max-uploads=2", "&max-uploads=1", "&key-marker=a",
              "&key-marker=b&upload-id-marker=UPLOAD2", "&prefix=dir%2F",
              "&prefix=dir%2F&delimiter=%2F", "&delimiter=%2F", "&encoding-type=url",
              "&encoding-type=bad", "&max-uploads=-1", "&max-uploads=5000"):
        pair.both("ListMultipartUploads %s" % q, "GET", "/mpu?uploads" + q)
    pair.both("ListMultipartUploads with a key", "GET", "/mpu/a?uploads")
    pair.both("ListMultipartUploads of a missing bucket", "GET", "/nosuchbucket?uploads")


def multipart(pair):
    """Multipart uploads from start to end on both sides, each with its own upload ids: the
    errors of each step, ListParts, UploadPartCopy with ranges, CompleteMultipartUpload's checks
    (order, ETags, sizes, Content-MD5), the object it makes, a retried Complete, Abort, and a
    bucket DELETE that removes the segments container."""
    ids = {}

    def initiate(what, key, headers=None):
        ids[key] = {}
        answers = {}
        for side, port in pair.ports.items():
            user, secret, _ = USERS[side]
            target, h = signed(port, "POST", "/mpb/%s?uploads" % key, headers,
                               creds=Credentials(user, secret))
            answers[side] = send(port, "POST", target, h)
            found = re.search(rb"<UploadId>([^<]+)</UploadId>", answers[side][2])
            ids[key][side] = found.group(1).decode() if found else "none"
        (sa, _, ba), (ss, _, bs) = answers["apus"], answers["swift"]
        check(sa == ss == 200, "%s: status apus %d, swift %d (%r / %r)" % (what, sa, ss, ba, bs))
        check(normalized(ba) == normalized(bs), "%s: body\n  apus  %r\n  swift %r" % (what, ba, bs))

    def on(key, query=""):
        return lambda side: "/mpb/%s?uploadId=%s%s" % (key, ids[key][side], query)

    pair.both("CreateMultipartUpload of a missing bucket", "POST", "/nosuchbucket/k?uploads")
    pair.both("PUT bucket for multipart", "PUT", "/mpb")
    pair.both("CreateMultipartUpload without a key", "POST", "/mpb?uploads")
    pair.both("CreateMultipartUpload of a key too long", "POST", "/mpb/%s?uploads" % ("k" * 1025))
    initiate("CreateMultipartUpload", "obj",
             {"Content-Type": "text/x-mp", "x-amz-meta-color": "blue",
              "Cache-Control": "no-cache"})
    initiate("CreateMultipartUpload, small parts", "small")
    initiate("CreateMultipartUpload, to abort", "gone")
    pair.both("ListMultipartUploads", "GET", "/mpb?uploads")
    big = b"a" * (5 * 1024 * 1024)
    pair.both("UploadPart 1", "PUT", on("obj", "&partNumber=1"), body=big)
    pair.both("UploadPart 2", "PUT", on("obj", "&partNumber=2"), body=b"tail")
    pair.both("UploadPart 3, replaced", "PUT", on("obj", "&partNumber=3"), body=b"first")
    pair.both("UploadPart 3 again", "PUT", on("obj", "&partNumber=3"), body=b"second")
    for n in ("0", "1001", "x", "-1"):
        pair.both("UploadPart number %s" % n, "PUT", on("obj", "&partNumber=" + n), body=b"x")
    pair.both("UploadPart without uploadId", "PUT", "/mpb/obj?partNumber=1", body=b"x")
    pair.both("UploadPart of an unknown upload", "PUT", "/mpb/obj?partNumber=1&uploadId=nope",
              body=b"x")
    pair.both("UploadPart of another key's upload", "PUT",
              lambda side: "/mpb/other?partNumber=1&uploadId=" + ids["obj"][side], body=b"x")
    pair.both("GET ?partNumber", "GET", on("obj", "&partNumber=1"))
    pair.both("UploadPart without a key", "PUT", "/mpb?partNumber=1&uploadId=x", body=b"x")
    pair.both("PUT a copy source", "PUT", "/mpb/src", body=b"0123456789" * 10)
    for rng in ("bytes=10-19", "bytes=0-", "bytes=90-200", "bytes=200-300", "bytes=1-2,4-5",
                "nonsense"):
        pair.both("UploadPartCopy %s" % rng, "PUT", on("small", "&partNumber=2"),
                  {"x-amz-copy-source": "/mpb/src", "x-amz-copy-source-range": rng},
                  compare_body=False)
    pair.both("UploadPartCopy whole", "PUT", on("small", "&partNumber=1"),
              {"x-amz-copy-source": "/mpb/src"}, compare_body=False)
    pair.both("UploadPartCopy of a missing source", "PUT", on("small", "&partNumber=3"),
              {"x-amz-copy-source": "/mpb/nosuch"})
    for q in ("", "&max-parts=1", "&max-parts=2&part-number-marker=1", "&part-number-marker=3",
              "&encoding-type=url", "&encoding-type=bad", "&max-parts=-1"):
        pair.both("ListParts %s" % q, "GET", on("obj", q))
    pair.both("ListParts of an unknown upload", "GET", "/mpb/obj?uploadId=nope")

    md5 = {n: hashlib.md5(d).hexdigest() for n, d in
           ((1, big), (2, b"tail"), (3, b"second"))}

    def doc(parts):
        return ("<CompleteMultipartUpload>" + "".join(
            "<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>" % p for p in parts) +
            "</CompleteMultipartUpload>").encode()

    good = doc([(1, '"%s"' % md5[1]), (3, md5[3]), (2, md5[2])])
    for what, body in (("malformed", b"<CompleteMultipartUpload><Part>"),
                       ("no parts", b"<CompleteMultipartUpload></CompleteMultipartUpload>"),
                       ("empty", b""),
                       ("another root", b"<Complete><Part/></Complete>"),
                       ("out of order", doc([(2, md5[2]), (1, md5[1])])),
                       ("repeated part", doc([(1, md5[1]), (1, md5[1])])),
                       ("bad etag", doc([(1, "xyz")])),
                       ("wrong etag", doc([(1, md5[2]), (2, md5[2])])),
                       ("missing part", doc([(1, md5[1]), (7, md5[2])])),
                       ("part too small", doc([(2, md5[2]), (3, md5[3])])),
                       ("part number not a number", doc([("one", md5[1])])),
                       ("with an unknown element",
                        b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" +
                        md5[1].encode() + b"</ETag><ChecksumMD5>x</ChecksumMD5></Part>"
                        b"</CompleteMultipartUpload>")):
        pair.both("CompleteMultipartUpload %s" % what, "POST", on("obj"), body=body)
    pair.both("CompleteMultipartUpload with a wrong Content-MD5", "POST", on("obj"),
              {"Content-MD5": base64.b64encode(hashlib.md5(b"x").digest()).decode()}, body=good)
    pair.both("CompleteMultipartUpload of an unknown upload", "POST", "/mpb/obj?uploadId=nope",
              body=good)
    pair.both("CompleteMultipartUpload", "POST", on("obj"),
              {"Content-MD5": base64.b64encode(hashlib.md5(good).digest()).decode()}, body=good)
    pair.both("HEAD the completed object", "HEAD", "/mpb/obj")
    pair.both("GET the completed object's end", "GET", "/mpb/obj", {"Range": "bytes=-10"})
    pair.both("GET the completed object, If-Match", "GET", "/mpb/obj",
              {"If-Match": '"%s-3"' % hashlib.md5(bytes.fromhex(md5[1] + md5[3] + md5[2]))
                                              .hexdigest(), "Range": "bytes=0-3"})
    for cond in ("If-None-Match", "If-Match"):
        pair.both("HEAD the completed object, %s its ETag" % cond, "HEAD", "/mpb/obj",
                  {cond: '"%s-3"' % hashlib.md5(bytes.fromhex(md5[1] + md5[3] + md5[2]))
                                          .hexdigest()}, extra=("content-length",))
        pair.both("HEAD the completed object, %s another" % cond, "HEAD", "/mpb/obj",
                  {cond: '"x"'}, extra=("content-length",))
    pair.both("ListObjects shows the upload's ETag", "GET", "/mpb?prefix=obj")
    pair.both("CompleteMultipartUpload retried", "POST", on("obj"), body=good)
    pair.both("ListParts of a completed upload", "GET", on("obj"))
    pair.both("AbortMultipartUpload of a completed upload", "DELETE", on("obj"))
    pair.both("UploadPart of a completed upload", "PUT", on("obj", "&partNumber=4"), body=b"x")
    pair.both("AbortMultipartUpload", "DELETE", on("gone"))
    pair.both("AbortMultipartUpload again", "DELETE", on("gone"))
    pair.both("ListMultipartUploads after", "GET", "/mpb?uploads")
    pair.both("POST ?uploadId without a key", "POST", "/mpb?uploadId=x", body=good)
    pair.both("PUT ?uploadId", "PUT", on("obj"), body=b"x")
    pair.both("DELETE bucket with an object", "DELETE", "/mpb")
    pair.both("DELETE the object", "DELETE", "/mpb/obj")
    pair.both("DELETE the source", "DELETE", "/mpb/src")
    pair.both("DELETE bucket with an upload left", "DELETE", "/mpb")
    for side in USERS:
        check(pair.swift_api("HEAD", "/mpb+segments", side=side)[0] == 404,
              "%s: the segments container goes with the bucket" % side)


def stored_checksums(pair):
    """Apus only (Swift's s3api keeps no checksum): a checksum sent as a header is kept and
    returned with x-amz-checksum-mode: ENABLED (not for a range, not without the mode); a
    multipart upload created with x-amz-checksum-algorithm gets the composite checksum of its
    parts' checksums, checked against what each part was uploaded with, or with
    x-amz-checksum-type FULL_OBJECT the CRC of the whole object."""
    port = pair.ports["apus"]
    call = apus_caller(port)

    def crc(data):
        return base64.b64encode(struct.pack(">I", zlib.crc32(data))).decode()

    call("PUT", "/sums")
    data = b"checksummed body\n"
    s, _, _ = call("PUT", "/sums/o", {"x-amz-checksum-crc32": crc(data)}, data)
    check(s == 200, "PUT with x-amz-checksum-crc32: %d" % s)
    _, h, _ = call("HEAD", "/sums/o", {"x-amz-checksum-mode": "ENABLED"})
    check(h.get("x-amz-checksum-crc32") == crc(data) and
          h.get("x-amz-checksum-type") == "FULL_OBJECT",
          "HEAD with the checksum mode returns the checksum: %r" % h)
    _, h, _ = call("GET", "/sums/o", {"x-amz-checksum-mode": "enabled"})
    check(h.get("x-amz-checksum-crc32") == crc(data), "GET with the checksum mode: %r" % h)
    _, h, _ = call("GET", "/sums/o")
    check("x-amz-checksum-crc32" not in h, "GET without the mode: no checksum: %r" % h)
    _, h, _ = call("GET", "/sums/o", {"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-3"})
    check("x-amz-checksum-crc32" not in h, "ranged GET: no checksum: %r" % h)

    s, h, b = call("POST", "/sums/mp?uploads", {"x-amz-checksum-algorithm": "CRC32"})
    check(s == 200 and h.get("x-amz-checksum-algorithm") == "CRC32" and
          h.get("x-amz-checksum-type") == "COMPOSITE",
          "CreateMultipartUpload with a checksum algorithm: %d %r" % (s, h))
    upload = re.search(rb"<UploadId>([^<]+)<", b).group(1).decode()
    s, _, _ = call("POST", "/sums/bad?uploads", {"x-amz-checksum-algorithm": "MD5"})
    check(s == 400, "CreateMultipartUpload with an unknown algorithm: %d" % s)
    parts = [b"p" * (5 << 20), b"last part"]
    etags = []
    for n, part in enumerate(parts, 1):
        s, h, _ = call("PUT", "/sums/mp?partNumber=%d&uploadId=%s" % (n, upload),
                       {"x-amz-checksum-crc32": crc(part)}, part)
        etags.append(h.get("etag"))
        check(s == 200, "UploadPart %d with its checksum: %d" % (n, s))
    # An upload id with a '/' names a part of another upload (here part 1, which exists), and
    # is no upload (Apus only; Swift takes it).
    s, _, b = call("PUT", "/sums/mp?partNumber=1&uploadId=%s" % quote(upload + "/1", safe=""),
                   {}, b"x")
    check(s == 404 and b"<Code>NoSuchUpload</Code>" in b,
          "UploadPart with an upload id holding a '/': %d %r" % (s, b))

    def complete(sums, headers=None):
        doc = "<CompleteMultipartUpload>" + "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>%s</Part>" % (
                n, etags[n - 1], "<ChecksumCRC32>%s</ChecksumCRC32>" % c if c else "")
            for n, c in enumerate(sums, 1)) + "</CompleteMultipartUpload>"
        return call("POST", "/sums/mp?uploadId=" + upload, headers, body=doc.encode())

    s, _, b = complete([crc(parts[0]), None])
    check(s == 400 and b"<Code>InvalidRequest</Code>" in b and b"missing for part 2" in b,
          "Complete without a part's checksum: %d %r" % (s, b))
    s, _, b = complete([crc(parts[0]), crc(b"other")])
    check(s == 400 and b"<Code>InvalidPart</Code>" in b,
          "Complete with a wrong part checksum: %d %r" % (s, b))
    want = base64.b64encode(struct.pack(">I", zlib.crc32(
        base64.b64decode(crc(parts[0])) + base64.b64decode(crc(parts[1]))))).decode() + "-2"
    s, _, b = complete([crc(p) for p in parts], {"x-amz-checksum-crc32": crc(b"x") + "-2"})
    check(s == 400 and b"<Code>BadDigest</Code>" in b,
          "Complete with another composite checksum in x-amz-checksum-crc32: %d %r" % (s, b))
    s, _, b = complete([crc(p) for p in parts], {"x-amz-checksum-crc32": want})
    check(s == 200 and ("<ChecksumCRC32>%s</ChecksumCRC32>" % want).encode() in b and
          b"<ChecksumType>COMPOSITE</ChecksumType>" in b,
          "Complete gives the composite checksum %s: %d %r" % (want, s, b))
    _, h, _ = call("HEAD", "/sums/mp", {"x-amz-checksum-mode": "ENABLED"})
    check(h.get("x-amz-checksum-crc32") == want and h.get("x-amz-checksum-type") == "COMPOSITE",
          "HEAD of the upload returns the composite checksum: %r" % h)

    # FULL_OBJECT: the CRC of the whole object, from the parts' CRCs and lengths.
    s, h, b = call("POST", "/sums/full?uploads", {"x-amz-checksum-algorithm": "CRC32",
                                                 "x-amz-checksum-type": "FULL_OBJECT"})
    check(s == 200 and h.get("x-amz-checksum-type") == "FULL_OBJECT",
          "CreateMultipartUpload FULL_OBJECT: %d %r" % (s, h))
    full = re.search(rb"<UploadId>([^<]+)<", b).group(1).decode()
    pieces = [b"q" * (5 << 20), b"r" * (5 << 20), b"end"]
    full_etags = []
    for n, piece in enumerate(pieces, 1):
        _, h, _ = call("PUT", "/sums/full?partNumber=%d&uploadId=%s" % (n, full),
                       {"x-amz-checksum-crc32": crc(piece)}, piece)
        full_etags.append(h.get("etag"))
    doc = ("<CompleteMultipartUpload>" + "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag><ChecksumCRC32>%s</ChecksumCRC32>"
        "</Part>" % (n, full_etags[n - 1], crc(piece)) for n, piece in enumerate(pieces, 1)) +
        "</CompleteMultipartUpload>").encode()
    whole = crc(b"".join(pieces))
    s, _, b = call("POST", "/sums/full?uploadId=" + full, {"x-amz-checksum-crc32": crc(b"x")},
                   doc)
    check(s == 400 and b"<Code>BadDigest</Code>" in b,
          "Complete FULL_OBJECT with another checksum: %d %r" % (s, b))
    s, _, b = call("POST", "/sums/full?uploadId=" + full, {"x-amz-checksum-crc32": whole}, doc)
    check(s == 200 and ("<ChecksumCRC32>%s</ChecksumCRC32>" % whole).encode() in b and
          b"<ChecksumType>FULL_OBJECT</ChecksumType>" in b,
          "Complete FULL_OBJECT gives the whole object's CRC32 %s: %d %r" % (whole, s, b))
    _, h, _ = call("HEAD", "/sums/full", {"x-amz-checksum-mode": "ENABLED"})
    check(h.get("x-amz-checksum-crc32") == whole and h.get("x-amz-checksum-type") == "FULL_OBJECT",
          "HEAD of a FULL_OBJECT upload: %r" % h)
    for key in ("o", "mp", "full"):
        call("DELETE", "/sums/" + key)
    call("DELETE", "/sums")


def tagging(pair):
    """Apus only (Swift's s3api keeps no tags: GET answers an empty set, PUT is NotImplemented):
    bucket and object tags kept, with S3's limits; x-amz-tagging on PUT, copies (the tagging
    directive) and multipart uploads; a tag change keeps the object's data, metadata, content
    headers and expiry; versions."""
    port = pair.ports["apus"]
    s3 = boto3_client(port)
    call = apus_caller(port)

    def tags(n, key="k%d", value="v%d"):
        def fill(form, i):
            return form % i if "%" in form else form
        return {"TagSet": [{"Key": fill(key, i), "Value": fill(value, i)} for i in range(n)]}

    s3.create_bucket(Bucket="tags")
    check(client_error(s3.get_bucket_tagging, Bucket="tags") == (404, "NoSuchTagSet"),
          "GetBucketTagging of an untagged bucket: NoSuchTagSet")
    r = s3.put_bucket_tagging(Bucket="tags", Tagging=tags(50))
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 204, "PutBucketTagging, 50 tags: 204")
    check(s3.get_bucket_tagging(Bucket="tags")["TagSet"] ==
          sorted(tags(50)["TagSet"], key=lambda t: t["Key"]),
          "GetBucketTagging returns the 50 tags, sorted by key")
    check(client_error(s3.put_bucket_tagging, Bucket="tags", Tagging=tags(51)) == (400, "InvalidTag"),
          "PutBucketTagging, 51 tags: InvalidTag")
    check(len(s3.get_bucket_tagging(Bucket="tags")["TagSet"]) == 50,
          "a refused PutBucketTagging changes nothing")
    r = s3.delete_bucket_tagging(Bucket="tags")
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 204, "DeleteBucketTagging: 204")
    check(client_error(s3.get_bucket_tagging, Bucket="tags") == (404, "NoSuchTagSet"),
          "GetBucketTagging after DeleteBucketTagging: NoSuchTagSet")
    check(client_error(s3.get_bucket_tagging, Bucket="nosuchbucket") == (404, "NoSuchBucket"),
          "GetBucketTagging of a missing bucket: NoSuchBucket")

    # X-Delete-At (Swift's, passed on as s3api passes headers) is an expiry a tag change keeps.
    delete_at = str(int(time.time()) + 86400)
    s, _, _ = call("PUT", "/tags/o", {"x-amz-tagging": "c=&a=1&b=two%20words",
                                      "x-amz-meta-color": "blue", "X-Delete-At": delete_at,
                                      "Content-Disposition": "attachment",
                                      "Cache-Control": "no-cache"}, b"tagged body")
    check(s == 200, "PUT with x-amz-tagging: %d" % s)
    got = s3.get_object_tagging(Bucket="tags", Key="o")["TagSet"]
    check(got == [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "two words"},
                  {"Key": "c", "Value": ""}], "GetObjectTagging after a tagged PUT: %r" % got)
    _, h, _ = call("HEAD", "/tags/o")
    check(h.get("x-amz-tagging-count") == "3", "HEAD says x-amz-tagging-count 3: %r" % h)
    before = s3.get_object(Bucket="tags", Key="o")
    body = before["Body"].read()
    s, _, b = call("PUT", "/tags/bad", {"x-amz-tagging": "a=1&a=2"}, b"x")
    check(s == 400 and b"<Code>InvalidTag</Code>" in b, "PUT with a key tagged twice: %d" % s)
    check(client_error(s3.head_object, Bucket="tags", Key="bad")[0] == 404,
          "a PUT with bad tags stores nothing")
    r = s3.put_object_tagging(Bucket="tags", Key="o", Tagging=tags(10))
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "PutObjectTagging, 10 tags: 200")
    check(s3.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == tags(10)["TagSet"],
          "GetObjectTagging returns the 10 tags")
    after = s3.get_object(Bucket="tags", Key="o")
    check(after["Body"].read() == body and after["ETag"] == before["ETag"] and
          after["Metadata"] == {"color": "blue"} and
          after["ContentDisposition"] == "attachment" and after["CacheControl"] == "no-cache",
          "PutObjectTagging keeps the data, ETag, metadata and content headers: %r" %
          {k: v for k, v in after.items() if k != "Body"})
    _, h, _ = pair.swift_api("HEAD", "/tags/o", side="apus")
    check(h.get("x-delete-at") == delete_at, "PutObjectTagging keeps X-Delete-At: %r" % h)
    for what, tagset in (("11 tags", tags(11)),
                         ("a 129-character key", tags(1, key="k" * 129)),
                         ("a 257-character value", tags(1, value="v" * 257)),
                         ("an aws: key", tags(1, key="aws:x%d")),
                         ("a key twice", {"TagSet": [{"Key": "k", "Value": "1"},
                                                     {"Key": "k", "Value": "2"}]})):
        check(client_error(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=tagset) ==
              (400, "InvalidTag"), "PutObjectTagging with %s: InvalidTag" % what)
    ok = tags(1, key="\u00e9" * 128, value="\u00e9" * 256)  # characters, not bytes
    check(client_error(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=ok) == (200, None),
          "PutObjectTagging with a 128-character key and a 256-character value")
    check(s3.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == ok["TagSet"],
          "non-ASCII tags come back as sent")
    s, _, b = call("PUT", "/tags/o?tagging", {}, b"<Tagging><Tag/></Tagging>")
    check(s == 400 and b"<Code>MalformedXML</Code>" in b, "PutObjectTagging malformed: %d" % s)
    check(client_error(s3.get_object_tagging, Bucket="tags", Key="nokey") == (404, "NoSuchKey"),
          "GetObjectTagging of a missing key: NoSuchKey")
    check(client_error(s3.put_object_tagging, Bucket="tags", Key="nokey", Tagging=tags(1)) ==
          (404, "NoSuchKey"), "PutObjectTagging of a missing key: NoSuchKey")
    r = s3.delete_object_tagging(Bucket="tags", Key="o")
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 204, "DeleteObjectTagging: 204")
    check(s3.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == [],
          "no tags after DeleteObjectTagging")
    _, h, _ = call("HEAD", "/tags/o")
    check("x-amz-tagging-count" not in h and h.get("x-amz-meta-color") == "blue",
          "HEAD after DeleteObjectTagging: no count, metadata kept: %r" % h)

    s3.put_object_tagging(Bucket="tags", Key="o", Tagging=tags(2))
    s3.copy_object(Bucket="tags", Key="copy", CopySource="tags/o")
    check(s3.get_object_tagging(Bucket="tags", Key="copy")["TagSet"] == tags(2)["TagSet"],
          "CopyObject copies the tags")
    s3.copy_object(Bucket="tags", Key="copy", CopySource="tags/o", MetadataDirective="REPLACE")
    check(s3.get_object_tagging(Bucket="tags", Key="copy")["TagSet"] == tags(2)["TagSet"],
          "CopyObject replacing the metadata still copies the tags")
    s3.copy_object(Bucket="tags", Key="copy", CopySource="tags/o", TaggingDirective="REPLACE",
                   Tagging="new=tag")
    check(s3.get_object_tagging(Bucket="tags", Key="copy")["TagSet"] ==
          [{"Key": "new", "Value": "tag"}], "CopyObject with TaggingDirective REPLACE")
    s3.copy_object(Bucket="tags", Key="copy", CopySource="tags/o", TaggingDirective="REPLACE")
    check(s3.get_object_tagging(Bucket="tags", Key="copy")["TagSet"] == [],
          "CopyObject with TaggingDirective REPLACE and no tags")
    s, _, b = call("PUT", "/tags/copy", {"x-amz-copy-source": "/tags/o",
                                         "x-amz-tagging-directive": "MOVE"})
    check(s == 400 and b"<Code>InvalidArgument</Code>" in b, "a bad tagging directive: %d" % s)

    up = s3.create_multipart_upload(Bucket="tags", Key="mp", Tagging="x=1&y=2")["UploadId"]
    part = s3.upload_part(Bucket="tags", Key="mp", UploadId=up, PartNumber=1, Body=b"part")
    s3.complete_multipart_upload(Bucket="tags", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    check(s3.get_object_tagging(Bucket="tags", Key="mp")["TagSet"] ==
          [{"Key": "x", "Value": "1"}, {"Key": "y", "Value": "2"}],
          "a multipart upload created with tags has them")
    r = s3.delete_object_tagging(Bucket="tags", Key="mp")
    check(s3.get_object(Bucket="tags", Key="mp")["Body"].read() == b"part",
          "a multipart upload's tags go, its data stays")

    s3.create_bucket(Bucket="tagsv")
    s3.put_bucket_versioning(Bucket="tagsv", VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket="tagsv", Key="o", Body=b"1", Tagging="v=1")["VersionId"]
    v2 = s3.put_object(Bucket="tagsv", Key="o", Body=b"2")["VersionId"]
    r = s3.put_object_tagging(Bucket="tagsv", Key="o", Tagging=tags(1))
    check(r.get("VersionId") == v2, "PutObjectTagging names the current version: %r" % r)
    check(s3.get_object_tagging(Bucket="tagsv", Key="o", VersionId=v1)["TagSet"] ==
          [{"Key": "v", "Value": "1"}], "GetObjectTagging of an older version")
    check(s3.get_object_tagging(Bucket="tagsv", Key="o")["TagSet"] == tags(1)["TagSet"],
          "GetObjectTagging of the current version")
    check(client_error(s3.put_object_tagging, Bucket="tagsv", Key="o", VersionId=v1,
                Tagging=tags(1)) == (501, "NotImplemented"),
          "PutObjectTagging of an older version: NotImplemented")
    check(s3.get_object(Bucket="tagsv", Key="o")["Body"].read() == b"2",
          "tagging the current version keeps it current")
    for v in (v1, v2):
        s3.delete_object(Bucket="tagsv", Key="o", VersionId=v)
    s3.delete_bucket(Bucket="tagsv")
    for key in ("o", "copy", "mp"):
        s3.delete_object(Bucket="tags", Key=key)
    s3.delete_bucket(Bucket="tags")


def delete_markers(pair):
    """Apus only (Swift's s3api says nothing of delete markers here): a GET or HEAD of a key
    whose newest version is a delete marker says x-amz-delete-marker: true with the marker's
    version id, of any other missing key false; DeleteObjects reports the markers it makes and
    the versions it was asked to delete, as S3 does."""
    port = pair.ports["apus"]
    s3 = boto3_client(port)

    def missing_headers(bucket, key):
        try:
            s3.head_object(Bucket=bucket, Key=key)
        except s3.exceptions.ClientError as e:
            return e.response["ResponseMetadata"]["HTTPHeaders"]
        return {}

    s3.create_bucket(Bucket="markers")
    s3.put_object(Bucket="markers", Key="k", Body=b"x")
    s3.delete_object(Bucket="markers", Key="k")
    h = missing_headers("markers", "k")
    check(h.get("x-amz-delete-marker") == "false", "unversioned bucket: no marker: %r" % h)
    s3.put_bucket_versioning(Bucket="markers", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="markers", Key="k", Body=b"x")
    marker = s3.delete_object(Bucket="markers", Key="k")
    h = missing_headers("markers", "k")
    check(h.get("x-amz-delete-marker") == "true" and
          h.get("x-amz-version-id") == marker.get("VersionId"),
          "HEAD behind a delete marker: %r (marker %r)" % (h, marker))
    h = missing_headers("markers", "never")
    check(h.get("x-amz-delete-marker") == "false", "versioned bucket, key never written: %r" % h)
    r = s3.delete_objects(Bucket="markers", Delete={"Objects": [{"Key": "new"}]})
    d = r["Deleted"][0]
    check(d.get("DeleteMarker") is True and d.get("DeleteMarkerVersionId"),
          "DeleteObjects makes and reports a delete marker: %r" % r["Deleted"])
    r = s3.delete_objects(Bucket="markers", Delete={"Objects": [
        {"Key": "new", "VersionId": d["DeleteMarkerVersionId"]}]})
    check(r["Deleted"] == [{"Key": "new", "VersionId": d["DeleteMarkerVersionId"],
                            "DeleteMarker": True,
                            "DeleteMarkerVersionId": d["DeleteMarkerVersionId"]}],
          "DeleteObjects of a delete marker by its id: %r" % r["Deleted"])
    versions = s3.list_object_versions(Bucket="markers")
    for v in versions.get("Versions", []) + versions.get("DeleteMarkers", []):
        s3.delete_object(Bucket="markers", Key=v["Key"], VersionId=v["VersionId"])
    s3.delete_bucket(Bucket="markers")


def list_buckets_pages(pair):
    """Apus only (Swift 2.30.1's s3api answers every bucket at once): ListBuckets with prefix,
    max-buckets and continuation-token, as S3 pages it."""
    port = pair.ports["apus"]
    call = apus_caller(port)

    def names(body):
        return re.findall(rb"<Name>([^<]+)</Name>", body)

    for b in ("page-a", "page-b", "page-c"):
        call("PUT", "/" + b)
    s, _, b = call("GET", "/?prefix=page-&max-buckets=2")
    token = re.search(rb"<ContinuationToken>([^<]+)<", b)
    check(s == 200 and names(b) == [b"page-a", b"page-b"] and token and
          b"<Prefix>page-</Prefix>" in b, "ListBuckets first page: %d %r" % (s, b))
    s, _, b = call("GET", "/?prefix=page-&max-buckets=2&continuation-token=" +
                   quote(token.group(1).decode(), safe=""))
    check(s == 200 and names(b) == [b"page-c"] and b"<ContinuationToken>" not in b,
          "ListBuckets last page: %d %r" % (s, b))
    s, _, b = call("GET", "/?prefix=page-")
    check(s == 200 and names(b) == [b"page-a", b"page-b", b"page-c"] and
          b"<ContinuationToken>" not in b, "ListBuckets with a prefix: %d %r" % (s, b))
    for q in ("max-buckets=0", "max-buckets=10001", "max-buckets=x", "continuation-token=%25"):
        s, _, b = call("GET", "/?" + q)
        check(s == 400 and b"<Code>InvalidArgument</Code>" in b, "ListBuckets ?%s: %d" % (q, s))
    for b in ("page-a", "page-b", "page-c"):
        call("DELETE", "/" + b)


def part_reads(pair):
    """Apus only (Swift 2.30.1's s3api answers 405): GetObject and HeadObject of one part
    (?partNumber), as AWS and Swift 2.36 serve them: a multipart upload's parts by their index
    in the completed object, with x-amz-mp-parts-count; any other object as its part 1; 416
    InvalidPartNumber past the last part; no Range with it."""
    port = pair.ports["apus"]
    s3 = boto3_client(port)

    s3.create_bucket(Bucket="parts")
    # Parts 1 and 3 uploaded (2 never): the object's parts are 1 and 2.
    up = s3.create_multipart_upload(Bucket="parts", Key="mp")["UploadId"]
    first, last = b"a" * (5 << 20), b"last part"
    done = []
    for n, body in ((1, first), (3, last)):
        etag = s3.upload_part(Bucket="parts", Key="mp", UploadId=up, PartNumber=n,
                              Body=body)["ETag"]
        done.append({"PartNumber": n, "ETag": etag})
    whole = s3.complete_multipart_upload(Bucket="parts", Key="mp", UploadId=up,
                                         MultipartUpload={"Parts": done})["ETag"]
    for n, body, start in ((1, first, 0), (2, last, len(first))):
        got = s3.get_object(Bucket="parts", Key="mp", PartNumber=n)
        check(got["Body"].read() == body and got["PartsCount"] == 2 and got["ETag"] == whole and
              got["ContentRange"] == "bytes %d-%d/%d" % (start, start + len(body) - 1,
                                                         len(first) + len(last)),
              "GetObject part %d: %r" % (n, {k: v for k, v in got.items() if k != "Body"}))
        head = s3.head_object(Bucket="parts", Key="mp", PartNumber=n)
        check(head["ContentLength"] == len(body) and head["PartsCount"] == 2 and
              head["ResponseMetadata"]["HTTPStatusCode"] == 206,
              "HeadObject part %d: %r" % (n, head))
    check(client_error(s3.get_object, Bucket="parts", Key="mp", PartNumber=3) ==
          (416, "InvalidPartNumber"), "GetObject past the last part: InvalidPartNumber")
    check(client_error(s3.get_object, Bucket="parts", Key="mp", PartNumber=1, Range="bytes=0-1") ==
          (400, "InvalidRequest"), "GetObject with a part and a Range: InvalidRequest")
    check(client_error(s3.get_object, Bucket="parts", Key="mp", PartNumber=10001) ==
          (400, "InvalidArgument"), "GetObject part 10001: InvalidArgument")
    s3.put_object(Bucket="parts", Key="plain", Body=b"plain body")
    got = s3.get_object(Bucket="parts", Key="plain", PartNumber=1)
    check(got["Body"].read() == b"plain body" and "PartsCount" not in got and
          got["ContentRange"] == "bytes 0-9/10", "GetObject part 1 of a plain object: %r" %
          {k: v for k, v in got.items() if k != "Body"})
    check(client_error(s3.get_object, Bucket="parts", Key="plain", PartNumber=2) ==
          (416, "InvalidPartNumber"), "GetObject part 2 of a plain object: InvalidPartNumber")
    check(client_error(s3.get_object, Bucket="parts", Key="none", PartNumber=1) ==
          (404, "NoSuchKey"), "GetObject part of a missing key: NoSuchKey")
    for key in ("mp", "plain"):
        s3.delete_object(Bucket="parts", Key=key)
    s3.delete_bucket(Bucket="parts")


def conditional_puts(pair):
    """Apus only (Swift 2.30.1's s3api refuses conditional PUTs): PutObject with
    "If-None-Match: *" (only if there is no object, as Swift 2.36 and AWS) and If-Match with
    ETags (only if the object is one of them, NoSuchKey without an object, as AWS); a refused
    PUT leaves the object as it was. Other conditions are NotImplemented, as in Swift and AWS."""
    port = pair.ports["apus"]
    call = apus_caller(port)

    def body_of(key):
        return call("GET", "/conds/" + key)[2]

    call("PUT", "/conds")
    s, _, _ = call("PUT", "/conds/new", {"If-None-Match": "*"}, b"first")
    check(s == 200 and body_of("new") == b"first", "PUT If-None-Match * of no object: %d" % s)
    s, _, b = call("PUT", "/conds/new", {"If-None-Match": "*"}, b"second")
    check(s == 412 and b"<Code>PreconditionFailed</Code>" in b and body_of("new") == b"first",
          "PUT If-None-Match * of an object: %d %r" % (s, b))
    etag = hashlib.md5(b"first").hexdigest()
    for what, headers, status, left in (
            ("If-Match its etag", {"If-Match": etag}, 200, b"2"),
            ("If-Match its quoted etag", {"If-Match": '"%s"' % hashlib.md5(b"2").hexdigest()},
             200, b"3"),
            ("If-Match another etag", {"If-Match": '"0123"'}, 412, b"3"),
            ("If-Match a list with its etag",
             {"If-Match": '"0123", "%s"' % hashlib.md5(b"3").hexdigest()}, 200, b"4"),
            ("If-Match *", {"If-Match": "*"}, 501, b"4"),
            ("If-None-Match its etag", {"If-None-Match": hashlib.md5(b"4").hexdigest()}, 501,
             b"4"),
            ("If-None-Match another etag", {"If-None-Match": "0123"}, 501, b"4")):
        s, _, b = call("PUT", "/conds/new", headers, left if status == 200 else b"refused")
        check(s == status and body_of("new") == left,
              "PUT %s: %d (want %d), object %r" % (what, s, status, body_of("new")))
    s, _, b = call("PUT", "/conds/none", {"If-Match": etag}, b"x")
    check(s == 404 and b"<Code>NoSuchKey</Code>" in b and call("HEAD", "/conds/none")[0] == 404,
          "PUT If-Match of no object: %d %r" % (s, b))
    # A multipart upload's ETag is the S3 one.
    s, _, b = call("POST", "/conds/mp?uploads")
    upload = re.search(rb"<UploadId>([^<]+)<", b).group(1).decode()
    _, h, _ = call("PUT", "/conds/mp?partNumber=1&uploadId=" + upload, {}, b"part")
    done = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
            "</CompleteMultipartUpload>" % h["etag"]).encode()
    s, _, b = call("POST", "/conds/mp?uploadId=" + upload, {}, done)
    mp_etag = re.search(rb"<ETag>([^<]+)<", b).group(1).decode()
    s, _, _ = call("PUT", "/conds/mp", {"If-Match": mp_etag}, b"replaced")
    check(s == 200 and body_of("mp") == b"replaced",
          "PUT If-Match a multipart upload's ETag %s: %d" % (mp_etag, s))
    for what, path, headers in (("UploadPart", "/conds/x?partNumber=1&uploadId=u",
                                 {"If-None-Match": "*"}),
                                ("CopyObject", "/conds/copy", {"If-Match": "*",
                                                               "x-amz-copy-source": "/conds/new"}),
                                ("PutObject If-Unmodified-Since", "/conds/new",
                                 {"If-Unmodified-Since": "Wed, 01 Dec 2021 00:00:00 GMT"})):
        s, _, b = call("PUT", path, headers, b"x")
        check(s == 501 and b"<Code>NotImplemented</Code>" in b,
              "%s with a condition: NotImplemented: %d %r" % (what, s, b))
    for key in ("new", "mp"):
        call("DELETE", "/conds/" + key)
    call("DELETE", "/conds")


def auth(pair):
    pair.both("Version 4 presigned ListBuckets", "GET", "/", kind="v4q")
    pair.both("Version 2 ListBuckets", "GET", "/", kind="v2")
    pair.both("Version 2 presigned ListBuckets", "GET", "/", kind="v2q")
    # The detail elements of SignatureDoesNotMatch differ in what Swift 2.30.1 puts in them
    # (string-to-sign bytes and canonical request); the code and message must agree.
    for kind in ("v4", "v2"):
        s, _, b = pair.both("wrong secret (%s)" % kind, "GET", "/", compare_body=False,
                            creds=Credentials("test:tester", "wrong"), kind=kind)
        check(b"<StringToSign>" in b and b"<AWSAccessKeyId>" in b,
              "wrong secret (%s) names what was signed: %r" % (kind, b))
        check(s == 403 and b"<Code>SignatureDoesNotMatch</Code>" in b,
              "wrong secret (%s): %d %r" % (kind, s, b))
    s, _, b = pair.both("unknown access key", "GET", "/", compare_body=False,
                        creds=Credentials("nobody:none", "x"))
    check(s == 403, "unknown access key: %d %r" % (s, b))
    old = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
    pair.both("skewed date", "GET", "/", when=old)
    pair.both("expired presigned URL", "GET", "/", kind="v4q", when=old, expires=60)
    pair.both("expired Version 2 presigned URL", "GET", "/", kind="v2q", when=old, expires=60)
    # botocore signs every x-amz-* header it is given; add one after signing.
    for side, port in pair.ports.items():
        target, h = signed(port, "PUT", "/bucket9", creds=Credentials(*USERS[side][:2]))
        h["x-amz-meta-sneaky"] = "1"
        s, _, b = send(port, "PUT", target, h)
        check(s == 403 and b"<HeadersNotSigned>x-amz-meta-sneaky</HeadersNotSigned>" in b,
              "%s: unsigned x-amz-meta header: %d %r" % (side, s, b))
    # Swift's API is untouched.
    s, _, _ = pair.swift_api("GET", "?format=json", side="apus")
    check(s == 200, "Swift API listing through an s3api pipeline: %d" % s)


def with_boto3(port):
    s3 = boto3_client(port)
    s3.create_bucket(Bucket="boto-bucket")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    check("boto-bucket" in names and "Not_S3_Name" not in names, "boto3 list_buckets: %r" % names)
    s3.head_bucket(Bucket="boto-bucket")
    try:
        s3.create_bucket(Bucket="boto-bucket")
        check(False, "boto3 create_bucket twice succeeded")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    data = os.urandom(3 * 1024 * 1024 + 17)
    s3.put_object(Bucket="boto-bucket", Key="dir/blob", Body=data, Metadata={"k": "v"},
                  ContentType="application/x-blob")
    got = s3.get_object(Bucket="boto-bucket", Key="dir/blob")
    check(got["Body"].read() == data and got["Metadata"] == {"k": "v"} and
          got["ContentType"] == "application/x-blob" and
          got["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(),
          "boto3 get_object: %r" % {k: v for k, v in got.items() if k != "Body"})
    part = s3.get_object(Bucket="boto-bucket", Key="dir/blob", Range="bytes=100-199")
    check(part["Body"].read() == data[100:200] and part["ContentRange"] ==
          "bytes 100-199/%d" % len(data), "boto3 ranged get_object")
    head = s3.head_object(Bucket="boto-bucket", Key="dir/blob")
    check(head["ContentLength"] == len(data), "boto3 head_object: %r" % head)
    listed = s3.list_objects_v2(Bucket="boto-bucket", Prefix="dir/")
    check([o["Key"] for o in listed.get("Contents", [])] == ["dir/blob"],
          "boto3 list_objects_v2: %r" % listed)
    s3.delete_object(Bucket="boto-bucket", Key="dir/blob")
    try:
        s3.get_object(Bucket="boto-bucket", Key="dir/blob")
        check(False, "boto3 get_object of a deleted key succeeded")
    except s3.exceptions.NoSuchKey:
        pass
    s3.delete_bucket(Bucket="boto-bucket")
    try:
        s3.head_bucket(Bucket="boto-bucket")
        check(False, "boto3 head_bucket of a deleted bucket succeeded")
    except s3.exceptions.ClientError as e:
        check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 404,
              "boto3 head_bucket of a deleted bucket: %r" % e.response)


def shared_info_cache(pair):
    """A stock proxy that lists a missing account (account_autocreate) caches it in memcached
    as existing but not really (account_really_exists false); an Apus proxy's container PUT
    must then create the account rather than answer 404. (Found by this test's first run.)"""
    _, h, _ = send(pair.ports["apus"], "GET", "/auth/v1.0",
                   {"X-Auth-User": "test:tester", "X-Auth-Key": "testing", "Host": "x"})
    token = {"X-Auth-Token": h["x-auth-token"], "Host": "x"}
    # test:tester is an .admin, so it owns AUTH_fresh too (tempauth's reseller-prefixed groups
    # cover only its own account: use the storage URL form it owns instead).
    s, _, _ = send(pair.ports["swift"], "GET", "/v1/AUTH_test?format=json", token)
    check(s == 200, "stock proxy lists the account: %d" % s)
    s, _, b = send(pair.ports["apus"], "PUT", "/v1/AUTH_test/after-stock-listing", token)
    check(s == 201, "Apus container PUT after a stock proxy cached a made-up account: %d %r"
          % (s, b))
    send(pair.ports["apus"], "DELETE", "/v1/AUTH_test/after-stock-listing", token)


def main():
    with procs.TempDir("apus-s3api-") as root, procs.Processes() as ps:
        cluster = Cluster(BIN, root, ps)
        apus = cluster.start_proxy("proxy-s3api", pipeline=PIPELINE, filters=FILTERS)
        swift = cluster.start_stock_proxy("proxy-s3api")
        pair = Pair({"apus": apus, "swift": swift})
        shared_info_cache(pair)
        buckets(pair)
        listings(pair)
        objects(pair)
        streaming(pair)
        checksums(pair)
        multi_delete(pair)
        acls(pair)
        versioning(pair)
        uploads(pair)
        multipart(pair)
        stored_checksums(pair)
        tagging(pair)
        conditional_puts(pair)
        delete_markers(pair)
        list_buckets_pages(pair)
        part_reads(pair)
        # Without object versioning in the pipeline, versioning cannot be turned on.
        plain = cluster.start_proxy("proxy-s3api-plain",
                                    pipeline=PIPELINE.replace(" versioned_writes", ""),
                                    filters=FILTERS)
        target, h = signed(plain, "PUT", "/versioned?versioning",
                           body=b"<VersioningConfiguration><Status>Enabled</Status>"
                                b"</VersioningConfiguration>",
                           creds=Credentials(*USERS["apus"][:2]))
        s, _, b = send(plain, "PUT", target, h, b"<VersioningConfiguration><Status>Enabled"
                                                b"</Status></VersioningConfiguration>")
        check(s == 501 and b"<Code>NotImplemented</Code>" in b,
              "versioning PUT without object_versioning: %d %r" % (s, b))
        auth(pair)
        with_boto3(apus)
        acl_filters = FILTERS.replace("use = egg:swift#s3api\n",
                                      "use = egg:swift#s3api\ns3_acl = true\n"
                                      "check_bucket_owner = true\n")
        acl_filters = ("user_test_reader = readkey\nuser_test2_reader = readkey\n" + acl_filters)
        apus_acl = cluster.start_proxy("proxy-s3acl", pipeline=PIPELINE, filters=acl_filters)
        swift_acl = cluster.start_stock_proxy("proxy-s3acl")
        s3_acls(Pair({"apus": apus_acl, "swift": swift_acl}))
        global_namespace(cluster.start_proxy(
            "proxy-s3global", pipeline=PIPELINE,
            filters=acl_filters.replace(
                "s3_acl = true\n", "s3_acl = true\nglobal_bucket_namespace = true\n"
                "cors_preflight_allow_origin = https://ops.example\n")))
    if failures:
        print("%d failure(s) of %d checks" % (len(failures), checked[0]))
        sys.exit(1)
    print("s3api: OK (%d checks)" % checked[0])


if __name__ == "__main__":
    main()
