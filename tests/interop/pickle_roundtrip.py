#!/usr/bin/python3
"""Checks with stock Python and Swift (python3-swift) what Apus' pickle codec writes and reads.

Usage: /usr/bin/python3 pickle_roundtrip.py <path to the pickle_roundtrip program>

The unit tests check that Apus reads Python's pickles (tests/interop/swift_vectors.py); this
checks the other direction, by driving tests/interop/pickle_roundtrip.cpp:

  1. dumps: every pickle case of swift_vectors.pickle_cases() (values built afresh, Swift's
     async_pendings, hashes.pkl and REPLICATE bodies, Python 2 pickles, protocol 3/4 pickles) is
     loaded by Apus and written again at protocols 0, 1 and 2; Python's pickle.loads() must give
     back the same value. Where Python's own pickle.dumps() of that value is known, Apus' bytes
     must be identical.
  2. object metadata: for Swift's metadata and for random wire metadata, Apus'
     encode_object_metadata() is stored in xattrs and read by Swift's diskfile.read_metadata(),
     which must return what it returns for Swift's own write_metadata() of the same request,
     and the pickles must be byte-identical.
  3. fuzz: random mutations of all those pickles are loaded by Apus and by Python (restricted to
     the globals Apus allows). Whatever Apus accepts, Python must accept with the same value.
     Inputs Apus alone rejects are counted by reason, not failed: Apus is stricter by design.

Exits non-zero on any failure.
"""

import collections
import os
import pickle
import pickletools
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swift_vectors  # noqa: E402 (pickle cases and canon())
from swift_vectors import canon  # noqa: E402

SEED = 20240612
FUZZ_CASES = 6000


class Tool(object):
    def __init__(self, path):
        self.path = path

    def run(self, requests):
        """[(command, argument)] -> [(ok, result)], in one process run."""
        data = ''.join('%s\t%s\n' % r for r in requests)
        proc = subprocess.run([self.path], input=data.encode('ascii'), stdout=subprocess.PIPE,
                              check=True, timeout=600)
        lines = proc.stdout.decode('ascii', 'replace').split('\n')[:-1]
        assert len(lines) == len(requests), (len(lines), len(requests))
        out = []
        for line in lines:
            status, _, result = line.partition('\t')
            out.append((status == 'ok', result))
        return out


class Failures(object):
    def __init__(self):
        self.count = 0

    def add(self, *what):
        self.count += 1
        if self.count <= 20:
            print('FAIL:', *what)


def python_reads(data):
    """What Swift's readers get: pickle.loads() with Python 3's defaults."""
    return pickle.loads(data)


def check_dumps(tool, cases, failures):
    requests, expected = [], []
    for label, proto, data in cases['dump']:
        requests.append(('dumps%d' % proto, data.hex()))
        expected.append((label, proto, data, True))
    for label, data in cases['load']:
        for proto in (0, 1, 2):
            requests.append(('dumps%d' % proto, data.hex()))
            expected.append((label, proto, data, False))
    identical = collections.Counter()
    for (label, proto, data, exact), (ok, result) in zip(expected, tool.run(requests)):
        if not ok:
            failures.add('dumps', label, proto, result)
            continue
        ours = bytes.fromhex(result)
        want = canon(swift_vectors.pickle_load(data))
        try:
            got = canon(python_reads(ours))
        except Exception as e:  # noqa: BLE001 (any failure to load is the finding)
            failures.add('python cannot load apus dumps', label, proto, repr(e))
            continue
        if got != want:
            failures.add('value differs', label, proto, got[:120], want[:120])
        if exact and ours != data:
            failures.add('not byte-identical', label, proto, result[:120], data.hex()[:120])
        identical['%s identical' % ('expected' if exact else 'other')] += ours == data
        identical['%s total' % ('expected' if exact else 'other')] += 1
    print('dumps: %d of %d pickles byte-identical where Python\'s bytes are known; '
          '%d of %d others (Swift async_pendings, py2 and protocol 3/4 pickles) loaded back '
          'equal by Python' % (identical['expected identical'], identical['expected total'],
                               identical['other total'], identical['other total']))


def random_wire_metadata(rng):
    def raw(n):
        return bytes(rng.randrange(256) for _ in range(rng.randrange(n)))
    name = '/AUTH_%s/c%s/o%s' % tuple(swift_vectors.fresh_str(rng) for _ in range(3))
    name = name.encode('utf-8', 'surrogatepass')
    if rng.random() < 0.2:
        name += raw(4)  # not UTF-8: Swift keeps such bytes through surrogateescape
    pairs = [(b'name', name), (b'X-Timestamp', b'1700000000.00000')]
    for i in range(rng.randrange(0, 12)):
        key = b'X-Object-Meta-%d-' % i + raw(6)
        pairs.append((key, raw(rng.choice([1, 2, 10, 60]))))
    return pairs


def swift_metadata_dict(pairs):
    # What Swift's object server holds for these wire bytes: WSGI strings, real text for name.
    return {k.decode('latin-1'): (v.decode('utf-8', 'surrogateescape') if k == b'name'
                                  else v.decode('latin-1'))
            for k, v in pairs}


def store_metadata(path, data):
    import xattr
    from swift.common.utils import md5
    for i in range(0, max(len(data), 1), 65536):
        n = i // 65536
        xattr.setxattr(path, 'user.swift.metadata' + (str(n) if n else ''), data[i:i + 65536])
    xattr.setxattr(path, 'user.swift.metadata_checksum',
                   md5(data, usedforsecurity=False).hexdigest().encode('ascii'))


def check_metadata(tool, cases, rng, failures):
    from swift.obj import diskfile
    samples = [(label, pairs) for label, writer, _, pairs in cases['meta'] if writer == 'py3']
    samples += [('random-%d' % i, random_wire_metadata(rng)) for i in range(300)]
    results = tool.run([('encmeta', swift_vectors.wire_pairs_hex(p)) for _, p in samples])
    identical = 0
    with tempfile.TemporaryDirectory(prefix='apus-pickle-roundtrip-') as tmp:
        ours_path = os.path.join(tmp, 'apus')
        swift_path = os.path.join(tmp, 'swift')
        for (label, pairs), (ok, result) in zip(samples, results):
            if not ok:
                failures.add('encmeta', label, result)
                continue
            for p in (ours_path, swift_path):
                open(p, 'wb').close()
            ours = bytes.fromhex(result)
            store_metadata(ours_path, ours)
            diskfile.write_metadata(swift_path, swift_metadata_dict(pairs))
            got = diskfile.read_metadata(ours_path)
            want = diskfile.read_metadata(swift_path)
            if got != want:
                failures.add('read_metadata differs', label, got, want)
            if ours == swift_vectors.metadata_xattr(swift_path):
                identical += 1
            else:
                failures.add('metadata not byte-identical to Swift', label)
    print('metadata: %d of %d Apus metadata pickles read by Swift as its own, byte-identical'
          % (identical, len(samples)))


class RestrictedUnpickler(pickle.Unpickler):
    ALLOWED = {('_codecs', 'encode'), ('copy_reg', '_reconstructor'),
               ('copyreg', '_reconstructor'), ('swift.common.header_key_dict', 'HeaderKeyDict'),
               ('__builtin__', 'dict'), ('builtins', 'dict'), ('__builtin__', 'bytes'),
               ('builtins', 'bytes')}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError('global %s.%s not allowed' % (module, name))
        return super().find_class(module, name)


def safe_for_python(data):
    # CPython grows its memo table to the largest PUT index; skip inputs that would make it
    # allocate gigabytes. Only opcodes before a parse error matter: loading stops there too.
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ('PUT', 'BINPUT', 'LONG_BINPUT') and arg > 10 ** 6:
                return False
            if op.name == 'STOP':
                break
    except Exception:  # noqa: BLE001
        pass
    return True


def python_restricted(data):
    import io
    try:
        return True, canon(RestrictedUnpickler(io.BytesIO(data), encoding='bytes').load())
    except RecursionError:
        return False, 'recursion'
    except Exception as e:  # noqa: BLE001
        return False, '%s: %s' % (type(e).__name__, e)


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        if not data:
            break
        at = rng.randrange(len(data))
        k = rng.random()
        if k < 0.3:
            data[at] = rng.randrange(256)
        elif k < 0.5:
            data[at] = rng.choice(b'(.)]}NIJKLMFGSTUVXabcdeghjlpqrstu012\x80\x85\x86\x87\x88'
                                  b'\x8a\x8c\x94\n')
        elif k < 0.65:
            data.insert(at, rng.randrange(256))
        elif k < 0.8:
            del data[at:at + rng.randrange(1, 5)]
        elif k < 0.9:
            start = rng.randrange(len(data))
            data[at:at] = data[start:start + rng.randrange(1, 16)]
        else:
            data[at] ^= 1 << rng.randrange(8)
    return bytes(data)


def check_fuzz(tool, cases, rng, failures):
    seeds = [d for _, _, d in cases['dump'] if len(d) < 4000]
    seeds += [d for _, d in cases['load'] if len(d) < 4000]
    seeds += [d for _, _, d, _ in cases['meta']]
    inputs = []
    while len(inputs) < FUZZ_CASES:
        m = mutate(rng, rng.choice(seeds))
        if safe_for_python(m):
            inputs.append(m)
    results = tool.run([('loads', m.hex()) for m in inputs])
    counts = collections.Counter()
    stricter = collections.Counter()
    for data, (ok, result) in zip(inputs, results):
        py_ok, py_result = python_restricted(data)
        if ok and not py_ok:
            failures.add('apus accepts what Python rejects', data.hex()[:200], py_result)
        elif ok and result != py_result:
            failures.add('apus loads a different value', data.hex()[:200], result[:100],
                         py_result[:100])
        elif ok:
            counts['both accept, same value'] += 1
        elif py_ok:
            counts['only Python accepts'] += 1
            reason = result.split(': ', 2)[-1].split(' at offset')[0]
            stricter[reason] += 1
        else:
            counts['both reject'] += 1
    print('fuzz: %d mutated pickles: %s' % (len(inputs), ', '.join(
        '%s %d' % kv for kv in sorted(counts.items()))))
    for reason, n in stricter.most_common(12):
        print('  only Python accepts (%d): %s' % (n, reason))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write('usage: %s <pickle_roundtrip program>\n' % sys.argv[0])
        return 2
    tool = Tool(sys.argv[1])
    rng = random.Random(SEED)
    cases = swift_vectors.pickle_cases(rng)
    failures = Failures()
    check_dumps(tool, cases, failures)
    check_metadata(tool, cases, rng, failures)
    check_fuzz(tool, cases, rng, failures)
    if failures.count:
        print('%d failures' % failures.count)
        return 1
    print('all checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
