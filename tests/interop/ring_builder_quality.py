#!/usr/bin/python3
"""apus-ring-builder beside stock swift-ring-builder (Debian's python3-swift).

    ring_builder_quality.py APUS_RING_BUILDER WORKDIR SCENARIO

SCENARIO is one of the layouts below, or "pickle". For a layout, both tools build the same ring
from the same commands (create, add, rebalance <seed>), then add a device, then reweight one
(each followed by pretend_min_part_hours_passed and rebalance <seed>), for a few seeds. From the
ring files each writes, the script computes balance, dispersion (Swift's definitions, over every
partition) and the partition replicas moved by each step, prints them side by side, and fails if
Apus is worse than Swift on any of them. Apus follows Swift's algorithm and random draws, so with
the same seed the figures (and the ring files) are expected to be identical; the report says so.
It also checks that every ring apus-ring-builder writes loads in Swift's Ring class with each
partition's devices equal to the assignment in Apus's .builder file (read here with its own
parser, following ring/FORMAT.md).

"pickle": a builder made by swift-ring-builder is used by apus-ring-builder directly (imported),
changed the same way by both tools, and the resulting rings must be byte-identical; a ring written
by apus-ring-builder can be turned back into a Swift builder (write_builder) that validates.

Exit status 0 when every check passes.
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from array import array

sys.path.insert(0, '/usr/lib/python3/dist-packages')
from swift.common.ring import Ring, RingData  # noqa: E402
from swift.common.ring.builder import RingBuilder  # noqa: E402

SWIFT = '/usr/bin/swift-ring-builder'
SEEDS = ('1', '2')
# Swift takes a few seconds per call at part power 14; one seed is enough there.
BIG_PART_POWER_SEEDS = ('1',)
EPS = 1e-9


def devices(regions, zones, servers, disks, weight):
    """Add-command arguments: r<r>z<z>-<ip>:6200/<disk> <weight>, weight(i) per device."""
    args = []
    i = 0
    for r in range(1, regions + 1):
        for z in range(1, zones + 1):
            for s in range(1, servers + 1):
                for d in range(disks):
                    args += ['r%dz%d-10.%d.%d.%d:6200/sd%s' % (r, z, r, z, s, chr(ord('a') + d)),
                             repr(float(weight(i)))]
                    i += 1
    return args


# name: (part_power, replicas, add-command arguments, steps after the first rebalance)
SCENARIOS = {
    'r1z4': (12, 3, devices(1, 4, 2, 3, lambda i: 100),
             [('add a device', ['add', 'r1z1-10.1.1.9:6200/sdz', '100']),
              ('reweight a device', ['set_weight', 'd5', '150'])]),
    'r2': (12, 3, devices(2, 2, 2, 2, lambda i: 100),
           [('add a device', ['add', 'r2z1-10.2.1.9:6200/sdz', '100']),
            ('reweight a device', ['set_weight', 'd3', '50'])]),
    'unequal': (12, 3, devices(1, 5, 1, 3, lambda i: (50, 100, 200, 300)[i % 4]),
                [('add a device', ['add', 'r1z2-10.1.2.9:6200/sdz', '250']),
                 ('reweight a device', ['set_weight', 'd0', '200']),
                 ('remove a device', ['remove', 'd7'])]),
    'frac': (11, 2.5, devices(1, 3, 2, 2, lambda i: (100, 150)[i % 2]),
             [('add a device', ['add', 'r1z3-10.1.3.9:6200/sdz', '100']),
              ('reweight a device', ['set_weight', 'd2', '300'])]),
    # Zone 3 is light: full dispersion needs overload, which the second step allows in part.
    'overload': (14, 3, devices(1, 3, 1, 2, lambda i: 100 if i < 4 else 40),
                 [('add a device', ['add', 'r1z3-10.1.3.9:6200/sdz', '20']),
                  ('set overload 10%', ['set_overload', '10%']),
                  ('reweight a device', ['set_weight', 'd4', '60'])]),
}


def run(tool, cwd, *args, ok=(0, 1)):
    p = subprocess.run([tool, 'x.builder'] + list(args), cwd=cwd, capture_output=True, text=True)
    if p.returncode not in ok:
        raise SystemExit('%s %s failed (%d):\n%s%s' % (os.path.basename(tool), ' '.join(args),
                                                      p.returncode, p.stdout, p.stderr))
    return p


def load_rows(path):
    rd = RingData.load(path)
    return rd, [array('H', row) for row in rd._replica2part2dev_id]


def replica_count(rows):
    return len(rows) - 1 + len(rows[-1]) / float(len(rows[0]))


def metrics(path):
    """(balance, dispersion) of a ring file, with Swift's definitions over all partitions."""
    rd, rows = load_rows(path)
    parts = len(rows[0])
    replicas = replica_count(rows)
    devs = [d for d in rd.devs if d is not None]
    counts = {d['id']: 0 for d in devs}
    for row in rows:
        for dev_id in row:
            counts[dev_id] += 1
    total_weight = sum(d['weight'] for d in devs)
    weight_of_one_part = parts * replicas / total_weight
    balance = 0.0
    for d in devs:
        if not d['weight']:
            b = 999.99 if counts[d['id']] else 0.0
        else:
            b = abs(100.0 * counts[d['id']] / (d['weight'] * weight_of_one_part) - 100.0)
        balance = max(balance, b)
    # Swift's per-tier replica limits for these devices and weights.
    shadow = RingBuilder(32 - rd._part_shift, replicas, 1)
    for d in devs:
        shadow.add_dev(dict((k, d[k]) for k in ('id', 'region', 'zone', 'ip', 'port', 'device',
                                                   'weight', 'replication_ip', 'replication_port',
                                                   'meta')))
    max_allowed = shadow._build_max_replicas_by_tier()
    by_id = dict((d['id'], d) for d in devs)
    at_risk = 0
    for part in range(parts):
        tiers = {}
        for row in rows:
            if part < len(row):
                d = by_id[row[part]]
                for t in ((d['region'],), (d['region'], d['zone']),
                          (d['region'], d['zone'], d['ip']),
                          (d['region'], d['zone'], d['ip'], d['id'])):
                    tiers[t] = tiers.get(t, 0) + 1
        depth_risk = {0: 0}
        for t, n in tiers.items():
            if n > max_allowed[t]:
                depth_risk[len(t)] = depth_risk.get(len(t), 0) + n - max_allowed[t]
        at_risk += max(depth_risk.values())
    return balance, 100.0 * at_risk / (parts * replicas)


def moved(before, after):
    """Partition replicas whose device differs between two ring files."""
    _, a = load_rows(before)
    _, b = load_rows(after)
    n = 0
    for r in range(max(len(a), len(b))):
        ra = a[r] if r < len(a) else array('H')
        rb = b[r] if r < len(b) else array('H')
        for p in range(max(len(ra), len(rb))):
            if p >= len(ra) or p >= len(rb) or ra[p] != rb[p]:
                n += 1
    return n


def read_apus_builder(path):
    """Parses an Apus .builder file as ring/FORMAT.md describes it."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:2] == b'\x1f\x8b':
        data = gzip.decompress(data)
    assert data[:8] == b'APUSBLDR', 'bad magic'
    version, header_len = struct.unpack('<II', data[8:16])
    assert version == 1, version
    assert zlib.crc32(data[:-4]) == struct.unpack('<I', data[-4:])[0], 'bad checksum'
    header = json.loads(data[16:16 + header_len])
    pos = 16 + header_len
    rows = []
    for n in header['row_lengths']:
        row = array('H')
        row.frombytes(data[pos:pos + 2 * n])
        if sys.byteorder == 'big':
            row.byteswap()
        rows.append(row)
        pos += 2 * n
    parts = 2 ** header['part_power']
    assert len(data) - 4 - pos == parts, 'move history size'
    return header, rows


def check_ring_loads(ring_path, builder_path):
    """Swift's Ring reads Apus's ring with the assignment and devices of Apus's builder."""
    header, rows = read_apus_builder(builder_path)
    ring = Ring(ring_path)
    assert [list(r) for r in ring._replica2part2dev_id] == [list(r) for r in rows], \
        'ring assignment differs from the builder'
    for part in range(ring.partition_count):
        want = []
        for row in rows:
            if part < len(row) and row[part] not in want:
                want.append(row[part])
        got = [n['id'] for n in ring.get_part_nodes(part)]
        assert got == want, 'partition %d: %r != %r' % (part, got, want)
    for d, b in zip(ring.devs, header['devs']):
        if b is None:
            assert d is None
            continue
        for k in ('id', 'region', 'zone', 'ip', 'port', 'replication_ip', 'replication_port',
                  'device', 'weight', 'meta'):
            assert d[k] == b[k], (k, d[k], b[k])


def scenario(apus, workdir, name):
    part_power, replicas, add_args, steps = SCENARIOS[name]
    failures = []
    identical_all = True
    print('scenario %s: part power %d, %s replicas, %d devices' % (
        name, part_power, replicas, len(add_args) // 2))
    print('  %-4s %-18s %21s %21s %17s  %s' % ('seed', 'step', 'balance swift/apus',
                                             'dispersion swift/apus', 'moved swift/apus',
                                             'same ring'))
    for seed in SEEDS if part_power < 14 else BIG_PART_POWER_SEEDS:
        dirs = {}
        for tool, label in ((SWIFT, 'swift'), (apus, 'apus')):
            d = os.path.join(workdir, name, seed, label)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            dirs[label] = d
            run(tool, d, 'create', str(part_power), str(replicas), '1', ok=(0,))
            run(tool, d, 'add', *add_args, ok=(0,))
            run(tool, d, 'rebalance', seed)
            shutil.copy(os.path.join(d, 'x.ring.gz'), os.path.join(d, 'step0.ring.gz'))
        for i, (label, args) in enumerate([('initial', None)] + steps):
            if args is not None:
                for tool, who in ((SWIFT, 'swift'), (apus, 'apus')):
                    d = dirs[who]
                    run(tool, d, *args, ok=(0, 1))
                    run(tool, d, 'pretend_min_part_hours_passed', ok=(0,))
                    run(tool, d, 'rebalance', seed)
                    shutil.copy(os.path.join(d, 'x.ring.gz'),
                                os.path.join(d, 'step%d.ring.gz' % i))
            figures = {}
            for who in ('swift', 'apus'):
                ring = os.path.join(dirs[who], 'step%d.ring.gz' % i)
                bal, disp = metrics(ring)
                mv = moved(os.path.join(dirs[who], 'step%d.ring.gz' % (i - 1)), ring) if i else 0
                figures[who] = (bal, disp, mv)
            same = (load_rows(os.path.join(dirs['swift'], 'step%d.ring.gz' % i))[1] ==
                    load_rows(os.path.join(dirs['apus'], 'step%d.ring.gz' % i))[1])
            identical_all = identical_all and same
            s, a = figures['swift'], figures['apus']
            print('  %-4s %-18s %10.4f/%-10.4f %10.4f/%-10.4f %8d/%-8d  %s' % (
                seed, label, s[0], a[0], s[1], a[1], s[2], a[2], 'yes' if same else 'no'))
            if a[0] > s[0] + EPS:
                failures.append('%s seed %s %s: balance %.4f > %.4f' % (name, seed, label,
                                                                       a[0], s[0]))
            if a[1] > s[1] + EPS:
                failures.append('%s seed %s %s: dispersion %.4f > %.4f' % (name, seed, label,
                                                                          a[1], s[1]))
            if a[2] > s[2]:
                failures.append('%s seed %s %s: moved %d > %d' % (name, seed, label, a[2], s[2]))
        # Every ring Apus wrote loads in Swift's Ring with Apus's assignment.
        check_ring_loads(os.path.join(dirs['apus'], 'x.ring.gz'),
                         os.path.join(dirs['apus'], 'x.builder'))
        run(apus, dirs['apus'], 'validate', ok=(0,))
    if not failures:
        shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
    print('  identical rings for every seed and step: %s' % ('yes' if identical_all else 'no'))
    print('  apus rings load in swift.common.ring.Ring with the builder\'s assignment: yes')
    return failures


def pickle_import(apus, workdir):
    base = os.path.join(workdir, 'pickle')
    shutil.rmtree(base, ignore_errors=True)
    s_dir, a_dir = os.path.join(base, 'swift'), os.path.join(base, 'apus')
    os.makedirs(s_dir)
    run(SWIFT, s_dir, 'create', '12', '3', '1', ok=(0,))
    run(SWIFT, s_dir, 'add', *devices(1, 4, 2, 2, lambda i: 100 + 25 * (i % 3)), ok=(0,))
    run(SWIFT, s_dir, 'rebalance', '4')
    shutil.copytree(s_dir, a_dir)
    # The listing of the imported builder is Swift's, line for line.
    s_list = run(SWIFT, s_dir, ok=(0,)).stdout.splitlines()
    a_list = run(apus, a_dir, ok=(0,)).stdout.splitlines()
    assert s_list[3:] == a_list[3:] and s_list[:2] == a_list[:2], \
        'listings differ:\n%s\n---\n%s' % ('\n'.join(s_list), '\n'.join(a_list))
    for tool, d in ((SWIFT, s_dir), (apus, a_dir)):
        run(tool, d, 'add', 'r1z2-10.1.2.9:6200/sdz', '150', ok=(0,))
        run(tool, d, 'set_weight', 'd0', '50', ok=(0,))
        run(tool, d, 'pretend_min_part_hours_passed', ok=(0,))
        run(tool, d, 'rebalance', '9')
    with open(os.path.join(s_dir, 'x.ring.gz'), 'rb') as f:
        swift_ring = f.read()
    with open(os.path.join(a_dir, 'x.ring.gz'), 'rb') as f:
        apus_ring = f.read()
    assert swift_ring == apus_ring, 'rings from the imported builder differ from Swift\'s'
    kept = [n for n in os.listdir(os.path.join(a_dir, 'backups')) if n.endswith('.swift-pickle')]
    assert kept, 'the Swift pickle was not kept in backups/'
    check_ring_loads(os.path.join(a_dir, 'x.ring.gz'), os.path.join(a_dir, 'x.builder'))
    # A ring Apus wrote becomes a Swift builder again, which validates.
    back = os.path.join(base, 'back')
    os.makedirs(back)
    shutil.copy(os.path.join(a_dir, 'x.ring.gz'), os.path.join(back, 'y.ring.gz'))
    p = subprocess.run([SWIFT, 'y.ring.gz', 'write_builder', '1'], cwd=back, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([SWIFT, 'y.builder', 'validate'], cwd=back, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    shutil.rmtree(base, ignore_errors=True)
    print('pickle: swift builder imported (same listing), same changes give a byte-identical '
          'ring (%d bytes); swift write_builder of the apus ring validates' % len(apus_ring))
    return []


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    apus, workdir, what = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(workdir, exist_ok=True)
    failures = pickle_import(apus, workdir) if what == 'pickle' else scenario(apus, workdir, what)
    if failures:
        print('FAILED:\n  ' + '\n  '.join(failures))
        return 1
    print('OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
