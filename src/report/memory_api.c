/* The memory report through the public API (include/modelprof.h): a
 * snapshot read, analysed and written into a string. */
#include "report/memory_report.h"

#include <stdio.h>
#include <stdlib.h>

static void memory_defaults(mp_memory_options *o) {
    *o = (mp_memory_options){sizeof *o, MP_FORMAT_TEXT, -1, MP_MEMORY_TOP_DEFAULT, 0, 0};
}
#define MEMORY_OPTIONS_V1 MP_FIELD_END(mp_memory_options, csv_table)

mp_status mp_memory_options_init(mp_memory_options *o, size_t size) {
    mp_memory_options d;
    memory_defaults(&d);
    return mp_opts_init(o, size, &d, sizeof d, MEMORY_OPTIONS_V1, "mp_memory_options");
}

mp_status mp_memory_report_file(const char *path, const mp_memory_options *opts, char **out) {
    if (out) *out = NULL;
    if (!path || !out) return mp_error(MP_ERR_USAGE, "mp_memory_report_file: no path or output pointer");
    mp_memory_options o;
    memory_defaults(&o);
    mp_status st = mp_opts_take(&o, sizeof o, opts, MEMORY_OPTIONS_V1, "mp_memory_options");
    if (st) return st;
    if (o.format < MP_FORMAT_TEXT || o.format > MP_FORMAT_CSV)
        return mp_error(MP_ERR_USAGE, "mp_memory_report_file: unknown format %d", (int)o.format);
    if (o.csv_table < 0 || o.csv_table > 2)
        return mp_error(MP_ERR_USAGE, "mp_memory_report_file: unknown csv_table %d", o.csv_table);
    if (o.top < -1 && o.top != MP_MEMORY_TOP_DEFAULT)
        return mp_error(MP_ERR_USAGE, "mp_memory_report_file: top %d (-1: all; MP_MEMORY_TOP_DEFAULT: each format's own)",
                        o.top);
    mp_snapshot *s = NULL;
    st = mp_snapshot_read(path, &s);
    mp_mem_opts mo = {o.device, o.top == MP_MEMORY_TOP_DEFAULT ? 20 : o.top, o.full_stack != 0};
    if (!st) st = mp_snapshot_analyze(s, &mo);
    if (!st) {
        mp_mem_report_opts ro = {o.device, o.top, o.full_stack != 0, o.csv_table, NULL};
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) {
            st = mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
        } else {
            switch (o.format) {
            case MP_FORMAT_JSON: st = mp_memory_write_json(s, &ro, f); break;
            case MP_FORMAT_CSV: st = mp_memory_write_csv(s, &ro, f); break;
            case MP_FORMAT_HTML: st = mp_memory_write_html(s, &ro, f); break;
            default: st = mp_memory_write_text(s, &ro, f); break;
            }
            if (fclose(f) != 0 && !st) st = mp_error(MP_ERR_NOMEM, "out of memory while writing the report");
            if (st) free(buf);
            else *out = buf;
        }
    }
    mp_snapshot_free(s);
    return st;
}
