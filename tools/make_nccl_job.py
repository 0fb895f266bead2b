#!/usr/bin/python3
"""Synthetic NCCL multi-rank job with known ground truth (tests/traces/tpdp_sorted: `tools/make_nccl_job.py
tests/traces/tpdp_sorted/scenario.py OUT --ts-sorted`, then gzip -9 each rank).

Each rank, each step (host thread tid=100, compute stream 7, nccl stream 20):
  [data loader range dl][unrecorded host stall h] then per phase:
    compute:  cpu_op aten::mm [t,t+30] with cudaLaunchKernel [t+5,t+25];
              kernel starts max(dev_free, t+30), runs K
    coll:     record_param_comms [t,t+30] (+cudaLaunchKernel [t+5,t+25]);
              nccl kernel arrives A = max(dev_free, t+30),
              ends at max(A over the group) + X; host then cudaDeviceSynchronize
              until end+5
  step ends 20 us after the last sync; the next step starts there.
All times us on the *job* clock; a rank's clock offset (ms) subtracts from its
ts and adds to baseTimeNanoseconds (consistent), or with --raw-shift only shifts
ts (an unsynchronised clock, base unchanged).

Scenario = python dict file (see scen_*.py). Ground truth dumped in truth.json.
"""
import json, os, sys, copy

T0 = 5_000_000_000.0
BASE = 1_790_000_000_000_000_000
X = 1000.0  # collective transfer time
TS_SORTED = False


def simulate(sc):
    n = sc['world']
    steps = sc['steps']             # list of step numbers (names ProfilerStep#N)
    nsteps_r = sc.get('nsteps', {})  # rank -> how many of the steps it records
    phases = sc['phases']           # list of ('compute', K) / ('coll', groupkind, collname, nelems)
    groups = sc['groups']           # groupkind -> list of (pgname, [ranks])
    def p(r, s, key, default):
        return sc.get(key, {}).get((r, s), sc.get(key + '_all', {}).get(r, default))
    host = [T0] * n
    dev = [T0] * n
    ev = [[] for _ in range(n)]
    corr = [1000] * n
    seq = {}  # (rank, pg) -> seq
    truth = {'steps': {}, 'calls': []}
    for s in steps:
        st = {'start': list(host), 'arrivals': [], 'walls': None}
        t = list(host)
        for r in range(n):
            dl = p(r, s, 'dl', 100.0)
            ev[r].append(('annot', 'enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__', t[r], dl))
            t[r] += dl + p(r, s, 'stall', 0.0)
        for ph in phases:
            if ph[0] == 'compute':
                for r in range(n):
                    K = ph[1] + (p(r, s, 'extra_compute', 0.0) if ph is phases[0] else 0.0)
                    c = corr[r]; corr[r] += 1
                    ks = max(dev[r], t[r] + 30)
                    ev[r].append(('op', 'aten::mm', t[r], 30.0, c, ks, K, 'gemm'))
                    dev[r] = ks + K
                    t[r] += 30
            else:
                _, gk, cname, nel = ph
                arr = {}
                for r in range(n):
                    arr[r] = max(dev[r], t[r] + 30)
                ends = {}
                for pg, members in groups[gk]:
                    e = max(arr[m] for m in members) + X
                    for m in members:
                        ends[m] = (e, pg, members)
                    truth['calls'].append({'step': s, 'pg': pg, 'coll': cname,
                                           'arr': {m: arr[m] for m in members}, 'end': e})
                for r in range(n):
                    e, pg, members = ends[r]
                    seq[(r, pg)] = seq.get((r, pg), 0) + 1
                    c = corr[r]; corr[r] += 1
                    ev[r].append(('coll', cname, t[r], 30.0, c, arr[r], e - arr[r], pg, members,
                                  seq[(r, pg)], nel, n))
                    t[r] += 30
                    ev[r].append(('sync', t[r], e + 5 - t[r] if e + 5 > t[r] else 1.0))
                    t[r] = max(t[r], e + 5) if e + 5 > t[r] else t[r] + 1
                    dev[r] = e
                st['arrivals'].append(arr)
        for r in range(n):
            t[r] += 20
        st['end'] = list(t)
        st['walls'] = [t[r] - host[r] for r in range(n)]
        for r in range(n):
            ev[r].append(('step', 'ProfilerStep#%d' % s, host[r], t[r] - host[r]))
        truth['steps'][s] = st
        host = list(t)
    return ev, truth


def emit(sc, ev, outdir, raw_shift=False, kernel_args=False):
    n = sc['world']
    os.makedirs(outdir, exist_ok=True)
    groups = sc['groups']
    pgcfg = [{'pg_name': '0', 'pg_desc': 'default_pg', 'backend_config': 'cuda:nccl',
              'pg_size': n, 'ranks': list(range(n))}]
    for gk, lst in groups.items():
        for pg, members in lst:
            if pg == '0':
                continue
            pgcfg.append({'pg_name': pg, 'pg_desc': gk, 'backend_config': 'cuda:nccl',
                          'pg_size': len(members), 'ranks': members})
    for r in range(n):
        if r in sc.get('missing', []):
            continue
        off = sc.get('clock', {}).get(r, 0.0) * 1000.0  # ms -> us
        keep = None
        if r in sc.get('nsteps', {}):
            keep = set('ProfilerStep#%d' % s for s in sc['steps'][:sc['nsteps'][r]])
        out = []
        ext = 1
        cutoff = None
        if keep is not None:
            # drop everything after the last kept step
            ends = [e[2] + e[3] for e in ev[r] if e[0] == 'step' and e[1] in keep]
            cutoff = max(ends)
        def T(x):
            return round(x - off, 3)
        for e in ev[r]:
            if cutoff is not None and e[0] != 'step' and e[2 if e[0] != 'sync' else 1] >= cutoff:
                continue
            if e[0] == 'step':
                if keep is not None and e[1] not in keep:
                    continue
                out.append({'ph': 'X', 'cat': 'user_annotation', 'name': e[1], 'pid': 10, 'tid': 100,
                            'ts': T(e[2]), 'dur': round(e[3], 3), 'args': {'External id': ext}})
                ext += 1
            elif e[0] == 'annot':
                out.append({'ph': 'X', 'cat': 'user_annotation', 'name': e[1], 'pid': 10, 'tid': 100,
                            'ts': T(e[2]), 'dur': round(e[3], 3), 'args': {'External id': ext}})
                ext += 1
            elif e[0] == 'op':
                _, name, t, d, c, ks, K, kind = e
                out.append({'ph': 'X', 'cat': 'cpu_op', 'name': name, 'pid': 10, 'tid': 100,
                            'ts': T(t), 'dur': d, 'args': {'External id': ext}})
                out.append({'ph': 'X', 'cat': 'cuda_runtime', 'name': 'cudaLaunchKernel', 'pid': 10, 'tid': 100,
                            'ts': T(t + 5), 'dur': 20.0, 'args': {'External id': ext, 'correlation': c}})
                out.append({'ph': 'X', 'cat': 'kernel', 'name': 'sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_kernel',
                            'pid': 0, 'tid': 7, 'ts': T(ks), 'dur': round(K, 3),
                            'args': {'External id': ext, 'device': 0, 'stream': 7, 'correlation': c}})
                out.append({'ph': 's', 'id': c, 'pid': 10, 'tid': 100, 'ts': T(t + 5), 'cat': 'ac2g', 'name': 'ac2g'})
                out.append({'ph': 'f', 'id': c, 'pid': 0, 'tid': 7, 'ts': T(ks), 'cat': 'ac2g', 'name': 'ac2g', 'bp': 'e'})
                ext += 1
            elif e[0] == 'coll':
                _, cname, t, d, c, A, dur, pg, members, sq, nel, world = e
                cargs = {'Collective name': cname, 'In msg nelems': nel, 'Out msg nelems': nel,
                         'Group size': len(members), 'dtype': 'Float', 'In split size': '[]',
                         'Out split size': '[]', 'Process Group Name': pg,
                         'Process Group Description': 'g', 'Process Group Ranks': str(members),
                         'Rank': r, 'Seq': sq}
                a = {'External id': ext}
                a.update(cargs)
                out.append({'ph': 'X', 'cat': 'cpu_op', 'name': 'record_param_comms', 'pid': 10, 'tid': 100,
                            'ts': T(t), 'dur': d, 'args': a})
                out.append({'ph': 'X', 'cat': 'cuda_runtime', 'name': 'cudaLaunchKernel', 'pid': 10, 'tid': 100,
                            'ts': T(t + 5), 'dur': 20.0, 'args': {'External id': ext, 'correlation': c}})
                ka = {'External id': ext, 'device': 0, 'stream': 20, 'correlation': c}
                if kernel_args:
                    ka.update(cargs)
                kname = {'allreduce': 'ncclDevKernel_AllReduce_Sum_f32_RING_LL',
                         'all_gather': 'ncclDevKernel_AllGather_RING_LL',
                         'reduce_scatter': 'ncclDevKernel_ReduceScatter_Sum_f32_RING_LL'}[cname]
                out.append({'ph': 'X', 'cat': 'kernel', 'name': kname, 'pid': 0, 'tid': 20,
                            'ts': T(A), 'dur': round(dur, 3), 'args': ka})
                out.append({'ph': 's', 'id': c, 'pid': 10, 'tid': 100, 'ts': T(t + 5), 'cat': 'ac2g', 'name': 'ac2g'})
                out.append({'ph': 'f', 'id': c, 'pid': 0, 'tid': 20, 'ts': T(A), 'cat': 'ac2g', 'name': 'ac2g', 'bp': 'e'})
                ext += 1
            elif e[0] == 'sync':
                _, t, d = e
                out.append({'ph': 'X', 'cat': 'cuda_runtime', 'name': 'cudaDeviceSynchronize', 'pid': 10, 'tid': 100,
                            'ts': T(t), 'dur': round(d, 3), 'args': {'correlation': 99999}})
        out.sort(key=lambda x: x['ts'])
        if not TS_SORTED:
            out = [e for e in out if e['pid'] != 0] + [e for e in out if e['pid'] == 0]  # Kineto: host events, then device
        out += [{'name': 'process_name', 'ph': 'M', 'ts': T(T0), 'pid': 10, 'tid': 0, 'args': {'name': 'python3'}},
                {'name': 'process_name', 'ph': 'M', 'ts': T(T0), 'pid': 0, 'tid': 0, 'args': {'name': 'python3'}},
                {'name': 'process_labels', 'ph': 'M', 'ts': T(T0), 'pid': 0, 'tid': 0, 'args': {'labels': 'GPU 0'}},
                {'name': 'thread_name', 'ph': 'M', 'ts': T(T0), 'pid': 0, 'tid': 7, 'args': {'name': 'stream 7 '}},
                {'name': 'thread_name', 'ph': 'M', 'ts': T(T0), 'pid': 0, 'tid': 20, 'args': {'name': 'stream 20 '}}]
        info = {'backend': 'nccl', 'rank': sc.get('rank_override', {}).get(r, r),
                'world_size': sc.get('world_override', {}).get(r, n), 'pg_count': len(pgcfg), 'pg_config': pgcfg}
        base = BASE if raw_shift else BASE + int(round(off * 1000))
        doc = {'schemaVersion': 1,
               'deviceProperties': [{'id': 0, 'name': sc.get('device', 'NVIDIA H100 80GB HBM3'),
                                     'totalGlobalMem': 85017493504, 'computeMajor': 9, 'computeMinor': 0,
                                     'numSms': 132}],
               'distributedInfo': info, 'record_shapes': 1, 'displayTimeUnit': 'ms',
               'baseTimeNanoseconds': base, 'traceName': 'rank%d' % r, 'traceEvents': out}
        with open(os.path.join(outdir, 'rank%d.trace.json' % r), 'w') as f:
            json.dump(doc, f)


def main():
    scen = sys.argv[1]
    outdir = sys.argv[2]
    flags = sys.argv[3:]
    sc = {}
    exec(open(scen).read(), sc)
    sc = sc['SC']
    global TS_SORTED
    TS_SORTED = '--ts-sorted' in flags
    ev, truth = simulate(sc)
    emit(sc, ev, outdir, raw_shift='--raw-shift' in flags, kernel_args='--kernel-args' in flags)
    with open(os.path.join(outdir, '..', os.path.basename(outdir.rstrip('/')) + '.truth.json'), 'w') as f:
        json.dump(truth, f, indent=1, default=str)


if __name__ == '__main__':
    main()
