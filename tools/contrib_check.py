#!/usr/bin/env python3
"""The com.microsoft contrib kernels and the default domain's opset 23/24
transformer kernels (Attention, RotaryEmbedding, RMSNormalization, Swish,
TensorScatter) against ONNX Runtime: small models, one
per op or form (the layer norms, the Gelus, Attention, QAttention,
MultiHeadAttention, GroupQueryAttention (prompt with rotary, decode with
past), EmbedLayerNormalization, RotaryEmbedding, MatMulNBits,
GatherBlockQuantized, FusedMatMul, FusedGemm, QGemm, the QLinear ops,
MatMulIntegerToFloat, DynamicQuantizeMatMul, Inverse), seeded inputs; ORT (npm onnxruntime-node, CPU, graph
optimizations off) and `modelprof --run --save-outputs` run each; every
output must agree within relative L2 1e-4.

    /usr/bin/python3 tools/contrib_check.py --modelprof build/modelprof --out build/contrib_check

onnxruntime-node is installed under build/ort (npm --ignore-scripts) when
missing. Exit 0 when every case agrees, 1 otherwise, 2 when ORT cannot be
set up.

With --poison (no ONNX Runtime), each case instead runs on adversarial
contents: its float inputs and weights all NaN, all 1e30, all -inf, or a
mix of special values, then its integer inputs at extremes, then each
input with a dim one shorter or longer; every run must end with the
outputs or with a message and exit 2, never with a crash or a sanitizer
report (run under `make test-sanitize`)."""
import argparse, json, os, shutil, subprocess, sys
import numpy as np, onnx
from onnx import helper, TensorProto as T, numpy_helper as nh

ap = argparse.ArgumentParser()
ap.add_argument("--modelprof", default="build/modelprof")
ap.add_argument("--out", default="build/contrib_check")
ap.add_argument("--ort", default="build/ort")
ap.add_argument("--poison", action="store_true", help="adversarial contents, no ORT: no crash")
args = ap.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
modelprof = os.path.abspath(args.modelprof)
ort_dir = os.path.abspath(args.ort)
if not args.poison and not os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
    os.makedirs(ort_dir, exist_ok=True)
    r = subprocess.run(["npm", "install", "--ignore-scripts", "--prefix", ort_dir, "onnxruntime-node"],
                       capture_output=True, text=True)
    if r.returncode:
        print("contrib_check: cannot install onnxruntime-node:", r.stderr.strip()[-300:])
        sys.exit(2)
os.makedirs(args.out, exist_ok=True)
os.chdir(args.out)
rng = np.random.default_rng(0)
MS = "com.microsoft"
cases = {}
cases={}
def model(name, nodes, inputs, outputs, inits=(), opset=17):
    g=helper.make_graph(nodes,name,[helper.make_tensor_value_info(n,dt,s) for n,dt,s in inputs],
        [helper.make_tensor_value_info(n,dt,s) for n,dt,s in outputs], initializer=list(inits))
    m=helper.make_model(g,opset_imports=[helper.make_opsetid("",opset),helper.make_opsetid(MS,1)])
    m.ir_version=8 if opset < 23 else 10
    onnx.save(m,f"{name}.onnx")
    cases[name]=[n for n,_,_ in inputs]
def f(*s): return rng.standard_normal(s).astype(np.float32)
def save(name, **arrs):
    os.makedirs(name, exist_ok=True)
    for k,v in arrs.items(): np.save(f"{name}/{k}.npy", v)
B,S,H,N=2,5,8,2
# SkipLayerNormalization
save("skipln", x=f(B,S,H), skip=f(B,S,H))
model("skipln",[helper.make_node("SkipLayerNormalization",["x","skip","g","b","bias"],["y"],domain=MS,epsilon=1e-5)],
  [("x",T.FLOAT,[B,S,H]),("skip",T.FLOAT,[B,S,H])],[("y",T.FLOAT,[B,S,H])],
  [nh.from_array(f(H),"g"),nh.from_array(f(H),"b"),nh.from_array(f(H),"bias")])
# FastGelu with bias, BiasGelu, QuickGelu, Gelu
save("gelus", x=f(B,S,H))
model("gelus",[helper.make_node("FastGelu",["x","bias"],["y1"],domain=MS),helper.make_node("BiasGelu",["x","bias"],["y2"],domain=MS),
  helper.make_node("QuickGelu",["x"],["y3"],domain=MS,alpha=1.5),helper.make_node("Gelu",["x"],["y4"],domain=MS)],
  [("x",T.FLOAT,[B,S,H])],[("y1",T.FLOAT,[B,S,H]),("y2",T.FLOAT,[B,S,H]),("y3",T.FLOAT,[B,S,H]),("y4",T.FLOAT,[B,S,H])],[nh.from_array(f(H),"bias")])
# Attention with mask
save("attn", x=f(B,S,H), mask=np.array([[1,1,1,0,0],[1,1,1,1,1]],np.int32))
model("attn",[helper.make_node("Attention",["x","w","bias","mask"],["y"],domain=MS,num_heads=N)],
  [("x",T.FLOAT,[B,S,H]),("mask",T.INT32,[B,S])],[("y",T.FLOAT,[B,S,H])],[nh.from_array(f(H,3*H),"w"),nh.from_array(f(3*H),"bias")])
save("attn_uni", x=f(B,S,H))
model("attn_uni",[helper.make_node("Attention",["x","w","bias"],["y"],domain=MS,num_heads=N,unidirectional=1)],
  [("x",T.FLOAT,[B,S,H])],[("y",T.FLOAT,[B,S,H])],[nh.from_array(f(H,3*H),"w"),nh.from_array(f(3*H),"bias")])
# MHA
L=4
save("mha", q=f(B,S,H), k=f(B,L,H), v=f(B,L,H))
model("mha",[helper.make_node("MultiHeadAttention",["q","k","v","bias"],["y"],domain=MS,num_heads=N)],
  [("q",T.FLOAT,[B,S,H]),("k",T.FLOAT,[B,L,H]),("v",T.FLOAT,[B,L,H])],[("y",T.FLOAT,[B,S,H])],[nh.from_array(f(3*H),"bias")])
# EmbedLayerNormalization
V=10
save("embln", ids=rng.integers(0,V,(B,S)).astype(np.int32), seg=rng.integers(0,2,(B,S)).astype(np.int32), mask=np.array([[1,1,1,0,0],[1,1,1,1,1]],np.int32))
model("embln",[helper.make_node("EmbedLayerNormalization",["ids","seg","we","pe","se","g","b","mask"],["y","mi"],domain=MS,epsilon=1e-12)],
  [("ids",T.INT32,[B,S]),("seg",T.INT32,[B,S]),("mask",T.INT32,[B,S])],[("y",T.FLOAT,[B,S,H]),("mi",T.INT32,[B])],
  [nh.from_array(f(V,H),"we"),nh.from_array(f(16,H),"pe"),nh.from_array(f(2,H),"se"),nh.from_array(f(H),"g"),nh.from_array(f(H),"b")])
# RotaryEmbedding [B,S,N*h]
h=H//N
save("rope", x=f(B,S,H), pos=np.tile(np.arange(S,dtype=np.int64),(B,1)))
model("rope",[helper.make_node("RotaryEmbedding",["x","pos","cos","sin"],["y"],domain=MS,num_heads=N)],
  [("x",T.FLOAT,[B,S,H]),("pos",T.INT64,[B,S])],[("y",T.FLOAT,[B,S,H])],
  [nh.from_array(np.cos(rng.standard_normal((16,h//2))).astype(np.float32),"cos"),nh.from_array(np.sin(rng.standard_normal((16,h//2))).astype(np.float32),"sin")])
# MatMulNBits 4-bit, K=32, N=6, block 16
Kk,Nn,blk=32,6,16
Bq=rng.integers(0,256,(Nn,Kk//blk,blk//2)).astype(np.uint8)
save("nbits", a=f(3,Kk))
model("nbits",[helper.make_node("MatMulNBits",["a","B","scales","zp"],["y"],domain=MS,K=Kk,N=Nn,bits=4,block_size=blk)],
  [("a",T.FLOAT,[3,Kk])],[("y",T.FLOAT,[3,Nn])],
  [nh.from_array(Bq,"B"),nh.from_array((rng.random(Nn*Kk//blk)*0.1).astype(np.float32),"scales"),nh.from_array(rng.integers(0,256,(Nn*((Kk//blk*4+7)//8),)).astype(np.uint8),"zp")])
# FusedMatMul transB alpha
save("fmm", a=f(2,3,4), b=f(2,5,4))
model("fmm",[helper.make_node("FusedMatMul",["a","b"],["y"],domain=MS,transB=1,alpha=0.5)],
  [("a",T.FLOAT,[2,3,4]),("b",T.FLOAT,[2,5,4])],[("y",T.FLOAT,[2,3,5])])
# SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization
save("rms", x=f(B,S,H), skip=f(B,S,H))
model("rms",[helper.make_node("SimplifiedLayerNormalization",["x","g"],["y1"],epsilon=1e-6),
  helper.make_node("SkipSimplifiedLayerNormalization",["x","skip","g"],["y2"],domain=MS,epsilon=1e-6)],
  [("x",T.FLOAT,[B,S,H]),("skip",T.FLOAT,[B,S,H])],[("y1",T.FLOAT,[B,S,H]),("y2",T.FLOAT,[B,S,H])],[nh.from_array(f(H),"g")])
# QLinearAdd
save("qadd", a=rng.integers(0,256,(2,6)).astype(np.uint8), b=rng.integers(0,256,(6,)).astype(np.uint8))
model("qadd",[helper.make_node("QLinearAdd",["a","as","az","b","bs","bz","cs","cz"],["y"],domain=MS)],
  [("a",T.UINT8,[2,6]),("b",T.UINT8,[6])],[("y",T.UINT8,[2,6])],
  [nh.from_array(np.array(0.05,np.float32),"as"),nh.from_array(np.array(120,np.uint8),"az"),nh.from_array(np.array(0.03,np.float32),"bs"),
   nh.from_array(np.array(130,np.uint8),"bz"),nh.from_array(np.array(0.07,np.float32),"cs"),nh.from_array(np.array(128,np.uint8),"cz")])
# MatMulIntegerToFloat
save("mmitf", a=rng.integers(0,256,(3,4)).astype(np.uint8))
model("mmitf",[helper.make_node("MatMulIntegerToFloat",["a","b","as","bs","az","bz","bias"],["y"],domain=MS)],
  [("a",T.UINT8,[3,4])],[("y",T.FLOAT,[3,5])],
  [nh.from_array(rng.integers(-128,128,(4,5)).astype(np.int8),"b"),nh.from_array(np.array(0.02,np.float32),"as"),nh.from_array((rng.random(5)*0.1).astype(np.float32),"bs"),
   nh.from_array(np.array(100,np.uint8),"az"),nh.from_array(np.array(0,np.int8),"bz"),nh.from_array(f(5),"bias")])
# DynamicQuantizeMatMul
save("dqmm", a=f(3,4))
model("dqmm",[helper.make_node("DynamicQuantizeMatMul",["a","b","bs","bz","bias"],["y"],domain=MS)],
  [("a",T.FLOAT,[3,4])],[("y",T.FLOAT,[3,5])],
  [nh.from_array(rng.integers(-128,128,(4,5)).astype(np.int8),"b"),nh.from_array(np.array(0.02,np.float32),"bs"),nh.from_array(np.array(0,np.int8),"bz"),nh.from_array(f(5),"bias")])
# BiasSoftmax? skip; Inverse
save("inv", x=(f(2,3,3)+3*np.eye(3,dtype=np.float32)))
model("inv",[helper.make_node("Inverse",["x"],["y"],domain=MS)],[("x",T.FLOAT,[2,3,3])],[("y",T.FLOAT,[2,3,3])])
# FusedGemm Relu
save("fgemm", a=f(3,4))
model("fgemm",[helper.make_node("FusedGemm",["a","b","c"],["y"],domain=MS,activation="LeakyRelu",activation_alpha=0.1,transB=1)],
  [("a",T.FLOAT,[3,4])],[("y",T.FLOAT,[3,5])],[nh.from_array(f(5,4),"b"),nh.from_array(f(5),"c")])

# QLinearSoftmax (opset 13 form), QLinearGlobalAveragePool, QLinearConcat, QLinearReduceMean, QLinearWhere
def qp(name, v, dt):
    return nh.from_array(np.array(v, dt), name)
save("qsm", x=rng.integers(0, 256, (2, 7)).astype(np.uint8))
model("qsm", [helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, axis=-1, opset=13)],
      [("x", T.UINT8, [2, 7])], [("y", T.UINT8, [2, 7])],
      [qp("xs", 0.05, np.float32), qp("xz", 128, np.uint8), qp("ys", 1 / 256, np.float32), qp("yz", 0, np.uint8)])
save("qgap", x=rng.integers(0, 256, (2, 3, 4, 4)).astype(np.uint8))
model("qgap", [helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, channels_last=0)],
      [("x", T.UINT8, [2, 3, 4, 4])], [("y", T.UINT8, [2, 3, 1, 1])],
      [qp("xs", 0.05, np.float32), qp("xz", 100, np.uint8), qp("ys", 0.03, np.float32), qp("yz", 110, np.uint8)])
save("qcat", a=rng.integers(0, 256, (2, 3)).astype(np.uint8), b=rng.integers(0, 256, (2, 2)).astype(np.uint8))
model("qcat", [helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], domain=MS, axis=1)],
      [("a", T.UINT8, [2, 3]), ("b", T.UINT8, [2, 2])], [("y", T.UINT8, [2, 5])],
      [qp("ys", 0.04, np.float32), qp("yz", 128, np.uint8), qp("as", 0.05, np.float32), qp("az", 120, np.uint8),
       qp("bs", 0.02, np.float32), qp("bz", 130, np.uint8)])
# QGemm (quantized output), QAttention
save("qgemm", a=rng.integers(0, 256, (3, 4)).astype(np.uint8))
model("qgemm", [helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"], ["y"], domain=MS, transB=1)],
      [("a", T.UINT8, [3, 4])], [("y", T.UINT8, [3, 5])],
      [qp("as", 0.02, np.float32), qp("az", 120, np.uint8), nh.from_array(rng.integers(-128, 128, (5, 4)).astype(np.int8), "b"),
       qp("bs", 0.03, np.float32), qp("bz", 0, np.int8), nh.from_array(rng.integers(-500, 500, (5,)).astype(np.int32), "c"),
       qp("ys", 0.05, np.float32), qp("yz", 128, np.uint8)])
save("qattn", x=rng.integers(0, 256, (B, S, H)).astype(np.uint8))
model("qattn", [helper.make_node("QAttention", ["x", "w", "bias", "xs", "ws", "", "xz", "wz"], ["y"], domain=MS, num_heads=N)],
      [("x", T.UINT8, [B, S, H])], [("y", T.FLOAT, [B, S, H])],
      [nh.from_array(rng.integers(0, 256, (H, 3 * H)).astype(np.uint8), "w"), nh.from_array(f(3 * H), "bias"),
       qp("xs", 0.01, np.float32), qp("ws", 0.02, np.float32), qp("xz", 128, np.uint8), qp("wz", 128, np.uint8)])
# GroupQueryAttention: a prompt (no past) and a decode step (past of 4), rotary
Ng, Nkv, hg, Sg = 4, 2, 16, 3
cosc = np.cos(rng.standard_normal((16, hg // 2))).astype(np.float32)
sinc = np.sin(rng.standard_normal((16, hg // 2))).astype(np.float32)
save("gqa_prompt", q=f(1, Sg, Ng * hg), k=f(1, Sg, Nkv * hg), v=f(1, Sg, Nkv * hg),
     sl=np.array([Sg - 1], np.int32), tsl=np.array(Sg, np.int32))
model("gqa_prompt", [helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "tsl", "cos", "sin"],
                                      ["y", "pk", "pv"], domain=MS, num_heads=Ng, kv_num_heads=Nkv, do_rotary=1)],
      [("q", T.FLOAT, [1, Sg, Ng * hg]), ("k", T.FLOAT, [1, Sg, Nkv * hg]), ("v", T.FLOAT, [1, Sg, Nkv * hg]),
       ("sl", T.INT32, [1]), ("tsl", T.INT32, [])],
      [("y", T.FLOAT, [1, Sg, Ng * hg]), ("pk", T.FLOAT, [1, Nkv, Sg, hg]), ("pv", T.FLOAT, [1, Nkv, Sg, hg])],
      [nh.from_array(cosc, "cos"), nh.from_array(sinc, "sin")])
save("gqa_decode", q=f(1, 1, Ng * hg), k=f(1, 1, Nkv * hg), v=f(1, 1, Nkv * hg), pk=f(1, Nkv, 4, hg), pv=f(1, Nkv, 4, hg),
     sl=np.array([4], np.int32), tsl=np.array(5, np.int32))
model("gqa_decode", [helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "sl", "tsl"],
                                      ["y", "ok", "ov"], domain=MS, num_heads=Ng, kv_num_heads=Nkv)],
      [("q", T.FLOAT, [1, 1, Ng * hg]), ("k", T.FLOAT, [1, 1, Nkv * hg]), ("v", T.FLOAT, [1, 1, Nkv * hg]),
       ("pk", T.FLOAT, [1, Nkv, 4, hg]), ("pv", T.FLOAT, [1, Nkv, 4, hg]), ("sl", T.INT32, [1]), ("tsl", T.INT32, [])],
      [("y", T.FLOAT, [1, 1, Ng * hg]), ("ok", T.FLOAT, [1, Nkv, 5, hg]), ("ov", T.FLOAT, [1, Nkv, 5, hg])])
# GatherBlockQuantized: a 4-bit table (uint8 packing two per byte), blocks of 16 along the last dim
save("gbq", ids=np.array([[3, 0], [5, 1]], np.int64))
model("gbq", [helper.make_node("GatherBlockQuantized", ["tab", "ids", "sc", "zp"], ["y"], domain=MS, bits=4,
                               block_size=16, gather_axis=0, quantize_axis=1)],
      [("ids", T.INT64, [2, 2])], [("y", T.FLOAT, [2, 2, 32])],
      [nh.from_array(rng.integers(0, 256, (6, 16)).astype(np.uint8), "tab"),
       nh.from_array((rng.random((6, 2)) * 0.1).astype(np.float32), "sc"),
       nh.from_array(rng.integers(0, 256, (6, 1)).astype(np.uint8), "zp")])
# the default domain's opset 23/24 transformer operators (src/ops/attention.c)
B2, Hq2, Hkv2, S2, P2, d2 = 2, 4, 2, 3, 2, 8
save("att23", q=f(B2, Hq2, S2, d2), k=f(B2, Hkv2, S2, d2), v=f(B2, Hkv2, S2, d2), pk=f(B2, Hkv2, P2, d2),
     pv=f(B2, Hkv2, P2, d2), m=(rng.random((S2, S2 + P2)) > 0.3))
model("att23", [helper.make_node("Attention", ["q", "k", "v", "m", "pk", "pv"], ["y", "ok", "ov"])],
      [("q", T.FLOAT, [B2, Hq2, S2, d2]), ("k", T.FLOAT, [B2, Hkv2, S2, d2]), ("v", T.FLOAT, [B2, Hkv2, S2, d2]),
       ("m", T.BOOL, [S2, S2 + P2]), ("pk", T.FLOAT, [B2, Hkv2, P2, d2]), ("pv", T.FLOAT, [B2, Hkv2, P2, d2])],
      [("y", T.FLOAT, [B2, Hq2, S2, d2]), ("ok", T.FLOAT, [B2, Hkv2, S2 + P2, d2]),
       ("ov", T.FLOAT, [B2, Hkv2, S2 + P2, d2])], opset=23)
save("att23c", q=f(B2, S2, Hq2 * d2), k=f(B2, S2, Hkv2 * d2), v=f(B2, S2, Hkv2 * d2))
model("att23c", [helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=Hq2, kv_num_heads=Hkv2,
                                  is_causal=1, softcap=2.0)],
      [("q", T.FLOAT, [B2, S2, Hq2 * d2]), ("k", T.FLOAT, [B2, S2, Hkv2 * d2]), ("v", T.FLOAT, [B2, S2, Hkv2 * d2])],
      [("y", T.FLOAT, [B2, S2, Hq2 * d2])], opset=23)
save("rope23", x=f(B2, Hq2, S2, d2), pos=rng.integers(0, 10, (B2, S2)).astype(np.int64))
model("rope23", [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=1)],
      [("x", T.FLOAT, [B2, Hq2, S2, d2]), ("pos", T.INT64, [B2, S2])], [("y", T.FLOAT, [B2, Hq2, S2, d2])],
      [nh.from_array(np.cos(f(10, d2 // 2)), "cos"), nh.from_array(np.sin(f(10, d2 // 2)), "sin")], opset=23)
save("rms23", x=f(B2, S2, d2))
model("rms23", [helper.make_node("RMSNormalization", ["x", "g"], ["y"], epsilon=1e-6)], [("x", T.FLOAT, [B2, S2, d2])],
      [("y", T.FLOAT, [B2, S2, d2])], [nh.from_array(f(d2), "g")], opset=23)
save("swish24", x=f(B2, S2, d2))
model("swish24", [helper.make_node("Swish", ["x"], ["y"], alpha=0.7)], [("x", T.FLOAT, [B2, S2, d2])],
      [("y", T.FLOAT, [B2, S2, d2])], opset=24)
save("tscatter24", p=f(B2, Hkv2, 6, d2), u=f(B2, Hkv2, 2, d2), wi=np.array([1, 3], np.int64))
model("tscatter24", [helper.make_node("TensorScatter", ["p", "u", "wi"], ["y"])],
      [("p", T.FLOAT, [B2, Hkv2, 6, d2]), ("u", T.FLOAT, [B2, Hkv2, 2, d2]), ("wi", T.INT64, [B2])],
      [("y", T.FLOAT, [B2, Hkv2, 6, d2])], opset=24)
json.dump(cases, open("cases.json", "w"))


def poison(a, variant):
    """a's contents replaced: variants 1-4 float, 5 integer (others kept)."""
    a = np.array(a)
    if a.dtype.kind == "f" and variant <= 4:
        mixed = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 3e9, -3e9, 1e-40, 0.5, -2.5])
        v = {1: np.resize(mixed, a.size), 2: np.nan, 3: 1e30, 4: -np.inf}[variant]
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.zeros(a.size) + v).astype(a.dtype).reshape(a.shape)
    if a.dtype.kind in "iu" and variant == 5:
        info = np.iinfo(a.dtype)
        ext = np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1], dtype=object)
        return np.array(np.resize(ext, a.size).tolist(), dtype=a.dtype).reshape(a.shape)
    return a


if args.poison:
    from concurrent.futures import ThreadPoolExecutor
    san = dict(os.environ, ASAN_OPTIONS="exitcode=99:detect_leaks=1", UBSAN_OPTIONS="exitcode=99")
    jobs = []
    for name, inputs in cases.items():
        # 1-5: contents; then for each input, its last dim one shorter, one
        # longer, its first dim one longer (contents cycled): inputs that do
        # not fit each other
        for variant in range(1, 6 + 3 * len(inputs)):
            pd = f"poison/{name}_{variant}"
            os.makedirs(pd, exist_ok=True)
            mod = onnx.load(f"{name}.onnx")
            for t in mod.graph.initializer:
                t.CopyFrom(nh.from_array(poison(nh.to_array(t), variant), t.name))
            onnx.save(mod, f"{pd}/model.onnx")
            # a given peak: the probe's GEMMs would cost each run most of its time
            cmd = [modelprof, "--run", "--warmup", "0", "--iters", "1", "--threads", "1", "-q",
                   "--peak-gflops", "100"]
            for j, i in enumerate(inputs):
                a = poison(np.load(f"{name}/{i}.npy"), variant)
                if variant > 5 and (variant - 6) // 3 == j and a.ndim:
                    shape, how = list(a.shape), (variant - 6) % 3
                    if how == 0: shape[-1] = max(shape[-1] - 1, 0)
                    elif how == 1: shape[-1] += 1
                    else: shape[0] += 1
                    a = np.resize(a, shape) if a.size else np.zeros(shape, a.dtype)
                np.save(f"{pd}/{i}.npy", a)
                cmd += ["--input-data", f"{i}={pd}/{i}.npy"]
            cmd += ["--save-outputs", f"{pd}/out", f"{pd}/model.onnx"]
            jobs.append((name, variant, cmd))
    # one single-threaded process per run: as many at once as there are cores
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        done = list(ex.map(lambda j: subprocess.run(j[2], env=san, capture_output=True, text=True,
                                                    timeout=120), jobs))
    bad = refused = 0
    runs = len(jobs)
    for (name, variant, _), r in zip(jobs, done):
        if r.returncode == 2 and r.stderr.strip():
            refused += 1
        elif r.returncode:
            bad += 1
            err = [l for l in r.stderr.splitlines() if "ERROR" in l or "runtime error" in l or " #0 " in l
                   or " #1 " in l] or r.stderr.strip().splitlines()[-3:]
            print(f"{name} variant {variant}: exit {r.returncode}: " + " | ".join(err[:4]))
    print(f"contrib and opset 23/24 kernels on adversarial contents: {runs} runs, {runs - refused - bad} ran, "
          f"{refused} refused with a message, {bad} crashed or reported")
    sys.exit(1 if bad else 0)
env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
r = subprocess.run(["node", os.path.join(here, "contrib_ort.js")], env=env, capture_output=True, text=True)
if r.returncode:
    print("contrib_check: ONNX Runtime failed:", r.stderr.strip()[-300:])
    sys.exit(2)
d = json.load(open("ort.json"))
bad = 0
for name, inputs in cases.items():
    if "error" in d[name]:
        print(f"{name:8s} ORT: {d[name]['error'][:120]}")
        bad += 1
        continue
    od = f"out_{name}"
    shutil.rmtree(od, ignore_errors=True)
    cmd = [modelprof, "--run", "--warmup", "0", "--iters", "1", "--threads", "1", "-q"]
    for i in inputs:
        cmd += ["--input-data", f"{i}={name}/{i}.npy"]
    cmd += ["--save-outputs", od, f"{name}.onnx"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(f"{name:8s} modelprof failed: {r.stderr.strip()[:200]}")
        bad += 1
        continue
    res = []
    for k, v in d[name].items():
        ref = np.array(v["data"], np.float64).reshape(v["dims"])
        got = np.load(f"{od}/{k}.npy").astype(np.float64)
        if got.shape != ref.shape:
            res.append(f"{k}: shape {got.shape} vs {ref.shape} <-- BAD")
            bad += 1
            continue
        err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
        ok = err <= 1e-4
        bad += not ok
        res.append(f"{k}: rel L2 {err:.2e}" + ("" if ok else " <-- BAD"))
    print(f"{name:8s} " + ", ".join(res))
print(f"contrib and opset 23/24 kernels against ONNX Runtime: {len(cases) - min(bad, len(cases))}/{len(cases)} cases agree")
sys.exit(1 if bad else 0)
