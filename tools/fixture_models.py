"""Hand-written modules used for the modelprof fixtures.

Transformers: module and parameter names mirror HuggingFace (BERT, GPT-2,
Llama) so that scope paths in exported node names look like the ones users
see in practice.  Also a recurrent token tagger (LSTM or GRU) and a small CNN
with an eager-mode statically quantized section.  Everything is plain PyTorch
(no transformers dependency) and exports with the TorchScript ONNX exporter of
torch 1.13.
"""

import collections
import math

import torch
import torch.ao.quantization as tq
from torch import nn


# --------------------------------------------------------------------------
# BERT (encoder, HuggingFace BertModel layout)
# --------------------------------------------------------------------------

BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072,
                 max_position_embeddings=512, type_vocab_size=2,
                 layer_norm_eps=1e-12, hidden_act="gelu")
BERT_TINY = dict(BERT_BASE, hidden_size=128, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=512)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], h)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids):
        seq = input_ids.size(1)
        position_ids = torch.arange(seq, dtype=torch.long,
                                    device=input_ids.device).unsqueeze(0)
        token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids)
             + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.num_heads = c["num_attention_heads"]
        self.head_dim = h // self.num_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout = nn.Dropout(0.1)

    def heads(self, x):
        b, s = x.size(0), x.size(1)
        return x.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, mask):
        q = self.heads(self.query(x))
        k = self.heads(self.key(x))
        v = self.heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + mask
        probs = self.dropout(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).transpose(1, 2).contiguous()
        return ctx.view(ctx.size(0), ctx.size(1), self.num_heads * self.head_dim)


class BertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.dense = nn.Linear(h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.intermediate_act_fn = nn.GELU()  # erf form

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c["num_hidden_layers"]))

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c)

    def forward(self, input_ids, attention_mask):
        # [batch, seq] int64 (1 = keep, 0 = pad) -> additive [batch, 1, 1, seq]
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * torch.finfo(torch.float32).min
        seq_out = self.encoder(self.embeddings(input_ids), ext)
        return seq_out, self.pooler(seq_out)


class Bert(nn.Module):
    """Wrapper so that scopes start with /bert/ like HF's task models."""

    def __init__(self, c):
        super().__init__()
        self.bert = BertModel(c)

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids, attention_mask)


# --------------------------------------------------------------------------
# GPT-2 (decoder, HuggingFace GPT2LMHeadModel layout, Conv1D projections)
# --------------------------------------------------------------------------

GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,
                  n_head=12, n_inner=3072, layer_norm_epsilon=1e-5,
                  activation_function="gelu_new", tie_word_embeddings=True)


class Conv1D(nn.Module):
    """HF GPT-2 Conv1D: a Linear whose weight is stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class NewGELUActivation(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                           * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["n_embd"]
        self.n_head = c["n_head"]
        self.head_dim = e // self.n_head
        self.c_attn = Conv1D(3 * e, e)
        self.c_proj = Conv1D(e, e)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)

    def heads(self, x):
        return x.view(x.size(0), x.size(1), self.n_head, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        e = x.size(-1)
        q, k, v = self.c_attn(x).split(e, dim=2)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        s = x.size(1)
        pos = torch.arange(s, device=x.device)
        causal = pos[None, :] <= pos[:, None]               # [seq, seq] bool
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = self.attn_dropout(torch.softmax(w, dim=-1))
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size(0), a.size(1), self.n_head * self.head_dim)
        return self.resid_dropout(self.c_proj(a))


class GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(c["n_inner"], c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], c["n_inner"])
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["n_embd"]
        self.ln_1 = nn.LayerNorm(e, eps=c["layer_norm_epsilon"])
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(e, eps=c["layer_norm_epsilon"])
        self.mlp = GPT2MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["n_embd"]
        self.wte = nn.Embedding(c["vocab_size"], e)
        self.wpe = nn.Embedding(c["n_positions"], e)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(e, eps=c["layer_norm_epsilon"])

    def forward(self, input_ids):
        pos = torch.arange(input_ids.size(1), dtype=torch.long,
                           device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied: one Parameter

    def forward(self, input_ids):
        return self.lm_head(self.transformer(input_ids))


# --------------------------------------------------------------------------
# Llama (decoder, HuggingFace LlamaForCausalLM layout)
# --------------------------------------------------------------------------

LLAMA_SMALL = dict(vocab_size=32000, hidden_size=512, num_hidden_layers=4,
                   num_attention_heads=8, head_dim=64, intermediate_size=1376,
                   rms_norm_eps=1e-6, rope_theta=10000.0,
                   max_position_embeddings=2048, tie_word_embeddings=False)
# The 4-layer Llama of the H100 reference runs (docs/PLANNING.md): Llama
# 3.2 1B's sizes (vocabulary 128,256, GQA 32/8 heads, tied embeddings).
LLAMA_1B_4LAYERS = dict(LLAMA_SMALL, vocab_size=128256, hidden_size=2048, num_hidden_layers=4,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                        intermediate_size=8192, rope_theta=500000.0, tie_word_embeddings=True)
# Llama-2-70B's sizes (GQA 64/8 heads): the planner's speed benchmark.
LLAMA_70B = dict(LLAMA_SMALL, hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
                 num_key_value_heads=8, head_dim=128, intermediate_size=28672,
                 max_position_embeddings=4096)
# Qwen2.5-0.5B's sizes (Qwen2ForCausalLM: Llama with biases on q, k and v;
# GQA 14/2 heads, tied embeddings; 494,032,768 parameters): the H200
# reference rows (tools/plan_h200.py).
QWEN25_05B = dict(LLAMA_SMALL, vocab_size=151936, hidden_size=896, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, head_dim=64,
                  intermediate_size=4864, rope_theta=1000000.0, max_position_embeddings=32768,
                  tie_word_embeddings=True, attention_bias=True)
# Mistral-7B's sizes cut to 2 layers (GQA 32/8 heads, head dim 128): the
# KV-cache check (docs/PLANNING.md section 7).
MISTRAL_7B_2LAYERS = dict(LLAMA_SMALL, hidden_size=4096, num_hidden_layers=2, num_attention_heads=32,
                          num_key_value_heads=8, head_dim=128, intermediate_size=14336,
                          rope_theta=1000000.0, max_position_embeddings=32768)
# Llama-3-8B's sizes (GQA 32/8 heads, vocabulary 128,256, untied head;
# 8,030,261,248 parameters): the fine-tuning examples (docs/PLANNING.md
# section 12).
LLAMA3_8B = dict(LLAMA_SMALL, vocab_size=128256, hidden_size=4096, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=14336,
                 rope_theta=500000.0, max_position_embeddings=8192)
# Gemma-2-2B's sizes cut to 2 layers, on Llama's blocks (SwiGLU, two
# RMSNorms; not Gemma-2's GeGLU, four norms and sliding windows): its
# vocabulary of 256,000, tied embeddings and final logit softcapping (30),
# the loss's share of the pure-bf16 rows (docs/PLANNING.md section 9).
GEMMA2_2B_2LAYERS = dict(LLAMA_SMALL, vocab_size=256000, hidden_size=2304, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                         intermediate_size=9216, max_position_embeddings=8192,
                         tie_word_embeddings=True, final_logit_softcapping=30.0)
# Llama-3.2-1B's sizes, all 16 layers (the pure-bf16 rows).
LLAMA_1B = dict(LLAMA_1B_4LAYERS, num_hidden_layers=16)
LLAMA_7B = dict(LLAMA_SMALL, hidden_size=4096, num_hidden_layers=32,
                num_attention_heads=32, head_dim=128, intermediate_size=11008,
                max_position_embeddings=4096)


class LlamaRMSNorm(nn.Module):
    def __init__(self, h, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * x


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq):
        t = torch.arange(seq, device=x.device, dtype=torch.float32)
        freqs = t[:, None] * self.inv_freq[None, :]          # [seq, dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)               # [seq, dim]
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.num_heads = c["num_attention_heads"]
        # grouped-query attention when num_key_value_heads < num_attention_heads
        self.num_kv = c.get("num_key_value_heads", self.num_heads)
        self.head_dim = c["head_dim"]
        qkv_bias = c.get("attention_bias", False)  # Qwen2: biases on q, k and v
        self.q_proj = nn.Linear(h, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(h, self.num_kv * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(h, self.num_kv * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, c["rope_theta"])

    def forward(self, x, mask):
        b, s = x.size(0), x.size(1)
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_kv, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, s)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.num_kv != self.num_heads:  # HF's repeat_kv: expand, then reshape (a copy)
            n = self.num_heads // self.num_kv
            k = k[:, :, None].expand(b, self.num_kv, n, s, self.head_dim).reshape(
                b, self.num_heads, s, self.head_dim)
            v = v[:, :, None].expand(b, self.num_kv, n, s, self.head_dim).reshape(
                b, self.num_heads, s, self.head_dim)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = torch.softmax(w + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(o.reshape(b, s, self.num_heads * self.head_dim))


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = LlamaRMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = LlamaRMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = LlamaRMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        s = input_ids.size(1)
        # causal additive mask [seq, seq]: 0 on/below the diagonal, min above
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype,
                          device=x.device).triu(1)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings"):
            self.lm_head.weight = self.model.embed_tokens.weight
        self.final_logit_softcapping = c.get("final_logit_softcapping")

    def forward(self, input_ids):
        logits = self.lm_head(self.model(input_ids))
        cap = self.final_logit_softcapping
        if cap:  # Gemma-2's final logit softcapping (transformers' Gemma2ForCausalLM)
            logits = torch.tanh(logits / cap) * cap
        return logits


# --------------------------------------------------------------------------
# Recurrent token tagger (embedding, 2-layer bidirectional LSTM or GRU, head)
# --------------------------------------------------------------------------

RNN_TAGGER = dict(vocab_size=10000, embedding_dim=128, hidden_size=256,
                  num_layers=2, bidirectional=True, batch_first=True,
                  dropout=0.1, num_labels=17)


class RNNTagger(nn.Module):
    """One label per token.  nn.LSTM / nn.GRU export to one ONNX LSTM / GRU
    node per layer (direction=bidirectional)."""

    def __init__(self, c, cell):
        super().__init__()
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.embedding = nn.Embedding(c["vocab_size"], c["embedding_dim"])
        self.rnn = rnn(c["embedding_dim"], c["hidden_size"], num_layers=c["num_layers"],
                       bidirectional=c["bidirectional"], batch_first=c["batch_first"],
                       dropout=c["dropout"])
        self.dropout = nn.Dropout(c["dropout"])
        directions = 2 if c["bidirectional"] else 1
        self.classifier = nn.Linear(directions * c["hidden_size"], c["num_labels"])

    def forward(self, input_ids):
        x, _ = self.rnn(self.embedding(input_ids))          # [batch, seq, 2 * hidden]
        return self.classifier(self.dropout(x))


# --------------------------------------------------------------------------
# The recurrent benchmark of issue 18: a 2-layer bidirectional LSTM, then a
# GRU over its output (sequence-major, as nn.LSTM's default)
# --------------------------------------------------------------------------

LSTM_GRU = dict(input_size=64, hidden_size=128, lstm_layers=2, seq=20, batch=4)


class LSTMGRU(nn.Module):
    """nn.LSTM(64, 128, 2 layers, bidirectional) -> nn.GRU(256, 128): two
    ONNX LSTM nodes (direction=bidirectional) and one GRU node
    (linear_before_reset=1, as PyTorch's GRU computes)."""

    def __init__(self, c=LSTM_GRU):
        super().__init__()
        h = c["hidden_size"]
        self.lstm = nn.LSTM(c["input_size"], h, num_layers=c["lstm_layers"], bidirectional=True)
        self.gru = nn.GRU(2 * h, h)

    def forward(self, x):                                   # [seq, batch, input]
        y, _ = self.lstm(x)
        z, h = self.gru(y)
        return z, h


# --------------------------------------------------------------------------
# Small CNN with a statically quantized section (eager mode, qnnpack)
# --------------------------------------------------------------------------

QUANT_CNN = dict(image_size=32, channels=[3, 16, 32, 64], hidden=128, num_classes=10,
                 backend="qnnpack", activation="quint8 per-tensor affine (MinMaxObserver)",
                 weight="qint8 per-channel symmetric (PerChannelMinMaxObserver)",
                 fused=["conv1+relu1", "conv2+relu2", "conv3+relu3"],
                 float_layers=["classifier"], calibration="4 batches of 2 x N(0,1), seed 2")


class QuantCNN(nn.Module):
    """quant -> 3 x (Conv2d + ReLU) -> pool -> fc1 -> ReLU -> dequant -> classifier.

    Everything between QuantStub and DeQuantStub is quantized; the classifier
    stays float (qconfig None).  fc1 and relu4 are not fused: torch 1.13
    cannot export quantized::linear_relu."""

    def __init__(self, c):
        super().__init__()
        ch = c["channels"]
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(ch[0], ch[1], 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(ch[1], ch[2], 3, stride=2, padding=1)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(ch[2], ch[3], 3, stride=2, padding=1)
        self.relu3 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(ch[3], c["hidden"])
        self.relu4 = nn.ReLU()
        self.dequant = tq.DeQuantStub()
        self.classifier = nn.Linear(c["hidden"], c["num_classes"])

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.relu3(self.conv3(x))
        x = self.relu4(self.fc1(torch.flatten(self.pool(x), 1)))
        return self.classifier(self.dequant(x))


QUANTIZED_LAYERS = ("conv1", "conv2", "conv3", "fc1")


def quantized_cnn(c):
    """QuantCNN after prepare / calibrate / convert (torch.ao.quantization).

    The float model's parameters (every weight and bias, before convert)
    are the reference count: after convert, quantized weights are packed
    int8 tensors and no longer nn.Parameters, so model.parameters() only
    yields the float classifier.  The returned module carries
    `fixture_params` (what expected.json records) for export_fixtures."""
    torch.backends.quantized.engine = c["backend"]
    model = QuantCNN(c).eval()
    float_params = sum(p.numel() for p in model.parameters())
    per_layer = collections.OrderedDict(
        (name, sum(p.numel() for p in getattr(model, name).parameters()))
        for name in QUANTIZED_LAYERS)
    weight_elems = sum(getattr(model, name).weight.numel() for name in QUANTIZED_LAYERS)
    bias_elems = sum(getattr(model, name).bias.numel() for name in QUANTIZED_LAYERS)
    model.qconfig = tq.QConfig(
        activation=tq.MinMaxObserver.with_args(dtype=torch.quint8),
        weight=tq.PerChannelMinMaxObserver.with_args(
            dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    model.classifier.qconfig = None
    model = tq.fuse_modules(model, [["conv1", "relu1"], ["conv2", "relu2"],
                                    ["conv3", "relu3"]])
    tq.prepare(model, inplace=True)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(2, 3, c["image_size"], c["image_size"], generator=g))
    tq.convert(model, inplace=True)
    model.fixture_params = collections.OrderedDict([
        ("params", float_params),
        ("params_pytorch_quantized", sum(p.numel() for p in model.parameters())),
        ("params_quantized_layers", per_layer),
        ("params_int8_weights", weight_elems),
        ("params_quantized_biases", bias_elems),
        # as torch.onnx.export writes them (quant_cnn_qdq): int8 weights, float biases
        ("params_by_dtype", collections.OrderedDict([
            ("float", float_params - weight_elems), ("int8", weight_elems)])),
    ])
    return model
