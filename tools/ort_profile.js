// ONNX Runtime's side of tools/ort_profiles.py: one CPU session of MODEL at
// graph optimisation level LEVEL (disabled, basic, extended, all) with
// SessionOptions.enableProfiling on, THREADS intra-op threads, sequential
// execution; RUNS runs on seeded inputs (floats in [-1, 1), integer ids in
// [0, 100), masks of ones; symbolic dims from NAME=DIM); then endProfiling,
// which writes PREFIX_<date>.json. With OPT set, the session also saves the
// model it optimised there (the mapping can be checked against it).
//
//   NODE_PATH=build/ort/node_modules node tools/ort_profile.js MODEL LEVEL RUNS THREADS PREFIX [OPT] [NAME=DIM ...]
'use strict';
const ort = require('onnxruntime-node');

async function main() {
    const [model, level, runs, threads, prefix, ...rest] = process.argv.slice(2);
    const opt = rest.length && !rest[0].includes('=') ? rest.shift() : '';
    const dims = {};
    for (const a of rest) {
        const [k, v] = a.split('=');
        dims[k] = Number(v);
    }
    const so = {
        executionProviders: ['cpu'],
        graphOptimizationLevel: level,
        intraOpNumThreads: Number(threads),
        interOpNumThreads: 1,
        executionMode: 'sequential',
        enableProfiling: true,
        profileFilePrefix: prefix,
    };
    if (opt) so.optimizedModelFilePath = opt;
    const session = await ort.InferenceSession.create(model, so);
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
        if (meta.type === 'int64') {
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
    for (let i = 0; i < Number(runs); i++) await session.run(feeds);
    session.endProfiling();
}

main().catch((e) => {
    process.stderr.write(`ort_profile: ${e && e.message ? e.message : e}\n`);
    process.exit(2);
});
