/* Values of weights, read only to judge a parameter count (docs/COUNTING.md,
 * "Folded and tied parameters"): is one tensor a transpose, cast or reshape
 * of another, and over which dims was a folded constant broadcast. The
 * static profile reads no weight otherwise; these read only candidates
 * whose shapes already match (docs/DESIGN.md, "Parameters judged by
 * value"). */
#ifndef MP_SAME_H
#define MP_SAME_H

#include "graph/graph.h"

/* A read-only view of a float tensor's elements wherever they live: raw
 * data in the model's mapping, typed fields decoded, or a range of an
 * external data file mapped. */
typedef struct mp_tview {
    int dtype;
    int64_t n;
    const uint8_t *raw;  /* little-endian elements (raw data or the mapped file) */
    void *map;           /* external data: the mapping, and its length */
    size_t map_len;
    double *dec;         /* typed fields: decoded */
} mp_tview;

/* Opens v on t, a float or bool tensor: false (v closed) when t has no
 * values to read here. */
bool mp_tview_open(const mp_model *m, const mp_tensor *t, mp_tview *v);
/* Element i (0 <= i < v->n), as a double. */
double mp_tview_get(const mp_tview *v, int64_t i);
void mp_tview_close(mp_tview *v);

/* Does tensor t have values to read here (raw, typed, or an external
 * file that is present), in a float dtype these functions compare? */
bool mp_tensor_has_values(const mp_tensor *t);

/* Is a equal, element for element, to b transposed (any permutation of
 * b's dims that gives a's), reshaped, or cast to a's dtype (rounded as a
 * cast rounds)? *how: "copy", "transpose", "reshape", "cast",
 * "transpose+cast" or "reshape+cast". False when not, or when either
 * cannot be read. */
bool mp_tensor_same(const mp_model *m, const mp_tensor *a, const mp_tensor *b,
                    const char **how);

/* The elements of the tensor a broadcast made t from: t's elements less
 * every dim whose slices are all equal (an Expand or Tile repeats its
 * source along a dim). -1 when t cannot be read. */
int64_t mp_tensor_broadcast_source(const mp_model *m, const mp_tensor *t);

/* How many distinct values t holds (a table gathered by an index keeps
 * each of its entries: Swin's relative position bias, folded); *mask (and
 * 2) when every value is 0 or very negative (-inf, or at most -1e4: an
 * attention mask), checked in place at any size. -1 when t cannot be read,
 * or is not a mask and has more than 2^24 elements (its sorted copy would
 * pass 128 MB). */
int64_t mp_tensor_distinct(const mp_model *m, const mp_tensor *t, bool *mask);

#endif
