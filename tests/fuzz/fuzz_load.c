/* libFuzzer target: arbitrary bytes -> load -> dims -> infer -> cost ->
 * text and JSON reports -> free. Build and run with `make fuzz` (see
 * docs/SECURITY.md); seeds are the fixtures in models/.
 *
 * The model is decoded from memory (mp_model_load_memory): nothing is
 * opened, external data counts as absent. Limits are lowered so that one
 * input cannot take more than a fraction of a second or a few hundred MB;
 * the defaults are tested by the malformed suite. The last input byte
 * picks the values given to the model's symbolic dims, from ordinary
 * sizes to ones whose products overflow 64 bits, one for all or mixed.
 *
 * Small graphs are then planned and run (mp_exec_create, one timed pass
 * through mp_profile_run, the outputs read, the measured reports): at most
 * 50 MFLOPs (and as much hidden work: pooling windows, Loop trip counts)
 * and 16 MB of activations, 64 MB for the whole run, one thread,
 * the peak given (no calibration GEMM). A plan may refuse a graph (no
 * kernel, limit) and a run may fail (an index out of range): with a
 * message, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "ops/ops.h"
#include "modelprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void report(const mp_profile *p, mp_format fmt, int depth, int top) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = fmt;
    o.depth = depth;
    o.top = top;
    (void)mp_report_write(p, &o, f);
    fclose(f);
    free(buf);
}

/* Work the counted FLOPs do not show, bounded like them: a pooling
 * window is counted by its input or output (DeepSpeed's rule), not by
 * output x window; a Loop with a constant trip count runs its body that
 * many times (a trip count from a graph input is random 0 or 1). */
static bool hidden_work(const mp_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const mp_node *n = &g->nodes[i];
        const int64_t *ks;
        int nk = mp_attr_ints(n, "kernel_shape", &ks);
        if (nk > 0) {
            int64_t out = n->n_out > 0 && n->out[0] >= 0 ? mp_value_numel(&g->values[n->out[0]]) : -1;
            double work = out < 0 ? 1e18 : (double)out;
            for (int j = 0; j < nk; j++) work *= ks[j] > 0 ? (double)ks[j] : 1.0;
            if (work > 5e7) return true;
        }
        if (mp_streq(n->op, "Loop") && n->n_in > 0 && n->in[0] >= 0) {
            const mp_value *m = &g->values[n->in[0]];
            if (m->iv && m->kn > 0 && m->iv[0] > 1000) return true;
        }
        for (int k = 0; k < n->n_sub; k++)
            if (n->sub[k] && hidden_work(n->sub[k])) return true;
    }
    return false;
}

static void run_small(const mp_model *m, mp_profile *p) {
    mp_totals t;
    mp_profile_totals(p, &t);
    if (t.unknown_nodes || t.flops > 50000000 || t.activation_peak_bytes > (16u << 20) ||
        t.bytes_read > (64u << 20) || t.nodes > 2000 || hidden_work(m->graph))
        return;
    mp_run_options o;
    mp_run_options_default(&o);
    o.warmup = 0;
    o.iters = 1;
    o.threads = 1;
    o.progress = 0;
    o.peak_gflops = 1;
    o.max_memory = 64 << 20;
    mp_exec *pl = NULL;
    if (mp_exec_create(p, &o, &pl) != MP_OK) {
        if (!mp_last_error()[0]) abort();
        return;
    }
    if (mp_profile_run(pl, p) == MP_OK) {
        for (int i = 0; i < mp_exec_output_count(pl); i++) {
            const char *name;
            int dt, rank;
            const int64_t *dims;
            const void *d;
            (void)mp_exec_output(pl, i, &name, &dt, &rank, &dims, &d);
        }
        report(p, MP_FORMAT_TEXT, -1, 3);
        report(p, MP_FORMAT_JSON, -1, 3);
    } else if (!mp_last_error()[0]) {
        abort();
    }
    mp_exec_free(pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int64_t dim_values[] = {1, 2, 3, 7, 64, 224, 0, INT64_C(1) << 20,
                                         INT64_C(1) << 33, INT64_C(1) << 62};
    mp_limits lim;
    mp_limits_default(&lim);
    lim.max_nodes = 50000;
    lim.max_values = 100000;
    lim.max_attr_elems = 1 << 20;
    lim.max_memory = 256 << 20;
    lim.max_depth = 32;
    mp_model *m = NULL;
    if (mp_model_load_memory(data, size, "fuzz.onnx", &lim, &m) != MP_OK) {
        if (!mp_last_error()[0]) abort(); /* every failure has a message */
        return 0;
    }
    uint8_t sel = size ? data[size - 1] : 0;
    int nv = (int)(sizeof dim_values / sizeof dim_values[0]);
    /* one value for every dim, or (high bit) a mix: zeros next to huge
     * dims are where products of the other dims overflow */
    for (int s = 1, k = 0; s < m->n_syms; s++)
        if (m->syms[s].on_input) {
            int vi = (sel & 0x80) ? (sel + 3 * k++) % nv : sel % nv;
            (void)mp_model_set_dim(m, m->syms[s].name, dim_values[vi]);
        }
    mp_profile *p = NULL;
    if (mp_profile_static(m, &p) == MP_OK) {
        mp_totals t;
        mp_profile_totals(p, &t);
        report(p, MP_FORMAT_TEXT, (sel & 0x10) ? 2 : -1, (sel & 0x20) ? -1 : 3);
        report(p, MP_FORMAT_JSON, -1, 3);
        if (sel & 0x08) run_small(m, p);
        /* a second profile of the same model must work too */
        if (sel & 0x40) {
            mp_profile *p2 = NULL;
            if (mp_profile_static(m, &p2) == MP_OK) mp_profile_free(p2);
        }
    } else if (!mp_last_error()[0]) {
        abort();
    }
    mp_profile_free(p);
    mp_model_free(m);
    return 0;
}
