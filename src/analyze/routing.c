/* The pattern layer's mixture of experts: the routers and the rows each
 * expert receives (patterns.h, "Mixture of experts").
 *
 * A sparse mixture of experts (transformers' MixtralSparseMoeBlock, the
 * Qwen, DeepSeek and OLMoE blocks written the same way) picks each token's
 * k experts with TopK over the router's E logits, then for each expert e
 * finds the tokens that chose it with a NonZero:
 *   - of the one-hot mask's slice e: one_hot(selected, E), permuted,
 *     indexed by e (`torch.where(expert_mask[e])`); TorchScript writes
 *     OneHot, the one-hot decomposed is Equal(indices, arange(E));
 *   - of `selected == e` (Equal of the indices and the constant e).
 * How many tokens each expert gets is the data's; how many rows the experts
 * get in all is not: every (token, slot) pair goes to exactly one expert,
 * so the NonZeros of one router find numel(selected) = tokens x k rows
 * together. Balanced routing (what the load-balancing loss aims at) gives
 * expert e numel / E rows, the remainder to the first experts: every
 * figure linear in the rows (MACs, FLOPs, bytes, what the backward keeps)
 * is then exact in total whatever the routing; only what one expert alone
 * holds at a time follows the assumption. */
#include "analyze/patterns.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

static const mp_node *producer(const mp_graph *g, int v) {
    if (v < 0 || v >= g->n_values || g->values[v].producer < 0) return NULL;
    return &g->nodes[g->values[v].producer];
}

static bool is_op(const mp_node *n, const char *op) { return n && !n->domain[0] && strcmp(n->op, op) == 0; }

/* Up through operators that keep every element and its value (casts,
 * views): where the elements come from. */
static int through_views(const mp_graph *g, int v) {
    for (int depth = 0; depth < 16; depth++) {
        const mp_node *n = producer(g, v);
        if (!n || n->n_in < 1 || n->in[0] < 0) return v;
        if (!is_op(n, "Cast") && !is_op(n, "Identity") && !is_op(n, "Reshape") && !is_op(n, "Flatten") &&
            !is_op(n, "Squeeze") && !is_op(n, "Unsqueeze"))
            return v;
        v = n->in[0];
    }
    return v;
}

/* v is output 1 of a TopK (its indices), through views: the TopK node and
 * its choices (the input's size on the TopK axis) and k. */
static int topk_of(const mp_graph *g, int v, int64_t *choices, int64_t *k) {
    v = through_views(g, v);
    const mp_node *n = producer(g, v);
    if (!is_op(n, "TopK") || n->n_out < 2 || n->out[1] != v || n->n_in < 2 || n->in[0] < 0) return -1;
    const mp_value *x = &g->values[n->in[0]];
    if (x->rank < 1) return -1;
    int64_t ax = mp_attr_i(n, "axis", -1);
    if (ax < 0) ax += x->rank;
    double kk;
    if (ax < 0 || ax >= x->rank || x->dims[ax] <= 0 || !mp_value_scalar(g, n->in[1], &kk) || kk < 1) return -1;
    *choices = x->dims[ax];
    *k = (int64_t)kk;
    return (int)(n - g->nodes);
}

/* A one-hot of TopK indices along axis *axis of v (through casts and
 * transposes, which move the axis): OneHot, or Equal of the indices with an
 * arange over the choices. */
static int onehot_of(const mp_graph *g, int v, int axis, int64_t *choices, int64_t *k, int64_t *numel) {
    for (int depth = 0; depth < 16; depth++) {
        const mp_node *n = producer(g, v);
        if (!n || n->n_in < 1) return -1;
        if (is_op(n, "Cast") || is_op(n, "Identity")) {
            v = n->in[0];
            continue;
        }
        if (is_op(n, "Transpose")) {
            const int64_t *perm = NULL;
            int np = mp_attr_ints(n, "perm", &perm);
            if (!perm || axis >= np) return -1;
            axis = (int)perm[axis];
            v = n->in[0];
            continue;
        }
        const mp_value *out = &g->values[v];
        if (is_op(n, "OneHot")) {
            if (n->n_in < 1 || n->in[0] < 0 || out->rank < 1) return -1;
            int64_t oa = mp_attr_i(n, "axis", -1);
            if (oa < 0) oa += out->rank;
            if (oa != axis) return -1;
            int t = topk_of(g, n->in[0], choices, k);
            const mp_value *idx = &g->values[n->in[0]];
            int64_t ne = mp_value_numel(idx);
            if (t < 0 || ne <= 0 || out->dims[axis] != *choices) return -1;
            *numel = ne;
            return t;
        }
        if (is_op(n, "Equal") && n->n_in == 2 && out->rank >= 1 && out->dims[axis] > 0) {
            /* one side an arange 0..E-1 along the axis, the other the
             * indices with 1 there */
            for (int s = 0; s < 2; s++) {
                int r = n->in[s], ix = n->in[1 - s];
                if (r < 0 || ix < 0) continue;
                const mp_value *rv = &g->values[r], *iv = &g->values[ix];
                int64_t E = out->dims[axis];
                if (rv->kn != E || !rv->iv || rv->rank < 1 || out->rank - axis > rv->rank) continue;
                bool arange = true;
                for (int64_t j = 0; arange && j < E; j++) arange = rv->iv[j] == j;
                int ra = rv->rank - (out->rank - axis), ia = iv->rank - (out->rank - axis);
                if (!arange || ra < 0 || rv->dims[ra] != E || (ia >= 0 && iv->dims[ia] != 1)) continue;
                int t = topk_of(g, ix, choices, k);
                int64_t ne = mp_value_numel(iv);
                if (t < 0 || ne <= 0 || *choices != E) continue;
                *numel = ne;
                return t;
            }
        }
        return -1;
    }
    return -1;
}

/* NonZero node nz as one expert's token finder: its router (the TopK
 * node), the expert's index e, and the router's choices, k and rows in
 * all; -1 when it is not one. */
static int expert_finder(const mp_graph *g, const mp_node *nz, int64_t *e, int64_t *choices, int64_t *k,
                         int64_t *numel) {
    if (nz->n_in < 1 || nz->in[0] < 0) return -1;
    int v = through_views(g, nz->in[0]);
    const mp_node *n = producer(g, v);
    double d;
    if (is_op(n, "Gather") && n->n_in == 2 && mp_value_scalar(g, n->in[1], &d) && d >= 0) {
        const mp_value *data = &g->values[n->in[0]];
        if (data->rank < 1) return -1;
        int64_t ax = mp_attr_i(n, "axis", 0);
        if (ax < 0) ax += data->rank;
        if (ax < 0 || ax >= data->rank) return -1;
        *e = (int64_t)d;
        int t = onehot_of(g, n->in[0], (int)ax, choices, k, numel);
        return t >= 0 && *e < *choices ? t : -1;
    }
    if (is_op(n, "Equal") && n->n_in == 2) {
        for (int s = 0; s < 2; s++) {
            if (n->in[s] < 0 || n->in[1 - s] < 0 || !mp_value_scalar(g, n->in[s], &d) || d < 0) continue;
            int t = topk_of(g, n->in[1 - s], choices, k);
            int64_t ne = mp_value_numel(&g->values[n->in[1 - s]]);
            if (t < 0 || ne <= 0 || d >= (double)*choices) continue;
            *e = (int64_t)d;
            *numel = ne;
            return t;
        }
    }
    return -1;
}

int mp_moe_routing(const mp_graph *g, mp_moe_route *out, int cap, mp_moe_summary *sum) {
    if (sum) memset(sum, 0, sizeof *sum);
    if (!g) return 0;
    int n = 0, last = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const mp_node *nz = &g->nodes[g->order ? g->order[i] : i];
        if (!is_op(nz, "NonZero") || nz->n_out < 1 || nz->out[0] < 0) continue;
        const mp_value *ov = &g->values[nz->out[0]];
        const mp_value *iv = &g->values[nz->in[0]];
        if (mp_shape_known(ov) || iv->rank < 0) continue;
        int64_t e = 0, choices = 0, k = 0, numel = 0;
        int t = expert_finder(g, nz, &e, &choices, &k, &numel);
        if (t < 0) continue;
        int64_t rows = numel / choices + (e < numel % choices ? 1 : 0);
        if (n < cap && out) {
            out[n].node = (int)(nz - g->nodes);
            out[n].value = nz->out[0];
            out[n].router = t;
            out[n].expert = e;
            out[n].rank = iv->rank;
            out[n].dims[0] = iv->rank;
            out[n].dims[1] = rows;
        }
        n++;
        if (sum) {
            /* routers in order: a model's are its layers' (their finders
             * come one router after the other) */
            sum->routers += t != last;
            last = t;
            sum->finders++;
            if (choices > sum->experts) sum->experts = choices;
            if (k > sum->top_k) sum->top_k = k;
            if (numel / (k ? k : 1) > sum->tokens) sum->tokens = numel / (k ? k : 1);
        }
    }
    return n;
}
