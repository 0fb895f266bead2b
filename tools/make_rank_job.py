#!/usr/bin/python3
"""Build the rank traces of a data-parallel job from one real rank's trace,
with stragglers injected where the test says: the multi-rank analysis must
find exactly what was injected (tests/test_trace_job.c, `make bench-ranks`).

The template is a real gloo DDP rank (tests/traces/ddp2/rank1: it carries a
30 ms `data` range at the start of every step). Its `data` ranges are cut to
10 us, which gives a rank that is never late. Every generated rank is that
clean rank, its times warped where it is told to be late:

  --straggler R:MS       rank R's `data` range takes MS ms more in every step
  --late R:STEP:MS       rank R is MS ms late in step STEP (ProfilerStep#STEP),
                         in host time no range records (just after `data`)
  --release R:STEP       in step STEP, rank R leaves the first broadcasts once
                         the --straggler ranks have arrived (as a broadcast's
                         receivers that the late rank does not hold up), runs
                         ahead and waits for the rest inside the step's first
                         all-reduce instead: the ranks still held wait inside
                         the broadcast for a --late rank, then reach the
                         all-reduce late with it (issue 31 item 6)
  --clock R:MS           rank R's clock is MS ms ahead: its baseTimeNanoseconds
                         grows by MS ms and its times shrink by as much (the
                         wall clock, and so the job, unchanged)

The ranks meet at the first collectives of each step (DDP's buffer
broadcasts at the start of the forward): a late rank arrives late there; the
others wait inside them (their broadcasts' annotations start on time and end
when the last rank has arrived): from just after the last of those
broadcasts started, every rank runs the same, shifted by the step's largest
delay. Each rank's map of times is monotonic, so nested ranges stay nested.

usage: make_rank_job.py --template T.json.gz --ranks N --out DIR [injections]
       [--gzip]  (write rankR.trace.json.gz instead of rankR.trace.json)
"""
import argparse
import bisect
import gzip
import json
import os
import sys


def load(path):
    op = gzip.open if path.endswith('.gz') else open
    with op(path, 'rt', encoding='utf-8') as f:
        return json.load(f)


def is_step(e):
    return e.get('ph') == 'X' and e.get('cat') == 'user_annotation' and \
        str(e.get('name', '')).startswith('ProfilerStep#')


class Warp:
    """A monotonic piecewise-linear map of template times: knots (x, y)."""

    def __init__(self, knots):
        knots = sorted(knots)
        self.x = [k[0] for k in knots]
        self.y = [k[1] for k in knots]

    def __call__(self, t):
        i = bisect.bisect_right(self.x, t)
        if i == 0:
            return t + (self.y[0] - self.x[0])
        if i == len(self.x):
            return t + (self.y[-1] - self.x[-1])
        x0, x1, y0, y1 = self.x[i - 1], self.x[i], self.y[i - 1], self.y[i]
        if x1 == x0:
            return y1
        return y0 + (t - x0) * (y1 - y0) / (x1 - x0)


def clean(doc):
    """The template without its `data` ranges' time (each cut to 10 us)."""
    ev = doc['traceEvents']
    data = sorted((e['ts'], e['ts'] + e['dur']) for e in ev
                  if e.get('ph') == 'X' and e.get('name') == 'data')
    knots, cut = [], 0.0
    for a, b in data:
        keep = 10.0
        knots.append((a + keep, a + keep - cut))
        cut += (b - a) - keep
        knots.append((b, b - cut))
    w = Warp(knots) if knots else None
    if w:
        for e in ev:
            if 'ts' not in e:
                continue
            a = e['ts']
            na = w(a)
            if 'dur' in e:
                e['dur'] = max(0.0, w(a + e['dur']) - na)
            e['ts'] = na
    return doc


def sync_points(doc):
    """Per step: the `data` range's end (where delays go), the first
    collective's start (where ranks meet) and the end of the collectives
    that start with it (where they leave together)."""
    ev = doc['traceEvents']
    steps = sorted((e['ts'], e['ts'] + e['dur'], e['name']) for e in ev if is_step(e))
    datas = sorted(e['ts'] + e['dur'] for e in ev if e.get('ph') == 'X' and e.get('name') == 'data')
    colls = sorted((e['ts'], e['ts'] + e['dur']) for e in ev if e.get('ph') == 'X' and
                   e.get('cat') == 'user_annotation' and str(e.get('name', '')).startswith('gloo:'))
    reduces = sorted(e['ts'] for e in ev if e.get('ph') == 'X' and
                     e.get('cat') == 'user_annotation' and str(e.get('name', '')).startswith('gloo:all_reduce'))
    out = []
    for a, b, name in steps:
        d = [x for x in datas if a <= x <= b]
        c = [x for x in colls if a <= x[0] <= b]
        if not d or not c:
            continue
        first = c[0][0]
        meet = [x for x in c if x[0] - first < 2000.0]   # the broadcasts that start together
        met = max(x[0] for x in meet) + 1.0
        red = [x for x in reduces if met < x <= b]
        out.append({'name': name, 'inject': d[0], 'arrive': first,
                    'met': met, 'leave': max(x[1] for x in meet),
                    'reduce': red[0] if red else None})
    return out


def rank_warp(points, delays, every, released=(), steady=0.0):
    """delays[s] = (ms this rank is late in step s, 'data' or 'host');
    every rank's map shares the steps' largest delays (of `every` rank)
    after each meeting; in a step of `released` it shares only `steady` ms
    (the --straggler delays) until the step's first all-reduce."""
    knots, shift = [], 0.0
    for s, p in enumerate(points):
        mine = delays[s][0] * 1000.0 if s in delays else 0.0
        most = max(d[s][0] * 1000.0 if s in d else 0.0 for d in every)
        at = p['inject'] if (s in delays and delays[s][1] == 'data') else p['inject'] + 0.001
        knots.append((at - 0.0005, at - 0.0005 + shift))
        knots.append((at, at + shift + mine))
        knots.append((p['met'] - 0.0005, p['met'] - 0.0005 + shift + mine))
        if s in released and p['reduce'] is not None:
            rel = max(steady * 1000.0, mine)
            knots.append((p['met'], p['met'] + shift + rel))
            knots.append((p['reduce'], p['reduce'] + shift + rel))
            shift += most
            knots.append((p['reduce'] + 0.001, p['reduce'] + 0.001 + shift))
            continue
        shift += most
        knots.append((p['met'], p['met'] + shift))
    if not knots:
        knots.append((0.0, 0.0))
    return Warp(knots)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--template', required=True)
    ap.add_argument('--ranks', type=int, required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--straggler', action='append', default=[])
    ap.add_argument('--late', action='append', default=[])
    ap.add_argument('--clock', action='append', default=[])
    ap.add_argument('--release', action='append', default=[])
    ap.add_argument('--gzip', action='store_true')
    a = ap.parse_args()
    n = a.ranks
    doc = clean(load(a.template))
    points = sync_points(doc)
    index = {p['name']: s for s, p in enumerate(points)}
    delays = [dict() for _ in range(n)]
    steady = 0.0
    for x in a.straggler:
        r, ms = x.split(':')
        steady = max(steady, float(ms))
        for s in range(len(points)):
            delays[int(r)][s] = (float(ms), 'data')
    released = [set() for _ in range(n)]
    for x in a.release:
        r, step = x.split(':')
        released[int(r)].add(index['ProfilerStep#' + step])
    for x in a.late:
        r, step, ms = x.split(':')
        s = index['ProfilerStep#' + step]
        prev = delays[int(r)].get(s, (0.0, 'host'))
        delays[int(r)][s] = (prev[0] + float(ms), prev[1] if prev[0] else 'host')
    clocks = {}
    for x in a.clock:
        r, ms = x.split(':')
        clocks[int(r)] = float(ms)
    os.makedirs(a.out, exist_ok=True)
    # each event serialised once with holes for its times: ranks differ only there
    ev = doc.pop('traceEvents')
    parts = []
    for e in ev:
        if 'ts' not in e:
            parts.append((json.dumps(e, separators=(',', ':')), None, None))
            continue
        ts, dur = e['ts'], e.get('dur')
        e2 = dict(e)
        e2['ts'] = '@TS@'
        if dur is not None:
            e2['dur'] = '@DUR@'
        s = json.dumps(e2, separators=(',', ':'))
        parts.append((s, ts, dur))
    base = doc.get('baseTimeNanoseconds', 0)
    for r in range(n):
        w = rank_warp(points, delays[r], delays, released[r], steady)
        off = clocks.get(r, 0.0) * 1000.0   # us
        head = dict(doc)
        info = dict(head.get('distributedInfo', {}))
        info['rank'] = r
        info['world_size'] = n
        info['pg_config'] = [{'pg_name': '0', 'pg_desc': 'default_pg', 'backend_config': 'cpu:gloo,cuda:gloo',
                              'pg_size': n, 'ranks': list(range(min(n, 64)))}]
        head['distributedInfo'] = info
        head['baseTimeNanoseconds'] = base + int(round(off * 1000))
        out = []
        for s, ts, dur in parts:
            if ts is None:
                out.append(s)
                continue
            a0 = w(ts)
            s = s.replace('"@TS@"', '%.3f' % (a0 - off))
            if dur is not None:
                s = s.replace('"@DUR@"', '%.3f' % max(0.0, w(ts + dur) - a0))
            out.append(s)
        body = json.dumps(head, separators=(',', ':'))[:-1] + ',"traceEvents":[' + ',\n'.join(out) + ']}'
        name = os.path.join(a.out, 'rank%d.trace.json' % r + ('.gz' if a.gzip else ''))
        if a.gzip:
            with gzip.open(name, 'wt', encoding='utf-8', compresslevel=1) as f:
                f.write(body)
        else:
            with open(name, 'w', encoding='utf-8') as f:
                f.write(body)
    return 0


if __name__ == '__main__':
    sys.exit(main())
