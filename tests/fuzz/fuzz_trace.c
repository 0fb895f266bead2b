/* libFuzzer target for the trace reader and everything after it:
 * arbitrary bytes (plain JSON or gzip, or a digest) -> read -> link ->
 * analyse -> digest and back -> a two-rank job of the trace and a copy
 * -> text and JSON reports -> free. Built and run by `make fuzz` and
 * `make fuzz-ci`; seeds are tests/corpus/trace (windows of the shared
 * traces). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mp_status open_any(const uint8_t *data, size_t size, const mp_trace_options *o, mp_trace *t) {
    if (mp_trace_is_digest(data, size)) return mp_trace_digest_read(data, size, "fuzz.json", t);
    return mp_trace_open_memory(data, size, "fuzz.json", o, t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mp_trace t, u;
    mp_trace_options o = {0, -1, 5};
    if (open_any(data, size, &o, &t) != MP_OK) return 0;
    /* its digest, read back as the second rank of a job */
    char *dbuf = NULL;
    size_t dlen = 0;
    FILE *df = open_memstream(&dbuf, &dlen);
    bool two = false;
    if (df) {
        mp_status st = mp_trace_digest_write(&t, df);
        fclose(df);
        two = st == MP_OK && mp_trace_digest_read(dbuf, dlen, "digest.json", &u) == MP_OK;
        free(dbuf);
    }
    if (two) u.raw.rank = t.raw.rank >= 0 ? t.raw.rank + 1 : 1;
    if (two && t.raw.rank < 0) t.raw.rank = 0;
    mp_trace *pt[2] = {&t, &u};
    mp_tjob job;
    bool have_job = two && mp_trace_job(pt, 2, &job) == MP_OK;
    const mp_trace *one = &t;
    const mp_trace *const *both = (const mp_trace *const *)pt;
    for (int fmt = 0; fmt < 2; fmt++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) break;
        if (fmt && two) (void)mp_trace_report_json(both, 2, have_job ? &job : NULL, &o, f);
        else (void)mp_trace_report_text(&one, 1, NULL, &o, f);
        fclose(f);
        free(buf);
    }
    if (have_job) mp_tjob_free(&job);
    if (two) mp_trace_free(&u);
    mp_trace_free(&t);
    return 0;
}
