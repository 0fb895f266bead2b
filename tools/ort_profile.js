// ONNX Runtime's side of tools/ort_profiles.py: one CPU session of MODEL at
// graph optimisation level LEVEL (disabled, basic, extended, all) with
// SessionOptions.enableProfiling on, THREADS intra-op threads, sequential
// execution; RUNS runs on seeded inputs (bench/ort_feeds.js; symbolic dims
// from NAME=DIM); then endProfiling,
// which writes PREFIX_<date>.json. With OPT set, the session also saves the
// model it optimised there (the mapping can be checked against it).
//
//   NODE_PATH=build/ort/node_modules node tools/ort_profile.js MODEL LEVEL RUNS THREADS PREFIX [OPT] [NAME=DIM ...]
'use strict';
const ort = require('onnxruntime-node');
const seededFeeds = require('../bench/ort_feeds');

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
    const feeds = seededFeeds(ort, session, dims);
    for (let i = 0; i < Number(runs); i++) await session.run(feeds);
    session.endProfiling();
}

main().catch((e) => {
    process.stderr.write(`ort_profile: ${e && e.message ? e.message : e}\n`);
    process.exit(2);
});
