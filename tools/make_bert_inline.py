#!/usr/bin/python3
"""Write a BERT-base-sized encoder with its weights inline (about 530 MB of
fp32 in the .onnx file itself) for `make bench`'s memory check: a static
profile must stay within 64 MB of RSS whatever the weights.

    /usr/bin/python3 tools/make_bert_inline.py OUT.onnx

Debian's torch 1.13 (TorchScript exporter, opset 14); seeded weights.
"""
import torch, sys
torch.manual_seed(0)
class L(torch.nn.Module):
    def __init__(s, h=768, f=3072):
        super().__init__(); s.q=torch.nn.Linear(h,h); s.k=torch.nn.Linear(h,h); s.v=torch.nn.Linear(h,h); s.o=torch.nn.Linear(h,h)
        s.f1=torch.nn.Linear(h,f); s.f2=torch.nn.Linear(f,h); s.n1=torch.nn.LayerNorm(h); s.n2=torch.nn.LayerNorm(h)
    def forward(s,x):
        a=torch.softmax(s.q(x)@s.k(x).transpose(1,2)/8.0,-1)@s.v(x)
        x=s.n1(x+s.o(a)); return s.n2(x+s.f2(torch.relu(s.f1(x))))
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.emb=torch.nn.Embedding(30522,768); s.layers=torch.nn.ModuleList([L() for _ in range(12)]); s.head=torch.nn.Linear(768,30522)
    def forward(s,ids):
        x=s.emb(ids)
        for l in s.layers: x=l(x)
        return s.head(x)
m=M().eval()
torch.onnx.export(m,(torch.zeros(1,16,dtype=torch.long),),sys.argv[1],input_names=['ids'],opset_version=14)
