/* The timed passes' step times for writers outside the run (stamps.h). */
#include "run/run.h"
#include "run/stamps.h"

bool mp_run_stamps_get(const mp_exec *pl, mp_run_stamps *out) {
    memset(out, 0, sizeof *out);
    if (!pl || !pl->t_start || !pl->t_step || pl->t_iters <= 0) return false;
    out->m = pl->m;
    out->g = pl->g;
    out->n_steps = pl->n_steps;
    out->iters = pl->t_iters;
    out->start = pl->t_start;
    out->dur = pl->t_step;
    return true;
}

void mp_run_stamp_step_get(const mp_exec *pl, int s, mp_run_stamp_step *out) {
    const mp_step *sp = &pl->steps[s];
    out->node = sp->node;
    out->nodes = sp->nodes;
    out->n_nodes = sp->n_nodes;
    out->module = sp->module;
    out->group = sp->group;
    out->kernel = sp->kern ? sp->kern->name : NULL;
}
