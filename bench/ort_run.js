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
const seededFeeds = require('./ort_feeds');
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
    const feeds = seededFeeds(ort, session, dims);
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
