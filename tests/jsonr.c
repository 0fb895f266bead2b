#include "jsonr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end, *start;
    int depth;
} jr_in;

static void jr_ws(jr_in *in) {
    while (in->p < in->end && (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t'))
        in->p++;
}

static jr *jr_value(jr_in *in);

static char *jr_string(jr_in *in) {
    if (in->p >= in->end || *in->p != '"') return NULL;
    in->p++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    while (in->p < in->end && *in->p != '"') {
        unsigned char c = (unsigned char)*in->p++;
        if (c < 0x20) goto bad;
        if (c == '\\') {
            if (in->p >= in->end) goto bad;
            char e = *in->p++;
            switch (e) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                if (in->end - in->p < 4) goto bad;
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    char h = *in->p++;
                    v <<= 4;
                    if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
                    else goto bad;
                }
                c = v < 0x80 ? (unsigned char)v : '?';
                break;
            }
            default: goto bad;
            }
        }
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        out[n++] = (char)c;
    }
    if (in->p >= in->end) goto bad;
    in->p++;
    out[n] = 0;
    return out;
bad:
    free(out);
    return NULL;
}

static jr *jr_new(jr_type t) {
    jr *j = calloc(1, sizeof *j);
    j->type = t;
    return j;
}

static jr *jr_value(jr_in *in) {
    jr_ws(in);
    if (in->p >= in->end || ++in->depth > 200) return NULL;
    jr *j = NULL;
    char c = *in->p;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        j = jr_new(obj ? JR_OBJ : JR_ARR);
        in->p++;
        jr_ws(in);
        jr **tail = &j->child;
        if (in->p < in->end && *in->p == (obj ? '}' : ']')) {
            in->p++;
        } else {
            for (;;) {
                char *key = NULL;
                if (obj) {
                    jr_ws(in);
                    key = jr_string(in);
                    if (!key) goto bad;
                    jr_ws(in);
                    if (in->p >= in->end || *in->p != ':') {
                        free(key);
                        goto bad;
                    }
                    in->p++;
                }
                jr *v = jr_value(in);
                if (!v) {
                    free(key);
                    goto bad;
                }
                v->key = key;
                *tail = v;
                tail = &v->next;
                jr_ws(in);
                if (in->p < in->end && *in->p == ',') {
                    in->p++;
                    continue;
                }
                if (in->p < in->end && *in->p == (obj ? '}' : ']')) {
                    in->p++;
                    break;
                }
                goto bad;
            }
        }
    } else if (c == '"') {
        j = jr_new(JR_STR);
        j->s = jr_string(in);
        if (!j->s) goto bad;
    } else if (in->end - in->p >= 4 && !memcmp(in->p, "null", 4)) {
        j = jr_new(JR_NULL);
        in->p += 4;
    } else if (in->end - in->p >= 4 && !memcmp(in->p, "true", 4)) {
        j = jr_new(JR_BOOL);
        j->b = true;
        in->p += 4;
    } else if (in->end - in->p >= 5 && !memcmp(in->p, "false", 5)) {
        j = jr_new(JR_BOOL);
        in->p += 5;
    } else {
        const char *s = in->p;
        if (in->p < in->end && *in->p == '-') in->p++;
        if (in->p >= in->end || *in->p < '0' || *in->p > '9') return NULL;
        if (*in->p == '0' && in->p + 1 < in->end && in->p[1] >= '0' && in->p[1] <= '9') return NULL;
        bool is_int = true;
        while (in->p < in->end && ((*in->p >= '0' && *in->p <= '9') || *in->p == '.' ||
                                   *in->p == 'e' || *in->p == 'E' || *in->p == '+' || *in->p == '-')) {
            if (*in->p == '.' || *in->p == 'e' || *in->p == 'E') is_int = false;
            in->p++;
        }
        char buf[64];
        size_t n = (size_t)(in->p - s);
        if (n >= sizeof buf) return NULL;
        memcpy(buf, s, n);
        buf[n] = 0;
        j = jr_new(JR_NUM);
        char *end;
        j->num = strtod(buf, &end);
        if (*end) goto bad;
        j->is_int = is_int;
        if (is_int) j->i = strtoll(buf, NULL, 10);
        if (is_int && buf[0] != '-' && j->num > 9.2e18) j->i = (int64_t)strtoull(buf, NULL, 10);
    }
    in->depth--;
    return j;
bad:
    jr_free(j);
    return NULL;
}

jr *jr_parse(const char *text, size_t len, size_t *err) {
    jr_in in = {text, text + len, text, 0};
    jr *j = jr_value(&in);
    if (j) {
        jr_ws(&in);
        if (in.p != in.end) {
            jr_free(j);
            j = NULL;
        }
    }
    if (!j && err) *err = (size_t)(in.p - text);
    return j;
}

void jr_free(jr *j) {
    while (j) {
        jr *n = j->next;
        jr_free(j->child);
        free(j->s);
        free(j->key);
        free(j);
        j = n;
    }
}

const jr *jr_get(const jr *obj, const char *key) {
    if (!obj || obj->type != JR_OBJ) return NULL;
    for (const jr *c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    return NULL;
}

int jr_len(const jr *arr) {
    int n = 0;
    if (!arr) return 0;
    for (const jr *c = arr->child; c; c = c->next) n++;
    return n;
}

const jr *jr_at(const jr *arr, int i) {
    if (!arr) return NULL;
    for (const jr *c = arr->child; c; c = c->next)
        if (i-- == 0) return c;
    return NULL;
}

const jr *jr_path(const jr *root, const char *path) {
    char key[128];
    const jr *cur = root;
    while (cur && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        cur = jr_get(cur, key);
        path += n + (dot ? 1 : 0);
    }
    return cur;
}

char *jr_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}
