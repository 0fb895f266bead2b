/* libFuzzer target for the memory snapshot reader and everything after
 * it: arbitrary bytes (a pickle, plain or gzip) -> the safe pickle reader
 * -> snapshot decoding -> replay -> categories, steps, findings -> text,
 * JSON, CSV (three tables) and HTML reports -> free. Built and run by
 * `make fuzz` and `make fuzz-ci`; seeds are tests/fuzz/memory (hostile
 * files and small valid snapshots). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory/memory.h"
#include "report/memory_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mp_snapshot *s = NULL;
    if (mp_snapshot_read_memory(data, size, "fuzz.pickle", &s) != MP_OK) return 0;
    mp_mem_opts o = {-1, 20, true};
    if (mp_snapshot_analyze(s, &o) == MP_OK) {
        for (int fmt = 0; fmt < 6; fmt++) {
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            if (!f) break;
            mp_mem_report_opts ro = {-1, fmt == 1 ? -1 : MP_MEMORY_TOP_DEFAULT, fmt == 1, fmt - 2, NULL};
            if (fmt == 0) (void)mp_memory_write_text(s, &ro, f);
            else if (fmt == 1) (void)mp_memory_write_json(s, &ro, f);
            else if (fmt <= 4) (void)mp_memory_write_csv(s, &ro, f);
            else (void)mp_memory_write_html(s, &ro, f);
            fclose(f);
            free(buf);
        }
    }
    mp_snapshot_free(s);
    return 0;
}
