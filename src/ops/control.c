/* Control flow: If, Loop, Scan. Bodies are inferred with the outer values
 * known; their node costs roll up into the control-flow node:
 *  - If: the branch taken when the condition is a known constant, else the
 *    costlier branch, flagged as an upper bound;
 *  - Loop: body cost x trip count when the trip count M is a known
 *    constant (and no condition can stop it earlier, else upper bound);
 *    otherwise one iteration, flagged "per iteration";
 *  - Scan: body cost x the scanned sequence length. */
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

static mp_graph *mp__body(mp_ctx *c, const char *name) {
    const mp_attr *a = mp_node_attr(c->n, name);
    return (a && a->type == MP_ATTR_GRAPH) ? a->g : NULL;
}

/* Set subgraph input i to a given type. */
static mp_status mp__set_body_input(mp_ctx *c, mp_graph *b, int i, int dtype, int rank,
                                    const int64_t *dims) {
    if (i >= b->n_inputs) return MP_OK;
    mp_value *v = &b->values[b->inputs[i]];
    v->dtype = dtype ? dtype : v->decl_dtype;
    v->rank = rank;
    v->kn = -1;
    v->iv = NULL;
    v->fv = NULL;
    v->dims = NULL;
    v->seq = NULL;
    if (rank < 0 && v->decl_rank >= 0) {
        v->rank = v->decl_rank;
        v->dims = v->decl_dims;
        return MP_OK;
    }
    if (rank > 0) {
        v->dims = mp_scratch(c, sizeof(int64_t) * (size_t)rank);
        if (!v->dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    }
    return MP_OK;
}

/* Where inference left a body output's dim unknown (it depends on the
 * iteration number, say), the body's declared output type fills it in:
 * the exporter states the fixed point there. */
static mp_status mp__refine_from_decl(mp_ctx *c, mp_graph *b) {
    for (int i = 0; i < b->n_outputs; i++) {
        mp_value *v = &b->values[b->outputs[i]];
        if (v->decl_rank < 0 || (v->rank >= 0 && v->rank != v->decl_rank)) continue;
        if (!v->dtype) v->dtype = v->decl_dtype;
        bool known = v->rank >= 0;
        for (int d = 0; known && d < v->rank; d++) known = v->dims[d] >= 0;
        if (known) continue;
        int64_t *dims = mp_scratch(c, sizeof(int64_t) * (size_t)(v->decl_rank ? v->decl_rank : 1));
        if (!dims) return mp_error(MP_ERR_NOMEM, "out of memory");
        for (int d = 0; d < v->decl_rank; d++) {
            int64_t inferred = v->rank >= 0 ? v->dims[d] : MP_DIM_ANON;
            dims[d] = inferred >= 0 ? inferred : v->decl_dims[d];
        }
        v->rank = v->decl_rank;
        v->dims = dims;
    }
    return MP_OK;
}

static mp_status mp__run_body(mp_ctx *c, mp_graph *b) {
    if (!c->infer_graph) return mp_fail(c, "its body cannot be inferred here (no inference driver)");
    mp_status st = c->infer_graph(c->m, b);
    if (st) {
        /* keep the inner message, say where it came from */
        char inner[512];
        snprintf(inner, sizeof inner, "%s", mp_last_error());
        return mp_fail(c, "in its body: %s", inner);
    }
    return mp__refine_from_decl(c, b);
}

/* ---- If ---- */

static mp_status mp__if_infer(mp_ctx *c) {
    mp_graph *t = mp__body(c, "then_branch"), *e = mp__body(c, "else_branch");
    if (!t || !e) return mp_fail(c, "needs then_branch and else_branch graphs");
    mp_status st;
    if ((st = mp__run_body(c, t)) || (st = mp__run_body(c, e))) return st;
    const int64_t *cond;
    int64_t nc;
    int taken = -1;
    if (mp_ints(c, 0, &cond, &nc) && nc == 1) taken = cond[0] ? 0 : 1;
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *a = o < t->n_outputs ? &t->values[t->outputs[o]] : NULL;
        const mp_value *b = o < e->n_outputs ? &e->values[e->outputs[o]] : NULL;
        if (!a || !b) return mp_fail(c, "branches have fewer outputs than the node");
        const mp_value *pick = taken == 1 ? b : a;
        if (taken < 0 && (a->rank != b->rank)) {
            if ((st = mp_set_out_dtype(c, o, a->dtype))) return st;
            continue;
        }
        int64_t dims[MP_MAX_RANK];
        for (int d = 0; d < pick->rank; d++)
            dims[d] = (taken >= 0 || a->dims[d] == b->dims[d]) ? pick->dims[d] : MP_DIM_ANON;
        if ((st = mp_set_out(c, o, pick->dtype, pick->rank, dims))) return st;
    }
    return MP_OK;
}

static void mp__if_cost(mp_ctx *c, mp_cost *k) {
    mp_graph *t = mp__body(c, "then_branch"), *e = mp__body(c, "else_branch");
    mp_cost a = {0}, b = {0};
    mp_graph_cost_sum(t, &a);
    mp_graph_cost_sum(e, &b);
    const int64_t *cond;
    int64_t nc;
    if (mp_ints(c, 0, &cond, &nc) && nc == 1) {
        *k = cond[0] ? a : b;
    } else {
        *k = (a.flops + a.macs >= b.flops + b.macs) ? a : b;
        k->flags |= MP_COST_BOUND;
    }
    k->bytes_read = k->bytes_written = 0;
}

/* ---- Loop ---- */

#define MP__SEQ_PASSES 4096   /* passes inferred one by one at most */
#define MP__SEQ_WORK ((uint64_t)1 << 20) /* passes x body nodes, the model's Loops together */

/* Body input i takes v's type, shape, contents and sequence. */
static void mp__set_body_value(mp_graph *b, int i, const mp_value *v) {
    if (i < b->n_inputs) mp_value_take(&b->values[b->inputs[i]], v);
}

/* A Loop that carries a sequence it inserts into (torch.tensor_split's
 * export: a pass per piece, each slicing by the iteration number) and
 * whose passes are known (a constant M, a condition the body keeps true):
 * the body is inferred pass by pass, the iteration number known, each
 * pass's carried values the last pass's outputs, so the sequence's
 * elements are known. The body's cost is the sum over the passes. *done
 * is false where this does not apply (the caller infers one pass for
 * all). */
static mp_status mp__loop_passes(mp_ctx *c, mp_graph *b, int n_carried, bool force, bool *done) {
    *done = false;
    const int64_t *mv, *cv;
    int64_t nm, nc;
    bool seq = force;
    for (int i = 0; i < n_carried; i++) {
        if (!mp_in(c, i + 2)) return MP_OK; /* one pass for all says what is wrong */
        seq = seq || mp_in(c, i + 2)->seq;
    }
    if (c->n->n_out < n_carried || b->n_inputs != n_carried + 2) return MP_OK;
    if (!seq || !mp_in(c, 0) || !mp_ints(c, 0, &mv, &nm) || nm != 1 || mv[0] < 0 || mv[0] > MP__SEQ_PASSES)
        return MP_OK;
    if (mp_in(c, 1) && (!mp_ints(c, 1, &cv, &nc) || nc != 1 || !cv[0])) return MP_OK;
    /* bounded work: a body without control flow of its own (no pass by
     * pass inside a pass), at most MP__SEQ_WORK node inferences for all
     * the model's Loops */
    uint64_t work = (uint64_t)mv[0] * (uint64_t)(b->n_nodes ? b->n_nodes : 1);
    if (work > MP__SEQ_WORK - (c->m->pass_work < MP__SEQ_WORK ? c->m->pass_work : MP__SEQ_WORK)) return MP_OK;
    for (int k = 0; k < b->n_nodes; k++)
        if (b->nodes[k].n_sub) return MP_OK;
    c->m->pass_work += work;
    int n_out = c->n->n_out;
    mp_value *state = mp_scratch(c, sizeof *state * (size_t)(n_out ? n_out : 1));
    mp_cost *sum = mp_scratch(c, sizeof *sum);
    int64_t *iters = mp_scratch(c, sizeof *iters * (size_t)(mv[0] ? mv[0] : 1));
    static const int64_t yes = 1;
    if (!state || !sum || !iters) return mp_error(MP_ERR_NOMEM, "out of memory");
    memset(state, 0, sizeof *state * (size_t)(n_out ? n_out : 1));
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < n_carried && i < n_out; i++) state[i] = *mp_in(c, i + 2);
    for (int o = n_carried; o < n_out; o++) state[o].rank = -2; /* scan output: no pass yet */
    mp_status st;
    int64_t pass = 0;
    for (; pass < mv[0]; pass++) {
        iters[pass] = pass;
        mp_value it = {.dtype = MP_DT_INT64, .rank = 0, .kn = 1, .iv = &iters[pass]};
        mp_value cond = {.dtype = MP_DT_BOOL, .rank = 0, .kn = 1, .iv = (int64_t *)&yes};
        mp__set_body_value(b, 0, &it);
        mp__set_body_value(b, 1, &cond);
        for (int i = 0; i < n_carried; i++) mp__set_body_value(b, i + 2, &state[i]);
        if ((st = mp__run_body(c, b))) return st;
        if (b->n_outputs < 1 + n_out) return MP_OK; /* the checks below say what is wrong */
        const mp_value *bc = &b->values[b->outputs[0]];
        if (bc->kn != 1 || !bc->iv) return MP_OK; /* it may stop early: one pass for all */
        mp_cost k = {0};
        mp_graph_cost_sum(b, &k);
        bool ovf = false;
        sum->macs = mp_uadd(sum->macs, k.macs, &ovf);
        sum->flops = mp_uadd(sum->flops, k.flops, &ovf);
        sum->flags |= k.flags | (ovf ? MP_COST_OVERFLOW : 0);
        for (int o = 0; o < n_out; o++) {
            const mp_value *bo = &b->values[b->outputs[o + 1]];
            if (o < n_carried) {
                state[o] = *bo;
                continue;
            }
            /* a scan output stacks the passes: dims every pass agrees on */
            mp_value *sv = &state[o];
            if (sv->rank == -2) {
                *sv = *bo;
            } else if (sv->rank != bo->rank) {
                sv->rank = -1;
            } else if (sv->rank > 0) {
                int64_t *dims = mp_scratch(c, sizeof *dims * (size_t)sv->rank);
                if (!dims) return mp_error(MP_ERR_NOMEM, "out of memory");
                for (int d = 0; d < sv->rank; d++) dims[d] = sv->dims[d] == bo->dims[d] ? bo->dims[d] : MP_DIM_ANON;
                sv->dims = dims;
            }
        }
        if (!bc->iv[0]) {
            pass++;
            break;
        }
    }
    for (int o = 0; o < n_out; o++) {
        mp_value *sv = &state[o];
        if (o < n_carried) {
            if ((st = mp_set_out(c, o, sv->dtype, sv->rank, sv->dims))) return st;
            mp_value *v = mp_out(c, o);
            if (v) v->seq = sv->seq;
            if (v && sv->kn >= 0 && sv->rank >= 0 && mp_value_numel(sv) == sv->kn)
                v->kn = sv->kn, v->iv = sv->iv, v->fv = sv->fv;
            continue;
        }
        if (sv->rank < 0 || sv->rank + 1 > MP_MAX_RANK) {
            const mp_value *bo = &b->values[b->outputs[o + 1]];
            if ((st = mp_set_out_dtype(c, o, bo->dtype))) return st;
            continue;
        }
        int64_t dims[MP_MAX_RANK];
        dims[0] = pass;
        for (int d = 0; d < sv->rank; d++) dims[d + 1] = sv->dims[d];
        if ((st = mp_set_out(c, o, sv->dtype, sv->rank + 1, dims))) return st;
    }
    /* the body as any pass sees it (the iteration number, the condition
     * and the carried values' contents not known, a dim that changed from
     * pass to pass unknown): what a plan of the body for the run reads,
     * the passes' own figures being summed above */
    if ((st = mp__set_body_input(c, b, 0, MP_DT_INT64, 0, NULL))) return st;
    if ((st = mp__set_body_input(c, b, 1, MP_DT_BOOL, 0, NULL))) return st;
    for (int i = 0; i < n_carried; i++) {
        const mp_value *v = mp_in(c, i + 2), *f = &state[i];
        int64_t dims[MP_MAX_RANK];
        int rank = v->rank == f->rank && v->rank <= MP_MAX_RANK ? v->rank : -1;
        for (int d = 0; d < rank; d++) dims[d] = v->dims[d] == f->dims[d] ? v->dims[d] : MP_DIM_ANON;
        if ((st = mp__set_body_input(c, b, i + 2, v->dtype, rank, dims))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    c->n->body_cost = sum;
    *done = true;
    return MP_OK;
}

static mp_status mp__loop_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_carried = c->n->n_in - 2;
    if (n_carried < 0) return mp_fail(c, "needs at least 2 inputs (M, cond)");
    if (b->n_inputs != n_carried + 2)
        return mp_fail(c, "body has %d inputs, expected %d", b->n_inputs, n_carried + 2);
    mp_status st;
    /* a carried sequence: the body reads one, the Loop gives one (the run
     * carries it as a value whose size changes) */
    for (int i = 0; i < n_carried; i++) {
        const mp_value *v = mp_in(c, i + 2);
        mp_value *o = mp_out(c, i);
        if (!v || !(v->flags & MP_VAL_SEQUENCE)) continue;
        b->values[b->inputs[i + 2]].flags |= MP_VAL_SEQUENCE;
        if (o) o->flags |= MP_VAL_SEQUENCE;
    }
    c->n->body_cost = NULL;
    bool done;
    if ((st = mp__loop_passes(c, b, n_carried, false, &done)) || done) return st;
    if ((st = mp__set_body_input(c, b, 0, MP_DT_INT64, 0, NULL))) return st;
    if ((st = mp__set_body_input(c, b, 1, MP_DT_BOOL, 0, NULL))) return st;
    for (int i = 0; i < n_carried; i++) {
        const mp_value *v = mp_in(c, i + 2);
        if (!v) return mp_fail(c, "loop-carried input %d is missing", i);
        if ((st = mp__set_body_input(c, b, i + 2, v->dtype, v->rank, v->dims))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs < 1 + n_carried)
        return mp_fail(c, "body has %d outputs, expected at least %d", b->n_outputs, 1 + n_carried);
    /* A carried value whose shape the body changes (a list of masks grown
     * by one a pass: torchvision's paste_masks_in_image) has the first
     * pass's shape only on the first pass: infer the body again with the
     * dims that change unknown (the rank unknown if it changes), until the
     * carried shapes hold. The body's figures are then those of any pass,
     * not the first's (its cost says unknown where a dim is). */
    for (int pass = 0; pass < 3; pass++) {
        bool changed = false;
        for (int i = 0; i < n_carried && !st; i++) {
            const mp_value *in = &b->values[b->inputs[i + 2]];
            const mp_value *bo = &b->values[b->outputs[i + 1]];
            if (in->rank < 0) continue;
            if (bo->rank != in->rank) {
                changed = true;
                st = mp__set_body_input(c, b, i + 2, in->dtype, -1, NULL);
                continue;
            }
            int64_t dims[MP_MAX_RANK];
            bool diff = false;
            for (int d = 0; d < in->rank; d++) {
                dims[d] = in->dims[d];
                if (in->dims[d] >= 0 && bo->dims[d] != in->dims[d]) dims[d] = MP_DIM_ANON, diff = true;
            }
            if (diff) {
                changed = true;
                st = mp__set_body_input(c, b, i + 2, in->dtype, in->rank, dims);
            }
        }
        if (st) return st;
        if (!changed) break;
        if ((st = mp__run_body(c, b))) return st;
    }
    const int64_t *mv;
    int64_t nm;
    int64_t trip = (mp_ints(c, 0, &mv, &nm) && nm == 1 && mv[0] >= 0) ? mv[0] : MP_DIM_ANON;
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = o + 1 < b->n_outputs ? &b->values[b->outputs[o + 1]] : NULL;
        if (!bo) return mp_fail(c, "node has more outputs than its body");
        if (o < n_carried) {
            const mp_value *init = mp_in(c, o + 2);
            /* a carried value keeps its shape where the body agrees */
            if (bo->rank == init->rank && bo->rank >= 0) {
                int64_t dims[MP_MAX_RANK];
                for (int d = 0; d < bo->rank; d++)
                    dims[d] = bo->dims[d] == init->dims[d] ? bo->dims[d] : MP_DIM_ANON;
                if ((st = mp_set_out(c, o, bo->dtype, bo->rank, dims))) return st;
            } else if ((st = mp_set_out_dtype(c, o, bo->dtype ? bo->dtype : init->dtype))) {
                return st;
            }
        } else {
            /* scan output: iterations stacked on a new first axis */
            if (bo->rank < 0 || bo->rank + 1 > MP_MAX_RANK) {
                if ((st = mp_set_out_dtype(c, o, bo->dtype))) return st;
                continue;
            }
            int64_t dims[MP_MAX_RANK];
            dims[0] = trip;
            for (int d = 0; d < bo->rank; d++) dims[d + 1] = bo->dims[d];
            if ((st = mp_set_out(c, o, bo->dtype, bo->rank + 1, dims))) return st;
        }
    }
    /* A body whose cost one pass for all leaves unknown (a Slice by the
     * iteration number: nn.EmbeddingBag's bags at offsets the export knows)
     * may be known pass by pass; where it is not, the body is left as one
     * pass for all saw it. */
    mp_cost k = {0};
    mp_graph_cost_sum(b, &k);
    if (!(k.flags & MP_COST_UNKNOWN)) return MP_OK;
    mp_value *saved = mp_scratch(c, sizeof *saved * (size_t)b->n_inputs);
    if (!saved) return mp_error(MP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < b->n_inputs; i++) saved[i] = b->values[b->inputs[i]];
    if ((st = mp__loop_passes(c, b, n_carried, true, &done)) || done) return st;
    for (int i = 0; i < b->n_inputs; i++) b->values[b->inputs[i]] = saved[i];
    return mp__run_body(c, b);
}

static void mp__scale_cost(mp_cost *k, uint64_t times) {
    bool ovf = false;
    k->macs = mp_umul(k->macs, times, &ovf);
    k->flops = mp_umul(k->flops, times, &ovf);
    if (ovf) k->flags |= MP_COST_OVERFLOW;
}

static void mp__loop_cost(mp_ctx *c, mp_cost *k) {
    if (c->n->body_cost) { /* inferred pass by pass: the passes' sum */
        uint32_t fl = k->flags;
        *k = *c->n->body_cost;
        k->flags |= fl & (uint32_t)MP_COST_OVERFLOW;
        k->bytes_read = k->bytes_written = 0;
        return;
    }
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    const int64_t *mv;
    int64_t nm;
    if (mp_in(c, 0) && mp_ints(c, 0, &mv, &nm) && nm == 1 && mv[0] >= 0) {
        mp__scale_cost(k, (uint64_t)mv[0]);
        if (mp_in(c, 1)) k->flags |= MP_COST_BOUND; /* cond may stop it earlier */
    } else {
        k->flags |= MP_COST_PER_ITER;
    }
}

/* ---- Scan (opset 9+) ---- */

static mp_status mp__scan_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", -1);
    int n_state = c->n->n_in - n_scan;
    if (n_scan < 1 || n_state < 0) return mp_fail(c, "bad num_scan_inputs %d", n_scan);
    if (b->n_inputs != c->n->n_in) return mp_fail(c, "body has %d inputs, node has %d", b->n_inputs, c->n->n_in);
    const int64_t *in_axes = NULL, *out_axes = NULL;
    int n_in_axes = mp_attr_ints(c->n, "scan_input_axes", &in_axes);
    int n_out_axes = mp_attr_ints(c->n, "scan_output_axes", &out_axes);
    mp_status st;
    int64_t seq = MP_DIM_ANON;
    for (int i = 0; i < c->n->n_in; i++) {
        const mp_value *v = mp_in(c, i);
        if (!v) return mp_fail(c, "input %d is missing", i);
        if (i < n_state || v->rank < 0) {
            if ((st = mp__set_body_input(c, b, i, v->dtype, v->rank, v->dims))) return st;
            continue;
        }
        int s = i - n_state;
        int ax = mp_axis(s < n_in_axes ? in_axes[s] : 0, v->rank);
        if (ax < 0) return mp_fail(c, "scan input %d: axis out of range", s);
        int64_t dims[MP_MAX_RANK];
        int r = 0;
        for (int d = 0; d < v->rank; d++)
            if (d != ax) dims[r++] = v->dims[d];
        seq = v->dims[ax];
        if ((st = mp__set_body_input(c, b, i, v->dtype, r, dims))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs != c->n->n_out) return mp_fail(c, "body has %d outputs, node has %d", b->n_outputs, c->n->n_out);
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = &b->values[b->outputs[o]];
        if (o < n_state || bo->rank < 0) {
            if ((st = mp_set_out_like(c, o, bo))) return st;
            continue;
        }
        int s = o - n_state;
        int ax = mp_axis(s < n_out_axes ? out_axes[s] : 0, bo->rank + 1);
        if (ax < 0 || bo->rank + 1 > MP_MAX_RANK) return mp_fail(c, "scan output %d: bad axis", s);
        int64_t dims[MP_MAX_RANK];
        for (int d = 0, src = 0; d < bo->rank + 1; d++) dims[d] = d == ax ? seq : bo->dims[src++];
        if ((st = mp_set_out(c, o, bo->dtype, bo->rank + 1, dims))) return st;
    }
    return MP_OK;
}

/* Scan before opset 9: input 0 is an optional sequence_lens, every other
 * input and output has a batch axis 0, and scan inputs and outputs scan
 * along axis 1. */
static mp_status mp__scan8_infer(mp_ctx *c) {
    mp_graph *b = mp__body(c, "body");
    if (!b) return mp_fail(c, "needs a body graph");
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", -1);
    int n_in = c->n->n_in - 1; /* without sequence_lens */
    int n_state = n_in - n_scan;
    if (n_scan < 1 || n_state < 0) return mp_fail(c, "bad num_scan_inputs %d", n_scan);
    if (b->n_inputs != n_in) return mp_fail(c, "body has %d inputs, node has %d", b->n_inputs, n_in);
    mp_status st;
    int64_t batch = MP_DIM_ANON, seq = MP_DIM_ANON;
    for (int i = 0; i < n_in; i++) {
        const mp_value *v = mp_in(c, i + 1);
        if (!v) return mp_fail(c, "input %d is missing", i + 1);
        int drop = i < n_state ? 1 : 2; /* batch, and the scan axis */
        if (v->rank < drop) {
            if ((st = mp__set_body_input(c, b, i, v->dtype, -1, NULL))) return st;
            continue;
        }
        batch = v->dims[0];
        if (i >= n_state) seq = v->dims[1];
        if ((st = mp__set_body_input(c, b, i, v->dtype, v->rank - drop, v->dims + drop))) return st;
    }
    if ((st = mp__run_body(c, b))) return st;
    if (b->n_outputs != c->n->n_out) return mp_fail(c, "body has %d outputs, node has %d", b->n_outputs, c->n->n_out);
    for (int o = 0; o < c->n->n_out; o++) {
        const mp_value *bo = &b->values[b->outputs[o]];
        int add = o < n_state ? 1 : 2;
        if (bo->rank < 0 || bo->rank + add > MP_MAX_RANK) {
            if ((st = mp_set_out_dtype(c, o, bo->dtype))) return st;
            continue;
        }
        int64_t dims[MP_MAX_RANK];
        dims[0] = batch;
        if (add == 2) dims[1] = seq;
        for (int d = 0; d < bo->rank; d++) dims[d + add] = bo->dims[d];
        if ((st = mp_set_out(c, o, bo->dtype, bo->rank + add, dims))) return st;
    }
    return MP_OK;
}

static void mp__scan8_cost(mp_ctx *c, mp_cost *k) {
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", 1);
    const mp_value *v = mp_in(c, c->n->n_in - n_scan);
    if (v && v->rank >= 2 && v->dims[0] >= 0 && v->dims[1] >= 0) {
        bool ovf = false;
        mp__scale_cost(k, mp_umul((uint64_t)v->dims[0], (uint64_t)v->dims[1], &ovf));
        if (ovf) k->flags |= MP_COST_OVERFLOW;
    } else {
        k->flags |= MP_COST_PER_ITER;
    }
}

static void mp__scan_cost(mp_ctx *c, mp_cost *k) {
    mp_cost body = {0};
    mp_graph_cost_sum(mp__body(c, "body"), &body);
    *k = body;
    k->bytes_read = k->bytes_written = 0;
    int n_scan = (int)mp_attr_i(c->n, "num_scan_inputs", 1);
    int first = c->n->n_in - n_scan;
    const mp_value *v = mp_in(c, first);
    const int64_t *in_axes = NULL;
    int n_in_axes = mp_attr_ints(c->n, "scan_input_axes", &in_axes);
    int ax = v ? mp_axis(n_in_axes > 0 ? in_axes[0] : 0, v->rank) : -1;
    if (ax >= 0 && v->dims[ax] >= 0)
        mp__scale_cost(k, (uint64_t)v->dims[ax]);
    else
        k->flags |= MP_COST_PER_ITER;
}

const mp_op mp_ops_control[] = {
    {"", "If", 1, mp__if_infer, mp__if_cost, 0, 0},
    {"", "Loop", 1, mp__loop_infer, mp__loop_cost, 0, 0},
    {"", "Scan", 8, mp__scan8_infer, mp__scan8_cost, 0, 0},
    {"", "Scan", 9, mp__scan_infer, mp__scan_cost, 0, 0},
};
const int mp_ops_control_count = (int)MP_ARRAY_LEN(mp_ops_control);
