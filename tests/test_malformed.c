/* Malformed and hostile models (docs/SECURITY.md): every case is built
 * byte by byte with tests/pbw.c (so the corpus is reproducible) and must
 * fail with a specific status and a message naming the file and the node,
 * tensor, attribute or limit concerned; through the CLI it must exit 2
 * with exactly one line on stderr. A few real byte files are committed in
 * tests/corpus/malformed (listed with their expectations in EXPECT).
 *
 * Set MP_CORPUS_OUT=DIR to also write every generated case into DIR (how
 * the committed files and the fuzzer's seeds were made). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyze/profile.h"
#include "graph/graph.h"
#include "pbw.h"
#include "tbuild.h"
#include "tcli.h"
#include "test.h"

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- files ---- */

static char mdir_buf[64];

static const char *mdir(void) {
    if (!mdir_buf[0]) {
        snprintf(mdir_buf, sizeof mdir_buf, "/tmp/mp-mal-XXXXXX");
        if (!mkdtemp(mdir_buf)) abort();
    }
    return mdir_buf;
}

/* Path of `name` in the test folder (rotating buffers: a few at once). */
static const char *mpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", mdir(), name);
    return b;
}

static void corpus_copy(const char *name, const void *b, size_t n) {
    const char *dir = getenv("MP_CORPUS_OUT");
    if (!dir || !*dir) return;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

static const char *write_bytes(const char *name, const void *b, size_t n) {
    const char *p = mpath(name);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (n && fwrite(b, 1, n, f) != n) abort();
    fclose(f);
    corpus_copy(name, b, n);
    return p;
}

/* A model around graph g (freed), written as `name`. */
static const char *write_model(const char *name, pbw *g, int opset) {
    pbw model = {0};
    onx_model(&model, 8, opset, g);
    const char *p = write_bytes(name, model.b, model.n);
    pbw_free(&model);
    return p;
}

/* ---- the command line ---- */

typedef t_cli cli_res;
static cli_res cli(const char *const *args) { return t_cli_run(args, 0, 0); }
static void cli_free(cli_res *r) { t_cli_free(r); }

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void check_needles(const char *where, const char *msg, const char *const *needles,
                          int line) {
    for (int i = 0; needles && needles[i]; i++)
        if (!strstr(msg, needles[i]))
            mp_t_fail(__FILE__, line, "%s message '%s' lacks '%s'", where, msg, needles[i]);
}

/* The whole contract for one bad input at `path`: the library (load,
 * then profile) fails with `want` and a message holding the needles (and
 * the path, when the loader fails); the CLI (with extra args, the limits
 * given the same way) exits 2 with one stderr line holding the path and
 * the needles, and prints nothing on stdout. */
static void expect_bad_at(int line, const char *path, mp_status want, const char *const *needles,
                          const mp_limits *lim, const char *const *extra) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    mp_status st = mp_model_load_ex(path, lim, &m);
    bool at_load = st != MP_OK;
    if (!st) st = mp_profile_static(m, &p);
    if (st != want)
        mp_t_fail(__FILE__, line, "%s: status %s, expected %s (%s)", path, mp_status_name(st),
                  mp_status_name(want), mp_last_error());
    if (at_load && m) mp_t_fail(__FILE__, line, "a failed load returned a model");
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mp_last_error());
    check_needles("library", msg, needles, line);
    if (at_load && !strstr(msg, path))
        mp_t_fail(__FILE__, line, "library message '%s' does not name the file", msg);
    mp_profile_free(p);
    mp_model_free(m);

    const char *args[40];
    int n = 0;
    for (int i = 0; extra && extra[i] && n < 36; i++) args[n++] = extra[i];
    args[n++] = path;
    args[n] = NULL;
    cli_res r = cli(args);
    if (r.code != 2) mp_t_fail(__FILE__, line, "CLI exit %d, expected 2 (stderr: %s)", r.code, r.err);
    if (lines(r.err) != 1 || strncmp(r.err, "modelprof: ", 11) != 0)
        mp_t_fail(__FILE__, line, "CLI stderr is not one 'modelprof:' line: '%s'", r.err);
    if (!strstr(r.err, path)) mp_t_fail(__FILE__, line, "CLI message '%s' does not name the file", r.err);
    check_needles("CLI", r.err, needles, line);
    if (r.out[0]) mp_t_fail(__FILE__, line, "CLI printed a report on failure");
    cli_free(&r);
}

#define EXPECT_BAD(path, want, needles) expect_bad_at(__LINE__, path, want, needles, NULL, NULL)
#define EXPECT_BAD_LIM(path, want, needles, lim, extra) \
    expect_bad_at(__LINE__, path, want, needles, lim, extra)

/* A model the tool must accept: load and profile succeed, the CLI exits
 * 0. Returns the CLI's stdout (free it) when want_out. */
static char *expect_good_at(int line, const char *path, const char *const *extra, bool want_out) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    mp_status st = mp_model_load(path, &m);
    if (!st) st = mp_profile_static(m, &p);
    if (st) mp_t_fail(__FILE__, line, "%s: %s", path, mp_last_error());
    mp_profile_free(p);
    mp_model_free(m);
    const char *args[40];
    int n = 0;
    for (int i = 0; extra && extra[i] && n < 36; i++) args[n++] = extra[i];
    args[n++] = path;
    args[n] = NULL;
    cli_res r = cli(args);
    if (r.code != 0) mp_t_fail(__FILE__, line, "CLI exit %d: %s", r.code, r.err);
    free(r.err);
    if (want_out) return r.out;
    free(r.out);
    return NULL;
}
#define EXPECT_GOOD(path, extra) expect_good_at(__LINE__, path, extra, false)

/* ---- graphs ---- */

/* x[N,4] -> Relu -> y */
static void relu_graph(pbw *g) {
    const char *syms[] = {"N", NULL};
    onx_node(g, 1, "Relu", "act", "x", "y", NULL);
    onx_value_info(g, 11, "x", 1, 2, (const int64_t[]){-1, 4}, syms);
    onx_value_info(g, 12, "y", 1, 2, (const int64_t[]){-1, 4}, syms);
}

static void opset_import(pbw *model, const char *domain, int64_t version, bool has_version) {
    pbw os = {0};
    pbw_str(&os, 1, domain);
    if (has_version) pbw_int(&os, 2, (uint64_t)version);
    pbw_msg(model, 8, &os);
}

/* A richer valid model: Conv (raw weights), Relu, Reshape from an inline
 * shape constant, MatMul with an absent external weight, an If whose
 * branches read an outer value, a local function called twice. Used for
 * truncation and bit flips, and as a fuzzing seed. */
static void rich_model(pbw *model) {
    const char *syms[] = {"N", NULL, NULL, NULL};
    pbw g = {0}, fn = {0}, os = {0}, a = {0}, then_g = {0}, else_g = {0}, ia = {0};
    float w[2 * 3 * 3 * 3];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = (float)i * 0.01f;
    int64_t shape[2] = {-1, 2 * 4 * 4};
    onx_attr_ints(&a, "kernel_shape", 2, (const int64_t[]){3, 3});
    onx_attr_ints(&a, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    onx_node(&g, 1, "Conv", "/features/conv/Conv", "x,W", "c", &a);
    onx_node(&g, 1, "Relu", "/features/act/Relu", "c", "r", NULL);
    onx_node(&g, 1, "Reshape", "/flat/Reshape", "r,shape", "f", NULL);
    onx_node(&g, 1, "MatMul", "/fc/MatMul", "f,Wfc", "h", NULL);
    pbw n1 = {0}, n2 = {0};
    pbw_str(&n1, 1, "h");
    pbw_str(&n1, 2, "h2");
    pbw_str(&n1, 3, "/block1/Block");
    pbw_str(&n1, 4, "Block");
    pbw_str(&n1, 7, "local");
    pbw_msg(&g, 1, &n1);
    pbw_str(&n2, 1, "h2");
    pbw_str(&n2, 2, "h3");
    pbw_str(&n2, 3, "/block2/Block");
    pbw_str(&n2, 4, "Block");
    pbw_str(&n2, 7, "local");
    pbw_msg(&g, 1, &n2);
    onx_node(&then_g, 1, "Relu", "t_relu", "h3", "t_out", NULL);
    onx_value_info(&then_g, 12, "t_out", 1, 2, (const int64_t[]){-1, 8}, syms);
    onx_node(&else_g, 1, "Neg", "e_neg", "h3", "e_out", NULL);
    onx_value_info(&else_g, 12, "e_out", 1, 2, (const int64_t[]){-1, 8}, syms);
    onx_attr_graph(&ia, "then_branch", &then_g);
    onx_attr_graph(&ia, "else_branch", &else_g);
    onx_node(&g, 1, "If", "/branch/If", "cond", "y", &ia);
    onx_value_info(&g, 11, "x", 1, 4, (const int64_t[]){-1, 3, 4, 4}, syms);
    onx_value_info(&g, 11, "cond", 9, 0, NULL, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){-1, 8}, syms);
    onx_tensor(&g, 5, "W", 1, 4, (const int64_t[]){2, 3, 3, 3}, w, sizeof w);
    onx_tensor(&g, 5, "shape", 7, 1, (const int64_t[]){2}, shape, sizeof shape);
    onx_tensor_external(&g, 5, "Wfc", 1, 2, (const int64_t[]){32, 8}, "absent.bin", NULL, NULL);
    pbw_str(&g, 2, "rich");
    pbw_str(&fn, 1, "Block");
    pbw_str(&fn, 10, "local");
    pbw_str(&fn, 4, "i");
    pbw_str(&fn, 5, "o");
    onx_node(&fn, 7, "Sigmoid", "s", "i", "t", NULL);
    onx_node(&fn, 7, "Mul", "m", "i,t", "o", NULL);
    pbw_str(&os, 1, "");
    pbw_int(&os, 2, 17);
    pbw_msg(&fn, 9, &os);
    onx_model(model, 8, 17, &g);
    opset_import(model, "local", 1, true);
    pbw_msg(model, 25, &fn);
}

/* ---- not a model at all ---- */

static void t_empty_random_text(void) {
    EXPECT_BAD(write_bytes("empty.onnx", NULL, 0), MP_ERR_FORMAT, NEEDLES("empty"));
    const char *text = "ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n";
    EXPECT_BAD(write_bytes("text.onnx", text, strlen(text)), MP_ERR_FORMAT, NEEDLES("ONNX"));
    /* random bytes: several seeds and sizes; each a clean format error */
    uint32_t s = 12345;
    for (int k = 0; k < 16; k++) {
        uint8_t rnd[1024];
        size_t n = 1 + (size_t)(k * 61) % sizeof rnd;
        for (size_t i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            rnd[i] = (uint8_t)(s >> 16);
        }
        char name[32];
        snprintf(name, sizeof name, "random%d.onnx", k);
        EXPECT_BAD(write_bytes(name, rnd, n), MP_ERR_FORMAT, NEEDLES("ONNX"));
    }
}

static void t_not_a_file(void) {
    /* a fifo: refused without hanging on open; a folder */
    const char *fifo = mpath("fifo.onnx");
    unlink(fifo);
    T_CHECK(mkfifo(fifo, 0600) == 0);
    EXPECT_BAD(fifo, MP_ERR_IO, NEEDLES("not a regular file"));
    EXPECT_BAD(mdir(), MP_ERR_IO, NEEDLES("not a regular file"));
    EXPECT_BAD(mpath("does-not-exist.onnx"), MP_ERR_IO, NEEDLES("cannot open"));
}

/* ---- the wire format ---- */

static void t_truncated_everywhere(void) {
    pbw model = {0};
    rich_model(&model);
    corpus_copy("rich.onnx", model.b, model.n);
    /* every prefix fails cleanly (or is a valid model: a prefix can be) */
    int failed = 0;
    for (size_t cut = 0; cut < model.n; cut++) {
        mp_model *m = NULL;
        mp_status st = mp_model_load_memory(model.b, cut, "cut.onnx", NULL, &m);
        if (st == MP_OK) {
            mp_profile *p = NULL;
            mp_status ps = mp_profile_static(m, &p);
            if (ps != MP_OK && !mp_last_error()[0]) mp_t_fail(__FILE__, __LINE__, "no message");
            mp_profile_free(p);
        } else {
            failed++;
            if (st != MP_ERR_FORMAT)
                mp_t_fail(__FILE__, __LINE__, "cut at %zu: %s (%s)", cut, mp_status_name(st),
                          mp_last_error());
            if (!strstr(mp_last_error(), "cut.onnx"))
                mp_t_fail(__FILE__, __LINE__, "cut at %zu: message '%s' lacks the name", cut,
                          mp_last_error());
        }
        T_CHECK((st == MP_OK) == (m != NULL));
        mp_model_free(m);
    }
    T_CHECK(failed > (int)model.n / 2);
    /* and through the CLI at a few offsets: exit 2, one line */
    size_t cuts[] = {1, 7, model.n / 3, model.n / 2, model.n - 5};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "cut%zu.onnx", cuts[i]);
        EXPECT_BAD(write_bytes(name, model.b, cuts[i]), MP_ERR_FORMAT, NEEDLES("ONNX"));
    }
    pbw_free(&model);
}

static void t_bit_flips(void) {
    /* every bit of a valid model flipped in turn: any outcome but a crash,
     * and every failure has a message */
    pbw model = {0};
    rich_model(&model);
    uint8_t *b = malloc(model.n);
    int ok = 0, bad = 0;
    for (size_t i = 0; i < model.n; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, model.b, model.n);
            b[i] ^= (uint8_t)(1u << bit);
            mp_model *m = NULL;
            mp_profile *p = NULL;
            mp_status st = mp_model_load_memory(b, model.n, "flip.onnx", NULL, &m);
            if (!st) st = mp_profile_static(m, &p);
            if (st) {
                bad++;
                if (!mp_last_error()[0])
                    mp_t_fail(__FILE__, __LINE__, "flip %zu.%d: %s without a message", i, bit,
                              mp_status_name(st));
                if (st == MP_ERR_NOMEM || st == MP_ERR_USAGE)
                    mp_t_fail(__FILE__, __LINE__, "flip %zu.%d: %s: %s", i, bit,
                              mp_status_name(st), mp_last_error());
            } else {
                ok++;
            }
            mp_profile_free(p);
            mp_model_free(m);
        }
    T_CHECK(bad > 0 && ok > 0);
    free(b);
    pbw_free(&model);
}

static void t_varint_and_length(void) {
    /* ir_version as an 11-byte varint */
    uint8_t v[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    EXPECT_BAD(write_bytes("varint11.onnx", v, sizeof v), MP_ERR_FORMAT, NEEDLES("malformed", "byte"));
    /* a 10-byte varint above 64 bits */
    uint8_t v2[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    EXPECT_BAD(write_bytes("varint65.onnx", v2, sizeof v2), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* the graph's length field runs past the end */
    uint8_t c[] = {0x08, 0x08, 0x3a, 0x7f, 0x0a, 0x01};
    EXPECT_BAD(write_bytes("length.onnx", c, sizeof c), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* a length of 2^63 */
    uint8_t d[] = {0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    EXPECT_BAD(write_bytes("length63.onnx", d, sizeof d), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* a length past the end deep inside: a node's attribute */
    pbw g = {0}, n = {0};
    pbw_str(&n, 4, "Relu");
    pbw_key(&n, 5, 2);
    pbw_varint_raw(&n, 1000); /* attribute of 1000 bytes, 0 present */
    pbw_msg(&g, 1, &n);
    EXPECT_BAD(write_model("length_attr.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* wire types 3 and 4 (groups) and 6, 7 */
    uint8_t e[] = {0x08, 0x08, 0x3b, 0x00};
    EXPECT_BAD(write_bytes("group.onnx", e, sizeof e), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* field number 0 */
    uint8_t z[] = {0x02, 0x00};
    EXPECT_BAD(write_bytes("field0.onnx", z, sizeof z), MP_ERR_FORMAT, NEEDLES("malformed"));
}

/* ---- deep nesting: the decoder must not recurse without bound ---- */

static void put_len(pbw *w, uint64_t n) { pbw_varint_raw(w, n); }

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* `levels` Ifs, each the then_branch of the one above: written outside
 * in (lengths computed first), so a 100,000-level file is linear work. */
static void nested_if_model(pbw *model, int levels) {
    static const uint8_t op[] = {0x22, 0x02, 'I', 'f'};           /* op_type "If" */
    static const uint8_t an[] = {0x0a, 0x0b, 't', 'h', 'e', 'n', '_', 'b', 'r', 'a', 'n', 'c', 'h'};
    static const uint8_t at[] = {0xa0, 0x01, 0x05};                /* type GRAPH */
    uint64_t *gl = malloc(sizeof *gl * (size_t)(levels + 1));
    uint64_t *nl = malloc(sizeof *nl * (size_t)(levels + 1));
    uint64_t *al = malloc(sizeof *al * (size_t)(levels + 1));
    gl[0] = 0;
    for (int k = 1; k <= levels; k++) {
        al[k] = sizeof an + sizeof at + 1 + varint_len(gl[k - 1]) + gl[k - 1];
        nl[k] = sizeof op + 1 + varint_len(al[k]) + al[k];
        gl[k] = 1 + varint_len(nl[k]) + nl[k];
    }
    pbw_int(model, 1, 8);
    opset_import(model, "", 17, true);
    pbw_key(model, 7, 2);
    put_len(model, gl[levels]);
    for (int k = levels; k >= 1; k--) {
        pbw_key(model, 1, 2); /* graph.node */
        put_len(model, nl[k]);
        pbw_raw(model, op, sizeof op);
        pbw_key(model, 5, 2); /* node.attribute */
        put_len(model, al[k]);
        pbw_raw(model, an, sizeof an);
        pbw_raw(model, at, sizeof at);
        pbw_key(model, 6, 2); /* attribute.g */
        put_len(model, gl[k - 1]);
    }
    free(gl);
    free(nl);
    free(al);
}

static void t_deep_subgraphs(void) {
    pbw model = {0};
    nested_if_model(&model, 100000);
    const char *p = write_bytes("nested_if_100k.onnx", model.b, model.n);
    EXPECT_BAD(p, MP_ERR_LIMIT, NEEDLES("then_branch", "depth", "--limit depth=N"));
    pbw_free(&model);
    /* 3 levels under a limit of 2 */
    pbw m3 = {0};
    nested_if_model(&m3, 3);
    p = write_bytes("nested_if_3.onnx", m3.b, m3.n);
    mp_limits lim;
    mp_limits_default(&lim);
    lim.max_depth = 2;
    EXPECT_BAD_LIM(p, MP_ERR_LIMIT, NEEDLES("depth", "If"), &lim, ARGS("--limit", "depth=2"));
    pbw_free(&m3);
}

/* A value whose type is a sequence of sequences ... `levels` deep. */
static void t_deep_types_and_unknown_fields(void) {
    int levels = 100000;
    /* TypeProto{sequence_type(4){elem_type(1){TypeProto ...}}}, innermost
     * a tensor type */
    uint64_t *tl = malloc(sizeof *tl * (size_t)(levels + 1));
    pbw inner = {0}, tt = {0};
    pbw_int(&tt, 1, 1);
    pbw_msg(&inner, 1, &tt);
    tl[0] = inner.n;
    for (int k = 1; k <= levels; k++) {
        uint64_t seq = 1 + varint_len(tl[k - 1]) + tl[k - 1];
        tl[k] = 1 + varint_len(seq) + seq;
    }
    pbw g = {0}, vi = {0};
    pbw_str(&vi, 1, "s");
    pbw_key(&vi, 2, 2);
    put_len(&vi, tl[levels]);
    for (int k = levels; k >= 1; k--) {
        pbw_key(&vi, 4, 2);
        put_len(&vi, 1 + varint_len(tl[k - 1]) + tl[k - 1]);
        pbw_key(&vi, 1, 2);
        put_len(&vi, tl[k - 1]);
    }
    pbw_raw(&vi, inner.b, inner.n);
    pbw_free(&inner);
    free(tl);
    pbw_msg(&g, 11, &vi);
    /* a node carrying an unknown field nested 100,000 deep */
    pbw n = {0};
    pbw_str(&n, 1, "x");
    pbw_str(&n, 2, "y");
    pbw_str(&n, 4, "Relu");
    uint64_t len = 0;
    uint64_t *ul = malloc(sizeof *ul * (size_t)(levels + 1));
    ul[0] = 0;
    for (int k = 1; k <= levels; k++) ul[k] = 1 + varint_len(ul[k - 1]) + ul[k - 1];
    len = ul[levels];
    pbw_key(&n, 99, 2);
    put_len(&n, len);
    for (int k = levels; k >= 1; k--) {
        pbw_key(&n, 1, 2);
        put_len(&n, ul[k - 1]);
    }
    free(ul);
    pbw_msg(&g, 1, &n);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 3}, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 3}, NULL);
    const char *p = write_model("nested_types.onnx", &g, 17);
    EXPECT_GOOD(p, NULL);
}

/* ---- functions ---- */

static void fn_proto(pbw *model, const char *name, const char *callee, int calls) {
    pbw fn = {0}, os = {0};
    pbw_str(&fn, 1, name);
    pbw_str(&fn, 10, "local");
    pbw_str(&fn, 4, "i");
    pbw_str(&fn, 5, "o");
    if (!callee) {
        onx_node(&fn, 7, "Relu", "r", "i", "o", NULL);
    } else {
        char prev[16] = "i", next[16];
        for (int c = 0; c < calls; c++) {
            snprintf(next, sizeof next, c == calls - 1 ? "o" : "t%d", c);
            pbw n = {0};
            pbw_str(&n, 1, prev);
            pbw_str(&n, 2, next);
            pbw_str(&n, 4, callee);
            pbw_str(&n, 7, "local");
            pbw_msg(&fn, 7, &n);
            snprintf(prev, sizeof prev, "%s", next);
        }
    }
    pbw_str(&os, 1, "");
    pbw_int(&os, 2, 17);
    pbw_msg(&fn, 9, &os);
    pbw_msg(model, 25, &fn);
}

static const char *fn_model(const char *file, const char *top, int n_fns, int calls,
                            bool recursive) {
    pbw g = {0}, model = {0}, n = {0};
    pbw_str(&n, 1, "x");
    pbw_str(&n, 2, "y");
    pbw_str(&n, 3, "call");
    pbw_str(&n, 4, top);
    pbw_str(&n, 7, "local");
    pbw_msg(&g, 1, &n);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 3}, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 3}, NULL);
    onx_model(&model, 8, 17, &g);
    opset_import(&model, "local", 1, true);
    if (recursive) {
        fn_proto(&model, top, top, 1);
    } else {
        for (int i = 0; i < n_fns; i++) {
            char name[16], callee[16];
            snprintf(name, sizeof name, "F%d", i);
            snprintf(callee, sizeof callee, "F%d", i + 1);
            fn_proto(&model, name, i + 1 < n_fns ? callee : NULL, calls);
        }
    }
    const char *p = write_bytes(file, model.b, model.n);
    pbw_free(&model);
    return p;
}

static void t_functions(void) {
    /* a function calling itself */
    EXPECT_BAD(fn_model("fn_recursive.onnx", "Self", 1, 1, true), MP_ERR_LIMIT,
               NEEDLES("'Self'", "recursive", "depth"));
    /* 100 functions, each calling the next */
    EXPECT_BAD(fn_model("fn_chain100.onnx", "F0", 100, 1, false), MP_ERR_LIMIT,
               NEEDLES("function 'F", "depth"));
    /* 30 levels, each calling the next twice: 2^30 nodes once inlined */
    mp_limits lim;
    mp_limits_default(&lim);
    lim.max_nodes = 10000;
    EXPECT_BAD_LIM(fn_model("fn_fanout.onnx", "F0", 30, 2, false), MP_ERR_LIMIT,
                   NEEDLES("nodes", "--max-nodes"), &lim, ARGS("--max-nodes", "10000"));
    /* a short chain loads */
    EXPECT_GOOD(fn_model("fn_chain5.onnx", "F0", 5, 2, false), NULL);
}

/* ---- graph structure ---- */

static void t_cycle_and_undefined(void) {
    pbw g = {0};
    relu_graph(&g);
    onx_node(&g, 1, "Add", "a1", "y,b", "a", NULL);
    onx_node(&g, 1, "Relu", "b1", "a", "b", NULL);
    EXPECT_BAD(write_model("cycle.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("cycle", "node '"));
    pbw g1 = {0};
    relu_graph(&g1);
    onx_node(&g1, 1, "Relu", "self", "z", "z", NULL);
    EXPECT_BAD(write_model("self_loop.onnx", &g1, 14), MP_ERR_FORMAT, NEEDLES("'self'", "'z'"));
    pbw g2 = {0};
    relu_graph(&g2);
    onx_node(&g2, 1, "Add", "adder", "y,ghost", "z", NULL);
    EXPECT_BAD(write_model("undefined.onnx", &g2, 14), MP_ERR_FORMAT,
               NEEDLES("'adder'", "'ghost'"));
    /* a graph output nothing produces */
    pbw g3 = {0};
    relu_graph(&g3);
    onx_value_info(&g3, 12, "nowhere", 1, 1, (const int64_t[]){4}, NULL);
    EXPECT_BAD(write_model("undefined_output.onnx", &g3, 14), MP_ERR_FORMAT,
               NEEDLES("'nowhere'"));
}

static void t_duplicate_names(void) {
    float w[16] = {0};
    /* two initializers with one name */
    pbw g = {0};
    relu_graph(&g);
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    EXPECT_BAD(write_model("dup_init.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("'W'", "twice"));
    /* an initializer and a graph input with one name: allowed (IR < 4's
     * default values) when they agree, refused when they do not */
    pbw g1 = {0};
    relu_graph(&g1);
    onx_tensor(&g1, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_value_info(&g1, 11, "W", 1, 2, (const int64_t[]){4, 4}, NULL);
    EXPECT_GOOD(write_model("init_and_input.onnx", &g1, 14), ARGS("--dim", "N=2"));
    pbw g2 = {0};
    relu_graph(&g2);
    onx_tensor(&g2, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_value_info(&g2, 11, "W", 1, 2, (const int64_t[]){8, 2}, NULL);
    EXPECT_BAD(write_model("init_and_input_differ.onnx", &g2, 14), MP_ERR_FORMAT,
               NEEDLES("'W'", "input", "initializer"));
    pbw g2b = {0};
    relu_graph(&g2b);
    onx_tensor(&g2b, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_value_info(&g2b, 11, "W", 7, 2, (const int64_t[]){4, 4}, NULL);
    EXPECT_BAD(write_model("init_and_input_dtype.onnx", &g2b, 14), MP_ERR_FORMAT,
               NEEDLES("'W'", "int64", "fp32"));
    /* two nodes writing one value */
    pbw g3 = {0};
    relu_graph(&g3);
    onx_node(&g3, 1, "Relu", "again", "x", "y", NULL);
    EXPECT_BAD(write_model("dup_producer.onnx", &g3, 14), MP_ERR_FORMAT,
               NEEDLES("'again'", "'y'", "'act'"));
    /* a node writing a graph input, or an initializer */
    pbw g4 = {0};
    relu_graph(&g4);
    onx_node(&g4, 1, "Neg", "clobber", "y", "x", NULL);
    EXPECT_BAD(write_model("writes_input.onnx", &g4, 14), MP_ERR_FORMAT,
               NEEDLES("'clobber'", "'x'", "graph input"));
    pbw g5 = {0};
    relu_graph(&g5);
    onx_tensor(&g5, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_node(&g5, 1, "Neg", "clobber", "y", "W", NULL);
    EXPECT_BAD(write_model("writes_init.onnx", &g5, 14), MP_ERR_FORMAT,
               NEEDLES("'clobber'", "'W'", "initializer"));
    /* one node writing the same value twice */
    pbw g6 = {0};
    relu_graph(&g6);
    onx_node(&g6, 1, "Split", "split", "y", "p,p", NULL);
    EXPECT_BAD(write_model("writes_twice.onnx", &g6, 14), MP_ERR_FORMAT,
               NEEDLES("'split'", "'p'"));
    /* a graph input listed twice */
    pbw g7 = {0};
    relu_graph(&g7);
    onx_value_info(&g7, 11, "x", 1, 2, (const int64_t[]){3, 4}, NULL);
    EXPECT_BAD(write_model("input_twice.onnx", &g7, 14), MP_ERR_FORMAT,
               NEEDLES("'x'", "twice"));
}

static void t_names(void) {
    /* a NUL byte inside a value name would alias another name */
    pbw g = {0}, n = {0};
    pbw_str(&n, 1, "x");
    pbw_bytes(&n, 2, "y\0z", 3);
    pbw_str(&n, 4, "Relu");
    pbw_msg(&g, 1, &n);
    onx_value_info(&g, 11, "x", 1, 1, (const int64_t[]){4}, NULL);
    EXPECT_BAD(write_model("nul_name.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("NUL"));
    /* a name of 2 MiB */
    size_t big = 2u << 20;
    char *s = malloc(big + 1);
    memset(s, 'a', big);
    s[big] = 0;
    pbw g1 = {0};
    relu_graph(&g1);
    onx_node(&g1, 1, "Relu", s, "y", "z", NULL);
    free(s);
    EXPECT_BAD(write_model("long_name.onnx", &g1, 14), MP_ERR_LIMIT, NEEDLES("node name", "limit"));
    /* control characters in a name stay on one stderr line */
    pbw g2 = {0};
    relu_graph(&g2);
    onx_node(&g2, 1, "Add", "evil\nname\r\x1b[31m", "y,ghost", "z", NULL);
    EXPECT_BAD(write_model("newline_name.onnx", &g2, 14), MP_ERR_FORMAT, NEEDLES("evil"));
}

/* ---- dims ---- */

static void t_negative_and_huge_dims(void) {
    float w[4] = {0};
    pbw g = {0};
    relu_graph(&g);
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){-3, 4}, NULL, 0);
    EXPECT_BAD(write_model("neg_init.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("'W'", "negative"));
    pbw g1 = {0};
    onx_node(&g1, 1, "Relu", "act", "x", "y", NULL);
    onx_value_info(&g1, 11, "x", 1, 2, (const int64_t[]){2, 4}, NULL);
    /* value_info with dim -5 */
    pbw vi = {0}, ty = {0}, tt = {0}, sh = {0}, d0 = {0};
    pbw_int(&d0, 1, (uint64_t)-5);
    pbw_msg(&sh, 1, &d0);
    pbw_int(&tt, 1, 1);
    pbw_msg(&tt, 2, &sh);
    pbw_msg(&ty, 1, &tt);
    pbw_str(&vi, 1, "y");
    pbw_msg(&vi, 2, &ty);
    pbw_msg(&g1, 12, &vi);
    EXPECT_BAD(write_model("neg_value_info.onnx", &g1, 14), MP_ERR_FORMAT,
               NEEDLES("'y'", "negative"));
    /* an initializer of 2^32 x 2^32 x 4 elements: past 2^63 */
    pbw g2 = {0};
    relu_graph(&g2);
    onx_tensor(&g2, 5, "W", 1, 3, (const int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32, 4}, w,
               sizeof w);
    EXPECT_BAD(write_model("huge_init.onnx", &g2, 14), MP_ERR_FORMAT, NEEDLES("'W'", "overflow"));
    /* rank 65 */
    int64_t d65[65];
    for (int i = 0; i < 65; i++) d65[i] = 1;
    pbw g3 = {0};
    relu_graph(&g3);
    onx_value_info(&g3, 13, "big_rank", 1, 65, d65, NULL);
    EXPECT_BAD(write_model("rank65.onnx", &g3, 14), MP_ERR_LIMIT, NEEDLES("'big_rank'", "rank"));
    pbw g4 = {0};
    relu_graph(&g4);
    onx_tensor(&g4, 5, "T65", 1, 65, d65, w, 4);
    EXPECT_BAD(write_model("rank65_init.onnx", &g4, 14), MP_ERR_LIMIT, NEEDLES("'T65'", "rank"));
}

/* value_info, --input and --dim past 2^63 elements: profiled, and every
 * report says the figures overflowed (never a quiet wrong number). */
static void check_overflow_report(int line, const char *path, const char *const *extra) {
    const char *args[16];
    int n = 0;
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n++] = path;
    args[n] = NULL;
    cli_res r = cli(args);
    if (r.code != 0) mp_t_fail(__FILE__, line, "exit %d: %s", r.code, r.err);
    if (!strstr(r.out, "overflow")) mp_t_fail(__FILE__, line, "the text report does not say overflow");
    cli_free(&r);
    args[n++] = "--format";
    args[n++] = "json";
    args[n] = NULL;
    r = cli(args);
    if (r.code != 0) mp_t_fail(__FILE__, line, "json exit %d: %s", r.code, r.err);
    if (!strstr(r.out, "\"overflow\": true")) mp_t_fail(__FILE__, line, "the JSON report lacks \"overflow\": true");
    cli_free(&r);
}

static void t_overflowing_shapes(void) {
    pbw g = {0};
    onx_node(&g, 1, "Relu", "act", "x", "y", NULL);
    onx_value_info(&g, 11, "x", 1, 3, (const int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32, 4}, NULL);
    onx_value_info(&g, 12, "y", 1, 3, (const int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32, 4}, NULL);
    const char *p = write_model("huge_value_info.onnx", &g, 14);
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    T_OK(mp_model_load(p, &m));
    if (m) T_OK(mp_profile_static(m, &prof));
    if (prof) {
        T_CHECK(prof->overflow);
        T_CHECK(m->graph->nodes[0].cost.flags & MP_COST_OVERFLOW);
        T_EQ_U64(prof->total.flops, UINT64_MAX);
    }
    mp_profile_free(prof);
    mp_model_free(m);
    check_overflow_report(__LINE__, p, NULL);
    /* --input and --dim */
    pbw g1 = {0};
    relu_graph(&g1);
    p = write_model("relu.onnx", &g1, 14);
    check_overflow_report(__LINE__, p, ARGS("--input", "x=4611686018427387904x4"));
    check_overflow_report(__LINE__, p, ARGS("--dim", "N=4611686018427387904"));
    /* negative or unparsable values are usage errors (exit 1) */
    const char *const bad[][3] = {{"--dim", "N=-5", NULL},
                                  {"--dim", "N=99999999999999999999", NULL},
                                  {"--input", "x=-1x4", NULL},
                                  {"--input", "x=2x99999999999999999999", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_res r = cli(ARGS(bad[i][0], bad[i][1], p));
        T_EQ(r.code, 1);
        T_CHECK(strstr(r.err, bad[i][0]) != NULL);
        cli_free(&r);
    }
}

/* MatMul [2^21,2^21] x [2^21,2^21]: 2^63 MACs (2^64 FLOPs); [2^22,2^22]
 * squared: 2^66 MACs. */
/* The activation peak is exact to 2^64 - 1 and saturated (overflow) past
 * it, as every total. Before: a value past 2^61 bytes was clamped to 2^61
 * unflagged (batch 1e12 of resnet18: peak 4611686018427387902 where the
 * true 6422528000000000000 fits), a value's bytes saturated when its bits
 * passed 2^64 (numel x 32), and at batch 2^63-1 the text showed a finite
 * "6.92 EB" beside totals marked overflow. */
static void t_peak_past_2_61(void) {
    cli_res r = cli(ARGS("models/resnet18.onnx", "--dim", "batch=1000000000000", "--format", "json"));
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "\"activation_peak_bytes\": 6422528000000000000,") != NULL);
    T_CHECK(strstr(r.out, "\"bytes_written\": 3211264000000000000,") != NULL);
    cli_free(&r);
    r = cli(ARGS("models/resnet18.onnx", "--dim", "batch=9223372036854775807"));
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "peak activation memory: overflow") != NULL);
    cli_free(&r);
    r = cli(ARGS("models/resnet18.onnx", "--dim", "batch=9223372036854775807", "--format", "json"));
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.out, "\"activation_peak_bytes\": 18446744073709551615,") != NULL);
    cli_free(&r);
}

static void t_overflowing_macs(void) {
    for (int e = 21; e <= 22; e++) {
        int64_t d = INT64_C(1) << e;
        pbw g = {0};
        onx_node(&g, 1, "MatMul", "mm", "a,b", "y", NULL);
        onx_value_info(&g, 11, "a", 1, 2, (const int64_t[]){d, d}, NULL);
        onx_value_info(&g, 11, "b", 1, 2, (const int64_t[]){d, d}, NULL);
        onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){d, d}, NULL);
        char name[32];
        snprintf(name, sizeof name, "matmul_2e%d.onnx", e);
        const char *p = write_model(name, &g, 14);
        mp_model *m = NULL;
        mp_profile *prof = NULL;
        T_OK(mp_model_load(p, &m));
        if (m) T_OK(mp_profile_static(m, &prof));
        if (prof) {
            mp_totals t;
            mp_profile_totals(prof, &t);
            T_CHECK(prof->overflow);
            if (e == 21) {
                T_EQ_U64(t.macs, UINT64_C(1) << 63);
                T_EQ_U64(t.flops, UINT64_MAX); /* 2^64: saturated */
            } else {
                T_EQ_U64(t.macs, UINT64_MAX);
                T_CHECK(m->graph->nodes[0].cost.flags & MP_COST_OVERFLOW);
            }
        }
        mp_profile_free(prof);
        mp_model_free(m);
        check_overflow_report(__LINE__, p, NULL);
    }
}

/* ---- tensors ---- */

static void t_tensor_data(void) {
    float w[3] = {1, 2, 3};
    pbw g = {0};
    relu_graph(&g);
    onx_tensor(&g, 5, "W", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    EXPECT_BAD(write_model("raw_short.onnx", &g, 14), MP_ERR_FORMAT, NEEDLES("'W'", "12 bytes", "64"));
    /* float_data with 3 values for 16 elements */
    pbw g1 = {0}, t = {0};
    pbw_int(&t, 1, 4);
    pbw_int(&t, 1, 4);
    pbw_int(&t, 2, 1);
    pbw_str(&t, 8, "Wf");
    pbw_bytes(&t, 4, w, sizeof w);
    pbw_msg(&g1, 5, &t);
    relu_graph(&g1);
    EXPECT_BAD(write_model("typed_short.onnx", &g1, 14), MP_ERR_FORMAT,
               NEEDLES("'Wf'", "float_data", "3 values", "16"));
    /* int64_data unpacked, 2 values for 3 elements */
    pbw g2 = {0}, t2 = {0};
    pbw_int(&t2, 1, 3);
    pbw_int(&t2, 2, 7);
    pbw_str(&t2, 8, "Wi");
    pbw_int(&t2, 7, 1);
    pbw_int(&t2, 7, 2);
    pbw_msg(&g2, 5, &t2);
    relu_graph(&g2);
    EXPECT_BAD(write_model("typed_unpacked_short.onnx", &g2, 14), MP_ERR_FORMAT,
               NEEDLES("'Wi'", "int64_data", "2 values"));
    /* packed floats whose byte count is not a multiple of 4 */
    pbw g3 = {0}, t3 = {0};
    pbw_int(&t3, 1, 1);
    pbw_int(&t3, 2, 1);
    pbw_str(&t3, 8, "Wp");
    pbw_bytes(&t3, 4, w, 5);
    pbw_msg(&g3, 5, &t3);
    relu_graph(&g3);
    EXPECT_BAD(write_model("typed_packed_odd.onnx", &g3, 14), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* no data at all for 16 elements */
    pbw g4 = {0};
    relu_graph(&g4);
    onx_tensor(&g4, 5, "Wn", 1, 2, (const int64_t[]){4, 4}, NULL, 0);
    EXPECT_BAD(write_model("no_data.onnx", &g4, 14), MP_ERR_FORMAT, NEEDLES("'Wn'", "no data"));
    /* an initializer without a name */
    pbw g5 = {0};
    relu_graph(&g5);
    onx_tensor(&g5, 5, "", 1, 1, (const int64_t[]){3}, w, sizeof w);
    EXPECT_BAD(write_model("init_no_name.onnx", &g5, 14), MP_ERR_FORMAT, NEEDLES("no name"));
    /* a shape constant read by Reshape, with float data of absurd values in
     * an int64 tensor: read without undefined behaviour */
    pbw g6 = {0}, t6 = {0};
    float big[2] = {1e30f, -1e30f};
    pbw_int(&t6, 1, 2);
    pbw_int(&t6, 2, 7);
    pbw_str(&t6, 8, "shape");
    pbw_bytes(&t6, 4, big, sizeof big);
    pbw_msg(&g6, 5, &t6);
    onx_node(&g6, 1, "Reshape", "r", "x,shape", "y", NULL);
    onx_value_info(&g6, 11, "x", 1, 2, (const int64_t[]){2, 4}, NULL);
    onx_value_info(&g6, 12, "y", 1, -1, NULL, NULL);
    const char *p = write_model("float_in_int.onnx", &g6, 14);
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    T_OK(mp_model_load(p, &m));
    if (m) (void)mp_profile_static(m, &prof); /* a shape error is fine */
    mp_profile_free(prof);
    mp_model_free(m);
}

/* ---- attributes ---- */

static void attr_raw(pbw *attrs, const pbw *a) { pbw_msg(attrs, 5, a); }

static void t_attributes(void) {
    /* declared INTS, holds a FLOAT */
    pbw g = {0}, as = {0}, a = {0};
    pbw_str(&a, 1, "kernel_shape");
    pbw_f32(&a, 2, 3.0f);
    pbw_int(&a, 20, 7);
    attr_raw(&as, &a);
    onx_node(&g, 1, "MaxPool", "pool", "y", "z", &as);
    relu_graph(&g);
    EXPECT_BAD(write_model("attr_type_mismatch.onnx", &g, 14), MP_ERR_FORMAT,
               NEEDLES("'pool'", "'kernel_shape'", "INTS", "FLOAT"));
    /* consistent, but not the type ONNX gives it */
    pbw g1 = {0}, as1 = {0}, a1 = {0};
    pbw_str(&a1, 1, "kernel_shape");
    pbw_f32(&a1, 2, 3.0f);
    pbw_int(&a1, 20, 1);
    attr_raw(&as1, &a1);
    onx_node(&g1, 1, "MaxPool", "pool", "y", "z", &as1);
    relu_graph(&g1);
    EXPECT_BAD(write_model("attr_wrong_type.onnx", &g1, 14), MP_ERR_FORMAT,
               NEEDLES("'pool'", "'kernel_shape'", "ONNX defines it as INTS"));
    /* two value fields of different kinds */
    pbw g2 = {0}, as2 = {0}, a2 = {0};
    pbw_str(&a2, 1, "axis");
    pbw_int(&a2, 3, 1);
    pbw_str(&a2, 4, "one");
    attr_raw(&as2, &a2);
    onx_node(&g2, 1, "Softmax", "sm", "y", "z", &as2);
    relu_graph(&g2);
    EXPECT_BAD(write_model("attr_two_kinds.onnx", &g2, 14), MP_ERR_FORMAT,
               NEEDLES("'sm'", "'axis'", "INT", "STRING"));
    /* an unknown type number */
    pbw g3 = {0}, as3 = {0}, a3 = {0};
    pbw_str(&a3, 1, "axis");
    pbw_int(&a3, 20, 99);
    attr_raw(&as3, &a3);
    onx_node(&g3, 1, "Softmax", "sm", "y", "z", &as3);
    relu_graph(&g3);
    EXPECT_BAD(write_model("attr_type99.onnx", &g3, 14), MP_ERR_FORMAT,
               NEEDLES("'sm'", "'axis'", "unknown type 99"));
    /* `ints` declaring 2^31 bytes of packed data that are not there */
    pbw g4 = {0}, as4 = {0}, a4 = {0};
    pbw_str(&a4, 1, "pads");
    pbw_key(&a4, 8, 2);
    pbw_varint_raw(&a4, UINT64_C(1) << 31);
    pbw_int(&a4, 20, 7);
    attr_raw(&as4, &a4);
    onx_node(&g4, 1, "MaxPool", "pool", "y", "z", &as4);
    relu_graph(&g4);
    EXPECT_BAD(write_model("attr_ints_2e31.onnx", &g4, 14), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* more elements than the limit allows */
    int64_t many[100];
    for (int i = 0; i < 100; i++) many[i] = i;
    pbw g5 = {0}, as5 = {0};
    onx_attr_ints(&as5, "perm", 100, many);
    onx_node(&g5, 1, "Transpose", "tr", "y", "z", &as5);
    relu_graph(&g5);
    const char *p = write_model("attr_100_ints.onnx", &g5, 14);
    mp_limits lim;
    mp_limits_default(&lim);
    lim.max_attr_elems = 50;
    EXPECT_BAD_LIM(p, MP_ERR_LIMIT, NEEDLES("'tr'", "'perm'", "100 elements", "attr-elems"), &lim,
                   ARGS("--limit", "attr-elems=50"));
    /* a tensor attribute without its tensor, a graph attribute without its
     * graph */
    pbw g6 = {0}, as6 = {0}, a6 = {0};
    pbw_str(&a6, 1, "value");
    pbw_int(&a6, 20, 4);
    attr_raw(&as6, &a6);
    onx_node(&g6, 1, "Constant", "const", "", "k", &as6);
    relu_graph(&g6);
    EXPECT_BAD(write_model("attr_no_tensor.onnx", &g6, 14), MP_ERR_FORMAT,
               NEEDLES("'const'", "'value'", "without a tensor"));
    pbw g7 = {0}, as7 = {0}, a7 = {0};
    pbw_str(&a7, 1, "then_branch");
    pbw_int(&a7, 20, 5);
    attr_raw(&as7, &a7);
    onx_node(&g7, 1, "If", "branch", "c", "k", &as7);
    relu_graph(&g7);
    onx_value_info(&g7, 11, "c", 9, 0, NULL, NULL);
    EXPECT_BAD(write_model("attr_no_graph.onnx", &g7, 14), MP_ERR_FORMAT,
               NEEDLES("'branch'", "'then_branch'", "without a graph"));
}

/* ---- opsets and domains ---- */

static const char *write_model_opsets(const char *name, pbw *g, int n, const char *const *domains,
                                      const int64_t *versions) {
    pbw model = {0};
    pbw_int(&model, 1, 8);
    pbw_msg(&model, 7, g);
    for (int i = 0; i < n; i++) opset_import(&model, domains[i], versions[i], versions[i] >= 0);
    const char *p = write_bytes(name, model.b, model.n);
    pbw_free(&model);
    return p;
}

static void t_opsets_and_domains(void) {
    /* a node in a domain the model does not import */
    pbw g = {0}, n = {0};
    relu_graph(&g);
    pbw_str(&n, 1, "y");
    pbw_str(&n, 2, "z");
    pbw_str(&n, 3, "custom");
    pbw_str(&n, 4, "Frobnicate");
    pbw_str(&n, 7, "com.acme");
    pbw_msg(&g, 1, &n);
    EXPECT_BAD(write_model("domain_not_imported.onnx", &g, 14), MP_ERR_FORMAT,
               NEEDLES("'custom'", "'com.acme'", "opset_import"));
    /* imported, unknown to the tool: profiled, listed as uncounted */
    pbw g1 = {0}, n1 = {0};
    relu_graph(&g1);
    pbw_str(&n1, 1, "y");
    pbw_str(&n1, 2, "z");
    pbw_str(&n1, 3, "custom");
    pbw_str(&n1, 4, "Frobnicate");
    pbw_str(&n1, 7, "com.acme");
    pbw_msg(&g1, 1, &n1);
    const char *p = write_model_opsets("domain_unknown_op.onnx", &g1, 2,
                                       (const char *const[]){"", "com.acme"},
                                       (const int64_t[]){14, 1});
    char *out = expect_good_at(__LINE__, p, ARGS("--dim", "N=2"), true);
    T_CHECK(out && strstr(out, "uncounted") && strstr(out, "Frobnicate"));
    free(out);
    /* no default-domain opset; an opset without a version; version 0; a
     * domain imported twice with different versions */
    pbw g2 = {0};
    relu_graph(&g2);
    EXPECT_BAD(write_model_opsets("no_default_opset.onnx", &g2, 1,
                                  (const char *const[]){"com.acme"}, (const int64_t[]){1}),
               MP_ERR_FORMAT, NEEDLES("default-domain opset"));
    pbw g3 = {0};
    relu_graph(&g3);
    EXPECT_BAD(write_model_opsets("opset_no_version.onnx", &g3, 1, (const char *const[]){""},
                                  (const int64_t[]){-1}),
               MP_ERR_FORMAT, NEEDLES("ai.onnx", "version"));
    pbw g4 = {0};
    relu_graph(&g4);
    EXPECT_BAD(write_model_opsets("opset_zero.onnx", &g4, 1, (const char *const[]){""},
                                  (const int64_t[]){0}),
               MP_ERR_FORMAT, NEEDLES("ai.onnx", "version"));
    pbw g5 = {0};
    relu_graph(&g5);
    EXPECT_BAD(write_model_opsets("opset_twice.onnx", &g5, 2, (const char *const[]){"", "ai.onnx"},
                                  (const int64_t[]){13, 17}),
               MP_ERR_FORMAT, NEEDLES("twice", "13", "17"));
    /* a default opset newer than the tool knows: profiled with a warning */
    pbw g6 = {0};
    relu_graph(&g6);
    p = write_model("opset_99.onnx", &g6, 99);
    cli_res r = cli(ARGS("--dim", "N=2", p));
    T_EQ(r.code, 0);
    T_CHECK(strstr(r.err, "warning") && strstr(r.err, "opset 99"));
    cli_free(&r);
    /* no IR version; no graph */
    uint8_t noir[] = {0x3a, 0x00, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0e};
    EXPECT_BAD(write_bytes("no_ir.onnx", noir, sizeof noir), MP_ERR_FORMAT, NEEDLES("IR version"));
    uint8_t nograph[] = {0x08, 0x08, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0e};
    EXPECT_BAD(write_bytes("no_graph.onnx", nograph, sizeof nograph), MP_ERR_FORMAT,
               NEEDLES("no graph"));
}

/* ---- control flow ---- */

static void t_control_flow(void) {
    const char *syms[] = {NULL, NULL};
    /* If without else_branch */
    pbw g = {0}, ia = {0}, then_g = {0};
    onx_node(&then_g, 1, "Relu", "t_relu", "x", "t_out", NULL);
    onx_value_info(&then_g, 12, "t_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_attr_graph(&ia, "then_branch", &then_g);
    onx_node(&g, 1, "If", "branch", "c", "y", &ia);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g, 11, "c", 9, 0, NULL, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    EXPECT_BAD(write_model("if_no_else.onnx", &g, 14), MP_ERR_SHAPE, NEEDLES("'branch'", "else_branch"));
    /* a branch reading a name nothing defines */
    pbw g1 = {0}, ia1 = {0}, t1 = {0}, e1 = {0};
    onx_node(&t1, 1, "Relu", "t_relu", "ghost", "t_out", NULL);
    onx_value_info(&t1, 12, "t_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_node(&e1, 1, "Neg", "e_neg", "x", "e_out", NULL);
    onx_value_info(&e1, 12, "e_out", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_attr_graph(&ia1, "then_branch", &t1);
    onx_attr_graph(&ia1, "else_branch", &e1);
    onx_node(&g1, 1, "If", "branch", "c", "y", &ia1);
    onx_value_info(&g1, 11, "x", 1, 2, (const int64_t[]){2, 4}, syms);
    onx_value_info(&g1, 11, "c", 9, 0, NULL, NULL);
    onx_value_info(&g1, 12, "y", 1, 2, (const int64_t[]){2, 4}, syms);
    EXPECT_BAD(write_model("if_undefined.onnx", &g1, 14), MP_ERR_FORMAT,
               NEEDLES("'t_relu'", "'ghost'", "'branch'"));
    /* a Loop body with a cycle */
    pbw g2 = {0}, la = {0}, body = {0};
    onx_node(&body, 1, "Add", "b_add", "v,q", "p", NULL);
    onx_node(&body, 1, "Relu", "b_relu", "p", "q", NULL);
    onx_node(&body, 1, "Identity", "b_cond", "cond_in", "cond_out", NULL);
    onx_value_info(&body, 11, "iter", 7, 0, NULL, NULL);
    onx_value_info(&body, 11, "cond_in", 9, 0, NULL, NULL);
    onx_value_info(&body, 11, "v", 1, 1, (const int64_t[]){4}, NULL);
    onx_value_info(&body, 12, "cond_out", 9, 0, NULL, NULL);
    onx_value_info(&body, 12, "q", 1, 1, (const int64_t[]){4}, NULL);
    onx_attr_graph(&la, "body", &body);
    onx_node(&g2, 1, "Loop", "loop", "M,,v0", "vout", &la);
    onx_value_info(&g2, 11, "M", 7, 0, NULL, NULL);
    onx_value_info(&g2, 11, "v0", 1, 1, (const int64_t[]){4}, NULL);
    onx_value_info(&g2, 12, "vout", 1, 1, (const int64_t[]){4}, NULL);
    EXPECT_BAD(write_model("loop_cycle.onnx", &g2, 14), MP_ERR_FORMAT, NEEDLES("cycle", "'b_"));
    /* a Loop whose body is garbage bytes */
    pbw g3 = {0}, la3 = {0}, a3 = {0};
    pbw_str(&a3, 1, "body");
    pbw_int(&a3, 20, 5);
    pbw_bytes(&a3, 6, "\x0a\x7f\x01", 3);
    pbw_msg(&la3, 5, &a3);
    onx_node(&g3, 1, "Loop", "loop", "M,,v0", "vout", &la3);
    onx_value_info(&g3, 11, "M", 7, 0, NULL, NULL);
    onx_value_info(&g3, 11, "v0", 1, 1, (const int64_t[]){4}, NULL);
    onx_value_info(&g3, 12, "vout", 1, 1, (const int64_t[]){4}, NULL);
    EXPECT_BAD(write_model("loop_garbage_body.onnx", &g3, 14), MP_ERR_FORMAT, NEEDLES("malformed"));
    /* a Loop whose body is an int */
    pbw g4 = {0}, la4 = {0};
    onx_attr_int(&la4, "body", 3);
    onx_node(&g4, 1, "Loop", "loop", "M,,v0", "vout", &la4);
    onx_value_info(&g4, 11, "M", 7, 0, NULL, NULL);
    onx_value_info(&g4, 11, "v0", 1, 1, (const int64_t[]){4}, NULL);
    onx_value_info(&g4, 12, "vout", 1, 1, (const int64_t[]){4}, NULL);
    EXPECT_BAD(write_model("loop_int_body.onnx", &g4, 14), MP_ERR_FORMAT,
               NEEDLES("'loop'", "'body'", "INT", "GRAPH"));
    /* a Loop body without the iteration inputs */
    pbw g5 = {0}, la5 = {0}, body5 = {0};
    onx_node(&body5, 1, "Relu", "b_relu", "v0", "q", NULL);
    onx_value_info(&body5, 12, "q", 1, 1, (const int64_t[]){4}, NULL);
    onx_attr_graph(&la5, "body", &body5);
    onx_node(&g5, 1, "Loop", "loop", "M,,v0", "vout", &la5);
    onx_value_info(&g5, 11, "M", 7, 0, NULL, NULL);
    onx_value_info(&g5, 11, "v0", 1, 1, (const int64_t[]){4}, NULL);
    onx_value_info(&g5, 12, "vout", 1, 1, (const int64_t[]){4}, NULL);
    const char *p = write_model("loop_bad_body.onnx", &g5, 14);
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    mp_status st = mp_model_load(p, &m);
    if (!st) st = mp_profile_static(m, &prof);
    if (st) {
        T_CHECK(strstr(mp_last_error(), "'loop'") != NULL);
        cli_res r = cli(ARGS(p));
        T_EQ(r.code, 2);
        T_EQ(lines(r.err), 1);
        cli_free(&r);
    }
    mp_profile_free(prof);
    mp_model_free(m);
}

/* ---- external data ---- */

static char outdir[64];

/* A file outside the model's folder, watched for opens. */
static const char *outside_file(void) {
    static char p[128];
    if (!outdir[0]) {
        snprintf(outdir, sizeof outdir, "/tmp/mp-outside-XXXXXX");
        if (!mkdtemp(outdir)) abort();
        snprintf(p, sizeof p, "%s/secret.bin", outdir);
        int64_t shape[2] = {2, 2};
        FILE *f = fopen(p, "wb");
        fwrite(shape, 1, sizeof shape, f);
        fclose(f);
    }
    return p;
}

static int watch_open(const char *path) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, path, IN_OPEN | IN_ACCESS) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Was the watched file opened or read? */
static bool was_opened(int fd) {
    if (fd < 0) return false;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n > 0;
}

/* Reshape x by a shape constant kept as external data at `loc`: if the
 * location were accepted, the shape arithmetic would read it. */
static const char *ext_model(const char *name, const char *loc, const char *off, const char *len) {
    pbw g = {0};
    onx_node(&g, 1, "Reshape", "r", "x,shape", "y", NULL);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){1, 4}, NULL);
    onx_value_info(&g, 12, "y", 1, -1, NULL, NULL);
    onx_tensor_external(&g, 5, "shape", 7, 1, (const int64_t[]){2}, loc, off, len);
    return write_model(name, &g, 14);
}

static void t_external_confined(void) {
    const char *secret = outside_file();
    char rel[256];
    snprintf(rel, sizeof rel, "../%s/secret.bin", strrchr(outdir, '/') + 1);
    const char *const locs[] = {secret, rel, "sub/../../secret.bin", "link.bin",
                                "linkdir/secret.bin", "a\\b.bin"};
    unlink(mpath("link.bin"));
    unlink(mpath("linkdir"));
    T_CHECK(symlink(secret, mpath("link.bin")) == 0);
    T_CHECK(symlink(outdir, mpath("linkdir")) == 0);
    for (size_t i = 0; i < sizeof locs / sizeof locs[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "ext_out%zu.onnx", i);
        const char *p = ext_model(name, locs[i], NULL, NULL);
        int w = watch_open(secret); /* without inotify, only the statuses are checked */
        EXPECT_BAD(p, MP_ERR_FORMAT, NEEDLES("'shape'", locs[i]));
        if (was_opened(w)) mp_t_fail(__FILE__, __LINE__, "'%s': the outside file was opened", locs[i]);
    }
    /* a dangling link, a folder, a fifo: refused, nothing hangs */
    unlink(mpath("dangling.bin"));
    T_CHECK(symlink("/nonexistent/x.bin", mpath("dangling.bin")) == 0);
    EXPECT_BAD(ext_model("ext_dangling.onnx", "dangling.bin", NULL, NULL), MP_ERR_FORMAT,
               NEEDLES("'shape'", "dangling.bin"));
    mkdir(mpath("adir"), 0700);
    EXPECT_BAD(ext_model("ext_dir.onnx", "adir", NULL, NULL), MP_ERR_FORMAT,
               NEEDLES("'shape'", "not a regular file"));
    unlink(mpath("fifo.bin"));
    T_CHECK(mkfifo(mpath("fifo.bin"), 0600) == 0);
    EXPECT_BAD(ext_model("ext_fifo.onnx", "fifo.bin", NULL, NULL), MP_ERR_FORMAT,
               NEEDLES("'shape'", "not a regular file"));
    /* an empty location; no location at all */
    EXPECT_BAD(ext_model("ext_empty_loc.onnx", "", NULL, NULL), MP_ERR_FORMAT, NEEDLES("'shape'"));
    EXPECT_BAD(ext_model("ext_no_loc.onnx", NULL, "0", "16"), MP_ERR_FORMAT,
               NEEDLES("'shape'", "without a location"));
    /* a link that stays inside the folder is followed, and read */
    FILE *f = fopen(mpath("shape.bin"), "wb");
    int64_t shape[2] = {2, 2};
    fwrite(shape, 1, sizeof shape, f);
    fclose(f);
    unlink(mpath("inside.bin"));
    T_CHECK(symlink("shape.bin", mpath("inside.bin")) == 0);
    const char *p = ext_model("ext_inside_link.onnx", "inside.bin", NULL, NULL);
    mp_model *m = NULL;
    mp_profile *prof = NULL;
    T_OK(mp_model_load(p, &m));
    if (m) T_OK(mp_profile_static(m, &prof));
    if (prof) T_EQ_STR(tb_shape(m, "y"), "2x2");
    mp_profile_free(prof);
    mp_model_free(m);
}

static void t_external_range(void) {
    FILE *f = fopen(mpath("ten.bin"), "wb");
    fwrite("0123456789", 1, 10, f);
    fclose(f);
    EXPECT_BAD(ext_model("ext_past_end.onnx", "ten.bin", "0", "16"), MP_ERR_FORMAT,
               NEEDLES("'shape'", "past the end", "ten.bin"));
    EXPECT_BAD(ext_model("ext_offset_past.onnx", "ten.bin", "8", "16"), MP_ERR_FORMAT,
               NEEDLES("'shape'", "past the end"));
    EXPECT_BAD(ext_model("ext_offset_max.onnx", "ten.bin", "18446744073709551615", "16"),
               MP_ERR_FORMAT, NEEDLES("'shape'", "past the end"));
    EXPECT_BAD(ext_model("ext_offset_neg.onnx", "ten.bin", "-1", "16"), MP_ERR_FORMAT,
               NEEDLES("offset"));
    EXPECT_BAD(ext_model("ext_offset_text.onnx", "ten.bin", "12abc", "16"), MP_ERR_FORMAT,
               NEEDLES("offset", "12abc"));
    EXPECT_BAD(ext_model("ext_length_big.onnx", "ten.bin", "0", "99999999999999999999"),
               MP_ERR_FORMAT, NEEDLES("length"));
    EXPECT_BAD(ext_model("ext_length_dims.onnx", "ten.bin", "0", "8"), MP_ERR_FORMAT,
               NEEDLES("'shape'", "needs 16 bytes"));
}

/* ---- limits ---- */

static void t_limits(void) {
    const char *model = "models/resnet18.onnx";
    struct {
        const char *flag, *value, *needle;
    } cases[] = {
        {"--max-nodes", "10", "--max-nodes"},
        {"--limit", "nodes=10", "nodes"},
        {"--limit", "values=10", "--limit values=N"},
        {"--limit", "attr-elems=3", "--limit attr-elems=N"},
        {"--max-memory", "100K", "--max-memory"},
        {"--limit", "memory=200K", "memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_res r = cli(ARGS(cases[i].flag, cases[i].value, model));
        T_EQ(r.code, 2);
        T_EQ(lines(r.err), 1);
        if (!strstr(r.err, cases[i].needle) || !strstr(r.err, "resnet18.onnx") ||
            !strstr(r.err, "limit"))
            mp_t_fail(__FILE__, __LINE__, "%s %s: '%s'", cases[i].flag, cases[i].value, r.err);
        T_EQ(r.out[0], 0);
        cli_free(&r);
    }
    /* the library's status and message */
    mp_limits lim;
    mp_limits_default(&lim);
    T_OK(mp_limits_set(&lim, "memory", 16 << 10));
    mp_model *m = NULL;
    T_CHECK(mp_model_load_ex(model, &lim, &m) == MP_ERR_LIMIT);
    T_CHECK(strstr(mp_last_error(), "--max-memory") != NULL);
    T_CHECK(m == NULL);
    /* raising a limit is honoured; bad limits are usage errors */
    cli_res r = cli(ARGS("--max-nodes", "100000", "--limit", "depth=100", "--dim", "batch=1", model));
    T_EQ(r.code, 0);
    cli_free(&r);
    const char *const bad[][2] = {{"--limit", "bogus=3"}, {"--limit", "nodes=0"},
                                  {"--limit", "nodes"},   {"--max-memory", "12Q"},
                                  {"--limit", "depth=100000"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = cli(ARGS(bad[i][0], bad[i][1], model));
        T_EQ(r.code, 1);
        cli_free(&r);
    }
    T_CHECK(mp_limits_set(&lim, "bogus", 1) == MP_ERR_USAGE);
    T_CHECK(mp_limits_set(&lim, "depth", MP_LIMIT_DEPTH_CAP + 1) == MP_ERR_USAGE);
    lim.max_depth = MP_LIMIT_DEPTH_CAP + 1;
    T_CHECK(mp_model_load_ex(model, &lim, &m) == MP_ERR_USAGE);
}

/* ---- reports are written whole or not at all ---- */

static bool dir_has_prefix(const char *dir, const char *prefix) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -q '^%s'", dir, prefix);
    return system(cmd) == 0;
}

static void t_no_partial_output(void) {
    pbw g = {0};
    relu_graph(&g);
    onx_node(&g, 1, "Add", "adder", "y,ghost", "z", NULL);
    const char *bad = write_model("out_bad.onnx", &g, 14);
    const char *out = mpath("report.txt");
    unlink(out);
    cli_res r = cli(ARGS("-o", out, bad));
    T_EQ(r.code, 2);
    T_EQ(lines(r.err), 1);
    cli_free(&r);
    T_CHECK(access(out, F_OK) != 0);
    T_CHECK(!dir_has_prefix(mdir(), ".report.txt.tmp"));
    /* an existing report is left as it was */
    FILE *f = fopen(out, "w");
    fputs("previous report\n", f);
    fclose(f);
    r = cli(ARGS("-o", out, bad));
    T_EQ(r.code, 2);
    cli_free(&r);
    f = fopen(out, "r");
    char line[64] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    T_EQ_STR(line, "previous report\n");
    /* a write that fails half-way (files capped at 2 KB): exit 2, the old
     * report untouched, no temporary file left */
    r = t_cli_run(ARGS("-o", out, "--dim", "batch=1", "models/resnet18.onnx"), 0, 2048);
    T_EQ(r.code, 2);
    T_EQ(lines(r.err), 1);
    T_CHECK(strstr(r.err, "report.txt") != NULL);
    cli_free(&r);
    f = fopen(out, "r");
    line[0] = 0;
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    T_EQ_STR(line, "previous report\n");
    T_CHECK(!dir_has_prefix(mdir(), ".report.txt.tmp"));
    /* a folder that cannot be written */
    r = cli(ARGS("-o", "/proc/modelprof-no/report.txt", "--dim", "batch=1", "models/resnet18.onnx"));
    T_EQ(r.code, 2);
    T_EQ(lines(r.err), 1);
    cli_free(&r);
}

/* ---- the committed byte files ---- */

static void t_committed_corpus(void) {
    FILE *f = fopen("tests/corpus/malformed/EXPECT", "r");
    T_CHECK(f != NULL);
    if (!f) return;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char file[128], status[32], needle[256] = "";
        if (sscanf(line, "%127s %31s %255[^\n]", file, status, needle) < 2) continue;
        char path[256];
        snprintf(path, sizeof path, "tests/corpus/malformed/%s", file);
        mp_status want = MP_OK;
        for (int s = 0; s < MP_STATUS_COUNT; s++)
            if (strcmp(mp_status_name((mp_status)s), status) == 0) want = (mp_status)s;
        T_CHECK(want != MP_OK);
        expect_bad_at(__LINE__, path, want, needle[0] ? NEEDLES(needle) : NULL, NULL, NULL);
        n++;
    }
    fclose(f);
    T_CHECK(n >= 10);
}

MP_TESTS(malformed){
    {"empty_random_text", t_empty_random_text},
    {"not_a_file", t_not_a_file},
    {"truncated_everywhere", t_truncated_everywhere},
    {"bit_flips", t_bit_flips},
    {"varint_and_length", t_varint_and_length},
    {"deep_subgraphs", t_deep_subgraphs},
    {"deep_types_and_unknown_fields", t_deep_types_and_unknown_fields},
    {"functions", t_functions},
    {"cycle_and_undefined", t_cycle_and_undefined},
    {"duplicate_names", t_duplicate_names},
    {"names", t_names},
    {"negative_and_huge_dims", t_negative_and_huge_dims},
    {"overflowing_shapes", t_overflowing_shapes},
    {"overflowing_macs", t_overflowing_macs},
    {"peak_past_2_61", t_peak_past_2_61},
    {"tensor_data", t_tensor_data},
    {"attributes", t_attributes},
    {"opsets_and_domains", t_opsets_and_domains},
    {"control_flow", t_control_flow},
    {"external_confined", t_external_confined},
    {"external_range", t_external_range},
    {"limits", t_limits},
    {"no_partial_output", t_no_partial_output},
    {"committed_corpus", t_committed_corpus},
};
MP_TESTS_END(malformed)
