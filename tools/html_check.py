#!/usr/bin/python3
"""The HTML reports in a real browser (make test): headless Chromium loads
each report (static, measured, an ONNX Runtime profile, a trace, a CPU-only
trace, a job of ranks, the 7B graph) with #selftest, report.js checks its own rendered DOM
(totals present, a module tree node expands, a module's split by operator
expands and adds up, sorting reorders rows, no script errors; for a job of
ranks: the ranks table, the stragglers, each step's critical rank, one
timeline per rank with its collectives and waits, a rank's sections
rendered when opened; for a memory snapshot: every timeline column adds
up to the bytes live, the tallest is the peak) and writes the results into
the page, which --dump-dom returns.
A screenshot of each report goes into OUT. The 7B graph's report must load
in < 3 s (measured in the browser: navigation start to rendered) and weigh
< 20 MB.

usage: tools/html_check.py --modelprof build/modelprof --out build/html
"""
import argparse, os, re, shutil, subprocess, sys, tempfile, time

FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync']


def chromium(args, timeout=120):
    ud = tempfile.mkdtemp(prefix='mp-chromium-')
    try:
        r = subprocess.run(['chromium'] + FLAGS + ['--user-data-dir=' + ud] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return r.stdout.decode('utf-8', 'replace')
    finally:
        shutil.rmtree(ud, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--modelprof', default='build/modelprof')
    ap.add_argument('--out', default='build/html')
    ap.add_argument('--llama7b', default='build/bench/llama7b.onnx')
    ap.add_argument('--only', default='', help='check only the reports whose name starts with this')
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not os.path.exists(a.llama7b) and 'llama7b'.startswith(a.only):
        subprocess.run(['/usr/bin/python3', 'tools/make_llama7b.py', a.llama7b], check=True,
                       stdout=subprocess.DEVNULL)
    mp = a.modelprof
    reports = [
        ('static', [mp, 'models/resnet18.onnx', '--dim', 'batch=1', '-q']),
        ('measured', [mp, 'models/mobilenet_v2.onnx', '--dim', 'batch=1', '-q', '--run',
                      '--warmup', '1', '--iters', '2']),
        ('ort', [mp, 'models/resnet50.onnx', '--dim', 'batch=1', '-q', '--ort-profile',
                 'tests/ort/resnet50_all.json.gz', '--peak-gflops', '100']),
        ('trace', [mp, 'trace', 'tests/traces/mobilenet_v2_sgd_loader.trace.json.gz']),
        ('job', [mp, 'trace', 'tests/traces/ddp2']),
        # a CPU-only trace (PyTorch 1.13 without Kineto): host times, no device bars
        ('trace_cpu', [mp, 'trace', 'tests/traces/cpu/sgd_legacy.trace.json.gz']),
        ('llama7b', [mp, a.llama7b, '-q', '--dim', 'batch=1', '--dim', 'seq=2048']),
        ('formula', [mp, 'models/dynamo/qwen3_2layers.onnx', '-q', '--formula']),
        # unknown costs (no dims given): no card reads 0; the by-module-op table
        ('unknown', [mp, 'models/bert_base.onnx', '-q', '--formula', '--by-module-op', '--depth', '2']),
    ]
    # memory snapshots (issue 32): the shared real ones (copies in tests/), two devices with an
    # OOM, and a 1 M-event snapshot (tools/make_big_snapshot.py, made once) that must render in
    # < 10 s with every column adding up (the page's self-test)
    big = os.path.join(os.path.dirname(a.out) or '.', 'bench', 'big_snapshot.pickle')
    if not os.path.exists(big):
        subprocess.run(['/usr/bin/python3', 'tools/make_big_snapshot.py', '--out', big], check=True,
                       stdout=subprocess.DEVNULL)
    for i, snap in enumerate(sorted(f for f in os.listdir('tests/memory') if '.pickle' in f)):
        reports.append(('memory%d' % i, [mp, 'memory', os.path.join('tests/memory', snap)]))
    reports += [
        ('memory_yiyi', [mp, 'memory', 'tests/snapshots/Yiyi-philosophy_LLM-inference__1.3b_snapshot__a228b8e.pickle']),
        ('memory_oom', [mp, 'memory', 'tests/snapshots/v25_multidev_oom.pickle']),
        ('memory_1m', [mp, 'memory', big]),
    ]
    failed = 0
    reports = [r for r in reports if r[0].startswith(a.only)]
    for name, cmd in reports:
        path = os.path.abspath(os.path.join(a.out, name + '.html'))
        subprocess.run(cmd + ['--format', 'html', '-o', path], check=True)
        size = os.path.getsize(path)
        t = time.time()
        dom = chromium(['--window-size=1400,1100', '--dump-dom', 'file://' + path + '#selftest'])
        wall = time.time() - t
        m = re.search(r'<pre id="mp-selftest">(.*?)</pre>', dom, re.S)
        lines = m.group(1).split('\n') if m else ['FAIL the page did not run its self-test']
        err = re.search(r'<pre id="mp-errors"[^>]*>(.*?)</pre>', dom, re.S)
        if err and err.group(1).strip():
            lines.append('FAIL script errors: ' + err.group(1).strip())
        load = next((float(x.split()[1]) for x in lines if x.startswith('load_ms')), None)
        if name == 'formula' and 'PASS formulas shown' not in lines:
            lines.append('FAIL the formulas were not checked')
        if name == 'unknown':
            # read from the DOM itself, not only the page's self-test: the
            # cost cards of a model with unknown costs say "?", none "0"
            cards = dict((k.strip().lower(), v.strip()) for k, v in re.findall(
                r'<div class="card"[^>]*><div class="k">([^<]*)</div><div class="v">([^<]*)</div>', dom))
            zero = [k for k, v in cards.items() if re.match(r'0(\s|$)', v)]
            unk = [k for k in ('macs', 'flops', 'activation peak') if not cards.get(k, '').startswith('?')]
            lines.append(('FAIL' if zero or unk or not cards else 'PASS') +
                         ' unknown costs: no 0 card, MACs/FLOPs/activation peak "?" (%s)' %
                         ', '.join('%s=%s' % kv for kv in sorted(cards.items())))
            if not any(x.startswith('PASS unknown figures') for x in lines):
                lines.append('FAIL the unknown figures were not checked by the page')
            if not any(x.startswith('PASS by-module-op table') for x in lines):
                lines.append('FAIL the by-module-op table was not checked')
        if name == 'trace_cpu':
            ok = ('>Steps: wall time (no device in this trace)<' in dom and
                  '>Steps: device busy and idle by cause<' not in dom and '>device busy<' not in dom.lower())
            lines.append(('PASS' if ok else 'FAIL') + ' a CPU-only trace shows host wall time, no device idle')
            ok = ('id="mp-kernels"' not in dom and 'id="mp-memory"' not in dom and '>self device<' not in dom and
                  '>self CPU<' in dom)
            lines.append(('PASS' if ok else 'FAIL') + ' a CPU-only trace has no kernel, device memory or device '
                         'time columns')
        if name.startswith('memory'):
            if not any(x.startswith('PASS') and 'adds up' in x for x in lines):
                lines.append('FAIL the timeline was not checked')
            if name == 'memory_1m':
                lines.append(('PASS' if wall < 10 else 'FAIL') + ' renders in < 10 s (chromium run %.1f s)' % wall)
        if name == 'llama7b':
            lines.append(('PASS' if load is not None and load < 3000 else 'FAIL') + ' loads in < 3 s')
            lines.append(('PASS' if size < 20e6 else 'FAIL') + ' size < 20 MB')
        shot = os.path.join(a.out, name + '.png')
        chromium(['--screenshot=' + os.path.abspath(shot), '--window-size=1400,1100', 'file://' + path])
        bad = [x for x in lines if x.startswith('FAIL')]
        failed += len(bad)
        print('html %-8s %s: %.2f MB, load %s ms in the browser (chromium run %.1f s), screenshot %s%s' % (
            name, 'ok' if not bad else 'FAILED', size / 1e6, load, wall, shot,
            ''.join('\n    ' + x for x in lines if x.startswith(('PASS', 'FAIL')))))
    if failed:
        print('html: %d checks failed' % failed)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
