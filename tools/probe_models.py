"""Models in plain torch for tools/plan_check.py's rows of operators and
forms a probe found planned wrong (stop 50), each small:

  MoEModel("mask"):  a dense top-k mixture: every expert on every token,
      weighted by a masked softmax of the router; the router reads the
      LayerNorm's output, which the checkpointed experts read too (a block
      input kept once, not twice, under --checkpointing);
  MoEModel("index"): top-k routing with index_select and scatter_add
      (scatter_add's idiom, index.unsqueeze(-1).expand(-1, H): its backward
      keeps the index alone);
  GNN("scatter"):    message passing by scatter_add (GNN("index_add") by
      index_add_, whose backward keeps its source too: the exporter refuses
      its duplicated indices, so tests/test_plan.c plan.probe_rules has it);
  SSM():             a Mamba-style selective scan in log space with cumsum
      (CumsumBackward keeps nothing);
  ALiBiLM():         a decoder with an ALiBi bias computed from an fp32
      buffer and added to the scores (under autocast the bf16 scores
      promote to fp32: PyTorch's type promotion with a tensor with dims),
      hand-written RMSNorm, SwiGLU, tied head;
  OpsZoo():          elu, maximum(h, flip(h)) and gather between Linears
      (elu keeps its input; maximum both inputs and not its result;
      torch.flip, a Slice of step -1 in the export, copies; gather keeps its
      input and index).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


from plain_decoders import MLP as Expert   # SwiGLU: w2(silu(w1 x) * w3 x)


class Router(nn.Module):
    """A router over n SwiGLU experts, top k."""

    def __init__(self, h=64, i=128, n=4, k=2):
        super().__init__()
        self.gate = nn.Linear(h, n, bias=False)
        self.experts = nn.ModuleList(Expert(h, i) for _ in range(n))
        self.k, self.n = k, n


class MoEDenseMask(Router):
    def forward(self, x):
        logits = self.gate(x)
        topv, topi = logits.topk(self.k, dim=-1)
        w = torch.full_like(logits, float("-inf")).scatter(-1, topi, topv).softmax(-1)
        out = 0
        for e in range(self.n):
            out = out + self.experts[e](x) * w[:, e:e + 1]
        return out


class MoEIndex(Router):
    """Each expert takes a fixed share of the tokens sorted by expert
    (capacity T * k / n: static shapes)."""

    def forward(self, x):
        T, H = x.shape
        w, sel = self.gate(x).softmax(-1).topk(self.k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        order = sel.reshape(-1).argsort()
        tok = order // self.k
        cap = T * self.k // self.n
        out = torch.zeros_like(x)
        wf = w.reshape(-1)
        for e in range(self.n):
            idx = tok[e * cap:(e + 1) * cap]
            ws = wf.index_select(0, order[e * cap:(e + 1) * cap])
            y = self.experts[e](x.index_select(0, idx)) * ws.unsqueeze(-1)
            out = out.scatter_add(0, idx.unsqueeze(-1).expand(-1, H), y.to(x.dtype))
        return out


class MoELayer(nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.moe = moe()

    def forward(self, x):
        return x + self.moe(self.norm(x))


class MoEModel(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = nn.Embedding(500, 64)
        moe = MoEDenseMask if kind == "mask" else MoEIndex
        self.layers = nn.ModuleList(MoELayer(moe) for _ in range(2))
        self.head = nn.Linear(64, 500)

    def forward(self, ids):
        x = self.emb(ids).view(-1, 64)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class GNNLayer(nn.Module):
    def __init__(self, f, how):
        super().__init__()
        self.msg = nn.Linear(f, f)
        self.upd = nn.Linear(2 * f, f)
        self.how = how

    def forward(self, x, src, dst):
        m = F.relu(self.msg(x)).index_select(0, src)
        if self.how == "index_add":
            agg = torch.zeros_like(x).index_add(0, dst, m)
        else:
            agg = torch.zeros_like(x).scatter_add(0, dst.unsqueeze(-1).expand_as(m), m)
        deg = torch.zeros(x.shape[0], 1).scatter_add(0, dst.unsqueeze(-1), torch.ones(dst.shape[0], 1)).clamp(min=1)
        return F.relu(self.upd(torch.cat([x, agg / deg], -1)))


class GNN(nn.Module):
    def __init__(self, how, f=32):
        super().__init__()
        self.inp = nn.Linear(16, f)
        self.layers = nn.ModuleList(GNNLayer(f, how) for _ in range(2))
        self.out = nn.Linear(f, 7)

    def forward(self, x, edges):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h, edges[0], edges[1])
        return self.out(h)


class SSMBlock(nn.Module):
    def __init__(self, d=32, n=8):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.inp = nn.Linear(d, 2 * d)
        self.dt = nn.Linear(d, d)
        self.B = nn.Linear(d, n)
        self.C = nn.Linear(d, n)
        self.A_log = nn.Parameter(torch.zeros(d, n))
        self.out = nn.Linear(d, d)

    def forward(self, x):
        u, z = self.inp(self.norm(x)).chunk(2, -1)
        u = F.silu(u)
        dt = F.softplus(self.dt(u))
        A = -torch.exp(self.A_log)
        dBu = dt.unsqueeze(-1) * self.B(u).unsqueeze(2) * u.unsqueeze(-1)
        la = torch.cumsum(dt.unsqueeze(-1) * A, 1)
        h = torch.exp(la) * torch.cumsum(dBu * torch.exp(-la), 1)
        y = (h * self.C(u).unsqueeze(2)).sum(-1)
        return x + self.out(y * F.silu(z))


class SSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.layers = nn.ModuleList(SSMBlock() for _ in range(2))
        self.head = nn.Linear(32, 100)

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class ALiBiAttn(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh, self.hd = nh, d // nh
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.register_buffer("slopes", torch.tensor([2 ** (-8 * (i + 1) / nh) for i in range(nh)]),
                             persistent=False)

    def forward(self, x):
        B, S, D = x.shape
        q, k, v = self.qkv(x).split(D, -1)
        q = q.view(B, S, self.nh, self.hd).transpose(1, 2)
        k = k.view(B, S, self.nh, self.hd).transpose(1, 2)
        v = v.view(B, S, self.nh, self.hd).transpose(1, 2)
        pos = torch.arange(S)
        bias = self.slopes[:, None, None] * (pos[None, :] - pos[:, None]).to(x.dtype)
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        s = (q @ k.transpose(-1, -2) / math.sqrt(self.hd) + bias).masked_fill(causal, float("-inf"))
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D))


class SwiGLU(nn.Module):
    def __init__(self, d, i):
        super().__init__()
        self.gu = nn.Linear(d, 2 * i, bias=False)
        self.down = nn.Linear(i, d, bias=False)

    def forward(self, x):
        a, b = self.gu(x).chunk(2, -1)
        return self.down(F.silu(a) * b)


class ALiBiBlock(nn.Module):
    def __init__(self, d, nh, i):
        super().__init__()
        self.n1, self.a, self.n2, self.m = RMSNorm(d), ALiBiAttn(d, nh), RMSNorm(d), SwiGLU(d, i)

    def forward(self, x):
        x = x + self.a(self.n1(x))
        return x + self.m(self.n2(x))


class ALiBiLM(nn.Module):
    def __init__(self, d=64, nh=4, i=128, layers=2, vocab=300):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(ALiBiBlock(d, nh, i) for _ in range(layers))
        self.norm = RMSNorm(d)

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return F.linear(self.norm(x), self.emb.weight)


class OpsZoo(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(d, d) for _ in range(4))
        self.register_buffer("ix", torch.arange(d).flip(0).expand(4, 8, d).contiguous(), persistent=False)

    def forward(self, x):
        h = F.elu(self.a(x))
        h = torch.maximum(self.b(h), self.b(h).flip(-1))
        return self.d(self.c(h).gather(-1, self.ix))
