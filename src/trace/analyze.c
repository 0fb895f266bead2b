/* Linking and analysis of a read trace (trace.h).
 *
 * Linking follows the trace's own links, as PyTorch does for key_averages
 * (torch/autograd/profiler.py, profiler_util.py):
 *  - a device event belongs to the operator whose External id it carries;
 *  - operators nest per thread by time: sorted by (start, -end), each one's
 *    parent is the innermost open span that contains it; a child with the
 *    same name as a parent whose only child it is, is merged into it
 *    (EventList._remove_dup_nodes), its kernels replacing the parent's;
 *  - a runtime call carrying an operator's External id counts on that
 *    operator's thread;
 *  - a backward operator is tied to the forward operator where its fwdbwd
 *    flow tr_starts (or, without flows, the forward operator with its
 *    Sequence number); an operator belongs to the innermost nn.Module scope
 *    open around it on its thread. */
#include "trace/trace.h"
#include "base/arrays.h"
#include "base/gpu.h"
#include "trace/ival.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#include "trace/analyze_int.h"
#endif

const char *const mp_tcat_names[MP_TC_COUNT] = {"gemm", "conv", "attention", "elementwise",
                                                "memcpy_memset", "communication", "other"};
const char *const mp_tcat_labels[MP_TC_COUNT] = {
    "GEMM", "convolution", "attention", "element-wise/reduction/norm", "memcpy/memset",
    "communication (NCCL)", "other"};
const char *const mp_tidle_names[MP_TI_COUNT] = {"data_loader", "collective_wait", "host_range",
                                                 "launch_bound", "synchronization", "other"};
const char *const mp_tidle_labels[MP_TI_COUNT] = {"waiting on the data loader",
                                                  "waiting in a collective",
                                                  "host inside a record_function range",
                                                  "launch-bound (host late)",
                                                  "after synchronisation", "other"};

/* ---- helpers ---- */

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool has_ci(const char *s, const char *sub) { return strcasestr(s, sub) != NULL; }

bool tr_starts(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* The category an operator's name decides alone; -1 when its kernels
 * decide. */
int tr_op_category(const char *op) {
    if (op) {
        static const char *const gemm[] = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                                           "aten::matmul", "aten::linear", "aten::_scaled_mm",
                                           "aten::addmv", "aten::mv", "aten::dot"};
        for (size_t i = 0; i < MP_ARRAY_LEN(gemm); i++)
            if (strcmp(op, gemm[i]) == 0) return MP_TC_GEMM;
        if (has(op, "attention") || has(op, "flash") || has(op, "sdpa")) return MP_TC_ATTN;
        if (has(op, "conv") && tr_starts(op, "aten::")) return MP_TC_CONV;
        if (has(op, "norm") || has(op, "softmax")) return MP_TC_ELEM;
    }
    return -1;
}

bool mp__trace_comm_kernel(const char *name) { return has_ci(name, "nccl"); }

/* A kernel that ran fp32 operands on tensor cores (TF32): CUTLASS
 * "tensorop_s1688"/"s16816" kernels, cuBLAS/cuDNN xmma kernels named tf32. */
static bool tf32_kernel(const char *k) { return has_ci(k, "tf32") || has(k, "tensorop_s"); }

unsigned mp__trace_kflags(mp_trace_raw *raw, uint32_t name) {
    if (!raw->kflags && (raw->kflags = calloc((size_t)raw->n_names + 1, 1)) != NULL)
        raw->n_kflags = raw->n_names;
    bool cached = raw->kflags && name < (uint32_t)raw->n_kflags;   /* names added since: asked each time */
    if (cached && (raw->kflags[name] & MP_TK_ASKED)) return raw->kflags[name];
    const char *k = raw->names[name];
    unsigned f = MP_TK_ASKED | (mp__trace_comm_kernel(k) ? MP_TK_COMM : 0) |
                 (tf32_kernel(k) ? MP_TK_TF32 : 0);
    if (cached) raw->kflags[name] = (uint8_t)f;
    return f;
}

bool mp__trace_loader(const char *name) { return has(name, "DataLoader"); }

bool mp__trace_user_range(const char *n) {
    static const char *const framework[] = {"ProfilerStep#", "Optimizer.", "gloo:", "nccl:", "c10d::",
                                            "record_param_comms", "DistributedDataParallel.",
                                            "FullyShardedDataParallel", "## "};
    for (size_t i = 0; i < MP_ARRAY_LEN(framework); i++)
        if (tr_starts(n, framework[i])) return false;
    return !mp__trace_loader(n) && !mp_trace_module_range(n, strlen(n), NULL);
}

/* The category a kernel's name decides. */
int tr_kernel_category(const char *k) {
    if (mp__trace_comm_kernel(k)) return MP_TC_COMM;
    if (has_ci(k, "flash") || has_ci(k, "fmha") || has_ci(k, "attention") || has_ci(k, "sdpa"))
        return MP_TC_ATTN;
    if (has_ci(k, "conv") || has(k, "wgrad") || has(k, "dgrad") || has(k, "fprop"))
        return MP_TC_CONV;
    if (has_ci(k, "gemm") || has(k, "nvjet") || has_ci(k, "cutlass") || has_ci(k, "cublas") ||
        has(k, "xmma") || has(k, "Kernel2") || has_ci(k, "gemv"))
        return MP_TC_GEMM;
    if (has(k, "elementwise") || has(k, "reduce") || has_ci(k, "norm") || has_ci(k, "softmax") ||
        has(k, "Welford") || has(k, "multi_tensor") || has(k, "at::native") || has(k, "GammaBeta") ||
        has(k, "bn_fw") || has(k, "bn_bw"))
        return MP_TC_ELEM;
    return MP_TC_OTHER;
}

int tr_category(const char *k, int kind, const char *op) {
    if (kind == MP_TD_MEMCPY || kind == MP_TD_MEMSET) return MP_TC_MEM;
    int kc = tr_kernel_category(k);
    if (kc == MP_TC_COMM) return kc;
    int oc = tr_op_category(op);
    return oc >= 0 ? oc : kc;
}

void mp_trace_short_name(const char *name, char *out, size_t n) {
    if (!n) return;
    const char *s = name;
    if (tr_starts(s, "void ")) s += 5;
    size_t len = strlen(s);
    /* drop the parameter list: the last top-level "(...)" at the end */
    if (len && s[len - 1] == ')') {
        int depth = 0;
        for (size_t i = len; i-- > 0;) {
            if (s[i] == ')') depth++;
            else if (s[i] == '(' && --depth == 0) {
                if (i > 0) len = i;
                break;
            }
        }
    }
    size_t o = 0;
    static const char *const drop[] = {"(anonymous namespace)::", "at::native::", "at::cuda::",
                                       "c10::", "std::"};
    for (size_t i = 0; i < len && o + 1 < n;) {
        bool skipped = false;
        for (size_t d = 0; d < MP_ARRAY_LEN(drop); d++) {
            size_t dl = strlen(drop[d]);
            if (i + dl <= len && memcmp(s + i, drop[d], dl) == 0) {
                i += dl;
                skipped = true;
                break;
            }
        }
        if (!skipped) out[o++] = s[i++];
    }
    out[o] = 0;
    const size_t max = 72;
    if (o > max && n > max + 4) memcpy(out + max - 3, "...", 4);
}

/* ---- datasheet peaks (dense, no sparsity), TFLOPS: the one GPU table
 * (src/base/gpu.c) the planner reads too. fp32 is the non-tensor-core
 * rate (PyTorch's fp32 matmul with TF32 off); tf32 the tensor-core rate
 * fp32 operators get when their kernels ran as TF32 (cuDNN convolutions
 * do by default) ---- */

const char *const mp_tdtype_names[MP_TDT_COUNT] = {"?", "fp32", "fp16", "bf16", "fp8", "fp64",
                                                   "tf32"};

double mp_trace_peak(const char *device, int dtype, const char **label) {
    static const int col[MP_TDT_COUNT] = {-1, MP_GPU_FP32, MP_GPU_FP16, MP_GPU_BF16, MP_GPU_FP8,
                                          MP_GPU_FP64, MP_GPU_TF32};
    if (label) *label = NULL;
    if (!device || dtype <= 0 || dtype >= MP_TDT_COUNT) return 0;
    const mp_gpu *g = mp_gpu_match(device);
    if (!g) return 0;
    if (label) *label = g->label;
    return g->tflops[col[dtype]];
}

/* ---- the module tree ---- */

typedef struct mtree {
    mp_module *mods;
    mp_tmod *fig;
    int n, cap, cap2;
    mp_imap index;          /* (parent << 32 | name) -> node */
    mp_arena *arena;
    const char **names;
} mtree;

static int mtree_node(mtree *m, int parent, uint32_t name) {
    int64_t key = (int64_t)(((uint64_t)(uint32_t)parent << 32) | name);
    int32_t v = mp_imap_get(&m->index, key);
    if (v >= 0) return v;
    if (m->n + 1 > m->cap) {
        int cap = m->cap;
        mp_module *nm = mp_grow(m->mods, sizeof *m->mods, &cap, m->n + 1);
        if (!nm) return -1;
        m->mods = nm;
        int cap2 = m->cap;
        mp_tmod *nf = mp_grow(m->fig, sizeof *m->fig, &cap2, m->n + 1);
        if (!nf) return -1;
        m->fig = nf;
        m->cap = MP_MIN(cap, cap2);
    }
    int i = m->n++;
    mp_module *md = &m->mods[i];
    memset(md, 0, sizeof *md);
    memset(&m->fig[i], 0, sizeof m->fig[i]);
    const char *label = m->names[name];
    md->name = label;
    md->parent = parent;
    md->first_child = md->last_child = md->next_sibling = -1;
    md->depth = parent >= 0 ? m->mods[parent].depth + 1 : 0;
    /* class: the label without its "_N" instance suffix */
    size_t len = strlen(label), cut = len;
    while (cut > 0 && label[cut - 1] >= '0' && label[cut - 1] <= '9') cut--;
    if (cut > 0 && cut < len && label[cut - 1] == '_') cut--;
    else cut = len;
    md->cls = mp_arena_strndup(m->arena, label, cut);
    if (parent >= 0 && m->mods[parent].parent >= 0)
        md->path = mp_arena_printf(m->arena, "%s.%s", m->mods[parent].path, label);
    else
        md->path = parent >= 0 ? label : "";
    if (!md->cls || !md->path) return -1;
    if (parent >= 0) {
        mp_module *p = &m->mods[parent];
        if (p->last_child >= 0) m->mods[p->last_child].next_sibling = i;
        else p->first_child = i;
        p->last_child = i;
    }
    if (m->n > 64 && (size_t)m->n * 2 > m->index.mask) {
        /* rebuild the index larger */
        mp_imap bigger;
        if (!mp_imap_init(&bigger, (size_t)m->n * 2)) return -1;
        for (size_t s = 0; s <= m->index.mask; s++)
            if (m->index.vals[s] >= 0) mp_imap_put(&bigger, m->index.keys[s], m->index.vals[s]);
        mp_imap_free(&m->index);
        m->index = bigger;
    }
    mp_imap_put(&m->index, key, i);
    return i;
}

static uint8_t *name_flags(const mp_trace_raw *raw) {
    uint8_t *b = malloc((size_t)raw->n_names + 1);
    if (!b) return NULL;
    for (int n = 0; n < raw->n_names; n++) {
        const char *s = raw->names[n];
        b[n] = (uint8_t)((has(s, "Backward") ? NF_BACKWARD : 0) |
                         (tr_starts(s, "autograd::") ? NF_AUTOGRAD : 0) |
                         (has(s, "_backward") ? NF_UBACKWARD : 0) |
                         (has(s, "DataLoader") ? NF_LOADER : 0) |
                         (has(s, "Synchronize") || strcmp(s, "cudaMemcpy") == 0 ? NF_SYNC : 0) |
                         (mp_trace_flop_free(s) ? NF_FLOP_FREE : 0));
    }
    return b;
}

/* The outermost FLOP-counted operator among i and its ancestors; -1. */
static int32_t outer_of(const work *w, int32_t i) {
    const mp_tspan *sp = w->raw->spans;
    int32_t o = -1;
    for (int32_t x = i; x >= 0; x = w->parent[x])
        if (sp[x].has_flops && sp[x].kind == MP_TS_OP) o = x;
    return o;
}

/* Freed memory goes back to the system now (glibc keeps freed heap memory
 * for reuse; the analysis frees megabytes between its steps). */
void mp__trace_trim(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* The name of the module tree's root: "trace". */
static int intern_root(mp_trace_raw *raw) { return mp__trace_intern(raw, "trace"); }

int32_t tr_resolve(const work *w, int32_t s) {
    while (s >= 0 && mp_bit_get(w->merged, (size_t)s)) s = w->parent[s];
    return s;
}

/* Rank of span k among the set bits of b (rank: per word, the bits set
 * before it). */
static size_t bit_rank(const uint64_t *b, const uint32_t *rank, size_t k) {
    return rank[k / 64] + (size_t)__builtin_popcountll(b[k / 64] & ((UINT64_C(1) << (k % 64)) - 1));
}

/* A rank over the bit set b of `words` words (per word, the bits set before
 * it; to free); *n: the bits set. NULL when out of memory. */
static uint32_t *bit_ranks(const uint64_t *b, size_t words, size_t *n) {
    uint32_t *r = mp_big_alloc((words + 1) * sizeof *r, false);
    size_t k = 0;
    for (size_t q = 0; r && q < words; q++) {
        r[q] = (uint32_t)k;
        k += (size_t)__builtin_popcountll(b[q]);
    }
    *n = k;
    return r;
}

/* Span i's self device time (0 for a span outside kbits). */
int64_t tr_kern_of(const work *w, int32_t i) {
    return mp_bit_get(w->kbits, (size_t)i) ? w->kval[bit_rank(w->kbits, w->krank, (size_t)i)] : 0;
}

/* Span k's (in kbits) self device time, to be changed. */
static int64_t *kern_ref(work *w, int32_t k) { return &w->kval[bit_rank(w->kbits, w->krank, (size_t)k)]; }

int32_t tr_fwd_of(const work *w, int32_t i) {
    return i >= 0 && mp_bit_get(w->hasfwd, (size_t)i) ? w->fwd_val[bit_rank(w->hasfwd, w->fwd_rank, (size_t)i)] : -1;
}

/* Runtime calls count on their operator's thread; then the spans are
 * sorted in place (span_cmp), their FLOPs following them. */
static mp_status sort_spans(work *w) {
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    eidx *ext = &w->ext;   /* built (build_ext) */
    size_t hint = 0;
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_RUNTIME || sp[i].ext < 0) continue;
        int32_t o = tr_eidx_get(ext, sp[i].ext, &hint);
        if (o >= 0) sp[i].tid = sp[o].tid;
    }
    int32_t *perm = mp_big_alloc((S + 1) * sizeof *perm, false), *tmp = mp_big_alloc((S + 1) * sizeof *tmp, false);
    if (!perm || !tmp || !tr_span_sort(sp, perm, tmp, S, raw->n_threads, w->two)) {
        mp_big_free(perm);
        mp_big_free(tmp);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    /* tables keyed by span index follow the spans: old index -> new (a
     * side table added to mp_trace_raw by span index is remapped here) */
    for (size_t k = 0; k < S; k++) tmp[perm[k]] = (int32_t)k;
    for (size_t f = 0; f < raw->n_flops; f++) raw->flops[f].span = (uint32_t)tmp[raw->flops[f].span];
    for (size_t c = 0; c < raw->n_comms; c++)
        if (!raw->comms[c].on_dev) raw->comms[c].idx = (uint32_t)tmp[raw->comms[c].idx];
    if (raw->n_flops > 1) qsort(raw->flops, raw->n_flops, sizeof *raw->flops, tr_flop_cmp);
    if (raw->n_comms > 1) qsort(raw->comms, raw->n_comms, sizeof *raw->comms, tr_comm_cmp);
    tr_eidx_remap(ext, tmp);
    tr_order_spans(sp, perm, tmp, S, raw->n_threads);
    tr_eidx_ties(ext);
    mp_big_free(tmp);
    mp_big_free(perm);
    mp__trace_trim();
    return MP_OK;
}

static mp_status build_ext(work *w) {
    return tr_eidx_build(&w->ext, w->raw->spans, w->S) ? MP_OK : mp_error(MP_ERR_NOMEM, "trace: out of memory");
}

/* The spans sorted, and each device event's operator. */
static mp_status link_devices(work *w) {
    mp_trace_raw *raw = w->raw;
    size_t S = w->S;
    /* device events -> operator */
    w->devop = mp_big_alloc((w->D + 1) * sizeof *w->devop, false);
    if (!w->devop) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* the spans that launched device work, counted once (kbits: link_tree
     * adds the spans their kernels' time is moved to) */
    w->kbits = mp_big_alloc((S / 64 + 1) * sizeof *w->kbits, true);
    if (!w->kbits) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    size_t launches = 0, hint = 0;
    for (size_t d = 0; d < w->D; d++) {
        const mp_tdev *dv = &raw->devs[d];
        int32_t o = dv->kind == MP_TD_ANNOT || dv->ext < 0 ? -1 : tr_eidx_get(&w->ext, dv->ext, &hint);
        w->devop[d] = o;
        if (o >= 0 && !mp_bit_get(w->kbits, (size_t)o)) {
            mp_bit_set(w->kbits, (size_t)o);
            launches++;
        }
    }
    tr_eidx_free(&w->ext);
    w->launches = launches;
    return MP_OK;
}

/* The operator tree per thread (parents, merged duplicates), the module of
 * each operator and the module tree, each span's self device time. */
static mp_status link_tree(work *w) {
    mp_trace_raw *raw = w->raw;
    size_t S = w->S;
    mp_tspan *sp = raw->spans;
    mp_status st = MP_OK;
    size_t S1 = S + 1;
    w->parent = mp_big_alloc(S1 * sizeof *w->parent, false);
    w->nchild = mp_big_alloc(S1 * sizeof *w->nchild, true);   /* 0, 1 or 2 (more) */
    w->mod = mp_big_alloc(S1 * sizeof *w->mod, false);
    if (!w->parent || !w->nchild || !w->mod) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    for (size_t i = 0; i < S; i++) w->parent[i] = w->mod[i] = -1;

    int32_t *stack = mp_big_alloc(S1 * sizeof *stack, false);
    int32_t *mstack = mp_big_alloc(S1 * sizeof *mstack, false);   /* module spans */
    int32_t *mnode = mp_big_alloc(S1 * sizeof *mnode, false);     /* their tree nodes */
    if (!stack || !mstack || !mnode) {
        mp_big_free(stack);
        mp_big_free(mstack);
        mp_big_free(mnode);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    int root_name = intern_root(raw);
    mtree mt = {0};
    mt.arena = &raw->arena;
    mt.names = raw->names;
    if (!mp_imap_init(&mt.index, 256)) st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* the root of the module tree */
    int root = -1;
    size_t ns = 0, nm = 0;
    int32_t cur_tid = -1;
    for (size_t k = 0; k < S && st == MP_OK; k++) {
        int32_t i = (int32_t)k;
        if (sp[i].tid != cur_tid) {
            cur_tid = sp[i].tid;
            ns = nm = 0;
        }
        if (sp[i].kind == MP_TS_MODULE) {
            while (nm && sp[mstack[nm - 1]].end <= sp[i].ts) nm--;
            while (nm && sp[mstack[nm - 1]].end < sp[i].end) nm--;   /* partial overlap */
            if (root < 0) {
                root = root_name >= 0 ? mtree_node(&mt, -1, (uint32_t)root_name) : -1;
                if (root < 0) {
                    st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                    break;
                }
            }
            int parent = nm ? mnode[nm - 1] : root;
            int mname = mp_trace_module_name(raw, &sp[i]);
            int node = mname < 0 ? -1 : mtree_node(&mt, parent, (uint32_t)mname);
            if (node < 0) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            if (!sp[i].bwd) mt.fig[node].calls++;
            w->mod[i] = node;   /* module spans: their node (CPU-only times, tr_modules()) */
            mstack[nm] = i;
            mnode[nm++] = node;
            /* a record_function range is an operator row too, the parent
             * of what runs in it, as key_averages has it */
            if (!sp[i].rf) continue;
        } else {
            while (nm && sp[mstack[nm - 1]].end <= sp[i].ts) nm--;
            /* an operator inside a backward range belongs to no forward module */
            if ((sp[i].kind == MP_TS_OP || sp[i].kind == MP_TS_ANNOT) && !(nm && sp[mstack[nm - 1]].bwd))
                w->mod[i] = nm ? mnode[nm - 1] : -1;
        }
        /* PyTorch's _populate_cpu_children */
        while (ns) {
            int32_t p = stack[ns - 1];
            if (sp[i].ts >= sp[p].end || sp[i].end > sp[p].end) {
                ns--;
            } else {
                w->parent[i] = p;
                if (w->nchild[p] < 2) w->nchild[p]++;
                break;
            }
        }
        stack[ns++] = i;
    }
    mp_big_free(stack);
    mp_big_free(mstack);
    mp_big_free(mnode);
    mp_imap_free(&mt.index);
    w->t->mods = mt.mods;
    w->t->mfig = mt.fig;
    w->t->n_mods = mt.n;
    if (st != MP_OK) return st;

    /* _remove_dup_nodes: parents come before their children. A merged
     * span's self device time moves to the parent it merges into (set, in
     * span order): the merges first, then the times. */
    size_t nmg = 0, cm = 0;
    int32_t *mg = NULL;   /* (parent, child) of each merge, in order */
    for (size_t k = 0; k < S; k++) {
        int32_t i = (int32_t)k;
        if (sp[i].kind == MP_TS_MODULE && !sp[i].rf) continue;
        int32_t p = tr_resolve(w, w->parent[i]);
        w->parent[i] = p;
        if (p >= 0 && sp[p].name == sp[i].name && w->nchild[p] == 1) {
            mp_bit_set(w->merged, (size_t)i);
            if (nmg + 2 > cm) {
                int32_t *n2 = realloc(mg, (cm = cm ? 2 * cm : 4096) * sizeof *mg);
                if (!n2) {
                    free(mg);
                    return mp_error(MP_ERR_NOMEM, "trace: out of memory");
                }
                mg = n2;
            }
            mg[nmg++] = p;
            mg[nmg++] = i;
            mp_bit_set(w->kbits, (size_t)p);
            w->nchild[p] = w->nchild[i];
        }
    }
    /* self device time of the spans in kbits: a rank over the bits */
    size_t nk = 0;
    w->krank = bit_ranks(w->kbits, S / 64 + 1, &nk);
    w->kval = w->krank ? mp_big_alloc((nk + 1) * sizeof *w->kval, true) : NULL;
    if (!w->kval) {
        free(mg);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t d = 0; d < w->D; d++)
        if (w->devop[d] >= 0) MP_SADD(*kern_ref(w, w->devop[d]), raw->devs[d].end - raw->devs[d].ts);
    for (size_t m = 0; m < nmg; m += 2) *kern_ref(w, mg[m]) = tr_kern_of(w, mg[m + 1]);
    free(mg);
    return MP_OK;
}

typedef struct at_key {
    const mp_tspan *sp;
    uint32_t tid;
    int64_t ts;
} at_key;

static bool at_before(const void *ctx, size_t i) {
    const at_key *q = ctx;
    const mp_tspan *x = &q->sp[i];
    return x->tid < q->tid || (x->tid == q->tid && x->ts < q->ts);
}

/* The outermost operator starting at ts on thread tid: the first operator
 * of the sorted spans at (tid, ts) (longer spans sort first); -1. *hint: as
 * in mp_gallop (a flow's ends are looked up in runs that go forward or back
 * in time). */
static int32_t op_at(const mp_tspan *sp, size_t S, uint32_t tid, int64_t ts, size_t *hint) {
    at_key q = {sp, tid, ts};
    for (size_t i = mp_gallop(S, hint, at_before, &q); i < S && sp[i].tid == tid && sp[i].ts == ts; i++)
        if (sp[i].kind == MP_TS_OP) return (int32_t)i;
    return -1;
}

static int flow_cmp(const void *x, const void *y) {
    const mp_tflow *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->start != b->start) return a->start ? -1 : 1;   /* the start first */
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return (a->tid > b->tid) - (a->tid < b->tid);
}

/* Backward operator -> forward operator: the fwdbwd flow's start ('s', on
 * the forward operator's thread and start time) and end ('f', on the
 * backward operator's). Without a flow, the Sequence number. */
static mp_status link_backward(work *w) {
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    const uint8_t *bn = w->nf;
    size_t n_bwd = 0;
    for (size_t i = 0; i < S; i++) n_bwd += sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD);
    /* the links as found (a flow's end, or a backward operator, at most
     * once each); then, by span, fwd_rank and fwd_val */
    typedef struct { int32_t bo, fo; } link;
    size_t nl = 0;
    link *links = mp_big_alloc((raw->n_flows + n_bwd + 1) * sizeof *links, false);
    if (!links) return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    /* flows: each end after its start, by id */
    if (raw->n_flows > 1) qsort(raw->flows, raw->n_flows, sizeof *raw->flows, flow_cmp);
    size_t hs = 0, hf = 0;   /* where the starts' and the ends' searches were */
    for (size_t f = 0; f < raw->n_flows;) {
        size_t g = f;
        while (g < raw->n_flows && raw->flows[g].id == raw->flows[f].id) g++;
        const mp_tflow *b = &raw->flows[f];
        int32_t fo = b->start ? op_at(sp, S, b->tid, b->ts, &hs) : -1;
        for (size_t k = f + 1; fo >= 0 && k < g; k++) {
            const mp_tflow *e = &raw->flows[k];
            if (e->start) continue;
            int32_t bo = op_at(sp, S, e->tid, e->ts, &hf);
            if (bo >= 0 && bo != fo && !mp_bit_get(w->hasfwd, (size_t)bo)) {
                links[nl++] = (link){bo, fo};
                mp_bit_set(w->hasfwd, (size_t)bo);
                w->t->linked_flow++;
            }
        }
        f = g;
    }
    mp__trace_rec_free(raw->flows);   /* nothing reads the flows after */
    raw->flows = NULL;
    raw->n_flows = raw->cap_flows = 0;
    /* Sequence numbers, for the backward operators without a flow: a map
     * over their numbers alone, each given its forward operator.
     * Several forward operators share a sequence number: an operator that
     * creates no autograd node (a p=0 dropout, a view) leaves the counter
     * where it was, so it carries the number of the next one that does.
     * The node's creator is the last operator started with the number
     * (itself or one of its children, in its module): walk backwards and
     * keep the first seen. */
    const int32_t unset = INT32_MAX;
    size_t n_need = 0;
    int64_t max_need = -1;
    for (size_t i = 0; i < S; i++)
        if (sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD) &&
            !mp_bit_get(w->hasfwd, i)) {
            n_need++;
            max_need = MP_MAX(max_need, sp[i].seq);
        }
    mp_imap seq;
    bool ok = mp_imap_init_range(&seq, n_need, max_need);
    for (size_t i = 0; ok && i < S; i++)
        if (sp[i].kind == MP_TS_OP && sp[i].seq >= 0 && (bn[sp[i].name] & NF_BACKWARD) &&
            !mp_bit_get(w->hasfwd, i))
            ok = mp_imap_put(&seq, sp[i].seq, unset);
    if (!ok) {
        mp_imap_free(&seq);
        mp_big_free(links);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t i = S; n_need && i-- > 0;) {
        if (sp[i].kind != MP_TS_OP || sp[i].seq < 0 || (bn[sp[i].name] & (NF_BACKWARD | NF_AUTOGRAD)))
            continue;
        int32_t *v = mp_imap_ref(&seq, sp[i].seq);
        if (v && *v == unset) *v = (int32_t)i;
    }
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_OP || sp[i].seq < 0 || mp_bit_get(w->hasfwd, (size_t)i)) continue;
        if (!(bn[sp[i].name] & NF_BACKWARD)) continue;
        w->bwd_ops_seen = true;
        int32_t fo = mp_imap_get(&seq, sp[i].seq);
        if (fo >= 0 && fo != unset && sp[fo].ts < sp[i].ts) {
            links[nl++] = (link){(int32_t)i, fo};
            mp_bit_set(w->hasfwd, (size_t)i);
        }
    }
    mp_imap_free(&seq);
    size_t nset = 0;   /* nl: each link sets its bit once */
    w->fwd_rank = bit_ranks(w->hasfwd, S / 64 + 1, &nset);
    w->fwd_val = mp_big_alloc((nl + 1) * sizeof *w->fwd_val, false);
    if (!w->fwd_rank || !w->fwd_val) {
        mp_big_free(links);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t l = 0; l < nl; l++) w->fwd_val[bit_rank(w->hasfwd, w->fwd_rank, (size_t)links[l].bo)] = links[l].fo;
    mp_big_free(links);
    for (size_t i = 0; i < S; i++) {
        if (sp[i].kind != MP_TS_OP) continue;
        if ((bn[sp[i].name] & (NF_BACKWARD | NF_AUTOGRAD)) == NF_BACKWARD) {
            w->t->bwd_ops++;
            if (mp_bit_get(w->hasfwd, (size_t)i)) w->t->linked_bwd++;
        }
    }
    return MP_OK;
}

/* ---- FLOPs: backward share, the math the kernels used, uncounted ops ---- */

/* A kernel that ran fp32 operands on tensor cores (TF32): CUTLASS
 * "tensorop_s1688"/"s16816" kernels, cuBLAS/cuDNN xmma kernels named tf32. */

static int unc_cmp(const void *x, const void *y) {
    const mp_tuncounted *a = x, *b = y;
    if (a->device != b->device) return a->device > b->device ? -1 : 1;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Fills t->flops_bwd, steps' flops_bwd, t->dominant_dtype (fp32 operators
 * whose kernels ran as TF32 count as tf32) and t->uncounted. */
static mp_status flop_summary(work *w) {
    mp_trace *t = w->t;
    mp_trace_raw *raw = w->raw;
    mp_tspan *sp = raw->spans;
    size_t S = w->S;
    const char **nm = raw->names;
    size_t words = S / 64 + 1;
    /* bit sets over spans: launched kernels itself; its kernels ran fp32 on tensor cores */
    uint64_t *launched = mp_big_alloc(words * sizeof *launched, true), *tc = mp_big_alloc(words * sizeof *tc, true);
    int32_t *row = malloc(((size_t)raw->n_names + 1) * sizeof *row);
    if (!tc || !launched || !row) {
        mp_big_free(tc);
        mp_big_free(launched);
        free(row);
        return mp_error(MP_ERR_NOMEM, "trace: out of memory");
    }
    for (size_t d = 0; d < w->D; d++) {
        int32_t o = w->devop[d];
        if (o < 0 || raw->devs[d].kind != MP_TD_KERNEL) continue;
        o = tr_resolve(w, o);
        mp_bit_set(launched, o);
        int32_t c = outer_of(w, o);
        if (c >= 0 && sp[c].dtype == MP_TDT_FP32 && (mp__trace_kflags(raw, raw->devs[d].name) & MP_TK_TF32))
            mp_bit_set(tc, c);
    }
    uint64_t by[MP_TDT_COUNT] = {0};
    for (size_t f = 0; f < raw->n_flops; f++) {
        int32_t i = (int32_t)raw->flops[f].span;
        uint64_t fl = raw->flops[f].flops;
        if (mp_bit_get(w->merged, (size_t)i) || outer_of(w, i) != i) continue;
        int dt = sp[i].dtype < MP_TDT_COUNT ? sp[i].dtype : MP_TDT_NONE;
        if (dt == MP_TDT_FP32 && mp_bit_get(tc, i)) dt = MP_TDT_TF32;
        MP_SADD(by[dt], fl);
        /* backward: tied to a forward operator, or named so (itself or an
         * enclosing operator: a trace without flows or sequence numbers) */
        int32_t x = i;
        while (x >= 0 && !mp_bit_get(w->hasfwd, (size_t)x) && !(w->nf[sp[x].name] & (NF_BACKWARD | NF_UBACKWARD)))
            x = w->parent[x];
        if (x < 0) continue;
        int k = mp__trace_step_at(t, sp[i].ts);
        if (k < 0) continue;
        MP_SADD(t->flops_bwd, fl);
        MP_SADD(t->steps[k].flops_bwd, fl);
    }
    t->dominant_dtype = MP_TDT_NONE;
    for (int d = 1; d < MP_TDT_COUNT; d++)
        if (by[d] > (t->dominant_dtype ? by[t->dominant_dtype] : 0)) t->dominant_dtype = d;
    /* uncounted: operators that launched kernels themselves, inside no
     * counted operator, with no rule, that do more than move data */
    memset(row, 0xff, ((size_t)raw->n_names + 1) * sizeof *row);
    int cap = 0;
    mp_status st = MP_OK;
    for (size_t i = 0; i < S && st == MP_OK; i++) {
        if (!mp_bit_get(launched, i) || sp[i].kind != MP_TS_OP || mp_bit_get(w->merged, (size_t)i) ||
            outer_of(w, (int32_t)i) >= 0 || mp__trace_step_at(t, sp[i].ts) < 0 ||
            (w->nf[sp[i].name] & NF_FLOP_FREE))
            continue;
        int32_t r = row[sp[i].name];
        if (r < 0) {
            mp_tuncounted *nu = mp_grow(t->uncounted, sizeof *t->uncounted, &cap, t->n_uncounted + 1);
            if (!nu) {
                st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
                break;
            }
            t->uncounted = nu;
            r = row[sp[i].name] = t->n_uncounted++;
            memset(&t->uncounted[r], 0, sizeof t->uncounted[r]);
            t->uncounted[r].name = nm[sp[i].name];
        }
        t->uncounted[r].count++;
        MP_SADD(t->uncounted[r].device, tr_kern_of(w, (int32_t)i));
    }
    if (t->n_uncounted > 1)
        qsort(t->uncounted, (size_t)t->n_uncounted, sizeof *t->uncounted, unc_cmp);
    mp_big_free(tc);
    mp_big_free(launched);
    free(row);
    return st;
}

/* ---- several traces: ranks of one run, or separate jobs ---- */

bool mp_trace_one_run(const mp_trace *const *t, int n, char *why, size_t nwhy) {
    char dummy[8];
    if (!why) {
        why = dummy;
        nwhy = sizeof dummy;
    }
    if (nwhy) why[0] = 0;
    if (n < 2) return true;
    for (int i = 0; i < n; i++) {
        const mp_trace_raw *a = &t[i]->raw;
        if (a->rank < 0) {
            snprintf(why, nwhy, "%s has no distributedInfo rank", t[i]->path ? t[i]->path : "a trace");
            return false;
        }
        for (int j = 0; j < i; j++) {
            const mp_trace_raw *b = &t[j]->raw;
            const char *pa = t[i]->path ? t[i]->path : "?", *pb = t[j]->path ? t[j]->path : "?";
            if (a->rank == b->rank) {
                snprintf(why, nwhy, "%s and %s are both rank %d", pb, pa, a->rank);
                return false;
            }
            if (a->world_size != b->world_size) {
                snprintf(why, nwhy, "%s and %s have different world sizes (%d, %d)", pb, pa,
                         b->world_size, a->world_size);
                return false;
            }
            if (strcmp(a->device_name, b->device_name) != 0) {
                snprintf(why, nwhy, "%s and %s ran on different devices (%s, %s)", pb, pa,
                         b->device_name, a->device_name);
                return false;
            }
        }
    }
    return true;
}

/* ---- entry points ---- */

/* The [memory] records by time, stably (equal times keep their order), by
 * the natural merge sort of the spans (mp_idx_msort): a trace holds them in
 * few runs (one per copy, or per piece read at once), so it is linear when
 * they are in order and n log(runs) otherwise. */
static int mem_idx_cmp(const void *ctx, int32_t x, int32_t y) {
    const mp_tmem *m = ctx;
    if (m[x].ts != m[y].ts) return m[x].ts < m[y].ts ? -1 : 1;
    return (x > y) - (x < y);
}

/* The [memory] records in time order (stable), moved in place: a copy of
 * them would be the analysis' largest array at the time. */
static bool sort_mems(mp_tmem *m, size_t n) {
    size_t runs = 1;
    for (size_t i = 1; i < n; i++) runs += m[i].ts < m[i - 1].ts;
    if (runs == 1) return true;
    if (n > INT32_MAX) return false;
    int32_t *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *tmp);
    uint32_t *rl = NULL;
    size_t cap = 0;
    bool ok = a && tmp;
    for (size_t i = 0; ok && i < n; i++) a[i] = (int32_t)i;
    ok = ok && mp_idx_msort(a, tmp, 0, n, mem_idx_cmp, m, &rl, &cap);
    free(tmp);
    free(rl);
    _Static_assert(sizeof *m <= 64, "mp_permute_records keeps a record of at most 64 bytes");
    if (ok) mp_permute_records(m, sizeof *m, a, n);
    free(a);
    return ok;
}

/* Steps of the analysis run on a second thread (a lane) beside others that
 * read nothing they write; once sorted, the spans are only read. The
 * lane's error message is carried back (mp_error's text is per thread). */
typedef struct lane {
    work *w;
    mp_status (*fn)(work *w);
    mp_status st;
    char msg[256];
    pthread_t th;
    bool started;
} lane;

static void *lane_main(void *arg) {
    lane *l = arg;
    l->st = l->fn(l->w);
    if (l->st != MP_OK) snprintf(l->msg, sizeof l->msg, "%s", mp_last_error());
    return NULL;
}

/* fn on a thread of its own when the analysis has two, else nothing yet
 * (lane_join runs it). */
static void lane_start(lane *l, work *w, mp_status (*fn)(work *w)) {
    *l = (lane){.w = w, .fn = fn, .st = MP_OK};
    l->started = w->two && pthread_create(&l->th, NULL, lane_main, l) == 0;
}

/* The lane done (run here when it had no thread and st is MP_OK); st, or
 * the lane's error. A lane never started (zeroed, st an error) is a no-op. */
static mp_status lane_join(lane *l, mp_status st) {
    if (l->started) pthread_join(l->th, NULL);
    else if (st == MP_OK) lane_main(l);
    if (st == MP_OK && l->st != MP_OK) st = mp_error(l->st, "%s", l->msg);
    return st;
}

/* A step's figures, then its collectives (which read them). */
static mp_status steps_comm(work *w) {
    mp_status st = tr_steps(w);
    return st == MP_OK ? mp__trace_comm_steps(w->t) : st;
}

mp_status mp_trace_analyze(mp_trace_raw *raw, const mp_trace_options *o, mp_trace *t) {
    memset(t, 0, sizeof *t);
    t->raw = *raw;
    memset(raw, 0, sizeof *raw);
    raw = &t->raw;
    mp_trace_options def = MP_TRACE_OPTIONS_DEFAULT;
    if (!o) o = &def;
    if (raw->n_spans >= INT32_MAX || raw->n_devs >= INT32_MAX)
        return mp_error(MP_ERR_LIMIT, "trace: more than 2^31 events of one kind");
    work w;
    memset(&w, 0, sizeof w);
    w.t = t;
    w.raw = raw;
    w.S = raw->n_spans;
    w.D = raw->n_devs;
    w.two = o->threads > 1 || (o->threads == 0 && mp__trace_cores() > 1);
    mp_status st = MP_OK;
    /* the External-id index (reading the spans) beside the name flags and
     * the memory records' sort */
    lane el = {0};
    lane_start(&el, &w, build_ext);
    w.nf = name_flags(raw);
    w.hasfwd = mp_big_alloc((w.S / 64 + 1) * sizeof *w.hasfwd, true);
    w.merged = mp_big_alloc((w.S / 64 + 1) * sizeof *w.merged, true);
    if (!w.nf || !w.hasfwd || !w.merged || !sort_mems(raw->mems, raw->n_mems))
        st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
    st = lane_join(&el, st);
    /* Each step frees what the later ones do not read, so that few of the
     * per-span arrays are held at once (memory: docs/DESIGN.md "Reading").
     * First the steps and their memory: then the [memory] records give way
     * to the allocations alone (a third of their size) before the spans'
     * sort makes its arrays. */
    if (st == MP_OK) st = tr_steps_list(&w);
    if (st == MP_OK) st = tr_step_memory(&w);
    if (st == MP_OK) st = tr_keep_allocs(&w);
    if (st == MP_OK) st = sort_spans(&w);
    /* the backward links (reading the flows, writing hasfwd and fwd_val)
     * beside the device links, the tree and the tables */
    lane bl = {0};
    if (st == MP_OK) lane_start(&bl, &w, link_backward);
    if (st == MP_OK) st = link_devices(&w);
    if (st == MP_OK) st = link_tree(&w);
    mp_big_free(w.nchild);     /* only merging needed it */
    w.nchild = NULL;
    if (st == MP_OK) st = tr_tables(&w);
    mp_big_free(w.allocs);     /* the tables were the last to read them */
    w.allocs = NULL;
    st = lane_join(&bl, st);
    if (st == MP_OK) tr_modules(&w);
    mp_big_free(w.mod);        /* tr_modules() is the last to read these */
    w.mod = NULL;
    mp__trace_trim();
    if (st == MP_OK) st = mp__trace_calls(t, w.devop, w.parent);   /* asks every kernel's flags */
    /* the steps' figures and collectives (writing each step's but the
     * backward FLOPs) beside the FLOP summary (which reads the steps'
     * bounds alone) */
    lane sl = {0};
    if (st == MP_OK) lane_start(&sl, &w, steps_comm);
    if (st == MP_OK) st = flop_summary(&w);   /* the dtype doing most of the counted FLOPs */
    st = lane_join(&sl, st);
    if (st == MP_OK) {
        if (o->peak_tflops > 0) {
            t->peak_tflops = o->peak_tflops;
            t->peak_source = "--peak-tflops";
        } else {
            const char *label;
            t->peak_tflops = mp_trace_peak(raw->device_name, t->dominant_dtype, &label);
            if (t->peak_tflops > 0)
                t->peak_source = mp_arena_printf(&raw->arena, "datasheet: %s %s dense", label,
                                                 mp_tdtype_names[t->dominant_dtype]);
            if (t->peak_tflops > 0 && t->dominant_dtype == MP_TDT_TF32)
                t->peak_source = mp_arena_printf(&raw->arena,
                                                 "datasheet: %s tf32 dense (fp32 operators whose "
                                                 "matrix kernels ran on tensor cores as TF32)",
                                                 label);
        }
        /* what the trace did not record (findings.c says what it costs) */
        size_t nops = 0;
        for (size_t i = 0; i < raw->n_spans; i++) nops += raw->spans[i].kind == MP_TS_OP;
        t->no_device = raw->n_devs == 0 && t->mem_peak_alloc < 0;   /* no kernels, no device memory */
        t->flops_null = raw->n_flops_null;
        t->no_shapes = nops > 0 && (raw->n_shaped == 0 || t->flops_null > 0);
        t->no_modules = nops > 0 && t->n_mods <= 1;
        if (!mp__trace_churn(t)) st = mp_error(MP_ERR_NOMEM, "trace: out of memory");
        mp_trace_findings(t);
    }
    mp_big_free(w.fwd_rank);
    mp_big_free(w.fwd_val);
    mp_big_free(w.allocs);
    mp_big_free(w.kbits);
    mp_big_free(w.krank);
    mp_big_free(w.kval);
    mp_big_free(w.hasfwd);
    mp_big_free(w.merged);
    tr_eidx_free(&w.ext);
    mp_big_free(w.nchild);
    mp_big_free(w.parent);
    mp_big_free(w.mod);
    mp_big_free(w.devop);
    free(w.nf);
    if (st != MP_OK) mp_trace_free(t);
    return st;
}

/* Whether a file is a digest (its first bytes say). */
static bool digest_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char head[64];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return mp_trace_is_digest(head, n);
}

/* ONNX Runtime's profile is no torch.profiler trace: say how to read it. */
static mp_status mp__not_ort(mp_trace_raw *raw, const char *label) {
    if (!raw->n_orts || raw->n_spans || raw->n_devs) return MP_OK;
    mp_trace_raw_free(raw);
    return mp_error(MP_ERR_FORMAT,
                    "%s: ONNX Runtime's profile, not a torch.profiler trace: place it on its model with "
                    "`modelprof MODEL.onnx --ort-profile %s`",
                    label, label);
}

/* A pipe, FIFO or device (process substitution, `mkfifo`) can be read once:
 * its bytes, all of them from one open, into *buf (*len). */
static mp_status slurp_stream(int fd, const char *path, char **buf, size_t *len) {
    size_t cap = (size_t)1 << 20, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) return mp_error(MP_ERR_NOMEM, "%s: out of memory reading the stream", path);
        if (n == cap) {
            char *nb = cap < SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (!nb) free(b);
            b = nb;
            cap *= 2;
            continue;
        }
        ssize_t k = read(fd, b + n, cap - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            mp_status st = mp_error(MP_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            free(b);
            return st;
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    *buf = b;
    *len = n;
    return MP_OK;
}

mp_status mp_trace_open(const char *path, const mp_trace_options *o, mp_trace *t) {
    mp_trace_raw raw;
    memset(t, 0, sizeof *t);
    /* not a regular file nor a folder: read once, through one open (the
     * sniffing of a digest, then the reader's own open, would each take
     * bytes of it, or wait for a second writer) */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return mp_error(MP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        char *buf = NULL;
        size_t len = 0;
        mp_status st = slurp_stream(fd, path, &buf, &len);
        close(fd);
        if (st != MP_OK) return st;
        st = mp_trace_is_digest(buf, len < 64 ? len : 64) ? mp_trace_digest_read(buf, len, path, t)
                                                                   : mp_trace_open_memory(buf, len, path, o, t);
        free(buf);
        if (st == MP_OK) t->path = path;
        return st;
    }
    if (digest_file(path)) return mp_trace_digest_file(path, t);
    mp_status st = mp_trace_read_file_pieces(path, &raw, o ? o->threads : 0, 0);
    if (st == MP_OK) st = mp__not_ort(&raw, path);
    if (st != MP_OK) return st;
    st = mp_trace_analyze(&raw, o, t);
    if (st == MP_OK) t->path = path;
    return st;
}

mp_status mp_trace_open_memory(const void *data, size_t size, const char *label,
                               const mp_trace_options *o, mp_trace *t) {
    mp_trace_raw raw;
    memset(t, 0, sizeof *t);
    mp_status st = mp_trace_read_memory(data, size, label, &raw);
    if (st == MP_OK) st = mp__not_ort(&raw, label ? label : "(memory)");
    if (st != MP_OK) return st;
    st = mp_trace_analyze(&raw, o, t);
    if (st == MP_OK) t->path = label;
    return st;
}

void mp_trace_free(mp_trace *t) {
    if (!t) return;
    mp_trace_raw_free(&t->raw);
    free(t->mem_curve);
    free(t->steps);
    free(t->ops);
    free(t->kernels);
    free(t->mods);
    free(t->mfig);
    free(t->findings);
    free(t->uncounted);
    free(t->calls);
    free(t->timeline);
    free(t->hranges);
    memset(t, 0, sizeof *t);
}
