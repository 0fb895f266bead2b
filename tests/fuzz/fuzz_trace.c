/* libFuzzer target for the trace reader and everything after it:
 * arbitrary bytes (plain JSON or gzip) -> read -> link -> analyse -> text
 * and JSON reports -> free. Built and run by `make fuzz` and `make
 * fuzz-ci`; seeds are tests/corpus/trace (windows of the shared traces). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mp_trace t;
    mp_trace_options o = {0, -1, 5};
    if (mp_trace_open_memory(data, size, "fuzz.json", &o, &t) != MP_OK) return 0;
    const mp_trace *one = &t;
    const mp_trace *two[2] = {&t, &t};
    for (int fmt = 0; fmt < 2; fmt++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) break;
        if (fmt) (void)mp_trace_report_json(two, 2, &o, f);
        else (void)mp_trace_report_text(&one, 1, &o, f);
        fclose(f);
        free(buf);
    }
    mp_trace_free(&t);
    return 0;
}
