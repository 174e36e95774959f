#!/usr/bin/python3
"""Writes reference values computed by stock Swift (python3-swift) for Apus' unit tests.

Usage: /usr/bin/python3 swift_vectors.py <outfile>

Every value is produced by calling Swift's own code (swift.common.utils, swift.common.swob,
swift.common.ring) on inputs chosen here, some fixed and many drawn from a seeded generator, so
runs are reproducible. The C++ tests (tests/unit/common/*_test.cpp) recompute each line with
Apus and compare.

File format: one vector per line, fields separated by tabs, the first field naming the kind.
Free-form inputs (names, header values, timestamp strings) are hex-encoded so tabs, newlines
and non-ASCII bytes survive; "-" stands for "absent". Kinds:

  hash      prefix suffix account container object hexdigest parts   (byte fields hex-encoded;
            parts = "power:partition,..."; hexdigest "ERR" when Swift raises)
  ts        input normal internal short isoformat ceil raw offset    (input hex-encoded)
  ts_err    input
  cmp       a_internal b_internal sign                               (sign of a - b: -1, 0, 1)
  enc       t1 t2 t3 explicit encoded                                (timestamps in internal form)
  dec       encoded explicit t1 t2 t3                                (encoded hex-encoded)
  dec_err   encoded explicit
  delete_at value normalized
  httpdate  epoch_seconds formatted
  parsedate input epoch_seconds                                       (input hex-encoded)
  range     header length status ranges          (header hex; ranges "start-end,..." half-open)
  cond      status etag last_modified if_match if_none_match if_modified_since
            if_unmodified_since result_status                         (header values hex)

Timestamps built from text with more than 5 decimals keep Swift's unrounded float in memory,
so Swift's own .raw and ceil() for them can disagree with its text form. Apus stores only
what the text form says, so "ceil" and "raw" here come from Timestamp(ts.internal), the value
every other Swift process sees.
"""

import calendar
import os
import random
import struct
import time
import sys

import swift.common.swob as swob
import swift.common.utils as utils
from swift.common.ring import Ring

SEED = 20240611
PART_POWERS = (0, 1, 7, 10, 16, 18, 23, 31, 32)


def hx(data):
    if data is None:
        return '-'
    if isinstance(data, str):
        data = data.encode('latin-1')
    return data.hex()


class Out(object):
    def __init__(self):
        self.lines = []

    def add(self, *fields):
        for f in fields:
            assert '\t' not in str(f) and '\n' not in str(f), f
        self.lines.append('\t'.join(str(f) for f in fields))


# ---------------------------------------------------------------- hash_path

def ring_for(power):
    # A Ring without a file: get_part() needs only the shift and a reload time.
    ring = Ring.__new__(Ring)
    ring._part_shift = 32 - power
    ring._rtime = float('inf')
    return ring


RINGS = [(p, ring_for(p)) for p in PART_POWERS]

NAME_ALPHABET = (
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
    '/////-_.~ %+?#&=:;,\'"\\\t\n'
    '\u00e9\u00fc\u00df\u4e2d\u6587\u0416\u05d0\u0627\U0001f600\u2603\u00a0\u200b')


def random_name(rng, max_len):
    n = rng.choice([1, 1, 2, 3, 5, 8, 13, 30, 64, max_len])
    return ''.join(rng.choices(NAME_ALPHABET, k=min(n, max_len)))


def encode_name(name):
    return name if isinstance(name, bytes) else name.encode('utf-8')


def hash_vectors(out, rng):
    secrets = [
        (b'', b'changeme'),
        (b'changeme', b''),
        (b'pre', b'suf'),
        (b'\xe9t\xe9/\x00', b'suf\tfix/'),
        (bytes(range(1, 256)), b'x' * 300),
    ]
    fixed = [
        ('a', '', ''), ('AUTH_test', '', ''), ('AUTH_test', 'c', ''),
        ('AUTH_test', 'c', 'o'), ('AUTH_test', 'c', 'a/b/c//d/'),
        ('', '', ''), ('', 'c', ''), ('', 'c', 'o'), ('a', '', 'o'),
        ('/', '/', '/'), ('a', 'c', '/' * 100),
        ('AUTH_\u00e9', '\u4e2d\u6587', '\U0001f600 obj'),
        ('a', 'c', 'o' * 1024), ('a' * 256, 'c' * 256, 'o' * 1024),
        (b'AUTH_\xff\xfe', b'c\x80', b'o\xc3('),  # not UTF-8: Swift hashes bytes as given
        ('a', 'c', 'tab\there\nnewline'),
    ]
    for prefix, suffix in secrets:
        utils.HASH_PATH_PREFIX = prefix
        utils.HASH_PATH_SUFFIX = suffix
        cases = list(fixed)
        for _ in range(250):
            a = random_name(rng, 256)
            c = random_name(rng, 256) if rng.random() < 0.8 else ''
            o = random_name(rng, 1024) if c and rng.random() < 0.7 else ''
            cases.append((a, c, o))
        for a, c, o in cases:
            try:
                digest = utils.hash_path(a, c or None, o or None)
                raw = utils.hash_path(a, c or None, o or None, raw_digest=True)
                assert raw.hex() == digest
                parts = ','.join('%d:%d' % (p, r.get_part(a, c or None, o or None))
                                 for p, r in RINGS)
                # Cross-check the ring against the documented formula.
                top = struct.unpack_from('>I', raw)[0]
                assert all(r.get_part(a, c or None, o or None) == top >> (32 - p)
                           for p, r in RINGS)
            except ValueError:
                digest, parts = 'ERR', '-'
            out.add('hash', hx(prefix), hx(suffix), hx(encode_name(a)),
                    hx(encode_name(c)), hx(encode_name(o)), digest, parts)


# ---------------------------------------------------------------- Timestamp

def ts_line(out, text):
    try:
        t = utils.Timestamp(text)
        normal, internal, short, iso = t.normal, t.internal, t.short, t.isoformat
        rt = utils.Timestamp(t.internal)
        assert rt.normal == normal and rt.internal == internal
    except Exception:  # ValueError, or OverflowError for 'inf'-like floats
        out.add('ts_err', hx(text))
        return None
    out.add('ts', hx(text), normal, internal, short, iso, rt.ceil(), rt.raw, t.offset)
    return t


def random_timestamp_text(rng):
    whole = rng.choice([
        rng.randrange(0, 10 ** 10), rng.randrange(0, 10 ** 10), rng.randrange(0, 1000),
        rng.randrange(1400000000, 1800000000), 9999999999, 0])
    kind = rng.random()
    if kind < 0.15:
        text = str(whole)
    elif kind < 0.55:
        text = '%d.%s' % (whole, ''.join(rng.choice('0123456789')
                                         for _ in range(rng.randrange(0, 10))))
    elif kind < 0.7:
        # Exactly halfway at the 6th decimal: where rounding rules show.
        text = '%d.%05d5' % (whole, rng.randrange(0, 100000))
    elif kind < 0.85:
        text = repr(rng.uniform(0, 1e10))
    else:
        text = '%.*e' % (rng.randrange(0, 15), whole + rng.random())
    if rng.random() < 0.1:
        text = '0' * rng.randrange(1, 4) + text
    if rng.random() < 0.3:
        width = rng.randrange(1, 17)
        off = rng.randrange(0, 16 ** width)
        digits = '%x' % off
        if rng.random() < 0.5:
            digits = digits.zfill(width)
        if rng.random() < 0.1:
            digits = digits.upper()
        text += '_' + digits
    return text


def timestamp_vectors(out, rng):
    fixed = [
        '0', '1', '0.00001', '0.000001', '0.000005', '0.000015', '1.5', '.5', '5.', '1e9',
        '1.402464677e9', '1402464677', '1402464677.04188', '1402464677.041880',
        '1402464677.041885', '1402464677.041875', '1402464677.041884999', '1402464677.4',
        '1402464677.04188_0000000000000001', '1402464677.04188_1', '1402464677.04188_',
        '1402464677.04188_0', '1402464677.04188_ffffffffffffffff',
        '1402464677.04188_00000000000000000001', '1402464677.04188_0x1f',
        '1402464677.04188_ABCDEF', '  1402464677.04188  ', '+1402464677.5',
        '1402464677.04188_ 1 ', '9999999999.99999', '9999999999.999994', '9999999999.999995',
        '9999999999.999996', '9999999999.9999999', '1.000005', '1e-400', '1E5', '1.e3',
        '0000000000.00000', '00000000001402464677.04188', '1e+3', '1e-3', '86399.999995',
        '951782400', '4102444800.5', '1.0000049999', '1.00000500001',
        # rejected by Swift and Apus alike
        '', ' ', '_', '-1', '-0.00001', '-1402464677', '1e10', '10000000000', '1e400',
        '9999999999.9999999999999', 'abc', '1.2.3', '0x10', '1402464677.04188_g', '1_2_3',
        '1402464677.04188__1', '1402464677.04188_10000000000000000', 'nan', 'inf',
        '-inf', '1,5', '1 5', '_1', '1e', 'e5', '.', '+', '--1', '+-1', '1.5e',
    ]
    for text in fixed:
        ts_line(out, text)
    valid = []
    for _ in range(1500):
        t = ts_line(out, random_timestamp_text(rng))
        if t is not None:
            valid.append(t)
    return valid


def sign(a, b):
    if a < b:
        assert not (a == b) and not (b < a)
        return -1
    if a == b:
        return 0
    assert b < a
    return 1


def compare_vectors(out, rng, valid):
    for _ in range(300):
        a = rng.choice(valid)
        r = rng.random()
        if r < 0.3:
            b = utils.Timestamp(a.internal, offset=rng.randrange(0, 3))
        elif r < 0.6:
            try:
                b = utils.Timestamp(a.internal, delta=rng.choice([-1, 1, 2]))
            except ValueError:  # out of range near 0 or 10^10
                b = a
        else:
            b = rng.choice(valid)
        a = utils.Timestamp(a.internal)
        out.add('cmp', a.internal, b.internal, sign(a, b))
        out.add('cmp', b.internal, a.internal, sign(b, a))


def internal_or_dash(t):
    # Not "if t": a Timestamp at time 0 is falsy.
    return '-' if t is None else t.internal


def encode_vectors(out, rng, valid):
    encoded = []
    for _ in range(400):
        t1 = utils.Timestamp(rng.choice(valid).internal)
        r = rng.random()
        if r < 0.2:
            t2 = t3 = None
        else:
            def near(t):
                k = rng.random()
                if k < 0.4:
                    return utils.Timestamp(t.normal)  # same time, offset dropped
                if k < 0.8:
                    try:
                        return utils.Timestamp(t.normal,
                                               delta=rng.randrange(-10 ** 7, 10 ** 7))
                    except ValueError:  # out of range near 0 or 10^10
                        return utils.Timestamp(t.normal)
                return utils.Timestamp(rng.choice(valid).normal)
            t2 = near(t1)
            t3 = near(t2) if r < 0.8 else None
        explicit = rng.random() < 0.3
        e = utils.encode_timestamps(t1, t2, t3, explicit=explicit)
        out.add('enc', t1.internal, internal_or_dash(t2), internal_or_dash(t3), int(explicit), e)
        encoded.append(e)
    return encoded


def decode_vectors(out, rng, encoded):
    cases = list(encoded) + [
        '1402464677.04188', '1402464677.04188+0', '1402464677.04188+0+0',
        '1402464677.04188_a+0+0', '1402464677.04188_a+1+0', '1402464677.04188_a+0-1',
        '1402464677.04188-0+1', '1402464677.04188+1f-3', '1402464677.04188+0x1f',
        '1402464677.04188+1+2+3', '1402464677.04188+1+2-zz', '1402464677.04188+',
        '1402464677.04188++1', '1402464677.04188+g', '1402464677.04188-8c4a7a5f0f5fc',
        '1402464677.04188-8c4a7a5f0f5fd', '1402464677.04188+ffffffffffffffffff',
        '9999999999.99999+1', '0000000000.00001-1', '0000000000.00001-2', '+1', '-1', '',
        '1402464677.04188+ 1a ', '1402464677.04188_1-0', '1402464677.04188+-1',
    ]
    for e in cases:
        for explicit in (False, True):
            try:
                t1, t2, t3 = utils.decode_timestamps(e, explicit=explicit)
            except Exception:
                out.add('dec_err', hx(e), int(explicit))
                continue
            out.add('dec', hx(e), int(explicit), t1.internal, internal_or_dash(t2),
                    internal_or_dash(t3))


def delete_at_vectors(out, rng):
    values = [0, 1, -1, -10 ** 12, 9999999999, 10000000000, 10 ** 15, 1402464677, 123]
    values += [rng.randrange(-10 ** 11, 10 ** 11) for _ in range(40)]
    for v in values:
        out.add('delete_at', v, utils.normalize_delete_at_timestamp(v))


# ---------------------------------------------------------------- HTTP dates

def http_date_vectors(out, rng):
    epochs = [0, 1, 784111777, 951782400, 951868800, 2147483647, 2147483648, 4102444800,
              9999999999, 10000000000, 253402300799]
    epochs += [rng.randrange(0, 10 ** 10) for _ in range(200)]
    formatted = []
    for e in epochs:
        resp = swob.Response()
        resp.last_modified = e
        value = resp.headers['Last-Modified']
        out.add('httpdate', e, value)
        formatted.append((e, value))
    return formatted


MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
LONG_MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
               'September', 'October', 'November', 'December']
DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun']
LONG_DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday']


def swob_date(value):
    req = swob.Request.blank('/', headers={'If-Modified-Since': value})
    dt = req.if_modified_since
    return '-' if dt is None else calendar.timegm(dt.utctimetuple())


def date_forms(rng, e):
    t = time.gmtime(e)
    d, mon, y = t.tm_mday, t.tm_mon - 1, t.tm_year
    hms = '%02d:%02d:%02d' % (t.tm_hour, t.tm_min, t.tm_sec)
    return [
        '%s, %02d %s %d %s GMT' % (DAYS[t.tm_wday], d, MONTHS[mon], y, hms),
        '%s, %02d-%s-%02d %s GMT' % (LONG_DAYS[t.tm_wday], d, MONTHS[mon], y % 100, hms),
        '%s %s %2d %s %d' % (DAYS[t.tm_wday], MONTHS[mon], d, hms, y),
        '%02d %s %d %s +0500' % (d, LONG_MONTHS[mon].lower(), y, hms),
        '%s,%d %s %d %s-0800' % (DAYS[t.tm_wday].upper(), d, MONTHS[mon], y, hms[:5]),
        '%d %s %d %s' % (d, MONTHS[mon], y, hms.replace(':', '.')),
    ]


def mutate(rng, s):
    k = rng.random()
    if k < 0.3 and s:
        i = rng.randrange(len(s))
        return s[:i] + rng.choice(' ,:-+.0159aZx\t\xa0') + s[i + 1:]
    if k < 0.5 and s:
        i = rng.randrange(len(s))
        return s[:i] + s[i + 1:]
    if k < 0.7:
        i = rng.randrange(len(s) + 1)
        return s[:i] + rng.choice([' ', ',', '-', ':', '1', 'GMT', '_']) + s[i:]
    if k < 0.85:
        return ' '.join(reversed(s.split(' ')))
    return s[:rng.randrange(len(s) + 1)]


def parse_date_vectors(out, rng, formatted):
    cases = [
        'Sun, 06 Nov 1994 08:49:37 GMT', 'Sunday, 06-Nov-94 08:49:37 GMT',
        'Sun Nov  6 08:49:37 1994', 'Sun, 06 Nov 1994 08:49:37', '06 Nov 1994 08:49',
        'Sun, 06 Nov 1994 08:49:37 +0200', 'Sun, 06 Nov 1994 08:49:37 EST',
        'Sun, 06 Nov 1994 08:49:37GMT', 'Sun, 06 Nov 1994 08:49:37-0500', 'Nov 06 1994 08:49:37',
        'Sun, 6 Nov 69 08:49:37 GMT', 'Sun, 6 Nov 68 08:49:37 GMT', 'Sun, 6 Nov 0 08:49:37 GMT',
        'Sun, 31 Feb 2000 00:00:00 GMT', 'Tue, 29 Feb 2000 00:00:00 GMT',
        'Thu, 29 Feb 1900 00:00:00 GMT', 'Sun, 06 Nov 1994 24:00:00 GMT',
        'Sun, 06 Nov 1994 23:60:00 GMT', 'Sun, 06 Nov 1994 23:59:60 GMT',
        'Sun, 00 Nov 1994 08:49:37 GMT', 'Sun, 06 Nov 10000 08:49:37 GMT',
        'Sun, 06 Nov 1994 8:9:7 GMT', 'Sun, 06 Nov 1994 08:49:37:00 GMT', 'Sun, 06 Nov 1994',
        'Sun, 06 Nov 1_994 08:49:37 GMT', 'Sun, 06 Nov +1994 08:49:37 GMT',
        'Sun, 06 Nov 1994 -08:49:37 GMT', 'Sun, 06 Nov -5 08:49:37 GMT', 'garbage', '', ' ',
        '1402464677', 'Sun, 06 Nov 1994 08:49:37.5 GMT', 'Sun, 06 Nov 1994 08.49.37 GMT',
        'Sun, 06 Nov 1994 08.49 GMT', 'Sun, 06 Nov 1994, 08:49:37 GMT',
        'Sun, 06 Nov, 1994 08:49:37 GMT', 'Sun, 06 NOV 1994 08:49:37 GMT',
        'Sun, 06 November 1994 08:49:37 GMT', 'Sun, 06 Sept 1994 08:49:37 GMT',
        'Sun,06 Nov 1994 08:49:37 GMT', 'xx,06 Nov 1994 08:49:37 GMT', '06-Nov-1994 08:49:37',
        'Sun, Nov 06 1994 08:49:37 GMT', '1994 Nov 06 08:49:37', 'Nov 1994 06 08:49:37',
        'Sun, 06 Nov 1994 08:49:37 GMT\xa0', '\xa0Sun, 06\xa0Nov 1994 08:49:37 GMT',
        'Sun, 06 Nov 01994 08:49:37 GMT', 'Sun, 06 Nov 0001 00:00:00 GMT',
        'Sun, 06 Nov 1994 08:49: GMT', 'Sun, 06 Nov \xb2994 08:49:37 GMT',
        'Mon, 01 Jan 0001 00:00:00 GMT', 'Fri, 31 Dec 9999 23:59:59 GMT',
    ]
    for e, value in formatted[:60]:
        cases.append(value)
        cases.extend(date_forms(rng, e))
    for _ in range(500):
        base = rng.choice(cases[:60])
        cases.append(mutate(rng, base))
    for value in cases:
        out.add('parsedate', hx(value), swob_date(value))


# ---------------------------------------------------------------- Range / conditional

class RecordingIter(object):
    """An app_iter that records which byte ranges swob asks it for."""

    def __init__(self):
        self.ranges = None

    def __iter__(self):
        return iter([b''])

    def app_iter_range(self, start, stop):
        self.ranges = [(start, stop)]
        return [b'']

    def app_iter_ranges(self, ranges, content_type, boundary, size):
        self.ranges = list(ranges)
        return [b'']


def call(resp, req):
    status = []

    def start_response(s, headers, exc_info=None):
        status.append(int(s.split(' ')[0]))

    b''.join(resp(req.environ, start_response))
    return status[0]


def range_status(header, length):
    req = swob.Request.blank('/', headers={'Range': header})
    it = RecordingIter()
    resp = swob.Response(app_iter=it, request=req, conditional_response=True)
    resp.content_length = length
    status = call(resp, req)
    ranges = '-'
    if status == 206:
        ranges = ','.join('%d-%d' % r for r in it.ranges)
    return status, ranges


def random_range_header(rng, length):
    def num():
        k = rng.random()
        if k < 0.4:
            return rng.randrange(0, max(1, length) + 3)
        if k < 0.6:
            return rng.randrange(0, 20)
        if k < 0.7:
            return 0
        return rng.randrange(0, 2 * length + 10)

    specs = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 5, 7, 8, 9, 12, 49, 50, 51, 60])):
        k = rng.random()
        if k < 0.5:
            a = num()
            b = a + rng.randrange(0, 50) if rng.random() < 0.9 else max(0, a - 1)
            specs.append('%d-%d' % (a, b))
        elif k < 0.7:
            specs.append('%d-' % num())
        else:
            specs.append('-%d' % num())
    if rng.random() < 0.3:
        rng.shuffle(specs)
    if rng.random() < 0.2:
        specs.sort(key=lambda s: int(s.split('-')[0] or 0))
    header = 'bytes=' + ','.join(specs)
    if rng.random() < 0.05:
        header = header.replace(',', ', ')
    if rng.random() < 0.03:
        header = 'BYTES' + header[5:]
    return header


def range_vectors(out, rng):
    fixed = [
        ('bytes=0-0', 10), ('bytes=0-9', 10), ('bytes=0-10', 10), ('bytes=9-', 10),
        ('bytes=10-', 10), ('bytes=-1', 10), ('bytes=-10', 10), ('bytes=-11', 10),
        ('bytes=-0', 10), ('bytes=-0,0-0', 10), ('bytes=5-3', 10), ('bytes=-', 10),
        ('bytes=3', 10), ('bytes=a-3', 10), ('bytes=1-a', 10), ('bytes=--0', 10),
        ('bytes=1--2', 10), ('bytes=0-1,', 10), ('bytes=', 10), ('bytes', 10),
        ('byte=0-1', 10), ('Bytes = 0 - 1', 10), ('bytes=0-1,3-4', 10),
        ('bytes=+3-4', 10), ('bytes=3-+4', 10), ('bytes=1_0-20', 100), ('bytes=10-2_0', 100),
        ('bytes=\t3-4', 10), ('bytes=3\t-4', 10), ('bytes=3-4\t', 10), ('bytes=0-', 0),
        ('bytes=-5', 0), ('bytes=0-0', 0), ('bytes=-0', 0), ('bytes=0-1,-5', 0),
        ('bytes=0-99999999999999999999999', 10), ('bytes=99999999999999999999999-', 10),
        ('bytes=-99999999999999999999999', 10), ('bytes=0-1,1-2,2-3', 10),
        ('bytes=0-5,1-6,2-7', 10), ('bytes=0-5,1-6,2-7,3-8', 10), ('bytes=0-0,0-0,0-0', 10),
        ('bytes=' + ','.join('%d-%d' % (i, i) for i in range(7, -1, -1)), 10),
        ('bytes=' + ','.join('%d-%d' % (i, i) for i in range(6, -1, -1)), 10),
        ('bytes=' + ','.join('%d-%d' % (i, i) for i in range(50)), 100),
        ('bytes=' + ','.join('%d-%d' % (i, i) for i in range(51)), 100),
        ('bytes=' + ','.join('%d-%d' % (i, i) for i in range(51)), 50),
        ('bytes=0-1,0-0,2-3,4-5,6-7,8-9,10-11,12-13', 100),
        ('bytes=0-0,0-1,2-3,4-5,6-7,8-9,10-11,12-13', 100),
        ('', 10), (' ', 10), ('bytes=0-1;x', 10), ('bytes=0-1,bytes=2-3', 10),
        ('bytes=0x1-2', 10), ('bytes=1e2-300', 1000),
    ]
    for header, length in fixed:
        status, ranges = range_status(header, length)
        out.add('range', hx(header), length, status, ranges)
    for _ in range(700):
        length = rng.choice([0, 1, 2, 10, 100, 1000, rng.randrange(0, 5000), 2 ** 40])
        header = random_range_header(rng, min(length, 5000))
        status, ranges = range_status(header, length)
        out.add('range', hx(header), length, status, ranges)


def cond_status(status, etag, last_modified, headers):
    req = swob.Request.blank('/', headers=headers)
    resp = swob.Response(app_iter=RecordingIter(), request=req, conditional_response=True,
                         status=status)
    if etag is not None:
        resp.etag = etag
    if last_modified is not None:
        resp.last_modified = last_modified
    return call(resp, req)


def cond_vectors(out, rng):
    etags = ['d41d8cd98f00b204e9800998ecf8427e', 'abc', '"abc"', 'other']
    tag_lists = ['abc', '"abc"', '*', '"*"', 'other', 'abc,other', ' "other" , "abc" ', '',
                 ',', 'W/"abc"', '"abc', 'abc"', '"', '""', 'x,*',
                 'd41d8cd98f00b204e9800998ecf8427e']
    base = 784111777
    dates = [None, 'Sun, 06 Nov 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 08:49:36 GMT',
             'Sun, 06 Nov 1994 08:49:38 GMT', 'garbage', 'Sunday, 06-Nov-94 08:49:37 GMT',
             'Sun Nov  6 08:49:38 1994', 'Sun, 06 Nov 1994 08:49:38 +0500',
             'Sat, 01 Jan 2000 00:00:00 GMT', 'Thu, 01 Jan 1970 00:00:00 GMT']
    for _ in range(900):
        status = rng.choice([200, 200, 200, 404])
        etag = rng.choice(etags) if status == 200 or rng.random() < 0.2 else None
        lm = (base + rng.choice([-1, 0, 0, 1, 10 ** 6])) if (
            status == 200 or rng.random() < 0.2) else None
        headers = {}
        for name, p in (('If-Match', 0.35), ('If-None-Match', 0.35)):
            if rng.random() < p:
                headers[name] = rng.choice(tag_lists)
        for name, p in (('If-Modified-Since', 0.35), ('If-Unmodified-Since', 0.35)):
            if rng.random() < p:
                d = rng.choice(dates)
                if d is not None:
                    headers[name] = d
        result = cond_status(status, etag, lm, headers)
        out.add('cond', status, hx(etag), '-' if lm is None else lm,
                hx(headers.get('If-Match')), hx(headers.get('If-None-Match')),
                hx(headers.get('If-Modified-Since')), hx(headers.get('If-Unmodified-Since')),
                result)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write('usage: %s <outfile>\n' % sys.argv[0])
        return 2
    rng = random.Random(SEED)
    out = Out()
    hash_vectors(out, rng)
    valid = timestamp_vectors(out, rng)
    compare_vectors(out, rng, valid)
    decode_vectors(out, rng, encode_vectors(out, rng, valid))
    delete_at_vectors(out, rng)
    formatted = http_date_vectors(out, rng)
    parse_date_vectors(out, rng, formatted)
    range_vectors(out, rng)
    cond_vectors(out, rng)
    tmp = sys.argv[1] + '.tmp'
    with open(tmp, 'w', encoding='ascii') as f:
        f.write('# swift_vectors v1: generated by tests/interop/swift_vectors.py\n')
        f.write('\n'.join(out.lines))
        f.write('\n')
    os.replace(tmp, sys.argv[1])
    counts = {}
    for line in out.lines:
        kind = line.split('\t', 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    print('wrote %d vectors to %s: %s' % (
        len(out.lines), sys.argv[1],
        ', '.join('%s=%d' % kv for kv in sorted(counts.items()))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
