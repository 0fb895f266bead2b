/* Formulas in the reports (analyze/formula.h): a polynomial as text (the
 * text report, every coefficient through the one number formatter), as
 * plain text (CSV), as JSON (a list of terms), and the sentences every
 * format gives a node left out of the formulas. */
#include "report/jw.h"
#include "report/report.h"

#include <stdio.h>

/* A dim's name, control bytes shown as \xNN (names come from the model). */
static void fr_name(mp_out *o, const char *s) {
    for (const unsigned char *c = (const unsigned char *)(s ? s : "?"); *c; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            char b[8];
            snprintf(b, sizeof b, "\\x%02x", *c);
            mp_out_puts(o, b);
        } else {
            mp_out_putc(o, (char)*c);
        }
    }
}

const char *mp_formula_var_name(const mp_profile *p, int var) {
    const mp_formulas *F = p->formulas;
    if (!F || var < 0 || var >= F->n_vars) return "?";
    int s = F->vars[var];
    const char *n = s > 0 && s < p->m->n_syms ? p->m->syms[s].name : NULL;
    return n ? n : "?";
}

void mp_poly_write(mp_out *o, const mp_poly *q, const mp_profile *p, bool plain) {
    static const char *const sup[] = {"", "", "\xc2\xb2", "\xc2\xb3", "\xe2\x81\xb4"};
    if (!q->ok || q->partial) {
        /* no formula; a partial one is the rest's, a lower bound: "?
         * (at least ...)" where the rest is not 0, nothing in CSV */
        if (plain) return;
        mp_out_puts(o, MP_FMT_UNKNOWN);
        if (q->ok && q->n > 0) {
            mp_poly rest = *q;
            rest.partial = false;
            mp_out_puts(o, " (at least ");
            mp_poly_write(o, &rest, p, false);
            mp_out_putc(o, ')');
        }
        return;
    }
    if (q->n == 0) {
        mp_out_putc(o, '0');
        return;
    }
    int k = p->formulas ? p->formulas->n_vars : 0;
    char d[MP_DEC_MAX + 1];
    for (int j = 0; j < q->n; j++) {
        const mp_term *t = &q->t[j];
        uint64_t mag = t->num < 0 ? (uint64_t)0 - (uint64_t)t->num : (uint64_t)t->num;
        if (t->num < 0) mp_out_puts(o, plain ? "-" : j ? " - " : "-");
        else if (j) mp_out_puts(o, plain ? "+" : " + ");
        bool dims = false;
        for (int i = 0; i < k; i++) dims |= t->exp[i] != 0;
        bool coef = !dims || mag != 1 || t->den != 1;
        if (coef) {
            if (plain) mp_out_write(o, d, mp_fmt_dec(d, mag));
            else mp_out_puts(o, mp_fmt_count(mag).s);
            if (t->den != 1) {
                mp_out_putc(o, '/');
                mp_out_write(o, d, mp_fmt_dec(d, (uint64_t)t->den));
            }
        }
        bool first = !coef;
        for (int i = 0; i < k; i++) {
            int e = t->exp[i];
            if (!e) continue;
            if (!first) mp_out_puts(o, plain ? "*" : "\xc2\xb7");
            first = false;
            fr_name(o, mp_formula_var_name(p, i));
            if (e > 1) {
                if (plain || e >= (int)MP_ARRAY_LEN(sup)) {
                    char b[8];
                    snprintf(b, sizeof b, "^%d", e);
                    mp_out_puts(o, b);
                } else {
                    mp_out_puts(o, sup[e]);
                }
            }
        }
    }
}

const char *mp_formula_skip_kind(int kind) {
    switch (kind) {
    case MP_FX_DEGREE: return "degree";
    case MP_FX_UNKNOWN: return "unknown";
    case MP_FX_CHECK: return "check";
    case MP_FX_COEF: return "coefficient";
    default: return "?";
    }
}

/* The point as "batch=7, seq=300" (model strings as they are). */
static size_t fr_point(const mp_profile *p, const int64_t *x, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < p->formulas->n_vars && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s=%lld", i ? ", " : "", mp_formula_var_name(p, i),
                         (long long)x[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return at;
}

const char *mp_formula_skip_text(const mp_profile *p, const mp_formula_skip *sk, char *buf,
                                 size_t n) {
    char pt[256];
    fr_point(p, sk->at, pt, sizeof pt);
    const char *dim = sk->var >= 0 ? mp_formula_var_name(p, sk->var) : NULL;
    switch (sk->kind) {
    case MP_FX_DEGREE:
        snprintf(buf, n,
                 "no polynomial of degree <= %d in %s fits its consecutive values from %s "
                 "(a floor or a clamp)", MP_FORMULA_DEGREE, dim ? dim : "?", pt);
        break;
    case MP_FX_UNKNOWN:
        snprintf(buf, n, "its cost is unknown or past 64 bits at %s", pt);
        break;
    case MP_FX_CHECK:
        snprintf(buf, n, "it differs from its polynomial at %s%s%s", pt,
                 dim ? ": not a polynomial in " : "", dim ? dim : "");
        break;
    case MP_FX_COEF:
        snprintf(buf, n, "a coefficient of its polynomial does not fit 64 bits");
        break;
    default:
        snprintf(buf, n, "?");
    }
    return buf;
}

/* ---- JSON ---- */

void mp_poly_json(jw *w, const mp_poly *q, const mp_profile *p) {
    if (!q->ok || q->partial) {
        jw_null(w);
        return;
    }
    int k = p->formulas ? p->formulas->n_vars : 0;
    jw_open(w, '[');
    for (int j = 0; j < q->n; j++) {
        const mp_term *t = &q->t[j];
        jw_open(w, '{');
        jw_key(w, "coef");
        if (t->den == 1) jw_i64(w, t->num);
        else jw_double(w, (double)t->num / (double)t->den);
        if (t->den != 1) {
            jw_key(w, "fraction");
            jw_open(w, '[');
            jw_i64(w, t->num);
            jw_i64(w, t->den);
            jw_close(w, ']');
        }
        jw_key(w, "dims");
        jw_open(w, '{');
        for (int i = 0; i < k; i++) {
            if (!t->exp[i]) continue;
            jw_key_str(w, mp_formula_var_name(p, i));
            jw_i64(w, t->exp[i]);
        }
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* The partial formulas of a set (null above): the rest's polynomials,
 * lower bounds, under "at_least" (those that are not 0); nothing when
 * there is none. */
static void fr_at_least(jw *w, const mp_profile *p, const mp_formset *fs) {
    bool any = false;
    for (int f = 0; f < MP_FF_COUNT; f++) any |= fs->f[f].ok && fs->f[f].partial && fs->f[f].n > 0;
    if (!any) return;
    jw_key(w, "at_least");
    jw_open(w, '{');
    for (int f = 0; f < MP_FF_COUNT; f++) {
        if (!fs->f[f].ok || !fs->f[f].partial || fs->f[f].n == 0) continue; /* 0: says nothing */
        mp_poly rest = fs->f[f];
        rest.partial = false;
        jw_key_str(w, mp_formula_field_key[f]);
        mp_poly_json(w, &rest, p);
    }
    jw_close(w, '}');
}

void mp_formset_json(jw *w, const mp_profile *p, const mp_formset *fs) {
    jw_open(w, '{');
    for (int f = 0; f < MP_FF_COUNT; f++) {
        jw_key_str(w, mp_formula_field_key[f]);
        mp_poly_json(w, &fs->f[f], p);
    }
    jw_ki64(w, "left_out_nodes", fs->left_out);
    fr_at_least(w, p, fs);
    jw_close(w, '}');
}

static void fr_point_json(jw *w, const mp_profile *p, const int64_t *x) {
    jw_open(w, '{');
    for (int i = 0; i < p->formulas->n_vars; i++) {
        jw_key_str(w, mp_formula_var_name(p, i));
        jw_i64(w, x[i]);
    }
    jw_close(w, '}');
}

static const char *fr_node_name(const mp_profile *p, int node) {
    const mp_graph *g = p->m->graph;
    return node >= 0 && node < g->n_nodes && g->nodes[node].name ? g->nodes[node].name : "";
}

void mp_formulas_json(jw *w, const mp_profile *p) {
    const mp_formulas *F = p->formulas;
    const mp_graph *g = p->m->graph;
    jw_open(w, '{');
    jw_key(w, "dims");
    jw_open(w, '[');
    for (int i = 0; i < F->n_vars; i++) jw_str(w, mp_formula_var_name(p, i));
    jw_close(w, ']');
    jw_key(w, "degree");
    jw_open(w, '{');
    for (int i = 0; i < F->n_vars; i++) {
        jw_key_str(w, mp_formula_var_name(p, i));
        jw_i64(w, F->degree[i]);
    }
    jw_close(w, '}');
    for (int f = 0; f < MP_FF_COUNT; f++) {
        jw_key_str(w, mp_formula_field_key[f]);
        mp_poly_json(w, &F->total.f[f], p);
    }
    jw_ki64(w, "left_out_nodes", F->total.left_out);
    fr_at_least(w, p, &F->total);
    jw_key(w, "activation_peak_bytes");
    if (F->n_peak == 1) mp_poly_json(w, &F->peak[0].poly, p);
    else jw_null(w);
    jw_key(w, "activation_peak_pieces");
    jw_open(w, '[');
    for (int c = 0; c < F->n_peak; c++) {
        jw_open(w, '{');
        jw_kstr(w, "node", fr_node_name(p, F->peak[c].node));
        jw_key(w, "poly");
        mp_poly_json(w, &F->peak[c].poly, p);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    if (F->peak_why) jw_kstr(w, "activation_peak_note", F->peak_why);
    jw_key(w, "left_out");
    jw_open(w, '[');
    for (int j = 0; j < F->n_skips; j++) {
        const mp_formula_skip *sk = &F->skips[j];
        const mp_node *nd = &g->nodes[sk->node];
        char why[600];
        jw_open(w, '{');
        jw_kstr(w, "node", fr_node_name(p, sk->node));
        jw_kstr(w, "op", nd->op ? nd->op : "");
        jw_kstr(w, "module", nd->module >= 0 && nd->module < p->m->n_modules &&
                                     p->m->modules[nd->module].path
                                 ? p->m->modules[nd->module].path
                                 : "");
        jw_kstr(w, "kind", mp_formula_skip_kind(sk->kind));
        jw_key(w, "dim");
        if (sk->var >= 0) jw_str(w, mp_formula_var_name(p, sk->var));
        else jw_null(w);
        jw_key(w, "at");
        fr_point_json(w, p, sk->at);
        jw_kbool(w, "origin", sk->origin);
        jw_kstr(w, "reason", mp_formula_skip_text(p, sk, why, sizeof why));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "ranges");
    jw_open(w, '{');
    for (int i = 0; i < F->n_vars; i++) {
        const mp_formula_range *r = &F->range[i];
        jw_key_str(w, mp_formula_var_name(p, i));
        jw_open(w, '{');
        jw_ki64(w, "min", r->lo);
        jw_ki64(w, "max", r->hi);
        jw_kbool(w, "min_bounded", r->lo_bounded);
        jw_kbool(w, "max_bounded", r->hi_bounded);
        if (r->lo_why) jw_kstr(w, "below_min", r->lo_why);
        if (r->hi_why) jw_kstr(w, "above_max", r->hi_why);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_key(w, "checked_at");
    jw_open(w, '[');
    for (int j = 0; j < F->n_checked; j++) fr_point_json(w, p, F->checked[j]);
    jw_close(w, ']');
    jw_ki64(w, "checks", F->n_checks);
    jw_ki64(w, "base", F->base);
    jw_ki64(w, "profiles", F->profiles);
    jw_kbool(w, "escalated", F->escalated);
    jw_close(w, '}');
}
