/* The memory report as one self-contained HTML page (a timeline of live
 * memory). */
#include "report/memory_report.h"

mp_status mp_memory_write_html(const mp_snapshot *s, const mp_mem_report_opts *o, FILE *f) {
    (void)s, (void)o, (void)f;
    return mp_error(MP_ERR_UNSUPPORTED, "memory --format html: not written yet");
}
