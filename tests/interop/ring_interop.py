#!/usr/bin/python3
"""Ring interop between Apus and stock Swift (python3-swift, Debian's swift-ring-builder).

Usage (run by CTest, label interop; each step its own test):
  ring_interop.py build  <dir>                                  make the rings
  ring_interop.py lookup <dir> <apus-get-nodes>                 same answers as Swift's Ring
  ring_interop.py write  <dir> <ring_rewrite> <apus-get-nodes>  Apus-written rings = Swift's
  ring_interop.py text   <dir> <apus-get-nodes>                 same report as swift-get-nodes

build: swift-ring-builder makes rings (1, 3 and 2.5 replicas, part powers 8, 10, 12, 16, several
  regions and zones, a device with no partitions, a removed device) in <dir>/<name>/, and
  <dir>/swift.conf holds the hash prefix and suffix.
lookup: for NAMES names per ring (accounts, containers and objects with non-ASCII characters
  and slashes), Swift's Ring.get_nodes() and the first 20 of get_more_nodes() must equal what
  `apus-get-nodes --batch` prints.
write: Apus re-writes each ring (ring_rewrite: load_ring_file + write_ring_file); the file must
  be byte-identical to Swift's RingData.load().save() of the same ring, and Swift's Ring must
  answer the same from it. A big-endian copy written by Swift's own serializer must give the
  same answers in Apus and Swift, and re-written by Apus must equal the little-endian file.
text: apus-get-nodes and swift-get-nodes print the same report for a few targets.

Exit status 0 when everything matches; otherwise the first differences are printed.
"""

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import types

from swift.common import utils
from swift.common.ring import Ring, RingData
import swift.common.ring.ring as ring_module

SEED = 20241130
NAMES = 10000
HANDOFFS = 20

HASH_PREFIX = 'apus-prefix'
HASH_SUFFIX = 'apus-suffix'

# name, part power, replicas, devices (builder "add" syntax and weight), ids removed after the
# first rebalance (then rebalanced again).
RINGS = [
    ('p8_r1', 8, '1', [
        ('r1z1-10.0.0.1:6200/sda', '100'),
        ('r1z1-10.0.0.1:6200/sdb', '100'),
        ('r1z2-10.0.0.2:6200/sda', '50.5'),
        ('r2z1-10.0.1.1:6200/sda_m\u00e9ta \u2603', '100'),
        ('r2z2-10.0.1.2:6200/sdb', '33.3'),
        ('r2z2-10.0.1.3:6200/sdc', '0.5'),
        ('r2z3-10.0.1.4:6200/sdd', '1e-05'),  # few or no partitions: long handoff scans
    ], []),
    ('p10_r3_flat', 10, '3', [
        ('r1z1-10.1.0.1:6200/d%d' % i, '100') for i in range(4)
    ] + [
        ('r1z1-10.1.0.2:6200/d%d' % i, '100') for i in range(4)
    ], []),
    ('p12_r3', 12, '3', [
        ('r1z1-10.2.0.1:6200/sda', '100'),
        ('r1z1-10.2.0.1:6200/sdb', '100'),
        ('r1z1-10.2.0.2:6200/sda', '100'),
        ('r1z2-10.2.1.1:6200/sda', '100'),
        ('r1z2-10.2.1.2:6200/sda', '75.25'),
        ('r1z3-10.2.2.1:6200/sda', '100'),
        ('r2z1-10.3.0.1:6200/sda', '100'),
        ('r2z1-10.3.0.1:6200/sdb', '100'),
        ('r2z2-10.3.1.1:6200/sda', '100'),
        ('r2z2-10.3.1.1:6200/sdb', '100'),
        ('r3z1-10.4.0.1:6200/sda', '100'),
        ('r3z1-10.4.0.2:6200/sda', '100'),
        ('r3z2-10.4.1.1:6200/sda', '100'),
        ('r3z2-10.4.1.1:6200/sdb', '100'),
        ('r4z1-10.5.0.1:6200/sda', '0'),  # no partitions: must not count in the tier totals
        ('r1z3-[fe80::1]:6200/sdb', '100'),
    ], [4, 9]),
    ('p16_r2.5', 16, '2.5', [
        ('r1z1-10.6.0.%d:6200/sda' % (i + 1), '100') for i in range(4)
    ] + [
        ('r1z2-10.6.1.%d:6200/sdb' % (i + 1), '80') for i in range(3)
    ] + [
        ('r2z1-10.7.0.%d:6200/sdc' % (i + 1), '120') for i in range(3)
    ] + [
        ('r2z2-10.7.1.1:6200/sdd', '12.125'),
        ('r2z3-10.7.2.1:6200/sde', '100'),
    ], []),
]

ALPHABET = (
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
    '   -_.~%+?#&=\'"\\\t'
    '\u00e9\u00fc\u00df\u00f1\u0416\u05d0\u4e2d\u6587\u2603\u20ac\U0001f600\U0001f680'
)


def builder(cwd, *args):
    cmd = ['/usr/bin/swift-ring-builder', 'object.builder'] + list(args)
    res = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # 0 ok, 1 warning (e.g. dispersion notes), 2 error.
    if res.returncode not in (0, 1):
        sys.exit('swift-ring-builder %s failed:\n%s' % (' '.join(args), res.stdout.decode()))


def cmd_build(top):
    if os.path.isdir(top):
        shutil.rmtree(top)
    os.makedirs(top)
    with open(os.path.join(top, 'swift.conf'), 'w') as f:
        f.write('[swift-hash]\nswift_hash_path_prefix = %s\nswift_hash_path_suffix = %s\n'
                % (HASH_PREFIX, HASH_SUFFIX))
    for name, power, replicas, devs, removed in RINGS:
        d = os.path.join(top, name)
        os.makedirs(d)
        builder(d, 'create', str(power), replicas, '0')
        add = []
        for spec, weight in devs:
            add += [spec, weight]
        builder(d, 'add', *add)
        builder(d, 'rebalance', '--seed', '1')
        if removed:
            for dev_id in removed:
                builder(d, 'remove', 'd%d' % dev_id)
            builder(d, 'rebalance', '--seed', '2')
        if not os.path.exists(os.path.join(d, 'object.ring.gz')):
            sys.exit('%s: swift-ring-builder wrote no ring' % name)
    print('built %d rings in %s' % (len(RINGS), top))
    return 0


def random_names(seed, count):
    rnd = random.Random(seed)

    def word(lo, hi, slashes=False):
        alphabet = ALPHABET + ('/' * 4 if slashes else '')
        return ''.join(rnd.choice(alphabet) for _ in range(rnd.randint(lo, hi)))

    names = []
    for i in range(count):
        kind = i % 10
        a = word(1, 20)
        if kind == 0:
            names.append((a, None, None))
        elif kind < 3:
            names.append((a, word(1, 30), None))
        else:
            o = word(1, 60, slashes=True)
            if kind == 9:
                o = '/' + o + '/'  # leading and trailing slashes belong to the name
            names.append((a, word(1, 30), o))
    return names


def swift_answers(ring, names):
    out = []
    for a, c, o in names:
        part, nodes = ring.get_nodes(a, c, o)
        handoffs = itertools.islice(ring.get_more_nodes(part), HANDOFFS)
        out.append({'partition': part, 'primaries': [n['id'] for n in nodes],
                    'handoffs': [n['id'] for n in handoffs]})
    return out


def batch_lines(names):
    lines = []
    for a, c, o in names:
        lines.append('/'.join(x for x in (a, c, o) if x is not None))
    return ('\n'.join(lines) + '\n').encode('utf-8')


def apus_answers(get_nodes, top, ring_path, names):
    res = subprocess.run(
        [get_nodes, '--batch', '--swift-conf', os.path.join(top, 'swift.conf'), ring_path],
        input=batch_lines(names), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        sys.exit('apus-get-nodes failed: %s' % res.stderr.decode())
    return [json.loads(line) for line in res.stdout.decode().splitlines()]


def compare(what, names, expected, got):
    if len(expected) != len(got):
        print('%s: %d answers expected, %d received' % (what, len(expected), len(got)))
        return False
    bad = [i for i in range(len(expected)) if expected[i] != got[i]]
    for i in bad[:5]:
        print('%s: %r\n  swift %s\n  apus  %s' % (what, names[i], expected[i], got[i]))
    if bad:
        print('%s: %d of %d differ' % (what, len(bad), len(expected)))
        return False
    return True


def setup_swift(top):
    utils.set_swift_dir(top)
    assert utils.HASH_PATH_PREFIX == HASH_PREFIX.encode()


def cmd_lookup(top, get_nodes):
    setup_swift(top)
    ok = True
    for i, (name, *_rest) in enumerate(RINGS):
        path = os.path.join(top, name, 'object.ring.gz')
        ring = Ring(path)
        names = random_names(SEED + i, NAMES)
        expected = swift_answers(ring, names)
        got = apus_answers(get_nodes, top, path, names)
        if compare(name, names, expected, got):
            print('%s: %d lookups identical (partition, primaries, first %d handoffs; '
                  'replicas %s, part power %d, %d devices)' % (
                      name, len(names), HANDOFFS, ring.replica_count, ring.part_power,
                      ring.device_count))
        else:
            ok = False
    return 0 if ok else 1


def write_big_endian(src, dst):
    """Swift's own serializer, told the machine is big-endian, on byteswapped arrays."""
    data = RingData.load(src)
    for row in data._replica2part2dev_id:
        row.byteswap()
    real_sys = ring_module.sys
    ring_module.sys = types.SimpleNamespace(byteorder='big')
    try:
        data.save(dst)
    finally:
        ring_module.sys = real_sys


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def cmd_write(top, rewrite, get_nodes):
    setup_swift(top)
    ok = True
    for i, (name, *_rest) in enumerate(RINGS):
        orig = os.path.join(top, name, 'object.ring.gz')
        work = os.path.join(top, 'write', name)
        for sub in ('apus', 'swift', 'big', 'apus_from_big'):
            os.makedirs(os.path.join(work, sub), exist_ok=True)
        apus_path = os.path.join(work, 'apus', 'object.ring.gz')
        swift_path = os.path.join(work, 'swift', 'object.ring.gz')
        big_path = os.path.join(work, 'big', 'object.ring.gz')
        from_big = os.path.join(work, 'apus_from_big', 'object.ring.gz')

        subprocess.run([rewrite, orig, apus_path], check=True)
        RingData.load(orig).save(swift_path)
        if read(apus_path) != read(swift_path):
            print('%s: Apus writes %d bytes, Swift %d; they differ' % (
                name, len(read(apus_path)), len(read(swift_path))))
            ok = False
            continue
        if read(apus_path) != read(orig):
            print('%s: Apus rewrite differs from the swift-ring-builder file' % name)
            ok = False
        if os.stat(apus_path).st_mode & 0o777 != 0o644:
            print('%s: Apus wrote mode %o, Swift writes 0644' % (
                name, os.stat(apus_path).st_mode & 0o777))
            ok = False

        names = random_names(SEED + 100 + i, NAMES)
        expected = swift_answers(Ring(orig), names)
        if not compare(name + ' (Swift reading the Apus file)', names, expected,
                       swift_answers(Ring(apus_path), names)):
            ok = False

        write_big_endian(orig, big_path)
        if not compare(name + ' (Swift reading big-endian)', names, expected,
                       swift_answers(Ring(big_path), names)):
            ok = False
        if not compare(name + ' (Apus reading big-endian)', names, expected,
                       apus_answers(get_nodes, top, big_path, names)):
            ok = False
        subprocess.run([rewrite, big_path, from_big], check=True)
        if read(from_big) != read(orig):
            print('%s: Apus rewrite of the big-endian ring differs from the original' % name)
            ok = False
        if ok:
            print('%s: Apus file byte-identical to Swift\'s save() (%d bytes); Swift reads it '
                  'with identical answers; big-endian copy agrees (%d names)' % (
                      name, len(read(apus_path)), len(names)))
    return 0 if ok else 1


def cmd_text(top, get_nodes):
    ring_dir = os.path.join(top, 'p12_r3')
    policy_ring = os.path.join(top, 'text', 'object-1.ring.gz')
    os.makedirs(os.path.dirname(policy_ring), exist_ok=True)
    shutil.copy(os.path.join(ring_dir, 'object.ring.gz'), policy_ring)
    ring = os.path.join(ring_dir, 'object.ring.gz')
    cases = [
        [ring, 'AUTH_test', 'c', 'o'],
        [ring, 'AUTH_test', 'c'],
        [ring, 'AUTH_test'],
        [ring, '/AUTH_test/cont/obj/with/slashes/'],
        [ring, '-a', 'AUTH_\u00e9t\u00e9', 'c \u2603', 'o\U0001f600'],
        [ring, '-p', '1234'],
        [ring, '-Q', 'AUTH_x%E2%82%AC', 'c%20d', 'o%2Fp'],
        [policy_ring, 'AUTH_test', 'c', 'o'],
        [policy_ring, '-p', '77'],
    ]
    ok = True
    for args in cases:
        swift = subprocess.run(['/usr/bin/swift-get-nodes', '-d', top] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        apus = subprocess.run([get_nodes, '-d', top] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if swift.stdout != apus.stdout or swift.returncode != apus.returncode:
            ok = False
            print('swift-get-nodes %s differs (exit %d vs %d):' % (
                ' '.join(args), swift.returncode, apus.returncode))
            sl = swift.stdout.decode().splitlines()
            al = apus.stdout.decode().splitlines()
            for i in range(max(len(sl), len(al))):
                s = sl[i] if i < len(sl) else '<none>'
                a = al[i] if i < len(al) else '<none>'
                if s != a:
                    print('  line %d\n    swift %r\n    apus  %r' % (i + 1, s, a))
                    break
    if ok:
        print('%d swift-get-nodes reports identical' % len(cases))
    return 0 if ok else 1


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    cmd, top = argv[1], argv[2]
    if cmd == 'build' and len(argv) == 3:
        return cmd_build(top)
    if cmd == 'lookup' and len(argv) == 4:
        return cmd_lookup(top, argv[3])
    if cmd == 'write' and len(argv) == 5:
        return cmd_write(top, argv[3], argv[4])
    if cmd == 'text' and len(argv) == 4:
        return cmd_text(top, argv[3])
    sys.exit(__doc__)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
