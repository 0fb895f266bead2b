/* Traces of a PyTorch built without Kineto (Debian's torch 1.13):
 * export_chrome_trace writes a bare JSON array of
 *   {"name", "ph": "X", "ts", "dur", "tid", "pid": "CPU functions", "args": {}}
 * with integer microseconds and no "cat", shapes, ids, flows or memory
 * events. The reader (read.c) takes the array as the traceEvents of such a
 * trace and asks here what each event is, from its name alone.
 *
 * The range naming convention (docs/JSON.md, "Module ranges"), written by
 * modelprof.FlopsProfiler with record_function (any trace, any category):
 *   "nn.Module: NAME"           a module's forward call (Kineto's own name)
 *   "nn.Module.backward: NAME"  the same module's backward: from the first
 *                               gradient reaching its outputs to the last
 *                               leaving through its inputs
 * NAME is Class_K (K counts the modules of that class in named_modules()
 * order); nesting gives the module tree. */
#include "trace/trace.h"

#include <string.h>

static bool has_prefix(const char *s, size_t n, const char *pre, size_t *plen) {
    size_t k = strlen(pre);
    if (n <= k || memcmp(s, pre, k) != 0) return false;
    if (plen) *plen = k;
    return true;
}

int mp_trace_module_range(const char *name, size_t n, size_t *prefix) {
    if (!name) return 0;
    if (has_prefix(name, n, "nn.Module: ", prefix)) return 1;
    if (has_prefix(name, n, "nn.Module.backward: ", prefix)) return 2;
    return 0;
}

int mp_trace_module_name(const mp_trace_raw *t, const mp_tspan *s) {
    if (!s->rf) return (int)s->name;
    const char *n = t->names[s->name];
    size_t len = strlen(n), pre = 0;
    if (!mp_trace_module_range(n, len, &pre)) return -1;
    return mp_strmap_getn(&t->names_map, n + pre, len - pre);
}

int mp_trace_legacy_kind(const char *name, size_t n) {
    if (!name) return MP_TS_OP;
    if (mp_trace_module_range(name, n, NULL)) return MP_TS_MODULE;
    /* record_function ranges PyTorch itself writes (Kineto's
     * user_annotation); every other name is an operator (cpu_op) */
    static const char *const annots[] = {"ProfilerStep#", "Optimizer.step#",
                                         "Optimizer.zero_grad#", "enumerate(DataLoader)#"};
    for (size_t i = 0; i < MP_ARRAY_LEN(annots); i++)
        if (has_prefix(name, n, annots[i], NULL)) return MP_TS_ANNOT;
    return MP_TS_OP;
}

/* A trace with no device rows (a CPU-only run): a module's forward and
 * backward times are the CPU wall time of its ranges, "nn.Module: " and
 * "nn.Module.backward: " (inclusive of submodules: no roll-up). Returns
 * false, touching nothing, when the trace has device rows (the device time
 * of the module's kernels is used then). */
bool mp_trace_cpu_modules(mp_trace *t, const mp_tspan *sp, size_t n, const int32_t *mod,
                          size_t n_dev) {
    if (n_dev > 0 || t->n_mods <= 0) return false;
    t->cpu_modules = true;
    for (size_t i = 0; i < n; i++) {
        if (sp[i].kind != MP_TS_MODULE || mod[i] < 0 || mod[i] >= t->n_mods) continue;
        int64_t dur = sp[i].end - sp[i].ts;
        if (sp[i].bwd) MP_SADD(t->mfig[mod[i]].bwd, dur);
        else MP_SADD(t->mfig[mod[i]].fwd, dur);
    }
    /* the root ("trace") holds its top-level modules */
    for (int m = 1; m < t->n_mods; m++) {
        if (t->mods[m].parent != 0) continue;
        MP_SADD(t->mfig[0].fwd, t->mfig[m].fwd);
        MP_SADD(t->mfig[0].bwd, t->mfig[m].bwd);
    }
    return true;
}
