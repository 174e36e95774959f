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
  pkl_dump  label protocol pickle canonical    Python's pickle.dumps() of a value built afresh
            (pickle hex): Apus must load it to `canonical` and dump it back byte for byte
  pkl_load  label pickle canonical             any pickle Python (or Swift) wrote: Apus must
            load it to `canonical`
  pkl_meta  label writer pickle pairs          object metadata as Swift (writer py3) or Python 2
            Swift (py2) stores it, and its wire (key, value) pairs as "khex:vhex,..."

"canonical" is canon() below: N T F i<int> f<IEEE hex> s<utf-8 hex> b<hex> [..] (..) {k:v,..},
of what pickle.loads(data, encoding='bytes') returns.

Timestamps built from text with more than 5 decimals keep Swift's unrounded float in memory,
so Swift's own .raw and ceil() for them can disagree with its text form. Apus stores only
what the text form says, so "ceil" and "raw" here come from Timestamp(ts.internal), the value
every other Swift process sees.
"""

import calendar
import os
import pickle
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


# ---------------------------------------------------------------- pickles

def canon(v):
    """A canonical text form of a loaded pickle value; the C++ tests compute the same one."""
    if v is None:
        return 'N'
    if v is True:
        return 'T'
    if v is False:
        return 'F'
    if isinstance(v, int):
        return 'i%d' % v
    if isinstance(v, float):
        return 'f' + struct.pack('>d', v).hex()
    if isinstance(v, str):
        return 's' + v.encode('utf-8', 'surrogatepass').hex()
    if isinstance(v, bytes):
        return 'b' + v.hex()
    if isinstance(v, list):
        return '[' + ','.join(canon(x) for x in v) + ']'
    if isinstance(v, tuple):
        return '(' + ','.join(canon(x) for x in v) + ')'
    if isinstance(v, dict):  # HeaderKeyDict too
        return '{' + ','.join(canon(k) + ':' + canon(x) for k, x in v.items()) + '}'
    raise TypeError('no canonical form for %r' % (v,))


def pickle_load(data):
    # encoding='bytes': Python 2 strings load as bytes, as Apus loads them (and as Swift's
    # read_metadata does).
    return pickle.loads(data, encoding='bytes')


def wire_pairs_hex(pairs):
    return ','.join('%s:%s' % (k.hex(), v.hex()) for k, v in pairs)


PICKLE_ALPHABET = (
    'abcxyzABC019 -_./:%~\\\'"\t\n\r\x00\x1a\x7f\x80\xa0\xe9\xff'
    '\u0100\u2603\u4e2d\ud800\udc80\udfff\U0001f600\U0010ffff')


def fresh_str(rng, max_len=12):
    # A new str object each time (CPython shares only '' and one-character latin-1 strs,
    # which Apus' dumps() models), so Python's memo output is reproducible.
    n = rng.choice([0, 1, 1, 2, 3, 5, 8, max_len])
    return ''.join(rng.choice(PICKLE_ALPHABET) for _ in range(n))


def fresh_bytes(rng, max_len=12):
    n = rng.choice([0, 1, 1, 2, 3, 5, 8, max_len])
    return bytes(rng.randrange(256) for _ in range(n))


def random_int(rng):
    return rng.choice([
        0, 1, -1, 255, 256, 65535, 65536, -129, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1,
        2 ** 32, 2 ** 40, -2 ** 40, 2 ** 63 - 1, -2 ** 63, -2 ** 55 - 7,
        rng.randrange(-2 ** 63, 2 ** 63), rng.randrange(-300, 70000),
        rng.randrange(-2 ** 40, 2 ** 40)])


def random_float(rng):
    k = rng.random()
    if k < 0.3:
        return rng.choice([0.0, -0.0, 1.5, 1e16, 1e15, 1e-4, 1e-5, 123456789012345678.0,
                           5e-324, 1.7976931348623157e308, float('inf'), -float('inf'),
                           float('nan'), 0.1, 1 / 3, 1e22, 1e23, 9007199254740993.0])
    if k < 0.6:
        return struct.unpack('>d', struct.pack('>Q', rng.getrandbits(64)))[0]
    if k < 0.8:
        return rng.uniform(-1e6, 1e6)
    return time.time() + rng.random()


def random_key(rng):
    k = rng.random()
    if k < 0.6:
        return fresh_str(rng)
    if k < 0.75:
        return fresh_bytes(rng)
    if k < 0.85:
        return random_int(rng)
    if k < 0.9:
        return None
    if k < 0.95:
        return random_float(rng)
    return tuple(fresh_str(rng) for _ in range(rng.randrange(0, 3)))


def random_value(rng, depth=0):
    k = rng.random()
    if depth >= 3 or k < 0.55:
        return rng.choice([
            lambda: None, lambda: rng.random() < 0.5, lambda: random_int(rng),
            lambda: random_float(rng), lambda: fresh_str(rng), lambda: fresh_str(rng, 300),
            lambda: fresh_bytes(rng), lambda: fresh_bytes(rng, 300)])()
    n = rng.choice([0, 1, 2, 3, 4, 7])
    if k < 0.7:
        return [random_value(rng, depth + 1) for _ in range(n)]
    if k < 0.8:
        return tuple(random_value(rng, depth + 1) for _ in range(n))
    d = {}
    for _ in range(n):
        d[random_key(rng)] = random_value(rng, depth + 1)
    return d


def hashes_like(rng, count, ec=False, valid=True):
    # hashes.pkl / REPLICATE: {suffix: md5hex | None, 'valid': True, 'updated': float}
    hashes = {}
    for s in rng.sample(range(4096), count):
        if ec:
            v = {None: md5hex(rng)}
            for frag in rng.sample(range(14), rng.randrange(1, 4)):
                v[frag] = md5hex(rng)
        else:
            v = md5hex(rng) if rng.random() < 0.8 else None
        hashes['%03x' % s] = v
    if valid:
        hashes['valid'] = True
        hashes['updated'] = time.time()
    return hashes


def md5hex(rng):
    return '%032x' % rng.getrandbits(128)


def py2_metadata_pickle(pairs):
    """What Python 2 Swift's cPickle.dumps(metadata, 2) wrote: plain str (bytes) items."""
    out = [b'\x80\x02}q\x01(']
    memo = 2
    for k, v in pairs:
        for item in (k, v):
            if len(item) < 256:
                out.append(b'U' + bytes([len(item)]) + item)
            else:
                out.append(b'T' + struct.pack('<i', len(item)) + item)
            out.append(b'q' + bytes([memo]) if memo < 256 else b'r' + struct.pack('<I', memo))
            memo += 1
    out.append(b'u.')
    return b''.join(out)


def py2_repr(b):
    # Python 2's repr() of a str, as protocol 0 STRING carries it.
    quote = '"' if b"'" in b and b'"' not in b else "'"
    out = []
    for c in b:
        ch = chr(c)
        if ch == quote or ch == '\\':
            out.append('\\' + ch)
        elif ch == '\t':
            out.append('\\t')
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\r':
            out.append('\\r')
        elif 32 <= c < 127:
            out.append(ch)
        else:
            out.append('\\x%02x' % c)
    return (quote + ''.join(out) + quote).encode('ascii')


def py2_async_pickle(update, headers):
    """A Python 2 async_pending: protocol 0, str items as STRING, HeaderKeyDict headers."""
    out = [b'(dp1\n']
    memo = [2]

    def put():
        out.append(b'p%d\n' % memo[0])
        memo[0] += 1

    def s(b):
        out.append(b'S' + py2_repr(b) + b'\n')
        put()

    for k, v in update:
        s(k)
        if isinstance(v, bytes):
            s(v)
        elif isinstance(v, list):
            out.append(b'(l')
            put()
            for i in v:
                out.append(b'I%d\na' % i)
        else:
            out.append(b'N')
        out.append(b's')
    s(b'headers')
    out.append(b'ccopy_reg\n_reconstructor\n')
    put()
    out.append(b'(cswift.common.header_key_dict\nHeaderKeyDict\n')
    put()
    out.append(b'c__builtin__\ndict\n')
    put()
    out.append(b'(d')
    put()
    for k, v in headers:
        s(k)
        s(v)
        out.append(b's')
    out.append(b't')
    put()
    out.append(b'R')
    put()
    out.append(b's.')
    return b''.join(out)


class SwiftObjectServer(object):
    """A stock Swift object server on a temp device, driven in-process through swob."""

    def __init__(self):
        import logging
        import shutil
        import tempfile
        import eventlet
        from swift.obj import diskfile, server
        self.eventlet, self.diskfile, self.shutil = eventlet, diskfile, shutil
        self.root = tempfile.mkdtemp(prefix='apus-pickle-vectors-')
        os.makedirs(os.path.join(self.root, 'sda1'))
        logger = logging.getLogger('apus-pickle-vectors')
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        logger.statsd_client = None  # what get_logger() sets when statsd is off
        self.logger = utils.LogAdapter(logger, 'object-server')
        self.conf = {'devices': self.root, 'mount_check': 'false',
                     'container_update_timeout': '0.01'}
        self.app = server.ObjectController(self.conf, logger=self.logger)
        # Recent: Swift reclaims tombstones older than a week right away.
        self.ts = float(int(time.time()))

    def close(self):
        self.shutil.rmtree(self.root, ignore_errors=True)

    def timestamp(self):
        self.ts += 1.25
        return utils.Timestamp(self.ts).internal

    def request(self, method, path, headers=None, body=b''):
        # path and header values are WSGI strings: one code point per wire byte.
        headers = dict(headers or {})
        headers.setdefault('X-Timestamp', self.timestamp())
        if method == 'PUT':
            headers.setdefault('Content-Length', str(len(body)))
            headers.setdefault('Content-Type', 'application/octet-stream')
        req = swob.Request.blank(path, environ={'REQUEST_METHOD': method}, headers=headers,
                                 body=body)
        resp = req.get_response(self.app)
        assert resp.status_int // 100 == 2 or (method == 'DELETE' and resp.status_int == 404), (
            method, path, resp.status)
        self.eventlet.sleep(0)
        return resp

    def files(self, kind):
        found = []
        for dirpath, _, names in os.walk(os.path.join(self.root, 'sda1')):
            for n in names:
                if kind == 'async' and 'async_pending' in dirpath:
                    found.append(os.path.join(dirpath, n))
                elif kind == 'object' and n.endswith(('.data', '.meta', '.ts')):
                    found.append(os.path.join(dirpath, n))
        return sorted(found)

    def wait_for_asyncs(self, count):
        for _ in range(500):
            if len(self.files('async')) >= count:
                return
            self.eventlet.sleep(0.01)
        raise AssertionError('async_pending files were not written')


def metadata_xattr(path):
    import xattr
    data, n = b'', 0
    while True:
        try:
            data += xattr.getxattr(path, 'user.swift.metadata' + (str(n) if n else ''))
        except OSError:
            return data
        n += 1


def wire_metadata(swift_metadata):
    """Swift's read_metadata() result as wire bytes: WSGI strings, except name's UTF-8."""
    pairs = []
    for k, v in swift_metadata.items():
        if k == 'name':
            pairs.append((k.encode('latin-1'), v.encode('utf-8', 'surrogateescape')))
        else:
            pairs.append((k.encode('latin-1'), v.encode('latin-1')))
    return pairs


def swift_pickle_cases(rng):
    """Pickles stock Swift writes: object metadata, async_pendings, hashes.pkl, REPLICATE."""
    from swift.obj import diskfile
    from swift.common.storage_policy import POLICIES
    cases = {'meta': [], 'load': [], 'dump': []}
    srv = SwiftObjectServer()
    try:
        snowman = '\xe2\x98\x83'  # WSGI string of the wire bytes of U+2603
        high = ''.join(chr(c) for c in range(0x80, 0x100))
        srv.request('PUT', '/sda1/0/AUTH_test/c/o', {
            'Content-Type': 'text/plain', 'X-Object-Meta-Color': 'blue',
            'X-Object-Meta-A': '1', 'X-Object-Meta-B': '1', 'X-Object-Meta-Empty': '',
            'X-Object-Meta-E2': ''}, b'hello')
        names = ('\u00e9', '\u4e2d\u6587', '\U0001f600 obj/with/slashes')
        path_name = '/AUTH_' + names[0] + '/c' + names[1] + '/o' + names[2]
        path = '/sda1/0' + path_name
        srv.request('PUT', swob.str_to_wsgi(path), {
            'Content-Type': 'text/pl\xc3\xa9in; charset=utf-8',
            'X-Object-Meta-Caf\xc3\xa9': '\xc3\xa9t\xc3\xa9 ' + snowman,
            'X-Object-Meta-High': high, 'X-Object-Meta-Latin1': 'caf\xe9',
            'X-Object-Sysmeta-Thing': snowman, 'X-Object-Transient-Sysmeta-T': 'x',
            'X-Object-Meta-Sym': '\\\'"%~\x7f', 'Content-Encoding': 'gzip',
            'Content-Disposition': 'attachment; filename="\xc3\xa9.txt"',
            'X-Container-Host': '127.0.0.1:1', 'X-Container-Device': 'sdb',
            'X-Container-Partition': '7'}, b'x' * 100)
        # Enough items for memo indices above 255, small enough for ext4's one xattr block.
        many = {'X-Object-Meta-K%02d' % i: 'v%d' % i for i in range(46)}
        srv.request('PUT', '/sda1/0/AUTH_test/c/many', many, b'')
        srv.request('POST', '/sda1/0/AUTH_test/c/o', {
            'X-Object-Meta-Posted': '\xe4\xb8\xad', 'Content-Type': 'image/png'})
        gone = swob.str_to_wsgi(path + '-deleted')
        srv.request('PUT', gone, {'X-Object-Meta-Soon': 'gone'}, b'')
        srv.request('DELETE', gone, {
            'X-Container-Host': '127.0.0.1:1', 'X-Container-Device': 'sdb',
            'X-Container-Partition': '7',
            'X-Backend-Container-Path': '.shards_AUTH_x/c-shard-' + '\u00e9'.encode(
                'utf-8').decode('latin-1')})
        srv.request('PUT', '/sda1/0/AUTH_test/c/shardy', {
            'X-Container-Host': '127.0.0.1:1', 'X-Container-Device': 'sdb',
            'X-Container-Partition': '7', 'X-Backend-Container-Path': 'AUTH_test/c-shard'},
            b'')
        for i in range(40):
            name = '/sda1/0/AUTH_test/c/bulk-%d-%s' % (i, fresh_str(rng).encode(
                'utf-8', 'surrogatepass').hex())
            srv.request('PUT', name, {'X-Object-Meta-I': str(i)}, b'%d' % i)

        checked = False
        for path in srv.files('object'):
            data = metadata_xattr(path)
            assert data.startswith(b'\x80\x02}q\x00(c_codecs\nencode\n'), data[:40]
            md = diskfile.read_metadata(path)
            pairs = wire_metadata(md)
            # The rule the C++ side implements, checked against what went over the wire.
            wire = dict(pairs)
            if b'X-Object-Meta-Caf\xc3\xa9' in wire:
                checked = True
                assert wire[b'X-Object-Meta-Caf\xc3\xa9'] == b'\xc3\xa9t\xc3\xa9 \xe2\x98\x83'
                assert wire[b'X-Object-Meta-High'] == bytes(range(0x80, 0x100))
                assert wire[b'name'] == path_name.encode('utf-8'), wire[b'name']
            label = 'swift-' + os.path.splitext(path)[1][1:]
            cases['meta'].append((label, 'py3', data, pairs))
        assert checked

        srv.wait_for_asyncs(3)
        for path in srv.files('async'):
            data = open(path, 'rb').read()
            assert data.startswith(b'(dp0\n'), data[:20]
            cases['load'].append(('swift-async', data))
            # The updater rewrites it (protocol 0 again) after partial success.
            update = pickle.loads(data)
            update['successes'] = [1, 3]
            tmp = path + '.rewritten'
            utils.write_pickle(update, tmp)
            cases['load'].append(('swift-async-rewritten', open(tmp, 'rb').read()))
            os.unlink(tmp)

        mgr = srv.app._diskfile_router[POLICIES[0]]
        mgr.get_hashes('sda1', '0', [], POLICIES[0])
        pkl = os.path.join(srv.root, 'sda1', 'objects', '0', 'hashes.pkl')
        cases['dump'].append(('swift-hashes.pkl', 2, open(pkl, 'rb').read()))
        req = swob.Request.blank('/sda1/0', environ={'REQUEST_METHOD': 'REPLICATE'})
        resp = req.get_response(srv.app)
        assert resp.status_int == 200, resp.status
        cases['dump'].append(('swift-replicate', 2, resp.body))
    finally:
        srv.close()
    return cases


def pickle_cases(rng):
    """Every pickle case, as {'dump': [(label, protocol, data)], 'load': [(label, data)],
    'meta': [(label, writer, data, wire_pairs)]}. 'dump' data is Python's own pickle.dumps()
    of a value built afresh, which Apus must reproduce byte for byte."""
    cases = swift_pickle_cases(rng)
    dump, load, meta = cases['dump'], cases['load'], cases['meta']

    fixed = [None, True, False, 0, -1, 1.5, '', 'x', b'', b'x', [], (), {}, (None,),
             [None, None], (1, 2), (1, 2, 3), (1, 2, 3, 4)]
    for i, v in enumerate(fixed):
        for proto in (0, 1, 2):
            dump.append(('fixed-%d' % i, proto, pickle.dumps(v, proto)))
    for n in (999, 1000, 1001, 2000, 2001):
        for proto in (0, 1, 2):
            dump.append(('list-%d' % n, proto, pickle.dumps(list(range(n)), proto)))
            d = {'k%d' % i: i for i in range(n)}
            dump.append(('dict-%d' % n, proto, pickle.dumps(d, proto)))
            big = [fresh_bytes(rng, 3) for _ in range(n // 3)]
            dump.append(('bytes-list-%d' % n, proto, pickle.dumps(big, proto)))
    for i in range(400):
        v = random_value(rng)
        for proto in (0, 1, 2):
            dump.append(('random-%d' % i, proto, pickle.dumps(v, proto)))
        load.append(('random-p3-%d' % i, pickle.dumps(v, 3)))
        load.append(('random-p4-%d' % i, pickle.dumps(v, 4)))
    for i in range(80):
        v = random_float(rng)
        for proto in (0, 2):
            dump.append(('float-%d' % i, proto, pickle.dumps(v, proto)))
    for i in range(60):
        v = random_int(rng)
        for proto in (0, 1, 2):
            dump.append(('int-%d' % i, proto, pickle.dumps(v, proto)))
    for count, ec, valid in ((0, False, True), (1, False, True), (30, False, True),
                             (4096, False, True), (20, False, False), (10, True, True),
                             (1, True, False)):
        dump.append(('hashes-%d' % count, 2, pickle.dumps(hashes_like(rng, count, ec, valid), 2)))

    # Python 2 Swift: object metadata as plain strs, async_pending with STRING items.
    py2_pairs = [(b'name', b'/AUTH_test/c/\xc3\xa9 \xf0\x9f\x98\x80'),
                 (b'X-Timestamp', b'1402464677.04188'), (b'Content-Length', b'0'),
                 (b'ETag', b'd41d8cd98f00b204e9800998ecf8427e'),
                 (b'Content-Type', b'text/plain'),
                 (b'X-Object-Meta-Caf\xc3\xa9', b'\xc3\xa9t\xc3\xa9 \xe2\x98\x83'),
                 (b'X-Object-Meta-Raw', bytes(range(0x80, 0x100))),
                 (b'X-Object-Meta-Long', b'v' * 300), (b'X-Object-Meta-Empty', b'')]
    meta.append(('py2-metadata', 'py2', py2_metadata_pickle(py2_pairs), py2_pairs))
    async_items = [(b'op', b'PUT'), (b'account', b'AUTH_test'), (b'container', b'c\xc3\xa9'),
                   (b'obj', b"o'\"\\\n\t\x00\xff"), (b'successes', [1, 2]),
                   (b'container_path', None)]
    async_headers = [(b'X-Size', b'0'), (b'X-Content-Type', b'text/pl\xc3\xa9in'),
                     (b'X-Timestamp', b'1402464677.04188'), (b'X-Trans-Id', b'tx-1'),
                     (b'Referer', b'PUT http://localhost/sda1/p/a/c/o'),
                     (b'X-Backend-Storage-Policy-Index', b'0'),
                     (b'User-Agent', b'object-server 123')]
    load.append(('py2-async', py2_async_pickle(async_items, async_headers)))
    return cases


def pickle_vectors(out, rng):
    cases = pickle_cases(rng)
    for label, proto, data in cases['dump']:
        out.add('pkl_dump', label, proto, data.hex(), canon(pickle_load(data)))
    for label, data in cases['load']:
        out.add('pkl_load', label, data.hex(), canon(pickle_load(data)))
    for label, writer, data, pairs in cases['meta']:
        out.add('pkl_meta', label, writer, data.hex(), wire_pairs_hex(pairs))


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
    pickle_vectors(out, random.Random(SEED + 1))
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
