/* Conformance of shape and dtype inference against the ONNX backend test
 * data (Debian libonnx-testdata): for every case of the node, simple,
 * pytorch-converted and pytorch-operator suites, feed the test's inputs
 * (shapes, and contents of small int/float tensors), infer, and compare
 * every graph output's dtype and shape with the expected output tensor.
 *
 *   build/conformance [--data DIR] [--skip FILE] [--min-pass R] [--only SUBSTR] [-v]
 *
 * Prints one line per failed case (with -v, also passes and skips), a
 * per-operator table, a line per suite and, last, the overall line
 * `conformance: N passed, N failed, N skipped`. Exit status: 0 when
 * passed / (passed + failed) >= R (default 0.98), 1 when below, 2 on a
 * usage or setup error. docs/CONFORMANCE.md describes the scope. */
#include "modelprof.h"
#include "analyze/profile.h"
#include "graph/graph.h"
#include "load/load.h"
#include "load/pb.h"
#include "ops/kernel.h"
#include "run/run.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#define CF_DEFAULT_SKIP "tests/conformance_skip.txt"

static const char *const cf_data_dirs[] = {
    "/usr/share/libonnx-testdata/data",          /* Debian libonnx-testdata */
    "/usr/include/onnx/backend/test/data",       /* its symlink */
    "/usr/lib/python3/dist-packages/onnx/backend/test/data",
};

static const char *const cf_suites[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};
#define CF_N_SUITES ((int)(sizeof cf_suites / sizeof cf_suites[0]))

/* Operators whose output sizes depend on tensor values the profiler does
 * not evaluate (docs/CONFORMANCE.md). An unknown dim where the expected
 * output has one is "data-dependent" only for these; for any other op it
 * is a failure. Compress and Loop qualify only when the value their size
 * depends on (condition, trip count) is itself unknown. */
static const char *const cf_data_dependent[] = {"NonZero", "Unique", "NonMaxSuppression"};

enum { CF_PASS, CF_FAIL, CF_SKIP };

typedef struct cf_case {
    int suite;
    char *name;
    int result;
    char *category;           /* CF_SKIP: reason category */
    char *msg;                /* CF_FAIL / CF_SKIP: explanation */
    char **ops;               /* distinct op types of the main graph ("Op" or "domain.Op") */
    int n_ops;
    char *note;               /* a test-data quirk worked around */
    int run;                  /* run phase: CR_PASS, CR_FAIL, CR_OUT */
    char *run_msg;            /* CR_FAIL: what differs; CR_OUT: why out of scope */
    double run_err;           /* CR_PASS/CR_FAIL on values: worst relative L2 error */
    int shape_only;           /* random cases, run and compared by shape: 1 match, -1 not, 0 not run */
} cf_case;

typedef struct cf_skip {
    char *name, *category, *why;
    int used;
} cf_skip;

/* ---- small utilities ---- */

static void *cf_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "conformance: out of memory\n");
        exit(2);
    }
    return p;
}

static char *cf_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = cf_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

static char *cf_printf(const char *fmt, ...) MP_PRINTF(1, 2);
static char *cf_printf(const char *fmt, ...) {
    /* fmt is never NULL: the test quiets gcc's -Wformat-truncation under -fsanitize */
    if (!fmt) return cf_strdup("");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = cf_xmalloc((size_t)(n < 0 ? 0 : n) + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Whole file into memory; NULL when it cannot be read. */
static uint8_t *cf_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = cf_xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool err = ferror(f) != 0;
    fclose(f);
    if (err) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static bool cf_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cf_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted sub-folder names of dir; NULL when dir cannot be opened. */
static char **cf_list_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    *count = 0;
    if (!d) return NULL;
    int cap = 64, n = 0;
    char **names = cf_xmalloc(sizeof *names * (size_t)cap);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = cf_printf("%s/%s", dir, e->d_name);
        bool isdir = cf_is_dir(p);
        free(p);
        if (!isdir) continue;
        if (n == cap) {
            cap *= 2;
            char **nn = realloc(names, sizeof *names * (size_t)cap);
            if (!nn) {
                fprintf(stderr, "conformance: out of memory\n");
                exit(2);
            }
            names = nn;
        }
        names[n++] = cf_strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cf_cmp_str);
    *count = n;
    return names;
}

/* ---- the skip list ---- */

static cf_skip *cf_skips;
static int cf_n_skips;

static bool cf_load_skips(const char *path, bool required) {
    size_t len = 0;
    uint8_t *buf = cf_read_file(path, &len);
    if (!buf) {
        fprintf(stderr, "conformance: %s: cannot read skip list %s: %s\n",
                required ? "error" : "warning", path, strerror(errno));
        return !required;
    }
    char *text = cf_xmalloc(len + 1);
    memcpy(text, buf, len);
    text[len] = 0;
    free(buf);
    int cap = 0;
    int lineno = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = 0;
        if (l && line[0] != '#') {
            char *t1 = strchr(line, '\t');
            char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (!t1 || !t2 || t1 == line || t2 == t1 + 1) {
                fprintf(stderr, "%s:%d: expected case<TAB>category<TAB>explanation\n", path, lineno);
                free(text);
                return false;
            }
            *t1 = *t2 = 0;
            cf_skips = mp_grow(cf_skips, sizeof *cf_skips, &cap, cf_n_skips + 1);
            if (!cf_skips) {
                fprintf(stderr, "conformance: out of memory\n");
                exit(2);
            }
            cf_skips[cf_n_skips++] = (cf_skip){cf_strdup(line), cf_strdup(t1 + 1), cf_strdup(t2 + 1), 0};
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return true;
}

/* Skip-list entry of a case: "case" or "suite/case". */
static cf_skip *cf_find_skip(const char *suite, const char *name) {
    for (int i = 0; i < cf_n_skips; i++) {
        const char *s = cf_skips[i].name, *slash = strchr(s, '/');
        if (slash) {
            if (strncmp(s, suite, (size_t)(slash - s)) == 0 && suite[slash - s] == 0 &&
                strcmp(slash + 1, name) == 0)
                return &cf_skips[i];
        } else if (strcmp(s, name) == 0) {
            return &cf_skips[i];
        }
    }
    return NULL;
}

/* ---- the kind of each graph input and output (TypeProto's oneof) ----
 * The loader records tensor types only; sequences, maps and optionals
 * are read here from the model file. */

enum { CF_KIND_NONE = 0, CF_KIND_TENSOR, CF_KIND_SEQUENCE, CF_KIND_MAP, CF_KIND_OPTIONAL,
       CF_KIND_SPARSE };
static const char *const cf_kind_names[] = {"untyped", "tensor", "sequence", "map", "optional",
                                            "sparse tensor"};

typedef struct cf_io {
    char name[256];
    int kind;
} cf_io;

static int cf_type_kind(pb t) {
    uint32_t f = 0;
    int w = 0;
    while (pb_more(&t)) {
        if (!pb_key(&t, &f, &w)) return CF_KIND_NONE;
        switch (f) {
        case 1: return CF_KIND_TENSOR;
        case 4: return CF_KIND_SEQUENCE;
        case 5: return CF_KIND_MAP;
        case 8: return CF_KIND_SPARSE;
        case 9: return CF_KIND_OPTIONAL;
        default:
            if (!pb_skip(&t, w)) return CF_KIND_NONE;
        }
    }
    return CF_KIND_NONE;
}

/* Graph inputs (field 11) and outputs (12) of ModelProto.graph (7). */
static bool cf_io_kinds(const uint8_t *buf, size_t len, cf_io **ins, int *n_in, cf_io **outs,
                        int *n_out) {
    pb r = pb_view(buf, len), g = {0};
    uint32_t f = 0;
    int w = 0;
    bool have = false;
    *ins = *outs = NULL;
    *n_in = *n_out = 0;
    while (pb_more(&r)) {
        if (!pb_key(&r, &f, &w)) return false;
        if (f == 7 && w == PB_LEN) {
            if (!pb_len(&r, &g)) return false;
            have = true;
        } else if (!pb_skip(&r, w)) {
            return false;
        }
    }
    if (!have) return false;
    int cap_in = 0, cap_out = 0;
    while (pb_more(&g)) {
        if (!pb_key(&g, &f, &w)) return false;
        if ((f == 11 || f == 12) && w == PB_LEN) {
            pb vi;
            if (!pb_len(&g, &vi)) return false;
            cf_io io = {.kind = CF_KIND_NONE};
            while (pb_more(&vi)) {
                uint32_t vf = 0;
                int vw = 0;
                if (!pb_key(&vi, &vf, &vw)) return false;
                pb s;
                if (vf == 1 && vw == PB_LEN) {
                    if (!pb_len(&vi, &s)) return false;
                    size_t l = (size_t)(s.end - s.p);
                    if (l >= sizeof io.name) l = sizeof io.name - 1;
                    memcpy(io.name, s.p, l);
                    io.name[l] = 0;
                } else if (vf == 2 && vw == PB_LEN) {
                    if (!pb_len(&vi, &s)) return false;
                    io.kind = cf_type_kind(s);
                } else if (!pb_skip(&vi, vw)) {
                    return false;
                }
            }
            cf_io **arr = f == 11 ? ins : outs;
            int *n = f == 11 ? n_in : n_out;
            int *cap = f == 11 ? &cap_in : &cap_out;
            *arr = mp_grow(*arr, sizeof **arr, cap, *n + 1);
            if (!*arr) return false;
            (*arr)[(*n)++] = io;
        } else if (!pb_skip(&g, w)) {
            return false;
        }
    }
    return true;
}

/* Distinct op types of the main graph read from the file itself, for the
 * per-operator table when the loader refuses the model. */
static void cf_raw_ops(cf_case *c, const uint8_t *buf, size_t len) {
    pb r = pb_view(buf, len), g = {0};
    uint32_t f = 0;
    int w = 0, n_nodes = 0;
    bool have = false;
    while (pb_more(&r)) {
        if (!pb_key(&r, &f, &w)) return;
        if (f == 7 && w == PB_LEN) {
            if (!pb_len(&r, &g)) return;
            have = true;
        } else if (!pb_skip(&r, w)) {
            return;
        }
    }
    if (!have) return;
    for (pb scan = g; pb_more(&scan);) {
        if (!pb_key(&scan, &f, &w) || !pb_skip(&scan, w)) return;
        n_nodes += f == 1;
    }
    c->ops = cf_xmalloc(sizeof *c->ops * (size_t)(n_nodes + 1));
    while (pb_more(&g)) {
        if (!pb_key(&g, &f, &w)) return;
        pb node;
        if (f != 1 || w != PB_LEN) {
            if (!pb_skip(&g, w)) return;
            continue;
        }
        if (!pb_len(&g, &node)) return;
        pb op = {0}, dom = {0};
        while (pb_more(&node)) {
            uint32_t nf = 0;
            int nw = 0;
            if (!pb_key(&node, &nf, &nw)) return;
            if ((nf == 4 || nf == 7) && nw == PB_LEN) {
                if (!pb_len(&node, nf == 4 ? &op : &dom)) return;
            } else if (!pb_skip(&node, nw)) {
                return;
            }
        }
        int ol = (int)(op.end - op.p), dl = (int)(dom.end - dom.p);
        bool plain = dl == 0 || (dl == 7 && memcmp(dom.p, "ai.onnx", 7) == 0);
        char *key = plain ? cf_printf("%.*s", ol, (const char *)op.p)
                          : cf_printf("%.*s.%.*s", dl, (const char *)dom.p, ol, (const char *)op.p);
        bool dup = false;
        for (int j = 0; j < c->n_ops && !dup; j++) dup = strcmp(c->ops[j], key) == 0;
        if (dup)
            free(key);
        else
            c->ops[c->n_ops++] = key;
    }
}

/* ---- shapes as text ---- */

static void cf_shape_str(const mp_model *m, int rank, const int64_t *dims, char *out, size_t cap) {
    if (rank < 0) {
        snprintf(out, cap, "unknown rank");
        return;
    }
    if (rank == 0) {
        snprintf(out, cap, "[] (scalar)");
        return;
    }
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < rank && o + 24 < cap; i++) {
        const char *sep = i ? "x" : "";
        if (!dims)
            o += (size_t)snprintf(out + o, cap - o, "%s?", sep);
        else if (dims[i] >= 0)
            o += (size_t)snprintf(out + o, cap - o, "%s%lld", sep, (long long)dims[i]);
        else if (dims[i] == MP_DIM_ANON || MP_DIM_SYM(dims[i]) >= m->n_syms)
            o += (size_t)snprintf(out + o, cap - o, "%s?", sep);
        else
            o += (size_t)snprintf(out + o, cap - o, "%s%s", sep, m->syms[MP_DIM_SYM(dims[i])].name);
    }
}

/* Append "; "-separated text to buf (capacity cap, *o used). */
static void cf_append(char *buf, size_t cap, size_t *o, const char *fmt, ...) MP_PRINTF(4, 5);
static void cf_append(char *buf, size_t cap, size_t *o, const char *fmt, ...) {
    if (*o + 3 >= cap) return;
    if (*o) *o += (size_t)snprintf(buf + *o, cap - *o, "; ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *o, cap - *o, fmt, ap);
    va_end(ap);
    if (n > 0) *o += (size_t)n;
    if (*o >= cap) *o = cap - 1;
}

/* ---- walking the graph ---- */

static bool cf_node_is(const mp_node *n, const char *op) {
    return (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0) && strcmp(n->op, op) == 0;
}

static char *cf_op_key(const mp_node *n) {
    if (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0) return cf_strdup(n->op);
    return cf_printf("%s.%s", n->domain, n->op);
}

/* Nodes (recursively, bodies included) without a shape rule: their outputs
 * would come from the file's declared types, which is no inference. */
static void cf_missing_rules(const mp_graph *g, char *buf, size_t cap, size_t *o) {
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        if (!n->desc || !n->desc->infer) {
            char *key = cf_op_key(n);
            bool listed = false;
            size_t kl = strlen(key);
            for (const char *p = buf; !listed && (p = strstr(p, key)) != NULL; p += kl)
                listed = (p == buf || p[-1] == ' ') && (p[kl] == ',' || p[kl] == 0);
            if (!listed && *o + kl + 3 < cap)
                *o += (size_t)snprintf(buf + *o, cap - *o, "%s%s", *o ? ", " : "", key);
            free(key);
        }
        for (int s = 0; s < n->n_sub; s++)
            if (n->sub[s]) cf_missing_rules(n->sub[s], buf, cap, o);
    }
}

/* Is a data-dependent operator (docs/CONFORMANCE.md) upstream of value v?
 * Compress counts when its condition is unknown, Loop when its trip count
 * is; the listed ops always. */
static bool cf_data_dependent_upstream(const mp_graph *g, int v, char *seen) {
    if (v < 0 || v >= g->n_values || seen[v]) return false;
    seen[v] = 1;
    int p = g->values[v].producer;
    if (p < 0) return false;
    const mp_node *n = &g->nodes[p];
    for (size_t i = 0; i < sizeof cf_data_dependent / sizeof cf_data_dependent[0]; i++)
        if (cf_node_is(n, cf_data_dependent[i])) return true;
    if (cf_node_is(n, "Compress") && n->n_in > 1 && n->in[1] >= 0 && g->values[n->in[1]].kn < 0)
        return true;
    if (cf_node_is(n, "Loop") && (n->n_in < 1 || n->in[0] < 0 || g->values[n->in[0]].kn < 1))
        return true;
    for (int i = 0; i < n->n_in; i++)
        if (cf_data_dependent_upstream(g, n->in[i], seen)) return true;
    return false;
}

/* onnx 1.12's test data stores bfloat16 tensors as uint16 (numpy has no
 * bfloat16): a uint16 tensor where the model declares bfloat16 is one. */
static bool cf_bf16_as_uint16(int data_dtype, int declared) {
    return data_dtype == MP_DT_UINT16 && declared == MP_DT_BFLOAT16;
}

/* ---- one case ---- */

typedef struct cf_bufs {
    uint8_t **b;
    int n, cap;
} cf_bufs;

static void cf_bufs_free(cf_bufs *b) {
    for (int i = 0; i < b->n; i++) free(b->b[i]);
    free(b->b);
    b->b = NULL;
    b->n = b->cap = 0;
}

static uint8_t *cf_bufs_read(cf_bufs *b, const char *path, size_t *len) {
    uint8_t *p = cf_read_file(path, len);
    if (!p) return NULL;
    b->b = mp_grow(b->b, sizeof *b->b, &b->cap, b->n + 1);
    if (!b->b) {
        fprintf(stderr, "conformance: out of memory\n");
        exit(2);
    }
    b->b[b->n++] = p;
    return p;
}

static void cf_set(cf_case *c, int result, const char *category, char *msg) {
    c->result = result;
    free(c->category);
    c->category = category ? cf_strdup(category) : NULL;
    free(c->msg);
    c->msg = msg;
}

static void cf_record_ops(cf_case *c, const mp_graph *g) {
    c->ops = cf_xmalloc(sizeof *c->ops * (size_t)(g->n_nodes + 1));
    for (int k = 0; k < g->n_nodes; k++) {
        const mp_node *n = &g->nodes[k];
        char *key = cf_op_key(n);
        bool dup = false;
        for (int j = 0; j < c->n_ops && !dup; j++) dup = strcmp(c->ops[j], key) == 0;
        if (dup)
            free(key);
        else
            c->ops[c->n_ops++] = key;
    }
}

static void cf_run_case(const char *data, cf_case *c) {
    const char *suite = cf_suites[c->suite];
    char *dir = cf_printf("%s/%s/%s", data, suite, c->name);
    char *path = cf_printf("%s/model.onnx", dir);
    cf_bufs bufs = {0};
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    cf_io *ins = NULL, *outs = NULL;
    int n_ins = 0, n_outs = 0;
    size_t len = 0;

    cf_skip *sk = cf_find_skip(suite, c->name);
    mp_status st = mp_model_load(path, &m);
    if (!st) {
        cf_record_ops(c, m->graph);
    } else {
        uint8_t *raw = cf_bufs_read(&bufs, path, &len);
        if (raw) cf_raw_ops(c, raw, len);
    }
    if (sk) {
        sk->used = 1;
        cf_set(c, CF_SKIP, sk->category, cf_strdup(sk->why));
        goto done;
    }
    if (st) {
        cf_set(c, CF_FAIL, NULL, cf_printf("load: %s: %s", mp_status_name(st), mp_last_error()));
        goto done;
    }

    /* Inputs and outputs that are not tensors: out of scope. */
    uint8_t *mbuf = cf_bufs_read(&bufs, path, &len);
    if (!mbuf || !cf_io_kinds(mbuf, len, &ins, &n_ins, &outs, &n_outs)) {
        cf_set(c, CF_FAIL, NULL, cf_printf("cannot read the graph's input and output types"));
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        const cf_io *io = pass ? outs : ins;
        int n = pass ? n_outs : n_ins;
        for (int i = 0; i < n; i++) {
            int k = io[i].kind;
            if (k == CF_KIND_SEQUENCE || k == CF_KIND_MAP || k == CF_KIND_OPTIONAL ||
                k == CF_KIND_SPARSE) {
                cf_set(c, CF_SKIP, cf_kind_names[k],
                       cf_printf("%s '%s' has %s type, not tensor", pass ? "output" : "input",
                                 io[i].name, cf_kind_names[k]));
                goto done;
            }
        }
    }

    /* Feed the inputs: dtype, shape, and contents of small int/float ones. */
    mp_graph *g = m->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        const mp_value *v = &g->values[g->inputs[i]];
        free(path);
        path = cf_printf("%s/test_data_set_0/input_%d.pb", dir, i);
        uint8_t *b = cf_bufs_read(&bufs, path, &len);
        if (!b) {
            cf_set(c, CF_FAIL, NULL, cf_printf("input %d '%s': cannot read %s", i, v->name, path));
            goto done;
        }
        mp_tensor *t = NULL;
        st = mp_tensor_decode(m, b, len, &t);
        if (st) {
            cf_set(c, CF_FAIL, NULL,
                   cf_printf("input %d '%s': decode: %s", i, v->name, mp_last_error()));
            goto done;
        }
        int dtype = t->dtype;
        int64_t *iv = NULL;
        double *fv = NULL;
        if (cf_bf16_as_uint16(dtype, v->decl_dtype)) {
            dtype = MP_DT_BFLOAT16; /* bit patterns: contents not fed */
        } else if (t->numel >= 0 && t->numel <= MP_KNOWN_MAX &&
                   (mp_dtype_is_int(dtype) || mp_dtype_is_float(dtype)) &&
                   mp_dtype_bits(dtype) >= 8) {
            if (mp_tensor_read(m, t, &iv, &fv) != MP_OK) iv = NULL, fv = NULL;
        }
        st = mp_model_set_input_data(m, v->name, dtype, t->rank, t->dims, iv, fv,
                                     (iv || fv) ? t->numel : 0);
        if (st && v->decl_rank >= 0 && v->decl_rank != t->rank &&
            mp_dims_product(v->decl_dims, v->decl_rank) >= 0) {
            /* The test's tensor contradicts its own model's declared type
             * (onnx 1.12's castlike data gives 'like' as [1] for a declared
             * [3,4]): keep the model's declaration, say so. */
            char have[256], decl[256];
            cf_shape_str(m, t->rank, t->dims, have, sizeof have);
            cf_shape_str(m, v->decl_rank, v->decl_dims, decl, sizeof decl);
            free(c->note);
            c->note = cf_printf("input %d '%s' is %s in the test data but declared %s: declared "
                                "shape used", i, v->name, have, decl);
            st = mp_model_set_input_data(m, v->name, dtype, v->decl_rank, v->decl_dims, NULL,
                                         NULL, 0);
        }
        if (st) {
            cf_set(c, CF_FAIL, NULL, cf_printf("input %d '%s': %s", i, v->name, mp_last_error()));
            goto done;
        }
    }

    st = mp_profile_static(m, &prof);
    if (st) {
        cf_set(c, CF_FAIL, NULL, cf_printf("profile: %s: %s", mp_status_name(st), mp_last_error()));
        goto done;
    }

    char missing[512] = "";
    size_t mo = 0;
    cf_missing_rules(g, missing, sizeof missing, &mo);
    if (mo) {
        cf_set(c, CF_FAIL, NULL, cf_printf("no shape rule for %s", missing));
        goto done;
    }

    /* Compare each output; list every mismatch. */
    char *seen = cf_xmalloc((size_t)g->n_values + 1);
    bool data_dep = false;
    char fail[1024] = "";
    size_t fo = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        const mp_value *v = &g->values[g->outputs[i]];
        free(path);
        path = cf_printf("%s/test_data_set_0/output_%d.pb", dir, i);
        uint8_t *b = cf_bufs_read(&bufs, path, &len);
        mp_tensor *t = NULL;
        if (!b) {
            cf_append(fail, sizeof fail, &fo, "output %d '%s': cannot read %s", i, v->name, path);
            continue;
        }
        if (mp_tensor_decode(m, b, len, &t) != MP_OK) {
            cf_append(fail, sizeof fail, &fo, "output %d '%s': decode: %s", i, v->name,
                      mp_last_error());
            continue;
        }
        int want_dt = t->dtype;
        if (cf_bf16_as_uint16(want_dt, v->decl_dtype)) want_dt = MP_DT_BFLOAT16;
        bool same = v->rank == t->rank;
        bool only_unknown = same;
        for (int d = 0; same && d < v->rank; d++)
            if (!v->dims || v->dims[d] != t->dims[d]) same = false;
        for (int d = 0; !same && only_unknown && d < v->rank; d++)
            if (!v->dims || (v->dims[d] >= 0 && v->dims[d] != t->dims[d])) only_unknown = false;
        if (v->dtype != want_dt)
            cf_append(fail, sizeof fail, &fo, "output %d dtype %s, expected %s", i,
                      mp_dtype_name(v->dtype), mp_dtype_name(want_dt));
        if (same) continue;
        memset(seen, 0, (size_t)g->n_values + 1);
        if (v->dtype == want_dt && only_unknown &&
            cf_data_dependent_upstream(g, g->outputs[i], seen)) {
            data_dep = true;
            continue;
        }
        char got[256], want[256];
        cf_shape_str(m, v->rank, v->dims, got, sizeof got);
        cf_shape_str(m, t->rank, t->dims, want, sizeof want);
        cf_append(fail, sizeof fail, &fo, "output %d shape %s, expected %s", i, got, want);
    }
    free(seen);
    if (fo)
        cf_set(c, CF_FAIL, NULL, cf_strdup(fail));
    else if (data_dep)
        cf_set(c, CF_SKIP, "data-dependent",
               cf_printf("an output size depends on tensor values (inferred as unknown)"));
    else
        cf_set(c, CF_PASS, NULL, NULL);

done:
    mp_profile_free(prof);
    mp_model_free(m);
    cf_bufs_free(&bufs);
    free(ins);
    free(outs);
    free(path);
    free(dir);
}

/* ---- the run phase: execute each case and compare the values ----
 * Every case whose shape phase did not skip it and whose operators have
 * numeric semantics is planned (one thread), fed its input_N.pb and run;
 * each output is compared with output_N.pb: float outputs by relative L2
 * error (tolerance 1e-4; 1e-2 for 16- and 8-bit float outputs), integer
 * and bool outputs exactly. A case runs in
 * a child process with a time limit, so a crash or a hang is a failure
 * with its cause, not the end of the run. */

enum { CR_PASS, CR_FAIL, CR_OUT };

/* Operators without numeric semantics here: compared by shape only. */
static const struct { const char *op, *why; } cf_run_out[] = {
    {"Bernoulli", "random"}, {"RandomUniform", "random"}, {"RandomNormal", "random"},
    {"RandomUniformLike", "random"}, {"RandomNormalLike", "random"}, {"Multinomial", "random"},
    {"StringNormalizer", "string"}, {"RegexFullMatch", "string"}, {"StringConcat", "string"},
    {"StringSplit", "string"}, {"SequenceMap", "sequence"}, {"Optional", "optional"},
    {"OptionalGetElement", "optional"},
    {"OptionalHasElement", "optional"},
};

/* Cases whose output_0.pb follows the ONNX reference implementation's
 * reading where ONNX Runtime and PyTorch, which every exported model is
 * run by, read the text otherwise: compared with the values both give
 * (docs/CONFORMANCE.md). Resize with align_corners at a scale whose
 * product with the input is not whole: the reference divides by
 * (input x scale - 1), the text, ONNX Runtime 1.30 and
 * F.interpolate(align_corners=True) by (output length - 1). */
static const float cf_rz_lin[] = {1, 4};
static const float cf_rz_cub[] = {1, 2.5f, 4, 7, 8.5f, 10, 13, 14.5f, 16};
static const struct { const char *name; const float *v; int n; } cf_ref_values[] = {
    {"test_resize_downsample_scales_linear_align_corners", cf_rz_lin, 2},
    {"test_resize_downsample_scales_cubic_align_corners", cf_rz_cub, 9},
};

/* Relative L2 tolerance of fp32 outputs: 1e-4 for every operator (no
 * kernel needs a looser one: docs/CONFORMANCE.md). */
static double cf_tol(const cf_case *c) {
    (void)c;
    return 1e-4;
}

/* The case's operators out of scope, or NULL. */
static const char *cf_out_of_scope(const cf_case *c, const char **op) {
    for (int j = 0; j < c->n_ops; j++) {
        if (strncmp(c->ops[j], "ai.onnx.preview.training.", 25) == 0) {
            *op = c->ops[j];
            return "training";
        }
        for (size_t i = 0; i < sizeof cf_run_out / sizeof cf_run_out[0]; i++)
            if (strcmp(c->ops[j], cf_run_out[i].op) == 0) {
                *op = c->ops[j];
                return cf_run_out[i].why;
            }
    }
    /* Dropout in training mode draws a random mask */
    if (strstr(c->name, "training_dropout") && !strstr(c->name, "zero_ratio")) {
        *op = "Dropout";
        return "random";
    }
    return NULL;
}

typedef struct cf_tdata {
    const uint8_t *p;          /* raw element bytes */
    uint8_t *own;
} cf_tdata;

/* A decoded tensor's elements in dtype dt as raw bytes. */
static bool cf_tensor_bytes(mp_model *m, const mp_tensor *t, int dt, cf_tdata *d) {
    d->own = NULL;
    d->p = NULL;
    size_t bytes = (size_t)mp_dtype_bytes(dt, t->numel);
    if (t->loc == MP_DATA_RAW) { /* copied: the file's bytes are not aligned for their type */
        if (t->size != bytes) return false;
        d->own = cf_xmalloc(bytes + 8);
        memcpy(d->own, t->data, bytes);
        d->p = d->own;
        return true;
    }
    if (t->numel == 0) {
        d->p = (const uint8_t *)"";
        return true;
    }
    int64_t *iv = NULL;
    double *fv = NULL;
    if (mp_tensor_read(m, t, &iv, &fv) != MP_OK) return false;
    d->own = cf_xmalloc(bytes + 8);
    for (int64_t i = 0; i < t->numel; i++) {
        if (fv) mp_kset_f(d->own, dt, i, fv[i]);
        else if (dt == MP_DT_FLOAT16 || dt == MP_DT_BFLOAT16) ((uint16_t *)d->own)[i] = (uint16_t)iv[i];
        else mp_kset_i(d->own, dt, i, iv[i]);
    }
    d->p = d->own;
    return true;
}

static bool cf_is_float(int dt) { return mp_dtype_is_float(dt); }

/* Set for a random case: outputs are compared by dtype and shape only. */
static bool cf_shape_only;

/* --poison: each case is run with adversarial contents in place of its
 * test data, once per variant, and passes when every run either finishes
 * or refuses with a message (no crash, no sanitizer report, no hang):
 * the inputs a fuzzer's random weights produce, met by every kernel.
 * Variant 1 mixes special floats, 2 is all NaN, 3 all 1e30, 4 all -inf,
 * 5 puts extreme integers in integer inputs (floats as given). */
static int cf_poison;
#define CF_POISONS 5
/* Then shape variants: input j's shape changed (its last dim one shorter,
 * one longer, or its first dim one longer; contents cycled from the test
 * data), so that a kernel meets inputs that do not fit each other where
 * the static inference lets them through. Variant CF_POISONS + 1 + 3j + s. */
#define CF_SHAPE_INPUTS 6
#define CF_VARIANTS (CF_POISONS + 3 * CF_SHAPE_INPUTS)

/* The shape variant's input and its new dims, or -1 (none, or the input
 * has no dim to change). */
static int cf_shape_variant(int variant, int i, const mp_tensor *t, int64_t *dims) {
    if (variant <= CF_POISONS) return -1;
    int j = (variant - CF_POISONS - 1) / 3, how = (variant - CF_POISONS - 1) % 3;
    if (j != i || t->rank < 1) return -1;
    memcpy(dims, t->dims, sizeof *dims * (size_t)t->rank);
    if (how == 0 && dims[t->rank - 1] > 0) dims[t->rank - 1]--;
    else if (how == 1) dims[t->rank - 1]++;
    else if (how == 2) dims[0]++;
    else return -1;
    return j;
}

static void cf_poison_data(uint8_t *p, int dt, int64_t n, int variant) {
    static const double mixed[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e30, -1e30, 3e9, -3e9, 1e-40, 0.5, -2.5};
    static const int64_t ints[] = {INT64_MIN, INT64_MAX, -1, 0, INT64_C(1) << 40, -(INT64_C(1) << 40),
                                   INT64_C(2147483648), -INT64_C(2147483649), 1, 2};
    bool fl = mp_dtype_is_float(dt);
    if (variant > CF_POISONS || (variant == 5 ? (fl || !mp_dtype_is_int(dt)) : !fl)) return;
    for (int64_t i = 0; i < n; i++) {
        if (variant == 5) {
            mp_kset_i(p, dt, i, ints[i % (int64_t)(sizeof ints / sizeof ints[0])]);
            continue;
        }
        double v = variant == 1 ? mixed[i % (int64_t)(sizeof mixed / sizeof mixed[0])]
                 : variant == 2 ? NAN : variant == 3 ? 1e30 : -INFINITY;
        mp_kset_f(p, dt, i, v);
    }
}

/* Compare a produced output with the expected tensor; false with msg. */
static bool cf_compare(const char *what, int dt, int rank, const int64_t *dims, const void *data,
                       const mp_tensor *want, int want_dt, const cf_tdata *wd, double tol, double *worst,
                       char *msg, size_t cap) {
    if (dt != want_dt) {
        snprintf(msg, cap, "%s: dtype %s, expected %s", what, mp_dtype_name(dt), mp_dtype_name(want_dt));
        return false;
    }
    bool same = rank == want->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == want->dims[d];
    if (!same) {
        char a[128] = "", b[128] = "";
        for (int d = 0; d < rank && strlen(a) < 100; d++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "x" : "", (long long)dims[d]);
        for (int d = 0; d < want->rank && strlen(b) < 100; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "x" : "", (long long)want->dims[d]);
        snprintf(msg, cap, "%s: shape [%s], expected [%s]", what, a, b);
        return false;
    }
    int64_t n = want->numel;
    if (cf_shape_only) return true;
    if (cf_is_float(dt)) {
        if (mp_dtype_bits(dt) < 32 && tol < 1e-2) tol = 1e-2;
        double e2 = 0, r2 = 0;
        for (int64_t i = 0; i < n; i++) {
            double a = mp_kget_f(data, dt, i), b = mp_kget_f(wd->p, dt, i);
            if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
                bool ok = (isnan(a) && isnan(b)) || a == b;
                if (!ok) {
                    snprintf(msg, cap, "%s: element %lld is %g, expected %g", what, (long long)i, a, b);
                    return false;
                }
                continue;
            }
            e2 += (a - b) * (a - b);
            r2 += b * b;
        }
        double rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
        if (rel > *worst) *worst = rel;
        if (!(rel <= tol)) {
            snprintf(msg, cap, "%s: relative L2 error %.3g above %.0e", what, rel, tol);
            return false;
        }
        return true;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t a = mp_kget_i(data, dt, i), b = mp_kget_i(wd->p, dt, i);
        if (a != b) {
            snprintf(msg, cap, "%s: element %lld is %lld, expected %lld", what, (long long)i, (long long)a,
                     (long long)b);
            return false;
        }
    }
    return true;
}

/* One attempt: feed the static inference the contents of small inputs
 * only when `contents` (for shapes that depend on them: the second
 * attempt; the first leaves every input to the kernels), plan, run,
 * compare. Returns CR_* or -1 when the attempt failed before comparing. */
static int cf_run_attempt(const char *dir, const cf_case *c, bool contents, double *worst, char *msg,
                          size_t cap) {
    char *path = cf_printf("%s/model.onnx", dir);
    cf_bufs bufs = {0};
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    mp_exec *pl = NULL;
    cf_tdata *tds = NULL;
    int n_tds = 0, result = -1;
    size_t len = 0;
    mp_status st = mp_model_load(path, &m);
    if (st) {
        snprintf(msg, cap, "load: %s", mp_last_error());
        goto done;
    }
    mp_graph *g = m->graph;
    mp_tensor **ins = cf_xmalloc(sizeof *ins * (size_t)(g->n_inputs + 1));
    mp_tensor **quirk = calloc((size_t)g->n_inputs + 1, sizeof *quirk);
    int *in_dt = cf_xmalloc(sizeof *in_dt * (size_t)(g->n_inputs + 1));
    tds = cf_xmalloc(sizeof *tds * (size_t)(g->n_inputs + g->n_outputs + 1));
    for (int i = 0; i < g->n_inputs; i++) {
        const mp_value *v = &g->values[g->inputs[i]];
        free(path);
        path = cf_printf("%s/test_data_set_0/input_%d.pb", dir, i);
        uint8_t *b = cf_bufs_read(&bufs, path, &len);
        if (!b || mp_tensor_decode(m, b, len, &ins[i]) != MP_OK) {
            snprintf(msg, cap, "input %d: cannot read %s", i, path);
            goto done_in;
        }
        mp_tensor *t = ins[i];
        int dt = cf_bf16_as_uint16(t->dtype, v->decl_dtype) ? MP_DT_BFLOAT16 : t->dtype;
        in_dt[i] = dt;
        if (dt == MP_DT_STRING) {
            snprintf(msg, cap, "string");
            result = CR_OUT;
            goto done_in;
        }
        int64_t sdims[MP_MAX_RANK];
        if (cf_poison && t->rank <= MP_MAX_RANK && cf_shape_variant(cf_poison, i, t, sdims) >= 0) {
            /* the same input with one dim changed, its bytes cycled */
            cf_tdata od;
            if (!cf_tensor_bytes(m, t, dt, &od)) {
                snprintf(msg, cap, "input %d: contents unreadable", i);
                goto done_in;
            }
            int64_t sn = mp_dims_product(sdims, t->rank);
            size_t ob = (size_t)mp_dtype_bytes(dt, t->numel), nb = (size_t)mp_dtype_bytes(dt, sn);
            uint8_t *d = calloc(1, nb + 8);
            for (size_t q = 0; ob && q < nb; q++) d[q] = od.p[q % ob];
            free(od.own);
            int64_t *nd = cf_xmalloc(sizeof *nd * (size_t)t->rank);
            memcpy(nd, sdims, sizeof *nd * (size_t)t->rank);
            mp_tensor *nt = cf_xmalloc(sizeof *nt);
            *nt = (mp_tensor){.name = t->name, .dtype = t->dtype, .rank = t->rank, .dims = nd, .numel = sn,
                              .loc = MP_DATA_RAW, .data = d, .size = nb};
            quirk[i] = nt;
            ins[i] = t = nt;
        }
        int64_t *iv = NULL;
        double *fv = NULL;
        if (contents && (mp_dtype_is_int(dt) || mp_dtype_is_float(dt)) && mp_dtype_bits(dt) >= 8 &&
            dt != MP_DT_BFLOAT16 && t->numel <= MP_KNOWN_MAX && mp_tensor_read(m, t, &iv, &fv) != MP_OK)
            iv = NULL, fv = NULL;
        st = mp_model_set_input_data(m, v->name, dt, t->rank, t->dims, iv, fv, (iv || fv) ? t->numel : 0);
        if (st && v->decl_rank >= 0 && v->decl_rank != t->rank &&
            mp_dims_product(v->decl_dims, v->decl_rank) >= 0) {
            /* the test-data quirk the shape phase notes (castlike's 'like'
             * given as [1] for a declared [3,4]): the declared shape, zeros */
            int64_t n = mp_dims_product(v->decl_dims, v->decl_rank);
            mp_tensor *nt = cf_xmalloc(sizeof *nt);
            uint8_t *zeros = calloc(1, (size_t)mp_dtype_bytes(dt, n) + 8);
            int64_t *nd = cf_xmalloc(sizeof *nd * (size_t)(v->decl_rank + 1));
            if (v->decl_rank) memcpy(nd, v->decl_dims, sizeof *nd * (size_t)v->decl_rank);
            *nt = (mp_tensor){.name = t->name, .dtype = t->dtype, .rank = v->decl_rank, .dims = nd,
                              .numel = n, .loc = MP_DATA_RAW, .data = zeros,
                              .size = (size_t)mp_dtype_bytes(dt, n)};
            if (quirk[i]) free((void *)quirk[i]->data), free((void *)quirk[i]->dims), free(quirk[i]);
            quirk[i] = nt;
            ins[i] = t = nt;
            st = mp_model_set_input_data(m, v->name, dt, t->rank, t->dims, NULL, NULL, 0);
        }
        if (st) {
            snprintf(msg, cap, "input %d: %s", i, mp_last_error());
            goto done_in;
        }
        if (!cf_tensor_bytes(m, t, dt, &tds[n_tds])) {
            snprintf(msg, cap, "input %d: contents unreadable", i);
            goto done_in;
        }
        if (cf_poison && tds[n_tds].own) cf_poison_data(tds[n_tds].own, dt, t->numel, cf_poison);
        n_tds++;
    }
    if ((st = mp_profile_static(m, &prof))) {
        snprintf(msg, cap, "profile: %s", mp_last_error());
        goto done_in;
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].dtype == MP_DT_STRING) {
            snprintf(msg, cap, "string");
            result = CR_OUT;
            goto done_in;
        }
    mp_run_options o;
    mp_run_options_default(&o);
    o.threads = 1;
    o.warmup = 0;
    o.iters = 1;
    o.progress = 0;
    if (cf_poison) o.max_memory = INT64_C(1) << 30;
    if ((st = mp_exec_create(prof, &o, &pl))) {
        snprintf(msg, cap, "plan: %s", mp_last_error());
        goto done_in;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        const mp_tensor *t = ins[i];
        st = mp_exec_set_input(pl, g->values[g->inputs[i]].name, in_dt[i], t->rank, t->dims, tds[i].p,
                               (size_t)mp_dtype_bytes(in_dt[i], t->numel));
        if (st) {
            snprintf(msg, cap, "input %d: %s", i, mp_last_error());
            goto done_in;
        }
    }
    if ((st = mp_exec_run(pl))) {
        snprintf(msg, cap, "run: %s", mp_last_error());
        goto done_in;
    }
    if (cf_poison) { /* ran: the values are not compared */
        result = CR_PASS;
        goto done_in;
    }
    int n_out = mp_exec_output_count(pl);
    if (n_out != g->n_outputs) {
        snprintf(msg, cap, "%d outputs, the graph has %d", n_out, g->n_outputs);
        result = CR_FAIL;
        goto done_in;
    }
    result = CR_PASS;
    double tol = cf_tol(c);
    for (int i = 0; i < n_out && result == CR_PASS; i++) {
        const char *name;
        int dt, rank;
        const int64_t *dims;
        const void *data;
        if ((st = mp_exec_output(pl, i, &name, &dt, &rank, &dims, &data))) {
            snprintf(msg, cap, "output %d: %s", i, mp_last_error());
            result = CR_FAIL;
            break;
        }
        free(path);
        path = cf_printf("%s/test_data_set_0/output_%d.pb", dir, i);
        uint8_t *b = cf_bufs_read(&bufs, path, &len);
        mp_tensor *t = NULL;
        if (!b || mp_tensor_decode(m, b, len, &t) != MP_OK) {
            snprintf(msg, cap, "output %d: cannot read %s", i, path);
            result = CR_FAIL;
            break;
        }
        int want_dt = cf_bf16_as_uint16(t->dtype, g->values[g->outputs[i]].decl_dtype) ? MP_DT_BFLOAT16 : t->dtype;
        if (want_dt == MP_DT_STRING) {
            snprintf(msg, cap, "string");
            result = CR_OUT;
            break;
        }
        cf_tdata wd;
        if (!cf_tensor_bytes(m, t, want_dt, &wd)) {
            snprintf(msg, cap, "output %d: expected contents unreadable", i);
            result = CR_FAIL;
            break;
        }
        for (size_t v = 0; i == 0 && want_dt == MP_DT_FLOAT && v < sizeof cf_ref_values / sizeof cf_ref_values[0]; v++)
            if (strcmp(c->name, cf_ref_values[v].name) == 0 && t->numel == cf_ref_values[v].n) {
                free(wd.own);
                wd.own = NULL;
                wd.p = (const uint8_t *)cf_ref_values[v].v;
            }
        char what[300];
        snprintf(what, sizeof what, "output %d '%.200s'", i, name);
        if (!cf_compare(what, dt, rank, dims, data, t, want_dt, &wd, tol, worst, msg, cap)) result = CR_FAIL;
        free(wd.own);
    }
done_in:
    for (int i = 0; i < n_tds; i++) free(tds[i].own);
    for (int i = 0; quirk && i < g->n_inputs; i++)
        if (quirk[i]) free((void *)quirk[i]->data), free((void *)quirk[i]->dims), free(quirk[i]);
    free(quirk);
    free(ins);
    free(in_dt);
done:
    free(tds);
    mp_exec_free(pl);
    mp_profile_free(prof);
    mp_model_free(m);
    cf_bufs_free(&bufs);
    free(path);
    return result;
}

#define CF_RUN_SECONDS 30

static void cf_run_values(const char *data, cf_case *c) {
    const char *op = NULL, *why = NULL;
    /* data-dependent sizes are shaped by the kernels (mp_kout_alloc): run */
    if (c->result == CF_SKIP && !(c->category && strcmp(c->category, "data-dependent") == 0)) {
        c->run = CR_OUT;
        c->run_msg = cf_printf("%s", c->category ? c->category : "skipped");
        return;
    }
    cf_shape_only = false;
    if ((why = cf_out_of_scope(c, &op))) {
        c->run = CR_OUT;
        if (strcmp(why, "random") != 0) {
            c->run_msg = cf_printf("%s (%s)", why, op);
            return;
        }
        cf_shape_only = true; /* run it, compare dtypes and shapes */
    }
    char *dir = cf_printf("%s/%s/%s", data, cf_suites[c->suite], c->name);
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0) {
        c->run = CR_FAIL;
        c->run_msg = cf_printf("pipe: %s", strerror(errno));
        free(dir);
        return;
    }
    /* MP_CONFORMANCE_NOFORK=1: in this process (for a debugger) */
    bool nofork = getenv("MP_CONFORMANCE_NOFORK") != NULL;
    pid_t pid = nofork ? 0 : fork();
    if (pid == 0) {
        close(fds[0]);
        if (!nofork) alarm(CF_RUN_SECONDS);
        char msg[600] = "";
        double worst = 0;
        int r = -1;
        if (cf_poison) { /* every variant; refusing with a message is fine */
            int ran = 0, refused = 0;
            for (int v = 1; v <= CF_VARIANTS; v++) {
                cf_poison = v;
                char m2[600] = "";
                int r1 = cf_run_attempt(dir, c, false, &worst, m2, sizeof m2);
                if (r1 < 0) r1 = cf_run_attempt(dir, c, true, &worst, m2, sizeof m2);
                if (r1 < 0 && !m2[0]) {
                    snprintf(msg, sizeof msg, "variant %d failed without a message", v);
                    r = CR_FAIL;
                    break;
                }
                ran += r1 >= 0;
                refused += r1 < 0;
            }
            if (r < 0) {
                r = CR_PASS;
                snprintf(msg, sizeof msg, "poisoned: %d variants ran, %d refused with a message", ran, refused);
            }
        } else
            r = cf_run_attempt(dir, c, false, &worst, msg, sizeof msg);
        if (r < 0) {
            char msg2[600] = "";
            r = cf_run_attempt(dir, c, true, &worst, msg2, sizeof msg2);
            if (r < 0) r = CR_FAIL;
            memcpy(msg, msg2, sizeof msg);
        }
        char out[700];
        int n = snprintf(out, sizeof out, "%d %.6g %s", r, worst, msg);
        if (nofork) {
            printf("%s\n", out);
            close(fds[1]);
            free(dir);
            exit(0);
        }
        if (n > 0 && write(fds[1], out, (size_t)(n < (int)sizeof out ? n : (int)sizeof out - 1)) < 0) _exit(3);
        _exit(0);
    }
    close(fds[1]);
    char buf[800];
    size_t got = 0;
    ssize_t k;
    while (pid > 0 && got + 1 < sizeof buf && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
    buf[got] = 0;
    close(fds[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    free(dir);
    if (pid < 0) {
        c->run = CR_FAIL;
        c->run_msg = cf_printf("fork: %s", strerror(errno));
    } else if (WIFSIGNALED(status)) {
        c->run = CR_FAIL;
        c->run_msg = cf_printf("%s (signal %d)", WTERMSIG(status) == SIGALRM ? "timed out" : "crashed",
                               WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        c->run = CR_FAIL; /* a sanitizer's report ends the child with a status */
        c->run_msg = cf_printf("exited with status %d (a sanitizer report is on stderr)", WEXITSTATUS(status));
    } else {
        int r = CR_FAIL;
        double worst = 0;
        int off = 0;
        if (sscanf(buf, "%d %lf %n", &r, &worst, &off) < 2) {
            r = CR_FAIL;
            off = 0;
        }
        c->run = r;
        c->run_err = worst;
        c->run_msg = cf_strdup(buf + off);
    }
    if (cf_shape_only) {
        c->shape_only = c->run == CR_PASS ? 1 : -1;
        char *m2 = cf_printf("random (%s): %s", op, c->run == CR_PASS ? "ran, dtypes and shapes match"
                                                                       : (c->run_msg ? c->run_msg : "failed"));
        free(c->run_msg);
        c->run_msg = m2;
        c->run = CR_OUT;
    }
}

/* ---- per-operator attribution ---- */

typedef struct cf_opstat {
    char *op;
    int n[3];
} cf_opstat;

static cf_opstat *cf_opstats;
static int cf_n_opstats, cf_cap_opstats;

static void cf_count_op(const char *op, int result) {
    for (int i = 0; i < cf_n_opstats; i++)
        if (strcmp(cf_opstats[i].op, op) == 0) {
            cf_opstats[i].n[result]++;
            return;
        }
    cf_opstats = mp_grow(cf_opstats, sizeof *cf_opstats, &cf_cap_opstats, cf_n_opstats + 1);
    if (!cf_opstats) {
        fprintf(stderr, "conformance: out of memory\n");
        exit(2);
    }
    cf_opstats[cf_n_opstats] = (cf_opstat){cf_strdup(op), {0, 0, 0}};
    cf_opstats[cf_n_opstats++].n[result]++;
}

static int cf_cmp_opstat(const void *a, const void *b) {
    return strcmp(((const cf_opstat *)a)->op, ((const cf_opstat *)b)->op);
}

/* The op under test of a node-suite case: its only non-Constant op; for
 * an expanded function (test_x_expanded...), the op of test_x. */
static const char *cf_op_under_test(const cf_case *cases, int n, const cf_case *c) {
    if (c->n_ops == 1) return c->ops[0];
    const char *exp = strstr(c->name, "_expanded");
    if (exp) {
        size_t bl = (size_t)(exp - c->name);
        for (int i = 0; i < n; i++) {
            const cf_case *b = &cases[i];
            if (b->suite == c->suite && strlen(b->name) == bl &&
                strncmp(b->name, c->name, bl) == 0 && b != c)
                return cf_op_under_test(cases, n, b);
        }
    }
    const char *only = NULL;
    for (int j = 0; j < c->n_ops; j++) {
        if (strcmp(c->ops[j], "Constant") == 0) continue;
        if (only) return NULL;
        only = c->ops[j];
    }
    return only;
}

/* ---- main ---- */

static void cf_usage(FILE *f) {
    fprintf(f,
            "usage: conformance [--data DIR] [--skip FILE] [--min-pass R] [--only SUBSTR] [--no-run]\n"
            "                   [--portable] [--poison] [--run-min-pass R] [-v]\n"
            "  --data DIR      ONNX backend test data (default: the first of");
    for (size_t i = 0; i < sizeof cf_data_dirs / sizeof cf_data_dirs[0]; i++)
        fprintf(f, " %s", cf_data_dirs[i]);
    fprintf(f,
            ")\n"
            "  --skip FILE     skip list (default %s)\n"
            "  --min-pass R    exit 1 when passed/(passed+failed) < R (default 0.98)\n"
            "  --only SUBSTR   run only the cases whose name contains SUBSTR\n"
            "  --no-run        shapes only: skip the run phase (executing each case)\n"
            "  --portable      run every node on its portable kernel (none on oneDNN)\n"
            "  --poison        run every case on adversarial inputs (NaN, infinities, huge and\n"
            "                  extreme integer values) in place of its data: pass = no crash\n"
            "  --run-min-pass R  exit 1 when the run phase's passed/(passed+failed) < R (default 0.95)\n"
            "  -v              also list passed and skipped cases\n",
            CF_DEFAULT_SKIP);
}

int main(int argc, char **argv) {
    const char *data = NULL, *skip = NULL, *only = NULL;
    double min_pass = 0.98, run_min_pass = 0.95;
    bool verbose = false, run = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--data") == 0 || strcmp(a, "--skip") == 0 || strcmp(a, "--min-pass") == 0 ||
             strcmp(a, "--run-min-pass") == 0 || strcmp(a, "--only") == 0) && i + 1 < argc) {
            const char *val = argv[++i];
            if (strcmp(a, "--run-min-pass") == 0) {
                char *end = NULL;
                run_min_pass = strtod(val, &end);
                if (!end || *end || run_min_pass < 0 || run_min_pass > 1) {
                    fprintf(stderr, "conformance: --run-min-pass wants a number in [0, 1], got '%s'\n", val);
                    return 2;
                }
            } else if (strcmp(a, "--data") == 0) {
                data = val;
            } else if (strcmp(a, "--skip") == 0) {
                skip = val;
            } else if (strcmp(a, "--only") == 0) {
                only = val;
            } else {
                char *end = NULL;
                min_pass = strtod(val, &end);
                if (!end || *end || min_pass < 0 || min_pass > 1) {
                    fprintf(stderr, "conformance: --min-pass wants a number in [0, 1], got '%s'\n", val);
                    return 2;
                }
            }
        } else if (strcmp(a, "--no-run") == 0) {
            run = false;
        } else if (strcmp(a, "--poison") == 0) {
            cf_poison = 1;
        } else if (strcmp(a, "--portable") == 0) {
            mp_run_portable_only = true; /* every node on its portable kernel, none on oneDNN */
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            verbose = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cf_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "conformance: unknown or incomplete argument '%s'\n", a);
            cf_usage(stderr);
            return 2;
        }
    }
    if (!data) {
        for (size_t i = 0; i < sizeof cf_data_dirs / sizeof cf_data_dirs[0] && !data; i++) {
            char *p = cf_printf("%s/node", cf_data_dirs[i]);
            if (cf_is_dir(p)) data = cf_data_dirs[i];
            free(p);
        }
        if (!data) {
            fprintf(stderr,
                    "conformance: no ONNX backend test data found (install the Debian package "
                    "libonnx-testdata, or give --data DIR)\n");
            return 2;
        }
    }
    if (!cf_load_skips(skip ? skip : CF_DEFAULT_SKIP, skip != NULL)) return 2;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cf_case *cases = NULL;
    int n_cases = 0, cap_cases = 0, suites_found = 0;
    for (int s = 0; s < CF_N_SUITES; s++) {
        char *sdir = cf_printf("%s/%s", data, cf_suites[s]);
        int n = 0;
        char **names = cf_list_dir(sdir, &n);
        if (names) suites_found++;
        else fprintf(stderr, "conformance: warning: no suite folder %s\n", sdir);
        free(sdir);
        for (int i = 0; i < n; i++) {
            if (only && !strstr(names[i], only)) {
                free(names[i]);
                continue;
            }
            cases = mp_grow(cases, sizeof *cases, &cap_cases, n_cases + 1);
            if (!cases) {
                fprintf(stderr, "conformance: out of memory\n");
                return 2;
            }
            cases[n_cases++] = (cf_case){.suite = s, .name = names[i], .result = CF_FAIL};
        }
        free(names);
    }
    if (!suites_found) {
        fprintf(stderr, "conformance: %s holds none of the suites (node, simple, ...)\n", data);
        return 2;
    }

    for (int i = 0; i < n_cases; i++) cf_run_case(data, &cases[i]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (run)
        for (int i = 0; i < n_cases; i++) cf_run_values(data, &cases[i]);
    struct timespec t2;
    clock_gettime(CLOCK_MONOTONIC, &t2);

    int per_suite[CF_N_SUITES][3] = {{0}};
    int total[3] = {0};
    for (int i = 0; i < n_cases; i++) {
        const cf_case *c = &cases[i];
        per_suite[c->suite][c->result]++;
        total[c->result]++;
        if (c->result == CF_FAIL)
            printf("FAIL %s%s%s: %s\n", c->suite ? cf_suites[c->suite] : "", c->suite ? "/" : "",
                   c->name, c->msg ? c->msg : "");
        else if (verbose && c->result == CF_PASS)
            printf("pass %s%s%s%s%s%s\n", c->suite ? cf_suites[c->suite] : "",
                   c->suite ? "/" : "", c->name, c->note ? " (note: " : "",
                   c->note ? c->note : "", c->note ? ")" : "");
        else if (verbose)
            printf("skip %s%s%s: %s: %s\n", c->suite ? cf_suites[c->suite] : "",
                   c->suite ? "/" : "", c->name, c->category, c->msg ? c->msg : "");
        /* per-operator attribution */
        const char *op = c->suite == 0 ? cf_op_under_test(cases, n_cases, c) : NULL;
        if (op)
            cf_count_op(op, c->result);
        else if (c->n_ops == 0)
            cf_count_op("(no nodes)", c->result);
        else
            for (int j = 0; j < c->n_ops; j++) cf_count_op(c->ops[j], c->result);
    }
    for (int i = 0; i < cf_n_skips; i++)
        if (!cf_skips[i].used && !only)
            fprintf(stderr, "conformance: warning: skip-list entry '%s' matches no case\n",
                    cf_skips[i].name);

    /* skipped cases by category */
    if (total[CF_SKIP]) {
        printf("\nskipped by category:\n");
        char **cats = cf_xmalloc(sizeof *cats * (size_t)total[CF_SKIP]);
        int n_cats = 0;
        for (int i = 0; i < n_cases; i++) {
            if (cases[i].result != CF_SKIP) continue;
            bool dup = false;
            for (int j = 0; j < n_cats && !dup; j++) dup = strcmp(cats[j], cases[i].category) == 0;
            if (!dup) cats[n_cats++] = cases[i].category;
        }
        qsort(cats, (size_t)n_cats, sizeof *cats, cf_cmp_str);
        for (int j = 0; j < n_cats; j++) {
            int k = 0;
            for (int i = 0; i < n_cases; i++)
                k += cases[i].result == CF_SKIP && strcmp(cases[i].category, cats[j]) == 0;
            printf("  %-16s %4d\n", cats[j], k);
        }
        free(cats);
    }

    /* per-operator table */
    qsort(cf_opstats, (size_t)cf_n_opstats, sizeof *cf_opstats, cf_cmp_opstat);
    int w = 8;
    for (int i = 0; i < cf_n_opstats; i++)
        if ((int)strlen(cf_opstats[i].op) > w) w = (int)strlen(cf_opstats[i].op);
    printf("\n%-*s %6s %6s %7s\n", w, "operator", "passed", "failed", "skipped");
    for (int i = 0; i < cf_n_opstats; i++)
        printf("%-*s %6d %6d %7d\n", w, cf_opstats[i].op, cf_opstats[i].n[CF_PASS],
               cf_opstats[i].n[CF_FAIL], cf_opstats[i].n[CF_SKIP]);
    printf("\n");
    for (int s = 0; s < CF_N_SUITES; s++)
        printf("%s: %d passed, %d failed, %d skipped\n", cf_suites[s], per_suite[s][CF_PASS],
               per_suite[s][CF_FAIL], per_suite[s][CF_SKIP]);
    int in_scope = total[CF_PASS] + total[CF_FAIL];
    double rate = in_scope ? (double)total[CF_PASS] / in_scope : 0.0;
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("in scope: %d cases, pass rate %.2f%% (threshold %.2f%%), %d cases in %.2f s, data %s\n",
           in_scope, 100.0 * rate, 100.0 * min_pass, n_cases, secs, data);
    printf("conformance: %d passed, %d failed, %d skipped\n", total[CF_PASS], total[CF_FAIL],
           total[CF_SKIP]);

    /* the run phase: values */
    int run_in = 0, run_rate_ok = 1;
    if (run) {
        int rs[CF_N_SUITES][3] = {{0}}, rt[3] = {0};
        printf("\nrun phase (values against output_N.pb):\n");
        for (int i = 0; i < n_cases; i++) {
            const cf_case *c = &cases[i];
            rs[c->suite][c->run]++;
            rt[c->run]++;
            const char *sp = c->suite ? cf_suites[c->suite] : "", *sl = c->suite ? "/" : "";
            if (c->run == CR_FAIL)
                printf("RUN FAIL %s%s%s: %s\n", sp, sl, c->name, c->run_msg ? c->run_msg : "");
            else if (verbose && c->run == CR_PASS)
                printf("run pass %s%s%s (rel L2 %.2g)\n", sp, sl, c->name, c->run_err);
            else if (verbose)
                printf("run out of scope %s%s%s: %s\n", sp, sl, c->name, c->run_msg ? c->run_msg : "");
        }
        for (int s2 = 0; s2 < CF_N_SUITES; s2++) {
            int in = rs[s2][CR_PASS] + rs[s2][CR_FAIL];
            printf("run %s: %d passed, %d failed, %d out of scope (%.1f%% of in scope)\n", cf_suites[s2],
                   rs[s2][CR_PASS], rs[s2][CR_FAIL], rs[s2][CR_OUT], in ? 100.0 * rs[s2][CR_PASS] / in : 0.0);
        }
        char *real = cf_printf("%s/real", data);
        int n_real = 0;
        char **rn = cf_list_dir(real, &n_real);
        if (rn) {
            int with_model = 0;
            for (int i = 0; i < n_real; i++) {
                char *mp = cf_printf("%s/%s/model.onnx", real, rn[i]);
                with_model += access(mp, R_OK) == 0;
                free(mp);
                free(rn[i]);
            }
            free(rn);
            printf("run real: %d cases, %d with a model file (the package ships download links only): "
                   "not run\n", n_real, with_model);
        }
        free(real);
        int so_ok = 0, so_bad = 0;
        for (int i = 0; i < n_cases; i++) {
            so_ok += cases[i].shape_only > 0;
            so_bad += cases[i].shape_only < 0;
            if (cases[i].shape_only < 0)
                printf("RUN SHAPE FAIL %s: %s\n", cases[i].name, cases[i].run_msg ? cases[i].run_msg : "");
        }
        printf("run shape-only (random operators): %d ran with matching dtypes and shapes, %d did not\n", so_ok,
               so_bad);
        run_in = rt[CR_PASS] + rt[CR_FAIL];
        double rr = run_in ? (double)rt[CR_PASS] / run_in : 0.0;
        run_rate_ok = run_in > 0 && rr >= run_min_pass && !(cf_poison && rt[CR_FAIL]);
        double rsecs = (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) * 1e-9;
        printf("run in scope: %d cases, pass rate %.2f%% (threshold %.2f%%), %.2f s\n", run_in, 100.0 * rr,
               100.0 * run_min_pass, rsecs);
        printf("conformance run: %d passed, %d failed, %d out of scope\n", rt[CR_PASS], rt[CR_FAIL],
               rt[CR_OUT]);
    }

    for (int i = 0; i < n_cases; i++) {
        free(cases[i].name);
        free(cases[i].category);
        free(cases[i].msg);
        free(cases[i].note);
        free(cases[i].run_msg);
        for (int j = 0; j < cases[i].n_ops; j++) free(cases[i].ops[j]);
        free(cases[i].ops);
    }
    free(cases);
    for (int i = 0; i < cf_n_opstats; i++) free(cf_opstats[i].op);
    free(cf_opstats);
    for (int i = 0; i < cf_n_skips; i++) {
        free(cf_skips[i].name);
        free(cf_skips[i].category);
        free(cf_skips[i].why);
    }
    free(cf_skips);
    return in_scope > 0 && rate >= min_pass && run_rate_ok ? 0 : 1;
}
