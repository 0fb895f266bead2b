/* Cost as exact formulas in the free symbolic dims (docs/COUNTING.md,
 * "Formulas"; docs/DESIGN.md says why it is built this way).
 *
 * The counting rules stay as they are: the static profile is computed at
 * integer points, and from them each node's figures (MACs, FLOPs, bytes
 * read and written, activation bytes), the live activation bytes at each
 * step, and the parameters of each module and of the model are
 * reconstructed as polynomials, in exact integer arithmetic:
 *
 *   1. lines: along each free dim, MP_FORMULA_DEGREE + 2 consecutive
 *      values from the base point (every dim at `base`). The finite
 *      differences of each series give its degree along that dim; a
 *      series whose (MP_FORMULA_DEGREE + 1)-th difference is not 0 is no
 *      polynomial of bounded degree there (a floor, a clamp).
 *   2. grid: the tensor grid of (degree + 1) values per dim. Newton's
 *      forward differences on it give the coefficients in the binomial
 *      basis; they are turned into monomial coefficients over one common
 *      denominator (the product of degree! over the dims) without
 *      floating point.
 *   3. ranges: along each dim, the profile is computed far out (and at 1):
 *      where it fails or a cost turns unknown, a bisection finds the last
 *      value at which it holds, and the formula is said to hold up to
 *      there, naming the node that fails one step past.
 *   4. checks: at further points (all dims 1, (7, 300), (300, 7), just
 *      past the grid, far out within the ranges) every series must equal
 *      its polynomial exactly; module and model sums too. A mismatch
 *      rebuilds once with degree MP_FORMULA_DEGREE in every dim (a
 *      coefficient that vanished at the base value hides a degree from the
 *      lines); a series that still differs is left out, its node named.
 *
 * The model's and each module's formulas are the sums of their nodes'
 * (those left out excepted); parameters, counted once per module, have
 * series of their own. The activation peak is the maximum over the steps
 * of the live bytes: the steps whose polynomial no other dominates (for
 * every dim >= 1) are kept; one left means the peak is that polynomial. */
#include "analyze/analyze.h"
#include "analyze/formula.h"

#include <stdio.h>
#include <stdlib.h>

typedef __int128 fx_i128;

const char *const mp_formula_field_key[MP_FF_COUNT] = {
#define MP__FF(id, key) key,
    MP_FORMULA_FIELDS(MP__FF)
#undef MP__FF
};

/* A node's series: its cost figures, in this order. */
#define FX_NF 5
static const int fx_node_field[FX_NF] = {MP_FF_MACS, MP_FF_FLOPS, MP_FF_BYTES_READ,
                                         MP_FF_BYTES_WRITTEN, MP_FF_ACT_BYTES};

static uint64_t fx_cost_field(const mp_cost *c, int f) {
    switch (f) {
    case 0: return c->macs;
    case 1: return c->flops;
    case 2: return c->bytes_read;
    case 3: return c->bytes_written;
    default: return c->act_bytes;
    }
}
static uint64_t fx_fig_field(const mp_fig *g, int f) {
    switch (f) {
    case 0: return g->macs;
    case 1: return g->flops;
    case 2: return g->bytes_read;
    case 3: return g->bytes_written;
    default: return g->act_bytes;
    }
}

/* Values of the free dims the profile is first tried at (the base). */
static const int64_t fx_bases[] = {2, 16, 64};
/* The far end of a range along a dim of degree d: x^d stays near 2^40
 * (exact 128-bit checks), at most 65536. */
static int64_t fx_far(int d) { return d <= 2 ? 65536 : d == 3 ? 8192 : 1024; }

/* One profile's figures at point x. */
typedef struct fx_snap {
    int64_t x[MP_FORMULA_VARS];
    bool failed;         /* the profile failed: why */
    char *why;
    int unknown_node;    /* first node (in order) whose cost is unknown or past 64 bits here
                            and was known at the base; -1 none */
    bool overflow;       /* a total passed 64 bits */
    uint64_t *v;         /* the series (NULL: not kept) */
    uint8_t *unk;        /* per node: cost unknown or past 64 bits */
    uint64_t *mod;       /* per module: the five summed figures */
    uint64_t tot[FX_NF];
    uint64_t peak;
    bool check;          /* a point the formulas are checked at */
    int along;           /* a range end along this dim; -1 */
} fx_snap;

typedef struct fx {
    mp_profile *p;
    mp_model *m;
    mp_graph *g;
    mp_formulas *F;
    int k;                        /* free dims */
    int N, M;                     /* nodes, modules */
    size_t S;                     /* series: N*FX_NF node figures, N live steps, M module params, 1 */
    int64_t x0;
    int deg[MP_FORMULA_VARS];
    fx_snap *snaps;
    int n_snaps, cap_snaps;
    uint8_t *base_unk;            /* per node: unknown at the base */
    /* per series */
    uint8_t *bad;                 /* MP_FX_* when it has no formula, else 0 */
    int *bad_snap;                /* the point that showed it (-1) */
    int *bad_var;
    fx_i128 *coef;                /* G monomial numerators each, over den */
    int G;
    fx_i128 den;
    int dims[MP_FORMULA_VARS];    /* grid extents (deg + 1) */
} fx;

static size_t fx_live(const fx *s, int step) { return (size_t)s->N * FX_NF + (size_t)step; }
static size_t fx_modp(const fx *s, int md) { return (size_t)s->N * (FX_NF + 1) + (size_t)md; }
static size_t fx_totp(const fx *s) { return (size_t)s->N * (FX_NF + 1) + (size_t)s->M; }

static void fx_snap_free(fx_snap *sn) {
    free(sn->why);
    free(sn->v);
    free(sn->unk);
    free(sn->mod);
    sn->why = NULL;
    sn->v = NULL;
    sn->unk = NULL;
    sn->mod = NULL;
}

static mp_status fx_nomem(void) { return mp_error(MP_ERR_NOMEM, "out of memory"); }

/* The point x as "batch=7, seq=300" into buf. */
static const char *fx_point(const fx *s, const int64_t *x, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < s->k && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s=%lld", i ? ", " : "",
                         s->m->syms[s->F->vars[i]].name, (long long)x[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

/* The profile at x: its snapshot's index (computed once per point; keep:
 * the series are kept). -1 with an error status when out of memory. */
static int fx_eval(fx *s, const int64_t *x, bool keep, mp_status *st) {
    *st = MP_OK;
    int slot = -1;
    for (int i = 0; i < s->n_snaps && slot < 0; i++) {
        fx_snap *sn = &s->snaps[i];
        if (memcmp(sn->x, x, sizeof(int64_t) * (size_t)s->k) != 0) continue;
        if (!keep || sn->v || sn->failed) return i;
        slot = i; /* computed without its series: again, in its place */
    }
    if (slot < 0) {
        fx_snap *ns = mp_grow(s->snaps, sizeof *s->snaps, &s->cap_snaps, s->n_snaps + 1);
        if (!ns) {
            *st = fx_nomem();
            return -1;
        }
        s->snaps = ns;
        slot = s->n_snaps++;
        memset(&s->snaps[slot], 0, sizeof s->snaps[slot]);
        s->snaps[slot].along = -1;
    }
    fx_snap *sn = &s->snaps[slot];
    bool check = sn->check;
    int along = sn->along;
    fx_snap_free(sn);
    memset(sn, 0, sizeof *sn);
    memcpy(sn->x, x, sizeof(int64_t) * (size_t)s->k);
    sn->unknown_node = -1;
    sn->check = check;
    sn->along = along;
    for (int i = 0; i < s->k; i++) s->m->syms[s->F->vars[i]].value = x[i];
    uint64_t *live = malloc(sizeof *live * (size_t)(s->N > 0 ? s->N : 1));
    if (!live) {
        *st = fx_nomem();
        return -1;
    }
    mp_profile *q = NULL;
    mp_status pst = mp_profile_static_live(s->m, live, &q);
    s->F->profiles++;
    if (pst == MP_ERR_NOMEM || pst == MP_ERR_LIMIT) {
        free(live);
        *st = pst;
        return -1;
    }
    int idx = slot;
    if (pst) {
        sn->failed = true;
        sn->why = strdup(mp_last_error());
        free(live);
        return idx;
    }
    if (q->m->n_modules != s->M) {
        mp_profile_free(q);
        free(live);
        *st = mp_error(MP_ERR_SHAPE, "--formula: the module tree changed between profiles");
        return -1;
    }
    sn->overflow = q->overflow;
    for (int i = 0; i < s->N; i++) {
        int kk = s->g->order[i];
        if ((s->g->nodes[kk].cost.flags & (MP_COST_UNKNOWN | MP_COST_OVERFLOW)) &&
            !(s->base_unk && s->base_unk[kk])) {
            sn->unknown_node = kk;
            break;
        }
    }
    sn->peak = q->activation_peak_bytes;
    for (int f = 0; f < FX_NF; f++) sn->tot[f] = fx_fig_field(&q->total, f);
    if (keep) {
        sn->v = malloc(sizeof *sn->v * s->S);
        sn->unk = malloc((size_t)(s->N > 0 ? s->N : 1));
        sn->mod = malloc(sizeof *sn->mod * (size_t)(s->M > 0 ? s->M : 1) * FX_NF);
        if (!sn->v || !sn->unk || !sn->mod) {
            mp_profile_free(q);
            free(live);
            *st = fx_nomem();
            return -1;
        }
        for (int kk = 0; kk < s->N; kk++) {
            const mp_cost *c = &s->g->nodes[kk].cost;
            for (int f = 0; f < FX_NF; f++) sn->v[(size_t)kk * FX_NF + (size_t)f] = fx_cost_field(c, f);
            sn->unk[kk] = (c->flags & (MP_COST_UNKNOWN | MP_COST_OVERFLOW)) != 0;
        }
        memcpy(sn->v + fx_live(s, 0), live, sizeof *live * (size_t)s->N);
        for (int md = 0; md < s->M; md++) {
            sn->v[fx_modp(s, md)] = q->mods[md].params;
            for (int f = 0; f < FX_NF; f++)
                sn->mod[(size_t)md * FX_NF + (size_t)f] = fx_fig_field(&q->mods[md], f);
        }
        sn->v[fx_totp(s)] = q->total.params;
    }
    mp_profile_free(q);
    free(live);
    return idx;
}

/* Does the profile hold at this point (no failure, no cost turned unknown,
 * no total past 64 bits)? The reason when not, into buf. */
static bool fx_holds(const fx *s, const fx_snap *sn, char *buf, size_t n) {
    if (sn->failed) {
        snprintf(buf, n, "the profile fails: %s", sn->why ? sn->why : "?");
        return false;
    }
    int un = sn->unknown_node;
    if (sn->unk && s->base_unk) { /* judged against the base as it is now */
        un = -1;
        for (int i = 0; i < s->N && un < 0; i++) {
            int kk = s->g->order[i];
            if (sn->unk[kk] && !s->base_unk[kk]) un = kk;
        }
    }
    if (un >= 0) {
        const mp_node *nd = &s->g->nodes[un];
        snprintf(buf, n, "the cost of node '%s' (%s) is unknown or past 64 bits",
                 nd->name ? nd->name : "?", nd->op ? nd->op : "?");
        return false;
    }
    if (sn->overflow) {
        snprintf(buf, n, "a total passes 64 bits");
        return false;
    }
    return true;
}

/* ---- exact arithmetic ---- */

static fx_i128 fx_abs(fx_i128 a) { return a < 0 ? -a : a; }
static fx_i128 fx_gcd(fx_i128 a, fx_i128 b) {
    a = fx_abs(a);
    b = fx_abs(b);
    while (b) {
        fx_i128 t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Series s's polynomial at x, times den: false when a step passes 128 bits. */
static bool fx_poly_at(const fx *s, const fx_i128 *a, const int64_t *x, fx_i128 *out) {
    fx_i128 sum = 0;
    for (int e = 0; e < s->G; e++) {
        if (!a[e]) continue;
        fx_i128 t = a[e];
        int r = e;
        for (int i = s->k - 1; i >= 0; i--) {
            int p = r % s->dims[i];
            r /= s->dims[i];
            for (int j = 0; j < p; j++)
                if (__builtin_mul_overflow(t, (fx_i128)x[i], &t)) return false;
        }
        if (__builtin_add_overflow(sum, t, &sum)) return false;
    }
    *out = sum;
    return true;
}

/* Does series i equal its polynomial at snapshot sn? */
static bool fx_matches(const fx *s, size_t i, const fx_snap *sn) {
    fx_i128 got, want;
    if (!fx_poly_at(s, s->coef + i * (size_t)s->G, sn->x, &got)) return false;
    if (__builtin_mul_overflow((fx_i128)sn->v[i], s->den, &want)) return false;
    return got == want;
}

static void fx_set_bad(fx *s, size_t i, int kind, int snap, int var) {
    if (s->bad[i]) return;
    s->bad[i] = (uint8_t)kind;
    s->bad_snap[i] = snap;
    s->bad_var[i] = var;
}

/* The grid point with multi-index e (flat), as values. */
static void fx_grid_point(const fx *s, int e, int64_t *x) {
    for (int i = s->k - 1; i >= 0; i--) {
        x[i] = s->x0 + e % s->dims[i];
        e /= s->dims[i];
    }
}

/* ---- building ---- */

/* Nodes whose cost is unknown at a point the formulas are built from are
 * left out. */
static void fx_mark_unknown(fx *s, int e) {
    const fx_snap *sn = &s->snaps[e];
    for (int kk = 0; kk < s->N; kk++)
        if (sn->unk[kk])
            for (int f = 0; f < FX_NF; f++)
                fx_set_bad(s, (size_t)kk * FX_NF + (size_t)f, MP_FX_UNKNOWN, e, -1);
}

/* Stage 1: lines from the base point, one per dim; sets deg and marks the
 * series no bounded-degree polynomial fits. False (with *why) when the
 * profile fails at one of the points. */
static mp_status fx_lines(fx *s, bool *ok, char *why, size_t nwhy) {
    int64_t x[MP_FORMULA_VARS];
    const int L = MP_FORMULA_DEGREE + 2;
    int idx[MP_FORMULA_VARS][MP_FORMULA_DEGREE + 2];
    mp_status st;
    *ok = true;
    for (int i = 0; i < s->k; i++) x[i] = s->x0;
    int b = fx_eval(s, x, true, &st);
    if (b < 0) return st;
    if (s->snaps[b].failed) {
        *ok = false;
        snprintf(why, nwhy, "%s", s->snaps[b].why ? s->snaps[b].why : "?");
        return MP_OK;
    }
    /* nodes unknown at the base stay out of the "turns unknown" test */
    free(s->base_unk);
    s->base_unk = malloc((size_t)(s->N > 0 ? s->N : 1));
    if (!s->base_unk) return fx_nomem();
    memcpy(s->base_unk, s->snaps[b].unk, (size_t)s->N);
    fx_mark_unknown(s, b);
    for (int i = 0; i < s->k; i++) {
        for (int j = 0; j < L; j++) {
            for (int t = 0; t < s->k; t++) x[t] = s->x0;
            x[i] = s->x0 + j;
            int e = fx_eval(s, x, true, &st);
            if (e < 0) return st;
            if (s->snaps[e].failed) {
                *ok = false;
                char pt[160];
                snprintf(why, nwhy, "at %s: %s", fx_point(s, x, pt, sizeof pt),
                         s->snaps[e].why ? s->snaps[e].why : "?");
                return MP_OK;
            }
            idx[i][j] = e;
            fx_mark_unknown(s, e);
        }
    }
    for (int i = 0; i < s->k; i++) s->deg[i] = 0;
    fx_i128 d[MP_FORMULA_DEGREE + 2];
    for (size_t q = 0; q < s->S; q++) {
        if (s->bad[q]) continue;
        for (int i = 0; i < s->k; i++) {
            for (int j = 0; j < L; j++) d[j] = (fx_i128)s->snaps[idx[i][j]].v[q];
            for (int t = 1; t < L; t++)
                for (int j = L - 1; j >= t; j--) d[j] -= d[j - 1];
            if (d[L - 1]) {
                fx_set_bad(s, q, MP_FX_DEGREE, idx[i][0], i);
                break;
            }
            int dg = 0;
            for (int j = 1; j < L - 1; j++)
                if (d[j]) dg = j;
            if (dg > s->deg[i]) s->deg[i] = dg;
        }
    }
    return MP_OK;
}

/* Stage 2: the grid and each series' monomial numerators over den. */
static mp_status fx_grid(fx *s) {
    mp_status st;
    s->G = 1;
    s->den = 1;
    for (int i = 0; i < s->k; i++) {
        s->dims[i] = s->deg[i] + 1;
        s->G *= s->dims[i];
        for (int j = 2; j <= s->deg[i]; j++) s->den *= j;
    }
    int *gi = malloc(sizeof *gi * (size_t)s->G);
    free(s->coef);
    s->coef = malloc(sizeof *s->coef * s->S * (size_t)s->G);
    if (!gi || !s->coef) {
        free(gi);
        return fx_nomem();
    }
    int64_t x[MP_FORMULA_VARS];
    for (int e = 0; e < s->G; e++) {
        fx_grid_point(s, e, x);
        gi[e] = fx_eval(s, x, true, &st);
        if (gi[e] < 0) {
            free(gi);
            return st;
        }
        if (s->snaps[gi[e]].failed) {
            char pt[160];
            st = mp_error(MP_ERR_SHAPE, "--formula: the profile fails at %s: %s",
                          fx_point(s, x, pt, sizeof pt), s->snaps[gi[e]].why);
            free(gi);
            return st;
        }
        fx_mark_unknown(s, gi[e]);
    }
    /* Q[i][j]: (deg_i! / j!) * prod_{t<j} (x - x0 - t), coefficients by power */
    fx_i128 Q[MP_FORMULA_VARS][MP_FORMULA_DEGREE + 1][MP_FORMULA_DEGREE + 1];
    memset(Q, 0, sizeof Q);
    for (int i = 0; i < s->k; i++) {
        for (int j = 0; j <= s->deg[i]; j++) {
            fx_i128 c[MP_FORMULA_DEGREE + 1] = {1};
            for (int t = 0; t < j; t++) { /* multiply by (x - (x0 + t)) */
                fx_i128 r = s->x0 + t;
                for (int p = t + 1; p >= 0; p--) c[p] = (p ? c[p - 1] : 0) - r * c[p];
            }
            fx_i128 f = 1;
            for (int t = j + 1; t <= s->deg[i]; t++) f *= t;
            for (int p = 0; p <= j; p++) Q[i][j][p] = c[p] * f;
        }
    }
    fx_i128 *tmp = malloc(sizeof *tmp * (size_t)s->G);
    if (!tmp) {
        free(gi);
        return fx_nomem();
    }
    for (size_t q = 0; q < s->S; q++) {
        fx_i128 *a = s->coef + q * (size_t)s->G;
        if (s->bad[q]) {
            memset(a, 0, sizeof *a * (size_t)s->G);
            continue;
        }
        for (int e = 0; e < s->G; e++) a[e] = (fx_i128)s->snaps[gi[e]].v[q];
        bool ovf = false;
        /* along each dim: forward differences, then the binomial basis to
         * powers (stride: the product of the extents after dim i) */
        int stride = s->G;
        for (int i = 0; i < s->k && !ovf; i++) {
            int n = s->dims[i];
            stride /= n;
            for (int base = 0; base < s->G; base++) {
                if ((base / stride) % n != 0) continue; /* the start of a line along i */
                for (int t = 1; t < n; t++)
                    for (int j = n - 1; j >= t; j--)
                        a[base + j * stride] -= a[base + (j - 1) * stride];
                for (int p = 0; p < n; p++) {
                    fx_i128 acc = 0;
                    for (int j = p; j < n && !ovf; j++) {
                        fx_i128 term;
                        ovf |= __builtin_mul_overflow(a[base + j * stride], Q[i][j][p], &term) ||
                               __builtin_add_overflow(acc, term, &acc);
                    }
                    tmp[p] = acc;
                }
                for (int p = 0; p < n; p++) a[base + p * stride] = tmp[p];
            }
        }
        if (ovf) {
            memset(a, 0, sizeof *a * (size_t)s->G);
            fx_set_bad(s, q, MP_FX_COEF, gi[0], -1);
            continue;
        }
        /* each coefficient, in lowest terms, must fit int64 */
        for (int e = 0; e < s->G; e++) {
            if (!a[e]) continue;
            fx_i128 g = fx_gcd(a[e], s->den);
            fx_i128 num = a[e] / g, dn = s->den / g;
            if (num > INT64_MAX || num < -INT64_MAX || dn > INT64_MAX) {
                fx_set_bad(s, q, MP_FX_COEF, gi[0], -1);
                break;
            }
        }
    }
    free(tmp);
    free(gi);
    return MP_OK;
}

/* The last value of dim `var` (the others at the base) at which the
 * profile holds, between good (holds) and bad (does not: snapshot
 * *bad_idx), by bisection; *bad_idx becomes the snapshot one step past. */
static mp_status fx_bisect(fx *s, int var, int64_t good, int64_t bad, int64_t *last, int *bad_idx) {
    int64_t x[MP_FORMULA_VARS];
    mp_status st;
    char buf[8];
    while (bad - good > 1 || bad - good < -1) {
        int64_t mid = good + (bad - good) / 2;
        for (int t = 0; t < s->k; t++) x[t] = s->x0;
        x[var] = mid;
        int e = fx_eval(s, x, false, &st);
        if (e < 0) return st;
        if (fx_holds(s, &s->snaps[e], buf, sizeof buf)) {
            good = mid;
        } else {
            bad = mid;
            *bad_idx = e;
        }
    }
    *last = good;
    return MP_OK;
}

/* Stage 3: the range of each dim (the others at the base): values
 * doubling from the line's last point up to fx_far (and halving from the
 * base down to 1) until the profile does not hold; a bisection then finds
 * the last value at which it does. (The profile can hold again further
 * out, where contents too large to track stop a check: the range ends at
 * the first failure.) Both ends become check points. */
/* Along dim i from `good` (where the profile holds) toward `limit`,
 * doubling up or halving down until it does not hold, then a bisection:
 * *end the last value at which it holds, *why (malloc'd) what happens one
 * step past it; NULL when it holds up to limit. */
static mp_status fx_sweep(fx *s, int i, int64_t good, int64_t limit, int64_t *end, char **why) {
    int64_t x[MP_FORMULA_VARS];
    mp_status st;
    char buf[1200];
    *end = limit;
    *why = NULL;
    while (good != limit) {
        int64_t v = limit < good ? good / 2 : good > limit / 2 ? limit : 2 * good;
        for (int t = 0; t < s->k; t++) x[t] = s->x0;
        x[i] = v;
        int e = fx_eval(s, x, false, &st);
        if (e < 0) return st;
        if (fx_holds(s, &s->snaps[e], buf, sizeof buf)) {
            good = v;
            continue;
        }
        int bi = e;
        if ((st = fx_bisect(s, i, good, v, end, &bi))) return st;
        fx_holds(s, &s->snaps[bi], buf, sizeof buf);
        return (*why = strdup(buf)) ? MP_OK : fx_nomem();
    }
    return MP_OK;
}

static mp_status fx_ranges(fx *s) {
    int64_t x[MP_FORMULA_VARS];
    mp_status st;
    for (int i = 0; i < s->k; i++) {
        mp_formula_range *r = &s->F->range[i];
        int64_t top = s->x0 + MP_FORMULA_DEGREE + 1; /* the line's last point: holds */
        int64_t far = fx_far(s->deg[i]) > top ? fx_far(s->deg[i]) : top;
        if ((st = fx_sweep(s, i, top, far, &r->hi, &r->hi_why)) ||
            (st = fx_sweep(s, i, s->x0, 1, &r->lo, &r->lo_why)))
            return st;
        r->hi_bounded = r->hi_why != NULL;
        r->lo_bounded = r->lo_why != NULL;
        int64_t ends[2] = {r->lo, r->hi};
        for (int j = 0; j < 2; j++) {
            for (int t = 0; t < s->k; t++) x[t] = s->x0;
            x[i] = ends[j];
            int e = fx_eval(s, x, true, &st);
            if (e < 0) return st;
            s->snaps[e].check = true;
            s->snaps[e].along = i;
        }
    }
    return MP_OK;
}

/* Stage 4's points: within the ranges, each computed once. */
static mp_status fx_check_points(fx *s) {
    int64_t pts[6][MP_FORMULA_VARS];
    for (int i = 0; i < s->k; i++) {
        pts[0][i] = 1;
        pts[1][i] = i % 2 ? 300 : 7;
        pts[2][i] = i % 2 ? 7 : 300;
        pts[3][i] = s->x0 + MP_FORMULA_DEGREE + 2 + i; /* just past every line */
        pts[4][i] = 13 + 10 * i;
        pts[5][i] = 1021;
    }
    mp_status st;
    for (int j = 0; j < 6; j++) {
        for (int i = 0; i < s->k; i++) {
            const mp_formula_range *r = &s->F->range[i];
            if (pts[j][i] < r->lo) pts[j][i] = r->lo;
            if (pts[j][i] > r->hi) pts[j][i] = r->hi;
        }
        int e = fx_eval(s, pts[j], true, &st);
        if (e < 0) return st;
        s->snaps[e].check = true;
    }
    return MP_OK;
}

/* Stage 4: every kept series against every check point that holds.
 * Returns the number of mismatches (series marked bad when mark). */
static size_t fx_check(fx *s, bool mark) {
    size_t miss = 0;
    char buf[8];
    for (int j = 0; j < s->n_snaps; j++) {
        fx_snap *sn = &s->snaps[j];
        if (!sn->check || !sn->v || !fx_holds(s, sn, buf, sizeof buf)) continue;
        for (size_t q = 0; q < s->S; q++) { /* (a node unknown here is unknown at the base too) */
            if (s->bad[q] || fx_matches(s, q, sn)) continue;
            miss++;
            if (mark) fx_set_bad(s, q, MP_FX_CHECK, j, sn->along);
        }
    }
    return miss;
}

/* ---- the results ---- */

/* Term order: increasing total degree, then decreasing powers in dim order. */
static int fx_term_cmp(const mp_term *x, const mp_term *y, int k) {
    int dx = 0, dy = 0;
    for (int i = 0; i < k; i++) {
        dx += x->exp[i];
        dy += y->exp[i];
    }
    if (dx != dy) return dx < dy ? -1 : 1;
    for (int i = 0; i < k; i++)
        if (x->exp[i] != y->exp[i]) return x->exp[i] > y->exp[i] ? -1 : 1;
    return 0;
}

/* Numerators a (over s->den) into a polynomial in F's arena. */
static mp_status fx_poly(fx *s, const fx_i128 *a, mp_poly *out) {
    int n = 0;
    for (int e = 0; e < s->G; e++) n += a[e] != 0;
    out->n = 0;
    out->ok = true;
    out->t = n ? mp_arena_calloc(&s->F->arena, (size_t)n, sizeof *out->t) : NULL;
    if (n && !out->t) return fx_nomem();
    for (int e = 0; e < s->G; e++) {
        if (!a[e]) continue;
        fx_i128 g = fx_gcd(a[e], s->den);
        fx_i128 num = a[e] / g, dn = s->den / g;
        if (num > INT64_MAX || num < -INT64_MAX || dn > INT64_MAX) {
            out->ok = false;
            out->n = 0;
            return MP_OK;
        }
        mp_term *t = &out->t[out->n++];
        t->num = (int64_t)num;
        t->den = (int64_t)dn;
        int r = e;
        for (int i = s->k - 1; i >= 0; i--) {
            t->exp[i] = (uint8_t)(r % s->dims[i]);
            r /= s->dims[i];
        }
    }
    for (int j = 1; j < out->n; j++) { /* a few terms: insertion */
        mp_term t = out->t[j];
        int i = j;
        for (; i > 0 && fx_term_cmp(&out->t[i - 1], &t, s->k) > 0; i--) out->t[i] = out->t[i - 1];
        out->t[i] = t;
    }
    return MP_OK;
}

/* a >= b for every dim >= 1? Sufficient test: (a - b)(1 + y) has no
 * negative coefficient (y >= 0). */
static bool fx_dominates(const fx *s, const fx_i128 *a, const fx_i128 *b, fx_i128 *work) {
    for (int e = 0; e < s->G; e++) work[e] = a[e] - b[e];
    /* substitute x_i = 1 + y_i one dim at a time: Taylor shift by 1 */
    int stride = s->G;
    for (int i = 0; i < s->k; i++) {
        int n = s->dims[i];
        stride /= n;
        for (int base = 0; base < s->G; base++) {
            if ((base / stride) % n != 0) continue;
            for (int t = 0; t < n - 1; t++)
                for (int j = n - 2; j >= t; j--)
                    work[base + j * stride] += work[base + (j + 1) * stride];
        }
    }
    for (int e = 0; e < s->G; e++)
        if (work[e] < 0) return false;
    return true;
}

/* The peak's pieces: the live polynomials of the steps that no other
 * dominates. */
static mp_status fx_peak(fx *s) {
    mp_formulas *F = s->F;
    for (int i = 0; i < s->N; i++) {
        size_t q = fx_live(s, i);
        if (!s->bad[q]) continue;
        const mp_node *nd = &s->g->nodes[s->g->order[i]];
        char buf[600];
        snprintf(buf, sizeof buf,
                 "the live activation bytes at node '%s' (%s) are not a polynomial",
                 nd->name ? nd->name : "?", nd->op ? nd->op : "?");
        F->peak_why = strdup(buf);
        return F->peak_why ? MP_OK : fx_nomem();
    }
    int *keep = malloc(sizeof *keep * (size_t)(s->N > 0 ? s->N : 1));
    fx_i128 *work = malloc(sizeof *work * (size_t)s->G);
    if (!keep || !work) {
        free(keep);
        free(work);
        return fx_nomem();
    }
    int nk = 0;
    for (int i = 0; i < s->N; i++) {
        const fx_i128 *a = s->coef + fx_live(s, i) * (size_t)s->G;
        bool dominated = false;
        for (int c = 0; c < nk && !dominated; c++)
            dominated = fx_dominates(s, s->coef + fx_live(s, keep[c]) * (size_t)s->G, a, work);
        if (dominated) continue;
        /* drop the kept ones it dominates */
        int w = 0;
        for (int c = 0; c < nk; c++)
            if (!fx_dominates(s, a, s->coef + fx_live(s, keep[c]) * (size_t)s->G, work))
                keep[w++] = keep[c];
        nk = w;
        keep[nk++] = i;
    }
    free(work);
    mp_status st = MP_OK;
    F->peak = nk ? mp_arena_calloc(&F->arena, (size_t)nk, sizeof *F->peak) : NULL;
    if (nk && !F->peak) st = fx_nomem();
    for (int c = 0; c < nk && !st; c++) {
        F->peak[c].node = s->g->order[keep[c]];
        st = fx_poly(s, s->coef + fx_live(s, keep[c]) * (size_t)s->G, &F->peak[c].poly);
        if (!st && !F->peak[c].poly.ok) {
            F->peak_why = strdup("a coefficient of the live bytes does not fit 64 bits");
            nk = 0;
        }
    }
    if (!st) F->n_peak = nk;
    if (!st && F->n_peak) {
        /* the maximum of the pieces is the profile's peak at every check point */
        char buf[8];
        for (int j = 0; j < s->n_snaps && F->n_peak; j++) {
            const fx_snap *sn = &s->snaps[j];
            if (!sn->check || !sn->v || !fx_holds(s, sn, buf, sizeof buf)) continue;
            fx_i128 best = 0;
            bool ok = true;
            for (int c = 0; c < F->n_peak && ok; c++) {
                fx_i128 v;
                ok = fx_poly_at(s, s->coef + fx_live(s, keep[c]) * (size_t)s->G, sn->x, &v);
                if (ok && v > best) best = v;
            }
            fx_i128 want;
            if (!ok || __builtin_mul_overflow((fx_i128)sn->peak, s->den, &want) || want != best) {
                char pt[160], buf2[400];
                snprintf(buf2, sizeof buf2, "the maximum of its pieces differs from the peak at %s",
                         fx_point(s, sn->x, pt, sizeof pt));
                F->peak_why = strdup(buf2);
                F->n_peak = 0;
            }
        }
    }
    free(keep);
    return st;
}

/* Which nodes are left out, and the sums of the others per module. */
static mp_status fx_results(fx *s) {
    mp_formulas *F = s->F;
    mp_graph *g = s->g;
    int *skip_of = malloc(sizeof *skip_of * (size_t)(s->N > 0 ? s->N : 1));
    if (!skip_of) return fx_nomem();
    for (int i = 0; i < s->N; i++) skip_of[i] = -1;
    int n_skip = 0;
    for (int i = 0; i < s->N; i++) {
        int kk = g->order[i];
        for (int f = 0; f < FX_NF; f++)
            if (s->bad[(size_t)kk * FX_NF + (size_t)f]) {
                n_skip++;
                skip_of[kk] = 0;
                break;
            }
    }
    F->skips = n_skip ? mp_arena_calloc(&F->arena, (size_t)n_skip, sizeof *F->skips) : NULL;
    if (n_skip && !F->skips) {
        free(skip_of);
        return fx_nomem();
    }
    for (int i = 0; i < s->N; i++) {
        int kk = g->order[i];
        if (skip_of[kk] < 0) continue;
        /* the first reason among its figures */
        size_t q = (size_t)kk * FX_NF;
        for (int f = 0; f < FX_NF; f++)
            if (s->bad[(size_t)kk * FX_NF + (size_t)f]) {
                q = (size_t)kk * FX_NF + (size_t)f;
                break;
            }
        mp_formula_skip *sk = &F->skips[F->n_skips];
        skip_of[kk] = F->n_skips++;
        sk->node = kk;
        sk->kind = s->bad[q];
        sk->var = s->bad_var[q];
        if (s->bad_snap[q] >= 0) memcpy(sk->at, s->snaps[s->bad_snap[q]].x, sizeof(int64_t) * (size_t)s->k);
    }
    for (int j = 0; j < F->n_skips; j++) {
        mp_formula_skip *sk = &F->skips[j];
        const mp_node *nd = &g->nodes[sk->node];
        sk->origin = true;
        for (int i = 0; i < nd->n_in && sk->origin; i++) {
            int v = nd->in[i];
            int pr = v >= 0 ? g->values[v].producer : -1;
            if (pr >= 0 && skip_of[pr] >= 0) sk->origin = false;
        }
    }
    /* sums per module, children into parents */
    size_t per = (size_t)FX_NF * (size_t)s->G;
    fx_i128 *acc = calloc(((size_t)s->M + 1) * per, sizeof *acc);
    F->mods = calloc((size_t)(s->M > 0 ? s->M : 1), sizeof *F->mods);
    if (!acc || !F->mods) {
        free(acc);
        free(skip_of);
        return fx_nomem();
    }
    F->n_mods = s->M;
    fx_i128 *tot = acc + (size_t)s->M * per;
    for (int kk = 0; kk < s->N; kk++) {
        int md = g->nodes[kk].module;
        if (skip_of[kk] >= 0) {
            if (md >= 0 && md < s->M) F->mods[md].left_out++;
            F->total.left_out++;
            continue;
        }
        for (int f = 0; f < FX_NF; f++) {
            const fx_i128 *a = s->coef + ((size_t)kk * FX_NF + (size_t)f) * (size_t)s->G;
            fx_i128 *t = tot + (size_t)f * (size_t)s->G;
            fx_i128 *mo = md >= 0 && md < s->M ? acc + (size_t)md * per + (size_t)f * (size_t)s->G : NULL;
            for (int e = 0; e < s->G; e++) {
                t[e] += a[e];
                if (mo) mo[e] += a[e];
            }
        }
    }
    for (int md = s->M - 1; md > 0; md--) {
        int par = s->m->modules[md].parent;
        if (par < 0) continue;
        for (size_t e = 0; e < per; e++) acc[(size_t)par * per + e] += acc[(size_t)md * per + e];
        F->mods[par].left_out += F->mods[md].left_out;
    }
    /* a figure of a set is partial when a node of it left out adds to it:
     * its series has no formula, or one that is not 0 */
    uint8_t *part = calloc(((size_t)s->M + 1) * FX_NF, 1);
    if (!part) {
        free(acc);
        free(skip_of);
        return fx_nomem();
    }
    for (int j = 0; j < F->n_skips; j++) {
        int kk = F->skips[j].node;
        for (int f = 0; f < FX_NF; f++) {
            size_t q = (size_t)kk * FX_NF + (size_t)f;
            bool adds = s->bad[q] != 0;
            for (int e = 0; e < s->G && !adds; e++) adds = s->coef[q * (size_t)s->G + (size_t)e] != 0;
            if (!adds) continue;
            part[(size_t)s->M * FX_NF + (size_t)f] = 1;
            for (int md = g->nodes[kk].module; md >= 0 && md < s->M; md = s->m->modules[md].parent)
                part[(size_t)md * FX_NF + (size_t)f] = 1;
        }
    }
    mp_status st = MP_OK;
    for (int md = 0; md <= s->M && !st; md++) {
        mp_formset *fs = md < s->M ? &F->mods[md] : &F->total;
        const fx_i128 *a = md < s->M ? acc + (size_t)md * per : tot;
        for (int f = 0; f < FX_NF && !st; f++) {
            st = fx_poly(s, a + (size_t)f * (size_t)s->G, &fs->f[fx_node_field[f]]);
            fs->f[fx_node_field[f]].partial = part[(size_t)md * FX_NF + (size_t)f] != 0;
        }
        size_t pq = md < s->M ? fx_modp(s, md) : fx_totp(s);
        if (!st && !s->bad[pq])
            st = fx_poly(s, s->coef + pq * (size_t)s->G, &fs->f[MP_FF_PARAMS]);
        else
            fs->f[MP_FF_PARAMS].ok = false;
    }
    /* the sums against the profile's module and model figures, with the
     * nodes left out taken at their values */
    char buf[8];
    for (int j = 0; j < s->n_snaps && !st; j++) {
        const fx_snap *sn = &s->snaps[j];
        if (!sn->check || !sn->v || !fx_holds(s, sn, buf, sizeof buf)) continue;
        for (int md = 0; md <= s->M; md++) {
            mp_formset *fs = md < s->M ? &F->mods[md] : &F->total;
            for (int f = 0; f < FX_NF; f++) {
                mp_poly *q = &fs->f[fx_node_field[f]];
                if (!q->ok) continue;
                uint64_t want = md < s->M ? sn->mod[(size_t)md * FX_NF + (size_t)f] : sn->tot[f];
                uint64_t rest = 0, got = 0;
                for (int sk = 0; sk < F->n_skips; sk++) {
                    int kk = F->skips[sk].node, nm = g->nodes[kk].module;
                    bool in = md == s->M;
                    for (; !in && nm >= 0; nm = s->m->modules[nm].parent) in = nm == md;
                    if (in) rest += sn->v[(size_t)kk * FX_NF + (size_t)f];
                }
                bool ovf = false;
                if (!mp_poly_eval(q, s->k, sn->x, &got) || mp_uadd(got, rest, &ovf) != want || ovf)
                    q->ok = false;
            }
        }
    }
    free(part);
    free(acc);
    free(skip_of);
    return st;
}

void mp_formulas_free(mp_formulas *f) {
    if (!f) return;
    for (int i = 0; i < MP_FORMULA_VARS; i++) {
        free(f->range[i].lo_why);
        free(f->range[i].hi_why);
    }
    free(f->peak_why);
    free(f->mods);
    mp_arena_free(&f->arena);
    free(f);
}

bool mp_poly_eval(const mp_poly *q, int n_vars, const int64_t *x, uint64_t *out) {
    if (!q->ok) return false;
    /* sum of num * x^e / den: over the product of the denominators' lcm */
    fx_i128 l = 1;
    for (int j = 0; j < q->n; j++) {
        fx_i128 d = q->t[j].den, g = fx_gcd(l, d);
        if (__builtin_mul_overflow(l / g, d, &l)) return false;
    }
    fx_i128 sum = 0;
    for (int j = 0; j < q->n; j++) {
        fx_i128 t = q->t[j].num;
        if (__builtin_mul_overflow(t, l / q->t[j].den, &t)) return false;
        for (int i = 0; i < n_vars; i++)
            for (int p = 0; p < q->t[j].exp[i]; p++)
                if (__builtin_mul_overflow(t, (fx_i128)x[i], &t)) return false;
        if (__builtin_add_overflow(sum, t, &sum)) return false;
    }
    if (sum < 0 || sum % l != 0 || sum / l > (fx_i128)UINT64_MAX) return false;
    *out = (uint64_t)(sum / l);
    return true;
}

/* Build the formulas of s (its model and free dims set). */
static mp_status fx_build(fx *s) {
    mp_status st;
    char why[1200] = "";
    bool ok = false;
    for (size_t b = 0; b < MP_ARRAY_LEN(fx_bases) && !ok; b++) {
        s->x0 = fx_bases[b];
        memset(s->bad, 0, s->S);
        if ((st = fx_lines(s, &ok, why, sizeof why))) return st;
    }
    if (!ok) {
        char pt[160];
        int64_t x[MP_FORMULA_VARS];
        for (int i = 0; i < s->k; i++) x[i] = fx_bases[0];
        return mp_error(MP_ERR_SHAPE, "--formula: no base point where the profile holds (%s ...): %s",
                        fx_point(s, x, pt, sizeof pt), why);
    }
    s->F->base = s->x0;
    if ((st = fx_grid(s)) || (st = fx_ranges(s)) || (st = fx_check_points(s))) return st;
    if (fx_check(s, false)) {
        /* a degree hidden from the lines: every dim at the bound, if the
         * grid stays small */
        int G = 1;
        for (int i = 0; i < s->k; i++) G *= MP_FORMULA_DEGREE + 1;
        if (G <= 125) {
            for (int i = 0; i < s->k; i++) s->deg[i] = MP_FORMULA_DEGREE;
            s->F->escalated = true;
            if ((st = fx_grid(s))) return st;
        }
    }
    fx_check(s, true);
    for (int i = 0; i < s->k; i++) s->F->degree[i] = s->deg[i];
    /* the degree actually reached (after an escalation, the highest power
     * among the good series) */
    if (s->F->escalated) {
        for (int i = 0; i < s->k; i++) s->F->degree[i] = 0;
        for (size_t q = 0; q < s->S; q++) {
            if (s->bad[q]) continue;
            const fx_i128 *a = s->coef + q * (size_t)s->G;
            for (int e = 0; e < s->G; e++) {
                if (!a[e]) continue;
                int r = e;
                for (int i = s->k - 1; i >= 0; i--) {
                    int p = r % s->dims[i];
                    r /= s->dims[i];
                    if (p > s->F->degree[i]) s->F->degree[i] = p;
                }
            }
        }
    }
    for (int pass = 0; pass < 2; pass++) /* the points off the lines first */
        for (int j = 0; j < s->n_snaps; j++) {
            char buf[8];
            const fx_snap *sn = &s->snaps[j];
            if (!sn->check || !sn->v || !fx_holds(s, sn, buf, sizeof buf)) continue;
            if ((sn->along >= 0) != (pass == 1)) continue;
            if (s->F->n_checked < MP_FORMULA_CHECKS)
                memcpy(s->F->checked[s->F->n_checked++], sn->x, sizeof(int64_t) * (size_t)s->k);
            s->F->n_checks++;
        }
    if ((st = fx_results(s))) return st;
    return fx_peak(s);
}

mp_status mp_profile_formulas(mp_profile *p) {
    if (!p || !p->m) return mp_error(MP_ERR_USAGE, "no profile");
    mp_model *m = p->m;
    if (p->n_unresolved > MP_FORMULA_VARS)
        return mp_error(MP_ERR_UNSUPPORTED,
                        "--formula: the model has %d free dims; formulas take at most %d (give "
                        "the others values with --dim)", p->n_unresolved, MP_FORMULA_VARS);
    mp_formulas *F = calloc(1, sizeof *F);
    if (!F) return fx_nomem();
    mp_arena_init(&F->arena);
    F->n_vars = p->n_unresolved;
    int64_t saved[MP_FORMULA_VARS];
    for (int i = 0; i < F->n_vars; i++) {
        F->vars[i] = p->unresolved[i];
        saved[i] = m->syms[F->vars[i]].value;
    }
    fx s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.m = m;
    s.g = m->graph;
    s.F = F;
    s.k = F->n_vars;
    s.N = m->graph->n_nodes;
    s.M = m->n_modules;
    s.S = (size_t)s.N * (FX_NF + 1) + (size_t)s.M + 1;
    s.bad = calloc(s.S, 1);
    s.bad_snap = malloc(sizeof *s.bad_snap * s.S);
    s.bad_var = malloc(sizeof *s.bad_var * s.S);
    mp_status st = s.bad && s.bad_snap && s.bad_var ? MP_OK : fx_nomem();
    if (!st) st = fx_build(&s);
    /* the model back to the profile's dims (node costs and shapes are the
     * model's: the reports read them) */
    for (int i = 0; i < F->n_vars; i++) m->syms[F->vars[i]].value = saved[i];
    mp_profile *q = NULL;
    char keep_err[1200];
    snprintf(keep_err, sizeof keep_err, "%s", mp_last_error());
    mp_status rst = mp_profile_static(m, &q);
    mp_profile_free(q);
    if (st) mp_error(st, "%s", keep_err);
    else if (rst) st = rst;
    for (int i = 0; i < s.n_snaps; i++) fx_snap_free(&s.snaps[i]);
    free(s.snaps);
    free(s.bad);
    free(s.bad_snap);
    free(s.bad_var);
    free(s.coef);
    free(s.base_unk);
    if (st) {
        mp_formulas_free(F);
        return st;
    }
    mp_formulas_free(p->formulas);
    p->formulas = F;
    return MP_OK;
}
