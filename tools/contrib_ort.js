// ONNX Runtime's side of tools/contrib_check.py: runs each case's model
// (CPU, no graph optimization, so the contrib op itself runs) on the case's
// .npy inputs and writes every output to ort.json in the current folder.
//   NODE_PATH=build/ort/node_modules node tools/contrib_ort.js
'use strict';
const ort = require('onnxruntime-node');
const fs = require('fs');
function readNpy(p) {
  const b = fs.readFileSync(p);
  const hl = b.readUInt16LE(8);
  const hdr = b.toString('latin1', 10, 10 + hl);
  const descr = /'descr': '([^']+)'/.exec(hdr)[1];
  const shape = /'shape': \(([^)]*)\)/.exec(hdr)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const off = 10 + hl;
  const buf = b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length);
  const map = {'<f4': ['float32', Float32Array], '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array]};
  const [t, A] = map[descr];
  return new ort.Tensor(t, new A(buf.slice(0)), shape);
}
(async () => {
  const cases = JSON.parse(fs.readFileSync('cases.json'));
  const out = {};
  for (const [name, inputs] of Object.entries(cases)) {
    try {
      const s = await ort.InferenceSession.create(name + '.onnx', {graphOptimizationLevel: 'disabled'});
      const feeds = {};
      for (const i of inputs) feeds[i] = readNpy(`${name}/${i}.npy`);
      const r = await s.run(feeds);
      out[name] = {};
      for (const [k, v] of Object.entries(r)) out[name][k] = {dims: v.dims, data: Array.from(v.data, Number)};
    } catch (e) { out[name] = {error: String(e)}; }
  }
  fs.writeFileSync('ort.json', JSON.stringify(out));
})();
