// ONNX Runtime's side of the speed comparison (bench/run_peers.py): one
// session (CPU provider, all graph optimizations, the given intra-op thread
// count, sequential execution), seeded inputs, then the same stdin protocol
// as bench_run.c: a line "N" runs N times and answers the N wall times in
// milliseconds on one line; "q" quits.
//
//   node bench/ort_run.js MODEL.onnx THREADS [NAME=DIM ...]
//
// onnxruntime-node is looked up through NODE_PATH (run_peers.py installs
// it with `npm install --ignore-scripts` under build/ort).
'use strict';
const ort = require('onnxruntime-node');
const readline = require('readline');

async function main() {
    const [model, threadsArg, ...dimArgs] = process.argv.slice(2);
    const dims = {};
    for (const a of dimArgs) {
        const [k, v] = a.split('=');
        dims[k] = Number(v);
    }
    const threads = Number(threadsArg || 0);
    const session = await ort.InferenceSession.create(model, {
        executionProviders: ['cpu'],
        graphOptimizationLevel: 'all',
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
    });
    // seeded inputs: floats in [-1, 1), integer ids in [0, 100), masks of ones
    let seed = 12345;
    const rnd = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
    };
    const feeds = {};
    for (const name of session.inputNames) {
        const meta = (session.inputMetadata || []).find((m) => m.name === name) || {};
        const shape = (meta.shape || []).map((d) => (typeof d === 'number' && d >= 0 ? d : dims[d] || 1));
        const n = shape.reduce((a, b) => a * b, 1);
        const type = meta.type || 'float32';
        if (type === 'int64') {
            const mask = /mask/.test(name);
            const a = new BigInt64Array(n);
            for (let i = 0; i < n; i++) a[i] = mask ? 1n : BigInt(Math.floor(rnd() * 100));
            feeds[name] = new ort.Tensor('int64', a, shape);
        } else {
            const a = new Float32Array(n);
            for (let i = 0; i < n; i++) a[i] = rnd() * 2 - 1;
            feeds[name] = new ort.Tensor('float32', a, shape);
        }
    }
    await session.run(feeds);
    process.stdout.write('ready\n');
    const rl = readline.createInterface({ input: process.stdin });
    for await (const line of rl) {
        if (line.startsWith('q')) break;
        const n = parseInt(line, 10);
        if (!(n > 0)) continue;
        const t = [];
        for (let i = 0; i < n; i++) {
            const t0 = process.hrtime.bigint();
            await session.run(feeds);
            t.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
        process.stdout.write(t.map((x) => x.toFixed(4)).join(' ') + '\n');
    }
    rl.close();
    process.exit(0);
}

main().catch((e) => {
    process.stderr.write(`ort_run: ${e && e.message ? e.message : e}\n`);
    process.exit(2);
});
