/* The training profile: a torch.profiler trace of real training steps
 * (module ranges "nn.Module: LABEL" / "nn.Module.backward: LABEL", written
 * by the Python FlopsProfiler or by with_modules) joined, module by module,
 * with the static profile of the same model's ONNX export. The binding
 * names the modules (named_modules order) and where each sits in the
 * trace's tree; times come from the trace analysis, counts from the static
 * profile. Nothing here formats output (src/report/train.c does). */
#include "train/train.h"

#include "analyze/profile.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

void mp_train_free(mp_train *t) {
    if (!t) return;
    mp_arena_free(&t->arena);
    free(t);
}

/* The index of the module whose path is path[0..len) in a module array,
 * or -1. Paths are compared whole. */
static int find_path(const mp_module *mods, int n, const char *path, size_t len) {
    for (int i = 0; i < n; i++)
        if (mods[i].path && strlen(mods[i].path) == len && memcmp(mods[i].path, path, len) == 0)
            return i;
    return -1;
}

/* Is `parent` the name `name` sits directly under: "a.b" for "a.b.c",
 * "" (the model) for "a"? */
static bool is_parent(const char *parent, const char *name) {
    const char *dot = strrchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : 0;
    return strlen(parent) == n && strncmp(parent, name, n) == 0;
}

/* Rows and the tree from the binding's module list. */
static mp_status build(mp_train *t, const mp_torch_module *mods, int n) {
    t->rows = mp_arena_calloc(&t->arena, (size_t)n, sizeof *t->rows);
    t->mods = mp_arena_calloc(&t->arena, (size_t)n, sizeof *t->mods);
    int *stack = malloc(sizeof *stack * (size_t)n);
    int *last = malloc(sizeof *last * (size_t)n);
    if (!t->rows || !t->mods || !stack || !last) {
        free(stack);
        free(last);
        return mp_error(MP_ERR_NOMEM, "out of memory");
    }
    int sp = 0;
    for (int i = 0; i < n; i++) {
        const mp_torch_module *m = &mods[i];
        if (!m->name || !m->class_name || !m->trace_path) {
            free(stack);
            free(last);
            return mp_error(MP_ERR_USAGE, "training profile: module %d has no name, class or trace path", i);
        }
        if ((i == 0) != (m->name[0] == 0)) {
            free(stack);
            free(last);
            return mp_error(MP_ERR_USAGE,
                            "training profile: module %d ('%s'): the model (name \"\") must come first "
                            "and only once (named_modules order)",
                            i, m->name);
        }
        /* named_modules is pre-order: the parent is on the stack */
        while (sp > 0 && !is_parent(t->rows[stack[sp - 1]].name, m->name)) sp--;
        if (i > 0 && sp == 0) {
            free(stack);
            free(last);
            return mp_error(MP_ERR_USAGE,
                            "training profile: module '%s' comes before its parent (named_modules "
                            "order puts each module after its parent)",
                            m->name);
        }
        mp_train_row *r = &t->rows[i];
        r->name = mp_arena_strdup(&t->arena, m->name);
        r->cls = mp_arena_strdup(&t->arena, m->class_name);
        r->params = m->params > 0 ? (uint64_t)m->params : 0;
        r->params_declared = m->params >= 0;
        r->export_calls = m->export_calls > 0 ? m->export_calls : 1;
        mp_module *md = &t->mods[i];
        int parent = sp ? stack[sp - 1] : -1;
        const char *dot = strrchr(m->name, '.');
        md->name = parent < 0 ? r->cls : dot ? r->name + (dot - m->name) + 1 : r->name;
        md->path = r->name;
        md->cls = r->cls;
        md->parent = parent;
        md->depth = parent < 0 ? 0 : t->mods[parent].depth + 1;
        md->first_child = md->last_child = md->next_sibling = -1;
        /* a module inside an ignored one is left out with it */
        r->ignored = m->ignored || (parent >= 0 && t->rows[parent].ignored);
        if (parent >= 0) {
            if (t->mods[parent].first_child < 0)
                t->mods[parent].first_child = i;
            else
                t->mods[last[parent]].next_sibling = i;
            last[parent] = i;
            t->mods[parent].last_child = i;
        }
        if (md->depth > t->max_depth) t->max_depth = md->depth;
        stack[sp++] = i;
        last[i] = -1;
        if (!r->name || !r->cls) {
            free(stack);
            free(last);
            return mp_error(MP_ERR_NOMEM, "out of memory");
        }
    }
    free(stack);
    free(last);
    t->n = n;
    return MP_OK;
}

/* Times and calls from the trace analysis: each of the module's paths in
 * the trace's tree (a module called from several places has several). */
static void join_trace(mp_train *t, const mp_torch_module *mods, const mp_trace *tr) {
    t->cpu_time = tr->cpu_modules;
    t->n_steps = tr->n_steps;
    t->profiler_steps = tr->n_steps > 0 && tr->steps[0].name &&
                        strncmp(tr->steps[0].name, "ProfilerStep", 12) == 0;
    for (int s = 0; s < tr->n_steps; s++) {
        t->wall_s += (double)tr->steps[s].wall * 1e-9;
        t->optimizer_s += (double)tr->steps[s].optimizer * 1e-9;
    }
    /* what the profiler recorded: each costs (mp_train_set_overhead) */
    for (size_t i = 0; i < tr->raw.n_spans; i++) {
        const mp_tspan *sp = &tr->raw.spans[i];
        if (sp->kind == MP_TS_MODULE) t->overhead.ranges++;
        else if (sp->kind == MP_TS_OP) t->overhead.ops++;
        else if (sp->kind == MP_TS_ANNOT && strncmp(tr->raw.names[sp->name], "Optimizer.step#", 15) == 0)
            t->opt_steps++;
    }
    for (int i = 0; i < t->n; i++) {
        mp_train_row *r = &t->rows[i];
        for (const char *p = mods[i].trace_path; *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            int k = len ? find_path(tr->mods, tr->n_mods, p, len) : -1;
            if (k >= 0) {
                r->in_trace = true;
                r->calls += tr->mfig[k].calls;
                r->fwd_s += (double)tr->mfig[k].fwd * 1e-9;
                r->bwd_s += (double)tr->mfig[k].bwd * 1e-9;
            }
            p += len + (nl != NULL);
        }
    }
}

/* v x num / den, exactly when den divides num (the usual case: one call
 * exported, whole calls traced). */
static uint64_t scale(uint64_t v, int64_t num, int64_t den) {
    if (num <= 0 || den <= 0) return 0;
    bool ovf = false;
    if (num % den == 0) return mp_umul(v, (uint64_t)(num / den), &ovf);
    return (uint64_t)((double)v * (double)num / (double)den + 0.5);
}

/* Params, MACs and FLOPs from the static profile. A module's MACs and
 * FLOPs cover the calls its time covers: the exported forward's figures
 * (its export_calls calls) scaled to its calls in the trace. Without
 * module ranges in the trace (no module was found there) each module
 * counts one exported forward. */
static void join_static(mp_train *t, const mp_profile *p) {
    const mp_model *m = p->m;
    bool traced = t->rows[0].in_trace;
    for (int i = 0; i < t->n; i++) {
        mp_train_row *r = &t->rows[i];
        int k = i == 0 ? 0 : mp_strmap_get(&m->module_paths, r->name);
        if (k < 0 || k >= m->n_modules) continue;
        const mp_fig *f = &p->mods[k];
        r->in_static = true;
        /* the model's own count where the binding gave it: every parameter
         * of the module, a tensor the forward does not read (an unused
         * head) too, a buffer never (the export cannot tell a buffer read
         * as an operand from a weight: docs/COUNTING.md) */
        if (!r->params_declared) r->params = f->params;
        if (r->ignored) continue;
        int64_t calls = traced ? r->calls : r->export_calls;
        r->macs = scale(f->macs, calls, r->export_calls);
        r->flops = scale(f->flops, calls, r->export_calls);
    }
}

/* A module never called while the trace ran, whose children were (a
 * ModuleList, a ModuleDict: containers have no forward): its time and
 * counts are its children's, summed (as DeepSpeed's get_module_duration
 * does for a module without time). named_modules order puts children after
 * their parent: walking back sums the deepest first. counts_only: the
 * containers are known, their counts summed again (mp_train_set_shapes). */
static void containers(mp_train *t, bool counts_only) {
    if (!t->rows[0].in_trace) return;
    for (int i = t->n - 1; i > 0; i--) {
        const mp_train_row *c = &t->rows[i];
        mp_train_row *r = &t->rows[t->mods[i].parent];
        if (r->in_trace || r->ignored || !(c->in_trace || c->container)) continue;
        r->container = true;
        if (!counts_only) {
            r->fwd_s += c->fwd_s;
            r->bwd_s += c->bwd_s;
        }
        r->macs += c->macs;
        r->flops += c->flops;
    }
}

/* The model loaded, its ignored modules left out, and profiled. */
static mp_status profile_model(const mp_train *t, const char *path, mp_model **m,
                               mp_profile **p) {
    mp_status st = mp_model_load(path, m);
    for (int i = 1; !st && i < t->n; i++) {
        const mp_train_row *r = &t->rows[i];
        /* the outermost ignored module; one the export does not hold ran
         * no operator: nothing to leave out */
        if (r->ignored && !t->rows[t->mods[i].parent].ignored &&
            mp_strmap_get(&(*m)->module_paths, r->name) >= 0)
            st = mp_model_ignore_module(*m, r->name);
    }
    if (!st) st = mp_profile_static(*m, p);
    return st;
}

mp_status mp_train_set_overhead(mp_train *t, double op_record_s, double range_s) {
    if (!t) return mp_error(MP_ERR_USAGE, "mp_train_set_overhead: no training profile");
    if (!(op_record_s >= 0 && op_record_s < 1) || !(range_s >= 0 && range_s < 1))
        return mp_error(MP_ERR_USAGE, "mp_train_set_overhead: costs %g s and %g s are not the "
                        "cost of one record", op_record_s, range_s);
    t->overhead.known = true;
    t->overhead.op_s = op_record_s;
    t->overhead.range_s = range_s;
    /* what the profiler cost over the trace, for the writers to read */
    t->overhead.total_s = (double)t->overhead.ops * op_record_s + (double)t->overhead.ranges * range_s;
    return MP_OK;
}

mp_status mp_train_set_clock(mp_train *t, int before_calls, double before_iter_s,
                             double before_fwd_s, int profiled_calls, double profiled_iter_s,
                             double profiled_fwd_s) {
    if (!t) return mp_error(MP_ERR_USAGE, "mp_train_set_clock: no training profile");
    double v[4] = {before_iter_s, before_fwd_s, profiled_iter_s, profiled_fwd_s};
    for (int i = 0; i < 4; i++)
        if (!(v[i] >= 0) || v[i] > 1e9)
            return mp_error(MP_ERR_USAGE, "mp_train_set_clock: time %g s is not a duration", v[i]);
    if (before_calls < 0 || profiled_calls < 0)
        return mp_error(MP_ERR_USAGE, "mp_train_set_clock: negative call count");
    t->clock = (mp_train_clock){before_calls, profiled_calls, before_iter_s, before_fwd_s,
                                profiled_iter_s, profiled_fwd_s};
    return MP_OK;
}

mp_status mp_train_open(const char *trace_path, const char *model_path,
                        const mp_torch_module *mods, int n, mp_train **out) {
    if (!out) return mp_error(MP_ERR_USAGE, "mp_train_open: no output pointer");
    *out = NULL;
    if (!trace_path || !mods || n <= 0)
        return mp_error(MP_ERR_USAGE, "mp_train_open: needs a trace and at least the model's module");
    mp_train *t = calloc(1, sizeof *t);
    if (!t) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_arena_init(&t->arena);
    mp_status st = build(t, mods, n);
    if (!st) {
        t->trace_path = mp_arena_strdup(&t->arena, trace_path);
        t->model_path = model_path ? mp_arena_strdup(&t->arena, model_path) : NULL;
        mp_trace_options o = {0, -1, -1};
        mp_trace tr;
        st = mp_trace_open(trace_path, &o, &tr);
        if (!st) {
            join_trace(t, mods, &tr);
            mp_trace_free(&tr);
        }
    }
    if (!st && model_path) {
        mp_model *m = NULL;
        mp_profile *p = NULL;
        st = profile_model(t, model_path, &m, &p);
        if (!st) join_static(t, p);
        mp_profile_free(p);
        mp_model_free(m);
    }
    if (!st) containers(t, false);
    if (st) {
        mp_train_free(t);
        return st;
    }
    t->n_shapes = 1;
    *out = t;
    return MP_OK;
}

mp_status mp_train_set_shapes(mp_train *t, const char *const *model_paths, const int64_t *calls, int n) {
    if (!t || !model_paths || !calls || n < 1)
        return mp_error(MP_ERR_USAGE, "mp_train_set_shapes: needs a training profile and at least one export");
    for (int s = 0; s < n; s++)
        if (!model_paths[s] || calls[s] < 0)
            return mp_error(MP_ERR_USAGE, "mp_train_set_shapes: shape %d has no export or a negative count", s);
    mp_train_row *sum = calloc((size_t)t->n, sizeof *sum);
    if (!sum) return mp_error(MP_ERR_NOMEM, "out of memory");
    mp_status st = MP_OK;
    bool ovf = false;
    for (int s = 0; s < n && !st; s++) {
        mp_model *m = NULL;
        mp_profile *p = NULL;
        st = profile_model(t, model_paths[s], &m, &p);
        for (int i = 0; !st && i < t->n; i++) {
            const mp_train_row *r = &t->rows[i];
            int k = i == 0 ? 0 : mp_strmap_get(&m->module_paths, r->name);
            if (r->ignored || k < 0 || k >= m->n_modules) continue;
            /* the export's figures cover one forward of that shape */
            sum[i].in_static = true;
            sum[i].macs = mp_uadd(sum[i].macs, mp_umul(p->mods[k].macs, (uint64_t)calls[s], &ovf), &ovf);
            sum[i].flops = mp_uadd(sum[i].flops, mp_umul(p->mods[k].flops, (uint64_t)calls[s], &ovf), &ovf);
        }
        mp_profile_free(p);
        mp_model_free(m);
    }
    if (!st) {
        for (int i = 0; i < t->n; i++) {
            mp_train_row *r = &t->rows[i];
            if (r->ignored) continue;
            r->in_static = r->in_static || sum[i].in_static;
            r->macs = sum[i].macs;
            r->flops = sum[i].flops;
        }
        containers(t, true);
        t->n_shapes = n;
    }
    free(sum);
    return st;
}
