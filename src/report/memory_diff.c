/* `modelprof memory diff A B`: two snapshots compared (B - A). */
#include "report/memory_report.h"

mp_status mp_memory_write_diff(const mp_snapshot *a, const mp_snapshot *b, const mp_mem_report_opts *o, bool json,
                               FILE *f) {
    (void)a, (void)b, (void)o, (void)json, (void)f;
    return mp_error(MP_ERR_UNSUPPORTED, "memory diff: not written yet");
}
