/* Traces of a PyTorch without Kineto (a bare event array, no categories)
 * and the module range convention (src/trace/legacy.c, docs/JSON.md
 * "Module ranges"): per-module forward and backward CPU time of a trace
 * with no device rows, against the hand sums of the ranges. */
#include "test.h"
#include "trace/trace.h"
#include "train/train.h"
#include "jsonr.h"
#include "pbw.h"
#include "tcli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EV(name, ts, dur) \
    "{\"name\": \"" name "\", \"ph\": \"X\", \"ts\": " #ts ", \"dur\": " #dur \
    ", \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}"

/* One step: Net_0 { Linear_0 { aten::linear }, ReLU_0 } forward, then the
 * backward ranges (the outer one holds the inner ones), the optimizer. */
static const char legacy[] =
    "[" EV("ProfilerStep#1", 0, 1000) ","
    EV("nn.Module: Net_0", 10, 300) ","
    EV("nn.Module: Linear_0", 20, 100) ","
    EV("aten::linear", 25, 90) ","
    EV("aten::addmm", 30, 80) ","
    EV("nn.Module: ReLU_0", 130, 50) ","
    EV("aten::relu", 135, 40) ","
    EV("autograd::engine::evaluate_function: AddmmBackward0", 400, 520) ","
    EV("nn.Module.backward: Net_0", 410, 500) ","
    EV("nn.Module.backward: ReLU_0", 420, 60) ","
    EV("aten::threshold_backward", 425, 50) ","
    EV("nn.Module.backward: Linear_0", 490, 200) ","
    EV("aten::mm", 500, 150) ","
    EV("Optimizer.step#SGD.step", 930, 50) ","
    EV("aten::add_", 935, 40) "]";

static int find(const mp_trace *t, const char *path) {
    for (int m = 0; m < t->n_mods; m++)
        if (strcmp(t->mods[m].path, path) == 0) return m;
    return -1;
}

static void t_modules(void) {
    mp_trace t;
    T_OK(mp_trace_open_memory(legacy, strlen(legacy), "legacy.json", NULL, &t));
    T_CHECK(t.cpu_modules);
    int net = find(&t, "Net_0"), lin = find(&t, "Net_0.Linear_0"), relu = find(&t, "Net_0.ReLU_0");
    T_CHECK(net > 0 && lin > 0 && relu > 0);
    if (net > 0 && lin > 0 && relu > 0) {
        /* forward: the ranges' wall time; backward: the backward ranges' */
        T_EQ(t.mfig[net].fwd, 300000);
        T_EQ(t.mfig[net].bwd, 500000);
        T_EQ(t.mfig[lin].fwd, 100000);
        T_EQ(t.mfig[lin].bwd, 200000);
        T_EQ(t.mfig[relu].fwd, 50000);
        T_EQ(t.mfig[relu].bwd, 60000);
        T_EQ(t.mfig[net].calls, 1);   /* a backward range is no call */
        T_EQ(t.mfig[lin].calls, 1);
        T_EQ(t.mfig[0].fwd, 300000);  /* the root holds its top-level modules */
        T_EQ(t.mfig[0].bwd, 500000);
    }
    /* the step and the optimizer are PyTorch's own ranges */
    T_EQ(t.n_steps, 1);
    if (t.n_steps == 1) {
        T_EQ_STR(t.steps[0].name, "ProfilerStep#1");
        T_EQ(t.steps[0].wall, 1000000);
        T_EQ(t.steps[0].optimizer, 50000);
    }
    /* operators: every other name (self time of aten::linear = 90 - 80 us) */
    int found = 0;
    for (int i = 0; i < t.n_ops; i++)
        if (strcmp(t.ops[i].name, "aten::linear") == 0) {
            found = 1;
            T_EQ(t.ops[i].cpu_total, 90000);
            T_EQ(t.ops[i].self_cpu, 10000);
        }
    T_CHECK(found);
    /* the JSON says what the module times are */
    size_t len = 0;
    const mp_trace *tp = &t;
    mp_trace_options o = {0, -1, 20};
    char *buf = t_trace_report(&tp, 1, NULL, &o, 1, &len);
    T_CHECK(buf && strstr(buf, "\"module_time\": \"cpu\""));
    free(buf);
    mp_trace_free(&t);
}

/* The same ranges as Kineto user annotations (FlopsProfiler on a PyTorch
 * with Kineto): module spans; no device rows: CPU times. */
#define UA(name, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"" name "\",\"pid\":1,\"tid\":1," \
    "\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{}}"
#define CPUOP(name, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" name "\",\"pid\":1,\"tid\":1," \
    "\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{}}"

static void t_kineto_ranges(void) {
    static const char k[] =
        "{\"traceEvents\":[" UA("nn.Module: Net_0", 10.5, 300) ","
        UA("nn.Module: Linear_0", 20, 100.25) "," CPUOP("aten::linear", 25, 90) ","
        UA("nn.Module.backward: Net_0", 410, 500) ","
        UA("nn.Module.backward: Linear_0", 490, 200) "," CPUOP("aten::mm", 500, 150) "]}";
    mp_trace t;
    T_OK(mp_trace_open_memory(k, strlen(k), "kineto.json", NULL, &t));
    int net = find(&t, "Net_0"), lin = find(&t, "Net_0.Linear_0");
    T_CHECK(net > 0 && lin > 0 && t.cpu_modules);
    if (net > 0 && lin > 0) {
        T_EQ(t.mfig[net].fwd, 300000);
        T_EQ(t.mfig[net].bwd, 500000);
        T_EQ(t.mfig[lin].fwd, 100250);   /* Kineto's nanoseconds kept */
        T_EQ(t.mfig[lin].bwd, 200000);
    }
    /* and, being record_function ranges, key_averages' rows under their
     * whole names (self: 300 - 100.25 us; 500 - 200 us) */
    int rows = 0;
    for (int i = 0; i < t.n_ops; i++) {
        if (strcmp(t.ops[i].name, "nn.Module: Net_0") == 0) {
            rows++;
            T_EQ(t.ops[i].cpu_total, 300000);
            T_EQ(t.ops[i].self_cpu, 199750);
        }
        if (strcmp(t.ops[i].name, "nn.Module.backward: Net_0") == 0) {
            rows++;
            T_EQ(t.ops[i].self_cpu, 300000);
        }
        T_CHECK(strcmp(t.ops[i].name, "Net_0") != 0);
    }
    T_EQ(rows, 2);
    mp_trace_free(&t);
}

static void t_through_api(void) {
    /* mp_trace_string reads the file and gives the text report */
    char path[] = "/tmp/mp-legacy-XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs(legacy, f);
    fclose(f);
    char *s = NULL;
    T_OK(mp_trace_string(path, MP_FORMAT_TEXT, &s));
    T_CHECK(s && strstr(s, "module forward CPU time 300 us, backward 500 us"));
    mp_string_free(s);
    /* a bad trace: the library's message, no string */
    f = fopen(path, "w");
    fputs("[{\"name\": \"a\", \"ph\": \"X\", \"ts\": 1}]", f);
    fclose(f);
    s = (char *)1;
    T_EQ(mp_trace_string(path, MP_FORMAT_TEXT, &s), MP_ERR_FORMAT);
    T_CHECK(s == NULL && strstr(mp_last_error(), path) && strstr(mp_last_error(), "no \"dur\""));
    T_EQ(mp_trace_string(path, (mp_format)7, &s), MP_ERR_USAGE);
    unlink(path);
}

static void t_report_string(void) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(mp_model_load("models/resnet18.onnx", &m));
    T_OK(mp_model_set_dim(m, "batch", 1));
    T_OK(mp_profile_static(m, &p));
    mp_report_options o;
    mp_report_options_default(&o);
    o.format = MP_FORMAT_JSON;
    char *s = NULL;
    T_OK(mp_report_string(p, &o, &s));
    /* the same bytes as the file writer's */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    T_OK(mp_report_write(p, &o, f));
    fclose(f);
    T_CHECK(s && buf && strcmp(s, buf) == 0);
    if (s) t_json_dump("profile", s, strlen(s));
    free(buf);
    mp_string_free(s);
    o.depth = -5;
    s = (char *)1;
    T_EQ(mp_report_string(p, &o, &s), MP_ERR_USAGE);
    T_CHECK(s == NULL);
    mp_profile_free(p);
    mp_model_free(m);
}


/* A fresh folder (dir, "/tmp/mp-train-XXXXXX") holding the trace text as
 * trace.json; tpath and mpath (64 bytes) name it and net.onnx there. */
static bool train_files(char *dir, const char *trace, char *tpath, char *mpath) {
    T_CHECK(mkdtemp(dir) != NULL);
    snprintf(tpath, 64, "%s/trace.json", dir);
    snprintf(mpath, 64, "%s/net.onnx", dir);
    FILE *f = fopen(tpath, "w");
    T_CHECK(f != NULL);
    if (!f) return false;
    fputs(trace, f);
    fclose(f);
    return true;
}

/* The training profile (src/train/train.c): the legacy trace above joined
 * with a model Net { fc: Linear(4 -> 3), act: ReLU, drop: Dropout } whose
 * export holds /fc/Gemm (x [2,4], W [3,4]) and /act/Relu. */
static void t_train(void) {
    char dir[] = "/tmp/mp-train-XXXXXX", tpath[64], mpath[64];
    if (!train_files(dir, legacy, tpath, mpath)) return;
    pbw g = {0}, model = {0};
    pbw at = {0};
    onx_attr_int(&at, "transB", 1);
    onx_node(&g, 1, "Gemm", "/fc/Gemm", "x,fc.weight", "h", &at);
    onx_node(&g, 1, "Relu", "/act/Relu", "h", "y", NULL);
    pbw_str(&g, 2, "main_graph");
    static const float w[12] = {0};
    onx_tensor(&g, 5, "fc.weight", 1, 2, (const int64_t[]){3, 4}, w, sizeof w);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 3}, NULL);
    onx_model(&model, 8, 14, &g);
    T_EQ(pbw_write(&model, mpath), 0);
    pbw_free(&model);
    mp_torch_module mods[] = {{"", "Net", "Net_0", 15},
                              {"fc", "Linear", "Net_0.Linear_0", 15},
                              {"act", "ReLU", "Net_0.ReLU_0", 0},
                              {"drop", "Dropout", "Net_0.Dropout_0", 0}};
    mp_train *t = NULL;
    mp_status st = mp_train_open(tpath, NULL, mods, 4, &t);
    T_OK(st);
    if (t) {
        /* times from the trace: the ranges' wall time, summed over calls */
        T_EQ(t->rows[0].calls, 1);
        T_CHECK(fabs(t->rows[0].fwd_s - 300e-6) < 1e-12 && fabs(t->rows[0].bwd_s - 500e-6) < 1e-12);
        T_CHECK(fabs(t->rows[1].fwd_s - 100e-6) < 1e-12 && fabs(t->rows[1].bwd_s - 200e-6) < 1e-12);
        T_CHECK(fabs(t->rows[2].fwd_s - 50e-6) < 1e-12 && fabs(t->rows[2].bwd_s - 60e-6) < 1e-12);
        T_CHECK(!t->rows[3].in_trace && t->rows[3].calls == 0);
        T_CHECK(t->cpu_time && t->profiler_steps && t->n_steps == 1);
        T_CHECK(fabs(t->wall_s - 1000e-6) < 1e-12 && fabs(t->optimizer_s - 50e-6) < 1e-12);
        /* no model: the binding's params, no MACs */
        T_EQ(t->rows[1].params, 15);
        T_EQ(t->rows[1].macs, 0);
        /* the tree: fc, act and drop under the model, in order */
        T_EQ(t->mods[0].first_child, 1);
        T_EQ(t->mods[1].next_sibling, 2);
        T_EQ(t->mods[2].next_sibling, 3);
        T_EQ(t->mods[3].depth, 1);
        mp_train_free(t);
        t = NULL;
    }
    /* with the model: the binding's count stands (model.parameters(), as
     * DeepSpeed counts, a tensor the export does not hold too); -1 takes
     * the static profile's */
    T_OK(mp_train_open(tpath, mpath, mods, 4, &t));
    if (t) {
        T_EQ(t->rows[1].params, 15);
        T_EQ(t->rows[0].params, 15);
        T_EQ(t->rows[1].macs, 24);
        mp_train_free(t);
        t = NULL;
    }
    for (int i = 0; i < 4; i++) mods[i].params = -1;
    T_OK(mp_train_open(tpath, mpath, mods, 4, &t));
    if (t) {
        /* params and MACs from the static profile, times the calls */
        T_CHECK(t->rows[0].in_static && t->rows[1].in_static && t->rows[2].in_static);
        T_EQ(t->rows[1].params, 12); /* the export's weight: [3,4] (no bias) */
        T_EQ(t->rows[0].params, 12);
        T_EQ(t->rows[1].macs, 24);   /* 2 x 4 x 3, one call */
        T_CHECK(!t->rows[3].in_static);
        mp_train_options o;
        mp_train_options_default(&o);
        char *text = NULL;
        T_OK(mp_train_string(t, &o, &text));
        T_CHECK(text && strstr(text, "(fc): Linear(12, 100% Params, 24 MACs, 100% MACs, 100 us") &&
                strstr(text, "step latency (optimizer):") && strstr(text, "depth 1:"));
        mp_string_free(text);
        o.format = MP_FORMAT_JSON;
        text = NULL;
        T_OK(mp_train_string(t, &o, &text));
        if (text) t_json_dump("train", text, strlen(text));
        size_t err = 0;
        jr *j = text ? jr_parse(text, strlen(text), &err) : NULL;
        T_CHECK(j != NULL);
        if (j) {
            const jr *ms = jr_get(j, "modules");
            T_EQ(jr_len(ms), 4);
            T_EQ_STR(jr_get(jr_at(ms, 1), "name")->s, "fc");
            T_EQ(jr_get(jr_at(ms, 1), "macs")->i, 24);
            T_CHECK(fabs(jr_get(jr_at(ms, 1), "bwd_s")->num - 200e-6) < 1e-12);
            T_EQ_STR(jr_get(j, "module_time")->s, "cpu");
            jr_free(j);
        }
        mp_string_free(text);
        o.format = MP_FORMAT_TEXT;
        o.top = -2;
        text = NULL;
        T_EQ(mp_train_string(t, &o, &text), MP_ERR_USAGE);
        mp_train_free(t);
    }
    /* a child before its parent, and a missing model file, are errors */
    mp_torch_module bad[] = {{"", "Net", "Net_0", 0}, {"fc.inner", "X", "Net_0.X_0", 0}};
    t = NULL;
    T_EQ(mp_train_open(tpath, NULL, bad, 2, &t), MP_ERR_USAGE);
    T_CHECK(t == NULL && strstr(mp_last_error(), "fc.inner"));
    T_CHECK(mp_train_open(tpath, "/nonexistent.onnx", mods, 4, &t) != MP_OK && t == NULL);
    T_CHECK(strstr(mp_last_error(), "/nonexistent.onnx") != NULL);
    unlink(tpath);
    unlink(mpath);
    rmdir(dir);
}

/* Two calls of Net { blocks: ModuleList [Block, Block], act: ReLU }, each
 * block calling the shared act: blocks is never called (no range), act runs
 * under both blocks (two paths, two calls per forward). The export holds
 * /blocks/blocks.0/MatMul (x [2,4] W0 [4,4]: 32 MACs), /act/Relu (8
 * FLOPs), /blocks/blocks.1/MatMul, /act/Relu_1. */
static const char legacy2[] =
    "[" EV("nn.Module: Net_0", 10, 200) ","
    EV("nn.Module: Block_0", 20, 60) "," EV("nn.Module: ReLU_0", 30, 10) ","
    EV("nn.Module: Block_1", 100, 60) "," EV("nn.Module: ReLU_0", 110, 10) ","
    EV("nn.Module: Net_0", 300, 200) ","
    EV("nn.Module: Block_0", 310, 40) "," EV("nn.Module: ReLU_0", 315, 10) ","
    EV("nn.Module: Block_1", 360, 40) "," EV("nn.Module: ReLU_0", 365, 10) "]";

/* Every module is timed whatever holds it, its counts cover the calls its
 * time covers, a container holds its children's sums, and an ignored
 * module counts nothing. */
static void t_train_containers(void) {
    char dir[] = "/tmp/mp-train-XXXXXX", tpath[64], mpath[64];
    if (!train_files(dir, legacy2, tpath, mpath)) return;
    pbw g = {0}, model = {0};
    onx_node(&g, 1, "MatMul", "/blocks/blocks.0/MatMul", "x,W0", "h0", NULL);
    onx_node(&g, 1, "Relu", "/act/Relu", "h0", "a0", NULL);
    onx_node(&g, 1, "MatMul", "/blocks/blocks.1/MatMul", "a0,W1", "h1", NULL);
    onx_node(&g, 1, "Relu", "/act/Relu_1", "h1", "y", NULL);
    pbw_str(&g, 2, "main_graph");
    static const float w[16] = {0};
    onx_tensor(&g, 5, "W0", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_tensor(&g, 5, "W1", 1, 2, (const int64_t[]){4, 4}, w, sizeof w);
    onx_value_info(&g, 11, "x", 1, 2, (const int64_t[]){2, 4}, NULL);
    onx_value_info(&g, 12, "y", 1, 2, (const int64_t[]){2, 4}, NULL);
    onx_model(&model, 8, 14, &g);
    T_EQ(pbw_write(&model, mpath), 0);
    pbw_free(&model);
    for (int ignore = 0; ignore <= 1; ignore++) {
        mp_torch_module mods[] = {
            {"", "Net", "Net_0", 32, 1, 0},
            {"blocks", "ModuleList", "", 32, 0, 0},
            {"blocks.0", "Block", "Net_0.Block_0", 16, 1, 0},
            {"blocks.1", "Block", "Net_0.Block_1", 16, 1, 0},
            {"act", "ReLU", "Net_0.Block_0.ReLU_0\nNet_0.Block_1.ReLU_0", 0, 2, ignore}};
        mp_train *t = NULL;
        T_OK(mp_train_open(tpath, mpath, mods, 5, &t));
        if (!t) continue;
        const mp_train_row *r = t->rows;
        /* the model: two calls, 2 x (32 + 32) MACs, 2 x (64 + 64 + 2 x 8) FLOPs */
        T_EQ(r[0].calls, 2);
        T_CHECK(fabs(r[0].fwd_s - 400e-6) < 1e-12);
        T_EQ_U64(r[0].macs, 128);
        T_EQ_U64(r[0].flops, ignore ? 256 : 288);
        /* each block: its two calls */
        T_EQ(r[2].calls, 2);
        T_CHECK(fabs(r[2].fwd_s - 100e-6) < 1e-12 && fabs(r[3].fwd_s - 100e-6) < 1e-12);
        T_EQ_U64(r[2].macs, 64);
        /* the ModuleList, never called: its children's sums */
        T_CHECK(r[1].container && !r[1].in_trace && r[1].calls == 0);
        T_CHECK(fabs(r[1].fwd_s - 200e-6) < 1e-12);
        T_EQ_U64(r[1].macs, 128);
        T_EQ_U64(r[1].flops, 256);
        if (!ignore) {
            /* act under both blocks: four calls, two per exported forward */
            T_EQ(r[4].calls, 4);
            T_CHECK(fabs(r[4].fwd_s - 40e-6) < 1e-12);
            T_EQ_U64(r[4].flops, 32);
        } else {
            T_CHECK(r[4].ignored);
            T_EQ_U64(r[4].flops, 0);
        }
        mp_train_free(t);
    }
    unlink(tpath);
    unlink(mpath);
    rmdir(dir);
}

/* Classes named by the binding (mp_model_set_module_class): the tree says
 * "(conv1): Conv2d(" and the aggregated block sums by class. */
static void t_module_classes(void) {
    mp_model *m = NULL;
    mp_profile *p = NULL;
    T_OK(mp_model_load("models/resnet18.onnx", &m));
    if (!m) return;
    T_OK(mp_model_set_dim(m, "batch", 1));
    T_OK(mp_model_set_module_class(m, "", "ResNet"));
    T_OK(mp_model_set_module_class(m, "conv1", "Conv2d"));
    T_OK(mp_model_set_module_class(m, "layer1.0", "BasicBlock"));
    T_OK(mp_model_set_module_class(m, "layer1.1", "BasicBlock"));
    T_EQ(mp_model_set_module_class(m, "layer9", "Sequential"), MP_ERR_USAGE);
    T_CHECK(strstr(mp_last_error(), "layer9") != NULL);
    T_OK(mp_profile_static(m, &p));
    mp_report_options o;
    mp_report_options_default(&o);
    o.depth = 2;
    char *s = NULL;
    T_OK(mp_report_string(p, &o, &s));
    T_CHECK(s && strstr(s, "\nResNet(\n") && strstr(s, "(conv1): Conv2d(") &&
            strstr(s, "(0): BasicBlock(") && strstr(s, "(bn1)("));
    /* depth 2: the two BasicBlocks of layer1 summed under their class
     * (2 x 231.21 MMACs), beside the blocks still named by path */
    T_CHECK(s && strstr(s, "'BasicBlock': '462.42 MMACs'"));
    mp_string_free(s);
    mp_profile_free(p);
    mp_model_free(m);
}

MP_TESTS(trace_legacy) {
    {"module_classes", t_module_classes},
    {"train", t_train},
    {"train_containers", t_train_containers},
    {"modules", t_modules},
    {"kineto_ranges", t_kineto_ranges},
    {"through_api", t_through_api},
    {"report_string", t_report_string},
};
MP_TESTS_END(trace_legacy)
