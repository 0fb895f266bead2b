"""Llama-style decoders in plain torch, written differently from
tools/fixture_models.py (whose Llama the planner was developed against),
and LoRA written in plain torch as PEFT's Linear computes it, for
tools/plan_check.py's fine-tuning rows. PEFT cannot be installed here.

  PlainDecoder(variant): token embedding, L blocks of grouped-query
  attention with rotary and SwiGLU, RMSNorm, an LM head. What varies:
    "a": RMSNorm as x * rsqrt(mean(x*x) + eps) * w; rotary by chunk and cat
         of a table built per call from an outer product; GQA K/V heads by
         unsqueeze, expand and reshape; a boolean causal mask (ones().triu)
         applied with masked_fill; softmax in the scores' type;
    "b": RMSNorm as w * (x / sqrt(x.pow(2).mean + eps)); rotary by slices
         and cat (-x2, x1) with cos/sin tables registered as buffers; GQA by
         expand of a [B, kv, 1, S, D] view then reshape; the mask from
         torch.tril(ones).bool() with masked_fill(~mask); softmax in fp32
         then back (.float() ... .type_as);
    both: SiLU as F.silu(w1 x) * w3 x, no biases, untied head.
  With experts > 0 each block's MLP is a sparse mixture of experts
  (SparseMoE: Mixtral's block, top_k of the experts per token).

  FusedDecoder(style): one QKV projection whose output is viewed [B, S,
  heads, 3 x head dim], transposed and split into Q, K and V (views);
  partial rotary on half of each head by slices and cat; LayerNorm with
  biases; a causal boolean mask by ones().tril() and masked_fill; tied
  head. What varies:
    "neox": GPT-NeoX's parallel residual, x + attn(ln1 x) + mlp(ln2 x),
            and a GELU MLP;
    "phi3": sequential residuals and a fused gate-up projection split by
            chunk into SiLU(gate) * up (Phi-3's gate_up_proj).
  Eager matmul copies V (and K^T) before bmm: it cannot flatten their batch
  and heads, so autograd keeps the copies, not the QKV output.

  add_lora(model, names, r, alpha, dropout): replaces each named nn.Linear
  by LoRALinear: base(x) + B(A(dropout(x))) * alpha / r, the base frozen,
  A and B trainable (PEFT's vanilla LoRA forward, peft/tuners/lora/layer.py
  Linear.forward; fp32 here, so PEFT's input cast is a no-op).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class NormA(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.w


class NormB(nn.Module):
    def __init__(self, h, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rot_a(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rot_b(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attn(nn.Module):
    def __init__(self, variant, h, nh, nkv):
        super().__init__()
        self.v, self.nh, self.nkv, self.hd = variant, nh, nkv, h // nh
        self.wq = nn.Linear(h, nh * self.hd, bias=False)
        self.wk = nn.Linear(h, nkv * self.hd, bias=False)
        self.wv = nn.Linear(h, nkv * self.hd, bias=False)
        self.wo = nn.Linear(nh * self.hd, h, bias=False)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        q = self.wq(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, S, self.nkv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, S, self.nkv, self.hd).transpose(1, 2)
        rot = rot_a if self.v == "a" else rot_b
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        r = self.nh // self.nkv
        if self.v == "a":
            k = k.unsqueeze(2).expand(B, self.nkv, r, S, self.hd).reshape(B, self.nh, S, self.hd)
            v = v.unsqueeze(2).expand(B, self.nkv, r, S, self.hd).reshape(B, self.nh, S, self.hd)
            a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            a = a.masked_fill(mask, float("-inf")).softmax(-1)
        else:
            k = k[:, :, None].expand(B, self.nkv, r, S, self.hd).reshape(B, self.nh, S, self.hd)
            v = v[:, :, None].expand(B, self.nkv, r, S, self.hd).reshape(B, self.nh, S, self.hd)
            a = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
            a = a.masked_fill(~mask, torch.finfo(a.dtype).min)
            a = F.softmax(a.float(), dim=-1).type_as(q)
        o = (a @ v).transpose(1, 2).reshape(B, S, self.nh * self.hd)
        return self.wo(o)


class MLP(nn.Module):
    def __init__(self, h, i):
        super().__init__()
        self.w1 = nn.Linear(h, i, bias=False)
        self.w3 = nn.Linear(h, i, bias=False)
        self.w2 = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoE(nn.Module):
    """A sparse mixture of experts as transformers' MixtralSparseMoeBlock
    writes it: a router, softmax in fp32, top k renormalised, and per
    expert the tokens that chose it found by a NonZero, their rows gathered,
    the expert's SwiGLU on them, weighted and added back with index_add_.
    finder "onehot": torch.where of the one-hot mask's slice (Mixtral);
    "eq": torch.where(selected == e) (other MoE code)."""

    def __init__(self, h, i, experts, top_k, finder="onehot"):
        super().__init__()
        self.gate = nn.Linear(h, experts, bias=False)
        self.experts = nn.ModuleList(MLP(h, i) for _ in range(experts))
        self.k, self.n, self.finder = top_k, experts, finder

    def forward(self, x):
        B, S, H = x.shape
        x = x.view(-1, H)
        w = F.softmax(self.gate(x), dim=1, dtype=torch.float)
        w, sel = torch.topk(w, self.k, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros((B * S, H), dtype=x.dtype, device=x.device)
        mask = F.one_hot(sel, num_classes=self.n).permute(2, 1, 0)
        for e in range(self.n):
            if self.finder == "onehot":
                slot, tok = torch.where(mask[e])
            else:
                tok, slot = torch.where(sel == e)
            y = self.experts[e](x[tok]) * w[tok, slot, None]
            out.index_add_(0, tok, y.to(x.dtype))
        return out.view(B, S, H)


class Block(nn.Module):
    def __init__(self, variant, h, nh, nkv, i, experts=0, top_k=2, finder="onehot"):
        super().__init__()
        Norm = NormA if variant == "a" else NormB
        self.attention_norm = Norm(h)
        self.attention = Attn(variant, h, nh, nkv)
        self.ffn_norm = Norm(h)
        self.feed_forward = SparseMoE(h, i, experts, top_k, finder) if experts else MLP(h, i)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class PlainDecoder(nn.Module):
    def __init__(self, variant="a", vocab=1000, h=512, layers=2, nh=8, nkv=2, inter=1376, max_seq=256,
                 experts=0, top_k=2, finder="onehot"):
        super().__init__()
        self.variant = variant
        self.tok = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(Block(variant, h, nh, nkv, inter, experts, top_k, finder)
                                    for _ in range(layers))
        self.norm = (NormA if variant == "a" else NormB)(h)
        self.out = nn.Linear(h, vocab, bias=False)
        hd = h // nh
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        self.register_buffer("inv", inv, persistent=False)
        if variant == "b":
            f = torch.outer(torch.arange(max_seq, dtype=torch.float32), inv)
            e = torch.cat((f, f), -1)
            self.register_buffer("cos_t", e.cos(), persistent=False)
            self.register_buffer("sin_t", e.sin(), persistent=False)

    def forward(self, ids):
        S = ids.shape[1]
        if self.variant == "a":
            f = torch.outer(torch.arange(S, dtype=torch.float32), self.inv)
            e = torch.cat((f, f), -1)
            cos, sin = e.cos(), e.sin()
            mask = torch.ones(S, S, dtype=torch.bool).triu(1)
        else:
            cos, sin = self.cos_t[:S], self.sin_t[:S]
            mask = torch.tril(torch.ones(S, S)).bool()
        x = self.tok(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.out(self.norm(x))


class FusedBlock(nn.Module):
    def __init__(self, style, h, nh, inter):
        super().__init__()
        self.nh, self.hd, self.style = nh, h // nh, style
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.o = nn.Linear(h, h)
        self.up = nn.Linear(h, 2 * inter if style == "phi3" else inter)
        self.down = nn.Linear(inter, h)
        self.rd = self.hd // 2

    def rope(self, t, cos, sin):
        r, p = t[..., :self.rd], t[..., self.rd:]
        a, b = r[..., :self.rd // 2], r[..., self.rd // 2:]
        return torch.cat((r * cos + torch.cat((-b, a), -1) * sin, p), -1)

    def attn(self, x, cos, sin):
        B, S, H = x.shape
        qkv = self.qkv(x).view(B, S, self.nh, 3 * self.hd).transpose(1, 2)
        q, k, v = qkv.split(self.hd, dim=-1)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        w = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        w = w.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), float("-inf"))
        y = torch.matmul(torch.softmax(w, -1), v).transpose(1, 2).reshape(B, S, H)
        return self.o(y)

    def mlp(self, x):
        if self.style == "phi3":
            g, u = self.up(x).chunk(2, -1)
            return self.down(F.silu(g) * u)
        return self.down(F.gelu(self.up(x)))

    def forward(self, x, cos, sin):
        if self.style == "neox":
            return x + self.attn(self.ln1(x), cos, sin) + self.mlp(self.ln2(x))
        x = x + self.attn(self.ln1(x), cos, sin)
        return x + self.mlp(self.ln2(x))


class FusedDecoder(nn.Module):
    def __init__(self, style, vocab=2000, h=128, nh=4, layers=2, inter=256, max_seq=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(FusedBlock(style, h, nh, inter) for _ in range(layers))
        self.norm = nn.LayerNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)
        self.head.weight = self.emb.weight
        rd = (h // nh) // 2
        inv = 1.0 / (10000 ** (torch.arange(0, rd, 2).float() / rd))
        f = torch.outer(torch.arange(max_seq).float(), inv)
        e = torch.cat((f, f), -1)
        self.register_buffer("cos", e.cos(), persistent=False)
        self.register_buffer("sin", e.sin(), persistent=False)

    def forward(self, ids):
        x = self.emb(ids)
        S = ids.shape[1]
        cos, sin = self.cos[:S].to(x.dtype), self.sin[:S].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head(self.norm(x))


class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha, dropout):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.02)  # PEFT starts B at 0; any value keeps the same tensors
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(self.drop(x))) * self.scaling


def add_lora(model, names, r=8, alpha=16, dropout=0.0):
    """Freeze every parameter, then wrap the named Linears (module paths)."""
    for p in model.parameters():
        p.requires_grad_(False)
    mods = dict(model.named_modules())
    for name in names:
        parent, _, leaf = name.rpartition(".")
        setattr(mods[parent], leaf, LoRALinear(mods[name], r, alpha, dropout))
    return model


def linears(model, suffixes):
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.split(".")[-1] in suffixes]
