#!/usr/bin/python3
"""The multi-rank analysis at scale (make bench-ranks): a job of N rank traces
built from the real gloo DDP rank (tools/make_rank_job.py: stragglers and a
late step injected), analysed by `mpirun -n P modelprof-mpi trace` on the
first 1/8, 1/4, 1/2 and all of the ranks. Prints, per size, the bytes of JSON
read, the wall and CPU time and each process's peak RSS; checks that time
grows linearly in bytes (CPU time against bytes on a line, R^2 >= 0.98), that the
memory of the processes that read traces stays bounded (the largest run's
peak RSS within 1.5x of the smallest's), and that the injected stragglers
and the late step's rank are found.

usage: bench_ranks.py --mpi build/modelprof-mpi --out build/bench-ranks [--ranks 1024] [--procs 2]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time


def injected(n):
    """Two steady stragglers (30 ms and 15 ms more of `data` every step) and a
    rank 150 ms late in step 4 (1,024 ranks: ranks 3 and 517, rank 700)."""
    return {3: 30.0, n // 2 + 5: 15.0}, (n * 683 // 1000, 4, 150.0)



def gz_size(path):
    """Uncompressed bytes of a one-member gzip file (ISIZE, < 4 GB)."""
    with open(path, 'rb') as f:
        f.seek(-4, 2)
        return struct.unpack('<I', f.read(4))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--mpi', default='build/modelprof-mpi')
    ap.add_argument('--out', default='build/bench-ranks')
    ap.add_argument('--ranks', type=int, default=1024)
    ap.add_argument('--procs', type=int, default=2)
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args()
    n = a.ranks
    STRAGGLERS, LATE = injected(n)
    every = os.path.join(a.out, 'all')
    made = os.path.isdir(every) and len([f for f in os.listdir(every) if f.endswith('.json.gz')]) == n
    if not made:
        shutil.rmtree(every, ignore_errors=True)
        args = ['/usr/bin/python3', 'tools/make_rank_job.py', '--template', 'tests/traces/ddp2/rank1.trace.json.gz',
                '--ranks', str(n), '--out', every, '--gzip', '--late', '%d:%d:%g' % LATE]
        for r, ms in STRAGGLERS.items():
            args += ['--straggler', '%d:%g' % (r, ms)]
        t = time.time()
        subprocess.run(args, check=True)
        print('bench-ranks: %d rank traces made in %.0f s (%s)' % (n, time.time() - t, every))
    names = sorted(os.listdir(every), key=lambda s: int(s[4:].split('.')[0]))
    mpirun = ['mpirun', '--oversubscribe', '-n', str(a.procs)]
    if os.geteuid() == 0:
        mpirun.insert(1, '--allow-run-as-root')
    rows = []
    sizes = [n // 8, n // 4, n // 2, n]
    for k in sizes:
        d = os.path.join(a.out, 'n%d' % k)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in names[:k]:
            os.symlink(os.path.abspath(os.path.join(every, f)), os.path.join(d, f))
        json_bytes = sum(gz_size(os.path.join(every, f)) for f in names[:k])
        gz_bytes = sum(os.path.getsize(os.path.join(every, f)) for f in names[:k])
        out = os.path.join(a.out, 'job%d.json' % k)
        cmd = mpirun + ['/usr/bin/time', '-f', 'bench-rss-kb %M %U %S', a.mpi, 'trace', '--format', 'json', d, '-o', out]
        t = time.time()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wall = time.time() - t
        if r.returncode != 0:
            print(r.stderr.decode()[-2000:])
            return 1
        lines = [x.split() for x in r.stderr.decode().splitlines() if x.startswith('bench-rss-kb')]
        rss = sorted(int(x[1]) for x in lines)
        cpu = sum(float(x[2]) + float(x[3]) for x in lines)
        with open(out, encoding='utf-8') as f:
            job = json.load(f)['job']
        rows.append((k, json_bytes, gz_bytes, wall, rss, job, os.path.getsize(out), cpu))
        shutil.rmtree(d)
    print('bench-ranks: mpirun -n %d modelprof-mpi trace --format json (a job of rank traces made from '
          'tests/traces/ddp2/rank1, gzipped)' % a.procs)
    print('%6s %12s %10s %8s %8s %10s %16s %10s' % ('ranks', 'JSON bytes', 'gz bytes', 'wall s', 'CPU s',
                                                  'MB/CPU-s', 'peak RSS MB', 'report MB'))
    for k, jb, gb, wall, rss, job, rep, cpu in rows:
        print('%6d %12d %10d %8.2f %8.2f %10.1f %16s %10.1f' % (k, jb, gb, wall, cpu, jb / cpu / 1e6,
                                                               '/'.join('%.0f' % (x / 1024) for x in rss), rep / 1e6))
    ok = True
    # linear in bytes: CPU time (all processes) against bytes read, a
    # least-squares line (its intercept: MPI's and the processes' start-up)
    xs = [r[1] for r in rows]
    ys = [r[7] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    icpt = my - slope * mx
    ss_res = sum((y - icpt - slope * x) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-12
    r2 = 1 - ss_res / ss_tot
    print('CPU seconds = %.2f + bytes / (%.0f MB/s): R^2 %.4f (linear in bytes: >= 0.98); wall time on a shared '
          'machine (load %.1f)' % (icpt, 1e-6 / slope if slope > 0 else 0, r2, os.getloadavg()[0]))
    ok &= r2 >= 0.98

    small, big = rows[0][4], rows[-1][4]
    # the process that reads traces only (not process 0, which also holds the digests)
    grow = big[0] / small[0]
    print('peak RSS of the smallest process: %.0f MB at %d ranks, %.0f MB at %d ranks (x%.2f; bounded: <= 1.5)'
          % (small[0] / 1024, rows[0][0], big[0] / 1024, rows[-1][0], grow))
    print('peak RSS of process 0 (reads traces, holds every rank\'s summary, writes the report): %.0f MB at %d ranks, '
          '%.0f MB at %d ranks' % (small[-1] / 1024, rows[0][0], big[-1] / 1024, rows[-1][0]))
    ok &= grow <= 1.5
    job = rows[-1][5]
    found = sorted(s['rank'] for s in job['stragglers'])
    late = [s for s in job['steps'] if s['name'] == 'ProfilerStep#%d' % LATE[1]]
    print('stragglers found: %s (injected %s); the late step\'s rank: %s (injected %d)' % (
        found, sorted(STRAGGLERS), late[0]['critical_rank'] if late else None, LATE[0]))
    ok &= found == sorted(STRAGGLERS) and bool(late) and late[0]['critical_rank'] == LATE[0]
    if not a.keep:
        shutil.rmtree(a.out, ignore_errors=True)
    print('bench-ranks: %s' % ('PASS' if ok else 'FAIL'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
