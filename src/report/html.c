/* The HTML report: one self-contained page (inline style and script,
 * nothing from the network) holding the JSON writer's output unchanged in
 * a <script type="application/json"> block; report.js renders it. The
 * template (src/report/html/report.{html,css,js}) is embedded at build time
 * (tools/embed.sh -> build/gen/report_html.h). */
#include "report/report.h"

#include <errno.h>

#include "report_html.h"
#include "trace/trace.h"

/* Copy the template from *pos up to `mark` (or to its end when mark is
 * NULL); *pos moves past the mark. */
static void tpl_until(mp_out *o, const char **pos, const char *mark) {
    const char *at = mark ? strstr(*pos, mark) : NULL;
    size_t n = at ? (size_t)(at - *pos) : strlen(*pos);
    mp_out_write(o, *pos, n);
    *pos += n + (at ? strlen(mark) : 0);
}

/* JSON text into a page's <script> block, every '<' written as \u003c: in
 * JSON text '<' only occurs inside strings, where the escape means the same
 * character, and no "</" or "<!--" can end the block early. */
void mp_html_json_write(mp_out *o, const char *p, size_t n) {
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '<') continue;
        mp_out_write(o, p + s, i - s);
        mp_out_write(o, "\\u003c", 6);
        s = i + 1;
    }
    mp_out_write(o, p + s, n - s);
}

static bool copy_json(mp_out *o, FILE *src) {
    char buf[1 << 15];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, src)) > 0) mp_html_json_write(o, buf, n);
    return !ferror(src);
}

mp_status mp_report_html_page(FILE *f, const char *kind, mp_html_json_fn json, const void *ud) {
    return mp_report_html_page_ex(f, kind, "", json, ud);
}

/* attrs: more attributes of the data block (" data-x=\"1\""), written as
 * they are (the caller's own, never text from the model). */
mp_status mp_report_html_page_ex(FILE *f, const char *kind, const char *attrs, mp_html_json_fn json,
                                 const void *ud) {
    FILE *tmp = tmpfile();
    if (!tmp) return mp_error(MP_ERR_IO, "HTML report: cannot create a temporary file: %s", strerror(errno));
    mp_status st = json(ud, tmp);
    if (st == MP_OK && (fflush(tmp) != 0 || ferror(tmp)))
        st = mp_error(MP_ERR_IO, "HTML report: cannot write its JSON: %s", strerror(errno));
    if (st != MP_OK) {
        fclose(tmp);
        return st;
    }
    rewind(tmp);
    char buf[1 << 16];
    mp_out o = {f, 0, sizeof buf, buf};
    const char *pos = mp_html_report_html;
    tpl_until(&o, &pos, "@CSS@");
    mp_out_puts(&o, mp_html_report_css);
    tpl_until(&o, &pos, "@KIND@");
    mp_out_puts(&o, kind);
    tpl_until(&o, &pos, "@ATTRS@");
    mp_out_puts(&o, attrs ? attrs : "");
    tpl_until(&o, &pos, "@DATA@");
    bool ok = copy_json(&o, tmp);
    tpl_until(&o, &pos, "@JS@");
    mp_out_puts(&o, mp_html_report_js);
    tpl_until(&o, &pos, NULL);
    mp_out_flush(&o);
    fclose(tmp);
    if (!ok) return mp_error(MP_ERR_IO, "HTML report: cannot read back its JSON: %s", strerror(errno));
    return MP_OK;
}

typedef struct prof_args {
    const mp_profile *p;
    const mp_report_options *o;
} prof_args;

static mp_status profile_json(const void *ud, FILE *f) {
    const prof_args *a = ud;
    return mp_report_json(a->p, a->o, f);
}

mp_status mp_report_html(const mp_profile *p, const mp_report_options *o, FILE *f) {
    prof_args a = {p, o};
    /* the options that shape the page: --by-module-op adds its table, to
     * --depth, with --op-top op columns */
    char attrs[128] = "";
    if (o->by_module_op)
        snprintf(attrs, sizeof attrs, " data-by-module-op=\"1\" data-op-top=\"%d\" data-depth=\"%d\"",
                 o->op_top, o->depth);
    return mp_report_html_page_ex(f, "profile", attrs, profile_json, &a);
}

typedef struct trace_args {
    const mp_trace *const *t;
    int n;
    const mp_tjob *job;
    const mp_trace_options *o;
} trace_args;

static mp_status trace_json(const void *ud, FILE *f) {
    const trace_args *a = ud;
    return mp_trace_report_json(a->t, a->n, a->job, a->o, f);
}

mp_status mp_trace_report_html(const mp_trace *const *t, int n, const mp_tjob *job,
                               const mp_trace_options *o, FILE *f) {
    trace_args a = {t, n, job, o};
    return mp_report_html_page(f, "trace", trace_json, &a);
}
