// The seeded inputs the ONNX Runtime scripts give a session
// (bench/ort_run.js, tools/ort_profile.js): floats in [-1, 1), integer ids
// in [0, 100), masks of ones; a symbolic dim takes its value from `dims`
// (NAME -> number), else 1.
'use strict';

module.exports = function seededFeeds(ort, session, dims) {
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
        if ((meta.type || 'float32') === 'int64') {
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
    return feeds;
};
