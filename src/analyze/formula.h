/* Cost as exact formulas in the symbolic dims (analyze/formula.c; the
 * method and its limits: docs/COUNTING.md, "Formulas"). A formula is a
 * polynomial with exact rational coefficients in the dims the user left
 * free, reconstructed from static profiles at integer points by the
 * unchanged counting rules, and checked against profiles at further points. */
#ifndef MP_FORMULA_H
#define MP_FORMULA_H

#include "graph/graph.h"

#define MP_FORMULA_VARS 8   /* free dims a formula takes */
#define MP_FORMULA_DEGREE 4 /* the highest power of one dim it looks for */
#define MP_FORMULA_CHECKS 16 /* points listed as checked (more may be) */

/* The figures that get a formula: id, JSON key. */
#define MP_FORMULA_FIELDS(X)              \
    X(PARAMS, "params")                   \
    X(MACS, "macs")                       \
    X(FLOPS, "flops")                     \
    X(BYTES_READ, "bytes_read")           \
    X(BYTES_WRITTEN, "bytes_written")     \
    X(ACT_BYTES, "act_bytes")

enum {
#define MP__FF(id, key) MP_FF_##id,
    MP_FORMULA_FIELDS(MP__FF)
#undef MP__FF
    MP_FF_COUNT
};
extern const char *const mp_formula_field_key[MP_FF_COUNT];

/* One term: num / den (den >= 1, lowest terms) times the product of each
 * free dim to its power. */
typedef struct mp_term {
    int64_t num, den;
    uint8_t exp[MP_FORMULA_VARS];
} mp_term;

/* A polynomial: terms by increasing total degree (then by decreasing power
 * of the first dim, ...); n == 0 is 0. ok false: no formula (see why).
 * partial: some node of the set left out (mp_formulas.skips) adds to this
 * figure, so the polynomial is the rest's, a lower bound and not the set's
 * figure: every report says so (no formula, "at least"). */
typedef struct mp_poly {
    mp_term *t;
    int n;
    bool ok;
    bool partial;
} mp_poly;

/* Is q the set's figure at every value of the dims? */
static inline bool mp_poly_exact(const mp_poly *q) { return q->ok && !q->partial; }

/* The formulas of one set of nodes (the model, a module). Nodes left out
 * (mp_formulas.skips) are not in them: the formulas are those of the rest. */
typedef struct mp_formset {
    mp_poly f[MP_FF_COUNT];
    int left_out;      /* nodes of the set left out */
} mp_formset;

/* Why a node is left out. */
enum {
    MP_FX_DEGREE = 1, /* along one dim, no polynomial of degree <= MP_FORMULA_DEGREE fits
                         consecutive values (a floor, a clamp, ...) */
    MP_FX_UNKNOWN,    /* its cost is unknown (or past 64 bits) at a point the formula is built from */
    MP_FX_CHECK,      /* it differs from its polynomial at a point checked */
    MP_FX_COEF,       /* a coefficient does not fit 64 bits */
};

typedef struct mp_formula_skip {
    int node;                     /* main-graph node */
    int kind;                     /* MP_FX_* */
    int var;                      /* the dim it shows along (index into vars); -1 several */
    int64_t at[MP_FORMULA_VARS];  /* the point it shows at (DEGREE: the line's start) */
    bool origin;                  /* no node feeding it is left out */
} mp_formula_skip;

/* The values of one dim the profile was checked over, the others at the
 * base value: lo .. hi. A bounded end: one step past it the profile fails
 * (or a cost turns unknown) and why says how, naming the node. */
typedef struct mp_formula_range {
    int64_t lo, hi;
    bool lo_bounded, hi_bounded;
    char *lo_why, *hi_why;        /* malloc'd; NULL when not bounded */
} mp_formula_range;

/* A piece of the activation peak: the live bytes after node `node`. */
typedef struct mp_peak_piece {
    int node;
    mp_poly poly;
} mp_peak_piece;

typedef struct mp_formulas {
    int n_vars;
    int vars[MP_FORMULA_VARS];     /* symbol index (model syms) of each free dim */
    int degree[MP_FORMULA_VARS];   /* the highest power found of each */
    int64_t base;                  /* the smallest value interpolated at */
    mp_formset total;              /* the model */
    mp_formset *mods;              /* per module, indexed like the profile's */
    int n_mods;
    mp_formula_skip *skips;        /* nodes left out, in graph order */
    int n_skips;
    mp_formula_range range[MP_FORMULA_VARS];
    /* The activation peak is the maximum of these (one piece: that
     * polynomial everywhere); none: no formula, peak_why says why. */
    mp_peak_piece *peak;
    int n_peak;
    char *peak_why;
    /* points at which every formula was checked against a profile (besides
     * the ones it was built from), the first MP_FORMULA_CHECKS */
    int64_t checked[MP_FORMULA_CHECKS][MP_FORMULA_VARS];
    int n_checked, n_checks;       /* listed, all */
    int profiles;                  /* static profiles computed */
    bool escalated;                /* rebuilt at degree MP_FORMULA_DEGREE in every dim */
    mp_arena arena;                /* terms */
} mp_formulas;

void mp_formulas_free(mp_formulas *f);

/* q at x (one value per free dim), exactly: false when q has no formula,
 * the value is not a non-negative integer or passes 64 bits. */
bool mp_poly_eval(const mp_poly *q, int n_vars, const int64_t *x, uint64_t *out);

#endif
