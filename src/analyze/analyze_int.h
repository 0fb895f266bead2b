/* What the static profile's files share (analyze.c: op types, figures,
 * liveness, the walk and the profile; params.c: which initializers are
 * parameters and whose; bymodop.c: the by-module-and-operator table).
 * Internal to src/analyze/. */
#ifndef MP_ANALYZE_ANALYZE_INT_H
#define MP_ANALYZE_ANALYZE_INT_H

#include "analyze/analyze.h"
#include "analyze/same.h"
#include <stdlib.h>

/* What the parameter rules ask of an op type: found once per type, by
 * name, so that no node compares names. */
enum {
    MP__K_IDENTITY = 1u << 0, /* Identity (default domain): may copy a weight */
    MP__K_CONSTANT = 1u << 1, /* Constant (default domain) */
    MP__K_DEQUANT = 1u << 2,  /* DequantizeLinear (any domain) */
    MP__K_CHAIN = 1u << 3,    /* may quantize a weight on its way to a DequantizeLinear */
};
/* One use of a weight (or of a copy of one): the consumer node, its op
 * type, whether it is itself a copy, and the input slot. A value's uses
 * form a list, latest first. */
typedef struct mp__use {
    int node, op, slot, next;
    bool copy;
    bool stand_in;  /* the node took it for another, equal parameter (mp__fx_params) */
} mp__use;
/* Op types by descriptor address (open addressing). */
#define MP__DESC_SLOTS 256
typedef struct mp__walk {
    mp_profile *p;
    mp_graph *g;
    bool ovf;
    bool carry;               /* a total passed 64 bits (mp__fig_add_node) */
    mp_fig no_module;         /* takes the figures of nodes outside any module */
    /* op types */
    int cap_ops, cap_kind;
    unsigned char *op_kind;   /* MP__K_* per op type */
    struct {
        const mp_op *desc;
        int op;
    } by_desc[MP__DESC_SLOTS];
    int n_desc;
    mp_strmap by_name;        /* op types of nodes without a descriptor */
    bool any_dequant;
    /* weights: their uses and the nodes that copy them */
    mp__use *uses;
    int n_uses, cap_uses;
    int *inits, n_inits;      /* the initializers */
    int *copies, n_copies;    /* Identity nodes copying a weight */
    /* parameters judged (mp__judge): per value, the elements it counts
     * (-1: its own) and the value that counts it instead (-1: itself) */
    int64_t *pcount;
    int *alias;
    /* declared parameters counted by PyTorch's shape (mp__fx_params), per
     * m->sig_params index: elements (0: not), the node that took it, dtype */
    int64_t *role_numel;
    int *role_node, *role_dtype;
    int *node_op;             /* per node: its op type (before the op types are sorted) */
    int *pos;                 /* per node: its place in the execution order */
    int *ubuf, cap_ubuf;      /* one value's uses in execution order (mp__param) */
    /* liveness */
    int *live;                /* per value: an MP__ state, the uses to come or kept */
    uint64_t live_now, births;
    int alive;                /* activations with uses to come */
    bool live_exact;          /* false: replay it exactly (mp__liveness_replay) */
    bool root_failed;         /* no room for the root module */
    bool nomem;               /* out of memory where no status is returned */
    uint64_t *trace;          /* when not NULL: the live bytes at each step (mp_profile_static_live) */
    int step;
} mp__walk;

int mp__op_index_new(mp__walk *w, const mp_node *n, unsigned h);
static inline int mp__op_index(mp__walk *w, const mp_node *n) {
    unsigned h = 0;
    if (n->desc) {
        /* Fibonacci hashing: descriptors sit in arrays, a fixed stride apart */
        uint64_t a = (uint64_t)(uintptr_t)n->desc * UINT64_C(0x9E3779B97F4A7C15);
        h = (unsigned)(a >> 56) & (MP__DESC_SLOTS - 1);
        while (w->by_desc[h].desc) {
            if (w->by_desc[h].desc == n->desc) return w->by_desc[h].op;
            h = (h + 1) & (MP__DESC_SLOTS - 1);
        }
    }
    return mp__op_index_new(w, n, h);
}

void mp__fig_add_cost(mp_fig *f, const mp_cost *k, bool *ovf);
void mp__fig_add_fig(mp_fig *f, const mp_fig *c, bool *ovf);
bool mp__use_add(mp__walk *w, int v, int k, int op, bool copy, int slot);
int mp__use_first(const mp__walk *w, int v);
bool mp__is_copy(const mp__walk *w, const mp_node *n, unsigned kind);
int mp__modop_find(const mp_profile *p, int md, int op);
mp_status mp__modops(mp__walk *w);
mp_status mp__modops_order(mp_profile *p, const int *inv);
mp_status mp__params(mp__walk *w);

#endif
