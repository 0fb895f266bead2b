# modelprof build. `make` builds the CLI and the library; `make demo` and
# `make test` also install missing Debian packages when run as root.
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
OPT ?= -O2
CFLAGS ?= $(OPT) -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter \
        -Wno-missing-field-initializers
# -fvisibility=hidden: the shared library exports only what include/modelprof.h
# marks MP_API (tools/abi_check.py checks it); the tests and the command link
# the static library and keep every internal symbol
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden $(WARN) $(CFLAGS) -Iinclude -Isrc
# oneDNN (Debian libdnnl-dev) runs on OpenMP (libgomp): the glue sets its thread count
# gzip traces inflate through ISA-L (libisal-dev; docs/DESIGN.md); the tests write gzip with zlib
LDLIBS := -lisal -lz -lm -lpthread -ldl
BUILD ?= build

LIB_SRC := $(sort $(wildcard src/base/*.c src/load/*.c src/graph/*.c src/ops/*.c src/trace/*.c src/train/*.c src/import/*.c src/plan/*.c \
                  src/analyze/*.c src/report/*.c src/run/*.c src/memory/*.c))
CLI_SRC := src/cli/main.c src/cli/cli_util.c src/cli/trace_cmd.c src/cli/plan_cmd.c src/cli/memory_cmd.c
# modelprof-mpi (`mpirun -n N modelprof-mpi trace FOLDER`): built when Open
# MPI's compiler wrapper is there (Debian: libopenmpi-dev, openmpi-bin)
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_BIN := $(if $(MPICC),$(BUILD)/modelprof-mpi)
TEST_SRC := $(sort $(filter-out tests/conformance.c,$(wildcard tests/*.c)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

all: $(BUILD)/modelprof $(BUILD)/libmodelprof.a $(BUILD)/libmodelprof.so $(BUILD)/abi.ok $(MPI_BIN)

# objects are rebuilt when the compiler or its flags change (the stamp is
# rewritten only then); -Werror changes no object, so a -Werror build and a
# plain one (make test, make install) share their objects
COMPILE_ID := $(CC) $(filter-out -Werror,$(ALL_CFLAGS))
$(BUILD)/cflags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(COMPILE_ID)' | cmp -s - $@ || echo '$(COMPILE_ID)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libmodelprof.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# versioned soname: libmodelprof.so.0 -> libmodelprof.so.0.1.0 (install)
SO_MAJOR := 0
SO_VERSION := 0.1.0
$(BUILD)/libmodelprof.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libmodelprof.so.$(SO_MAJOR) -o $@ $^ $(LDLIBS)

# The command links dynamically: Debian's libdnnl-dev ships only the shared
# libdnnl.so (no libdnnl.a), so a static link is not possible any more
# (mapping the shared objects costs ~0.3 ms at start).
CLI_LDFLAGS ?=

$(BUILD)/modelprof: $(CLI_OBJ) $(BUILD)/libmodelprof.a
	$(CC) $(CLI_LDFLAGS) -o $@ $^ $(LDLIBS)

# mpicc wraps the same compiler flags around mpi.h and -lmpi
$(BUILD)/modelprof-mpi: src/cli/mpi_main.c $(BUILD)/obj/src/cli/trace_cmd.o $(BUILD)/obj/src/cli/cli_util.o $(BUILD)/libmodelprof.a
	OMPI_CC=$(CC) $(MPICC) $(ALL_CFLAGS) -o $@ src/cli/mpi_main.c $(BUILD)/obj/src/cli/trace_cmd.o $(BUILD)/obj/src/cli/cli_util.o \
		$(BUILD)/libmodelprof.a $(LDLIBS)

$(BUILD)/tests: $(TEST_OBJ) $(BUILD)/libmodelprof.a
	$(CC) -o $@ $^ $(LDLIBS)

objs: $(LIB_OBJ)

# One source of truth for the C API: the Python package's structs and
# prototypes (python/modelprof/_abi.py) against include/modelprof.h, and the
# shared library's exports against the header's MP_API functions
# (tools/abi_check.py). Skipped where there is no python3; `make test` runs
# it always, with its self-test.
PYTHON3 := $(firstword $(wildcard /usr/bin/python3) $(shell command -v python3 2>/dev/null))
$(BUILD)/abi.ok: include/modelprof.h python/modelprof/_abi.py tools/abi_check.py $(BUILD)/libmodelprof.so
ifneq ($(PYTHON3),)
	$(PYTHON3) tools/abi_check.py --cc $(CC) --lib $(BUILD)/libmodelprof.so
	@touch $@
else
	@echo "abi check skipped: no python3 (make test runs it)"
endif

# The HTML report's template, embedded as C strings (never committed).
HTML_TPL := src/report/html/report.html src/report/html/report.css src/report/html/report.js
$(BUILD)/gen/report_html.h: $(HTML_TPL) tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh mp_html $(HTML_TPL) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/src/report/html.o: $(BUILD)/gen/report_html.h
$(BUILD)/obj/src/report/html.o: ALL_CFLAGS += -I$(BUILD)/gen
# the memory report's page (modelprof memory --format html)
MEMH_TPL := src/report/html/memory.html src/report/html/memory.css src/report/html/memory.js
$(BUILD)/gen/memory_html.h: $(MEMH_TPL) tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh mp_memh $(MEMH_TPL) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/src/report/memory_html.o: $(BUILD)/gen/memory_html.h
$(BUILD)/obj/src/report/memory_html.o: ALL_CFLAGS += -I$(BUILD)/gen

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)

# ---- the two commands of the README ----
DEMO_MODEL ?= models/resnet18.onnx

demo:
	@sh tools/deps.sh build
	$(MAKE) all
	$(BUILD)/modelprof $(DEMO_MODEL) --dim batch=1 --depth 2

# the suite's one set of flags: objects rebuild when the flags change
# (build/cflags), so every sub-make of the suite is given the same ones
TEST_CFLAGS = $(OPT) -g -Werror

# the builds inside `make test` compile on every core (a plain `make test`
# would otherwise build one file at a time)
NPROC := $(shell nproc 2>/dev/null || echo 2)

test:
	@sh tools/deps.sh test
	$(MAKE) -j$(NPROC) all $(BUILD)/tests CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) check-layers CFLAGS="$(TEST_CFLAGS)"
	@echo "== clang build (warnings are errors)"
	$(MAKE) -j$(NPROC) all CC=clang BUILD=$(BUILD)/clang CFLAGS="$(TEST_CFLAGS)"
	@echo "== unit, model and CLI tests"
	rm -rf $(BUILD)/json-out && mkdir -p $(BUILD)/json-out
	cd . && MP_TEST_JOBS=2 MP_BIN=$(BUILD)/modelprof MP_JSON_DUMP=$(BUILD)/json-out $(BUILD)/tests
	@echo "== the oneDNN suite again with oneDNN at most AVX2 (gemm:jit matmul, padded weights: docs/DESIGN.md)"
	ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell MP_BIN=$(BUILD)/modelprof $(BUILD)/tests dnnl.
	@echo "== every JSON the tests produced, against its schema (docs/schema/)"
	/usr/bin/python3 tools/schema_check.py $(BUILD)/json-out profile:tests/golden/llama_small.json
	/usr/bin/python3 tools/schema_check.py --self-test $(BUILD)/json-out profile:tests/golden/llama_small.json
	$(MAKE) test-html CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) conformance CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) params-check CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) agree CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) pytest-ish CFLAGS="$(TEST_CFLAGS)"
	$(MAKE) plan-check CFLAGS="$(TEST_CFLAGS)"

# ---- the quick loop: one compiler, an incremental build and the unit test
# binary, two tests at a time (no clang build, conformance, browser,
# PyTorch or planner-harness suites); T=NAME runs the tests whose
# "file.test" name contains NAME (`make check T=plan.options`) ----
T ?=
check:
	@$(MAKE) --no-print-directory -j2 all $(BUILD)/tests CFLAGS="$(TEST_CFLAGS)"
	MP_TEST_JOBS=2 MP_BIN=$(BUILD)/modelprof $(BUILD)/tests $(T)

# ---- the folders' layering (src/LAYERS), on the objects and the includes ----
check-layers: objs
	/usr/bin/python3 tools/check_layers.py --build $(BUILD)
	/usr/bin/python3 tools/check_layers.py --self-test

# ---- the Python package (python/modelprof) and `make install`, tested
# (tests/python/run.py: get_model_profile on torchvision models, FlopsProfiler
# on a CPU training loop, the installed tree from another folder) ----
pytest-ish: all
	@sh tools/deps.sh test
	/usr/bin/python3 tools/manpage.py --check $(BUILD)/modelprof docs/modelprof.1
	/usr/bin/python3 tools/abi_check.py --cc $(CC) --lib $(BUILD)/libmodelprof.so
	/usr/bin/python3 tools/abi_check.py --cc $(CC) --self-test
	@echo "== the Python tests under PYTHONMALLOC=debug (a ctypes struct shorter than C's aborts)"
	PYTHONMALLOC=debug /usr/bin/python3 tests/python/run.py --build $(BUILD) $(PYTEST_ARGS)
	/usr/bin/python3 tests/python/test_memory.py   # modelprof.memory.record, torch.cuda.memory mocked per version
	/usr/bin/python3 tests/python/test_memory_report.py --build $(BUILD)   # modelprof.memory_report, the binding

# ---- make install / make uninstall (PREFIX, DESTDIR) ----
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(DESTDIR)$(PREFIX)/bin
LIBDIR := $(DESTDIR)$(PREFIX)/lib
INCDIR := $(DESTDIR)$(PREFIX)/include
PCDIR := $(DESTDIR)$(PREFIX)/lib/pkgconfig
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
PYDIR := $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/modelprof
PY_SRC := $(sort $(wildcard python/modelprof/*.py))
# every installed path, for uninstall (folders removed only when left empty)
INSTALLED := $(BINDIR)/modelprof $(LIBDIR)/libmodelprof.so.$(SO_VERSION) \
    $(LIBDIR)/libmodelprof.so.$(SO_MAJOR) $(LIBDIR)/libmodelprof.so $(LIBDIR)/libmodelprof.a \
    $(INCDIR)/modelprof.h $(PCDIR)/modelprof.pc $(MANDIR)/modelprof.1 \
    $(PY_SRC:python/modelprof/%=$(PYDIR)/%)

install: all
	install -d $(BINDIR) $(LIBDIR) $(INCDIR) $(PCDIR) $(MANDIR) $(PYDIR)
	install -m 755 $(BUILD)/modelprof $(BINDIR)/modelprof
	install -m 755 $(BUILD)/libmodelprof.so $(LIBDIR)/libmodelprof.so.$(SO_VERSION)
	ln -sf libmodelprof.so.$(SO_VERSION) $(LIBDIR)/libmodelprof.so.$(SO_MAJOR)
	ln -sf libmodelprof.so.$(SO_MAJOR) $(LIBDIR)/libmodelprof.so
	install -m 644 $(BUILD)/libmodelprof.a $(LIBDIR)/libmodelprof.a
	install -m 644 include/modelprof.h $(INCDIR)/modelprof.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SO_VERSION)|' tools/modelprof.pc.in \
	    > $(PCDIR)/modelprof.pc
	install -m 644 docs/modelprof.1 $(MANDIR)/modelprof.1
	install -m 644 $(PY_SRC) $(PYDIR)/

uninstall:
	rm -f $(INSTALLED)
	rm -rf $(PYDIR)/__pycache__
	-rmdir $(PYDIR) $(PCDIR) 2>/dev/null || true

.PHONY: pytest-ish install uninstall

# ---- the HTML reports in headless Chromium (tools/html_check.py): the
# static, measured, trace and 7B reports render, their tree expands, their
# tables sort, no script errors; screenshots and load times in build/html ----
test-html: $(BUILD)/modelprof
	/usr/bin/python3 tools/html_check.py --modelprof $(BUILD)/modelprof --out $(BUILD)/html \
	    --llama7b $(BUILD)/bench/llama7b.onnx

.PHONY: test-html

# ---- tied and folded weights of Debian PyTorch's exports against PyTorch's
# parameter count (tools/params_check.py; docs/COUNTING.md) ----
params-check: $(BUILD)/modelprof
	@sh tools/deps.sh agree
	/usr/bin/python3 tools/params_check.py --modelprof $(BUILD)/modelprof --out $(BUILD)/params_check

.PHONY: params-check

# ---- the measured run against PyTorch on real models (tools/agree.py):
# exported with weights into build/agree (once), rel L2 error <= 1e-3 ----
AGREE_OUT ?= $(BUILD)/agree
agree: $(BUILD)/modelprof
	@sh tools/deps.sh agree
	/usr/bin/python3 tools/agree.py --modelprof $(BUILD)/modelprof --out $(AGREE_OUT)
	@echo "== the same models with oneDNN at most AVX2 (its other kernels: gemm:jit, jit:avx2)"
	ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell /usr/bin/python3 tools/agree.py --modelprof $(BUILD)/modelprof --out $(AGREE_OUT)

.PHONY: agree

# ---- the planner's kept activations against PyTorch's saved_tensors_hooks
# (tools/plan_check.py: ResNet-50, ViT, BERT at 512, GPT-2 at 1,024, a Llama
# at 512 x fp32/bf16 autocast x checkpointing, the decoders in pure bf16;
# one small shape each: seconds, even with bf16 emulated) and its
# predictions against measured runs on an H100 and an H200
# (tools/plan_h100.py, tools/plan_h200.py) ----
plan-check: $(BUILD)/modelprof
	@sh tools/deps.sh agree
	/usr/bin/python3 tools/plan_check.py --modelprof $(BUILD)/modelprof --tol 0.05 --out $(BUILD)/plan_check
	/usr/bin/python3 tools/plan_h100.py --modelprof $(BUILD)/modelprof --out $(BUILD)/plan
	/usr/bin/python3 tools/plan_h200.py --modelprof $(BUILD)/modelprof --out $(BUILD)/plan
	/usr/bin/python3 tools/host_ops.py --modelprof $(BUILD)/modelprof --out $(BUILD)/host_ops
	/usr/bin/python3 tools/plan_measured.py --modelprof $(BUILD)/modelprof --out $(BUILD)/plan

.PHONY: plan-check

# ---- conformance against the ONNX backend test data (docs/CONFORMANCE.md) ----
$(BUILD)/conformance: $(BUILD)/obj/tests/conformance.o $(BUILD)/libmodelprof.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

-include $(BUILD)/obj/tests/conformance.d

conformance:
	@sh tools/deps.sh test
	$(MAKE) $(BUILD)/conformance
	$(BUILD)/conformance --skip tests/conformance_skip.txt $(CONFORMANCE_FLAGS)
	@echo "== the same cases with every node on its portable kernel (none on oneDNN)"
	$(BUILD)/conformance --skip tests/conformance_skip.txt --portable $(CONFORMANCE_FLAGS)

.PHONY: conformance

# ---- the com.microsoft contrib kernels against ONNX Runtime (npm
# onnxruntime-node under $(BUILD)/ort; tools/contrib_check.py) ----
contrib-check: $(BUILD)/modelprof
	/usr/bin/python3 tools/contrib_check.py --modelprof $(BUILD)/modelprof --out $(BUILD)/contrib_check \
	    --ort $(BUILD)/ort

.PHONY: contrib-check

# ---- sanitizers and fuzzing (docs/SECURITY.md) ----
SAN_CC ?= clang-14
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_BUILD := $(BUILD)/sanitize
# Sanitizer and fuzz builds load oneDNN (and its libgomp) at start instead
# of with dlopen on the first run: LeakSanitizer's exit-time scan crashes
# ("Tracer caught signal 11") on OpenMP threads of a library opened later.
SAN_DNNL := -Wl,--no-as-needed -ldnnl -lgomp -Wl,--as-needed

test-sanitize:
	@sh tools/deps.sh sanitize
	$(MAKE) BUILD=$(SAN_BUILD) CC=$(SAN_CC) CFLAGS="-O1 -g $(SAN_FLAGS)" CLI_LDFLAGS= \
	    LDLIBS="$(SAN_FLAGS) $(LDLIBS) $(SAN_DNNL)" $(SAN_BUILD)/modelprof $(SAN_BUILD)/tests \
	    $(SAN_BUILD)/conformance
	@echo "== every conformance case on adversarial inputs (NaN, infinities, extreme integers, shapes that do not fit): no crash"
	@# the two passes at once (each is one thread)
	$(SAN_BUILD)/conformance --skip tests/conformance_skip.txt --poison --portable \
	    > $(SAN_BUILD)/poison-portable.log 2>&1 & p=$$!; \
	$(SAN_BUILD)/conformance --skip tests/conformance_skip.txt --poison \
	    > $(SAN_BUILD)/poison.log 2>&1 || { grep -E "FAIL|runtime error|ERROR" $(SAN_BUILD)/poison.log | head -40; exit 1; }; \
	wait $$p || { grep -E "FAIL|runtime error|ERROR" $(SAN_BUILD)/poison-portable.log | head -40; exit 1; }
	@grep -h "^run in scope" $(SAN_BUILD)/poison.log $(SAN_BUILD)/poison-portable.log
	@echo "== the contrib and opset 23/24 kernels on adversarial contents: no crash"
	/usr/bin/python3 tools/contrib_check.py --poison --modelprof $(SAN_BUILD)/modelprof --out $(SAN_BUILD)/contrib_poison
	@echo "== the suite under ASan+UBSan, one process per test, then in one process (leaks)"
	MP_TEST_JOBS=2 MP_BIN=$(SAN_BUILD)/modelprof $(SAN_BUILD)/tests
	MP_TEST_INPROC=1 MP_BIN=$(SAN_BUILD)/modelprof $(SAN_BUILD)/tests > $(SAN_BUILD)/inproc.log \
	    || { tail -50 $(SAN_BUILD)/inproc.log; exit 1; }
	@echo "== the CLI on every fixture, text and JSON"
	for f in models/*.onnx; do \
	    $(SAN_BUILD)/modelprof -q $$f > /dev/null && \
	    $(SAN_BUILD)/modelprof -q --format json $$f > /dev/null || exit 1; done

FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_SECONDS ?= 600
FUZZ_CORPUS ?= $(FUZZ_BUILD)/corpus
FUZZ_ARGS := -rss_limit_mb=2048 -timeout=10 -max_len=1048576 -print_final_stats=1
# the ONNX backend test models (one per operator case) seed the fuzzer too
FUZZ_ONNX_SEEDS := $(FUZZ_BUILD)/onnx-seeds
ONNX_TESTDATA ?= /usr/share/libonnx-testdata/data

$(FUZZ_ONNX_SEEDS):
	@mkdir -p $@
	@i=0; for f in $$(find $(ONNX_TESTDATA) -name model.onnx 2>/dev/null); do \
	    i=$$((i+1)); cp $$f $@/$$i.onnx; done

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(SAN_CC) -std=c11 -D_GNU_SOURCE $(WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -Iinclude -Isrc -I$(BUILD)/gen -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/obj/src/report/html.o: $(BUILD)/gen/report_html.h
$(FUZZ_BUILD)/obj/src/report/memory_html.o: $(BUILD)/gen/memory_html.h

$(FUZZ_BUILD)/fuzz_load: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_load.o $(FUZZ_OBJ)
	$(SAN_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS) $(SAN_DNNL)

$(FUZZ_BUILD)/fuzz_trace: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_trace.o $(FUZZ_OBJ)
	$(SAN_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS) $(SAN_DNNL)

$(FUZZ_BUILD)/fuzz_memory: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_memory.o $(FUZZ_OBJ)
	$(SAN_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS) $(SAN_DNNL)

-include $(FUZZ_OBJ:.o=.d) $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_load.d $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_trace.d \
    $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_memory.d

# the memory snapshot fuzzer (issue 32): seeds are tests/fuzz/memory
# (hostile snapshots and small valid ones)
FUZZ_MEMORY_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_MEMORY_CI_SECONDS ?= 30
FUZZ_MEMORY_CORPUS ?= $(FUZZ_BUILD)/corpus-memory

# the trace fuzzer: seeds are windows of the shared traces (plain and gzip)
FUZZ_TRACE_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_TRACE_CI_SECONDS ?= 30
FUZZ_TRACE_CORPUS ?= $(FUZZ_BUILD)/corpus-trace

# `make fuzz`: FUZZ_SECONDS (default 600; 0 = until stopped) on a corpus
# kept in $(FUZZ_CORPUS), seeded with the fixtures and tests/corpus.
fuzz:
	@sh tools/deps.sh fuzz
	$(MAKE) $(FUZZ_BUILD)/fuzz_load $(FUZZ_ONNX_SEEDS)
	@mkdir -p $(FUZZ_CORPUS) $(FUZZ_BUILD)/artifacts
	$(FUZZ_BUILD)/fuzz_load $(FUZZ_ARGS) -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_CORPUS) models tests/corpus/seeds \
	    tests/corpus/malformed $(FUZZ_ONNX_SEEDS)
	$(MAKE) $(FUZZ_BUILD)/fuzz_trace
	@mkdir -p $(FUZZ_TRACE_CORPUS)
	$(FUZZ_BUILD)/fuzz_trace $(FUZZ_ARGS) -max_total_time=$(FUZZ_TRACE_SECONDS) \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_TRACE_CORPUS) tests/corpus/trace
	$(MAKE) $(FUZZ_BUILD)/fuzz_memory
	@mkdir -p $(FUZZ_MEMORY_CORPUS)
	$(FUZZ_BUILD)/fuzz_memory $(FUZZ_ARGS) -max_total_time=$(FUZZ_MEMORY_SECONDS) \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_MEMORY_CORPUS) tests/fuzz/memory

# `make fuzz-ci`: the committed cases once, then 60 s; any crash, leak,
# timeout or sanitizer report fails.
fuzz-ci:
	@sh tools/deps.sh fuzz
	$(MAKE) $(FUZZ_BUILD)/fuzz_load $(FUZZ_ONNX_SEEDS)
	@rm -rf $(FUZZ_BUILD)/ci && mkdir -p $(FUZZ_BUILD)/ci $(FUZZ_BUILD)/artifacts
	$(FUZZ_BUILD)/fuzz_load -runs=0 $(FUZZ_ARGS) tests/corpus/seeds tests/corpus/malformed \
	    tests/corpus/crashes
	$(FUZZ_BUILD)/fuzz_load $(FUZZ_ARGS) -max_total_time=60 -seed=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_BUILD)/ci models tests/corpus/seeds \
	    tests/corpus/malformed $(FUZZ_ONNX_SEEDS)
	$(MAKE) $(FUZZ_BUILD)/fuzz_trace
	@rm -rf $(FUZZ_BUILD)/ci-trace && mkdir -p $(FUZZ_BUILD)/ci-trace
	$(FUZZ_BUILD)/fuzz_trace -runs=0 $(FUZZ_ARGS) tests/corpus/trace
	$(FUZZ_BUILD)/fuzz_trace $(FUZZ_ARGS) -max_total_time=$(FUZZ_TRACE_CI_SECONDS) -seed=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_BUILD)/ci-trace tests/corpus/trace
	$(MAKE) $(FUZZ_BUILD)/fuzz_memory
	@rm -rf $(FUZZ_BUILD)/ci-memory && mkdir -p $(FUZZ_BUILD)/ci-memory
	$(FUZZ_BUILD)/fuzz_memory -runs=0 $(FUZZ_ARGS) tests/fuzz/memory tests/memory/regress
	$(FUZZ_BUILD)/fuzz_memory $(FUZZ_ARGS) -max_total_time=$(FUZZ_MEMORY_CI_SECONDS) -seed=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_BUILD)/ci-memory tests/fuzz/memory

.PHONY: test-sanitize fuzz fuzz-ci

$(BUILD)/bench_static: bench/bench_static.c $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_timing: bench/bench_timing.c $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# the per-node timer's cost against untimed passes of the same plan (<= 2%)
bench-timing: $(BUILD)/bench_timing
	$(BUILD)/bench_timing 21 models/resnet50.onnx batch=1 -- models/mobilenet_v2.onnx batch=1 \
	    -- models/bert_base.onnx batch=1 seq=32 -- models/llama_small.onnx batch=1 seq=8

$(BUILD)/bench_run: bench/bench_run.c $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_plan: bench/bench_plan.c $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# the training planner on a weightless Llama-2-70B (exported once, ~2 min):
# every option < 100 ms, --fit over 1,024 GPUs < 1 s
$(BUILD)/bench/llama70b.onnx:
	@mkdir -p $(BUILD)/bench
	/usr/bin/python3 tools/make_llama7b.py $@ 70b

bench-plan: $(BUILD)/bench_plan $(BUILD)/bench/llama70b.onnx
	$(BUILD)/bench_plan $(BUILD)/bench/llama70b.onnx 7 batch=1 seq=4096

# The per-shape GEMM table (issue 16): modelprof's MatMul against
# dnnl_sgemm and OpenBLAS, on the native ISA and on AVX2
$(BUILD)/bench_gemm: bench/bench_gemm.c $(BUILD)/obj/tests/tbuild.o $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -Itests -o $@ $^ $(LDLIBS)

bench-gemm:
	@sh tools/deps.sh bench
	$(MAKE) all $(BUILD)/bench_gemm
	$(BUILD)/bench_gemm
	ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell $(BUILD)/bench_gemm

bench:
	@sh tools/deps.sh bench
	$(MAKE) all $(BUILD)/bench_static $(BUILD)/bench_run
	/usr/bin/python3 bench/run.py --modelprof $(BUILD)/modelprof --bench-static $(BUILD)/bench_static
	@echo "== the measured run against ONNX Runtime and PyTorch eager (bench/run_peers.py)"
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run
	@echo "== the same against ONNX Runtime: opset-14 exports, and both export styles with oneDNN at most AVX2"
	@echo "   (PyTorch eager runs the same modules whatever the export: measured once, above)"
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run --engines modelprof,ORT --rounds 4 --opset 14
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run --engines modelprof,ORT --rounds 4 --max-isa AVX2
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run --engines modelprof,ORT --rounds 4 --opset 14 --max-isa AVX2
	@echo "== the dynamo exporter's graphs (models/dynamo/, seeded weights) against ONNX Runtime, native and at most AVX2"
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run --engines modelprof,ORT --rounds 4 --dynamo
	/usr/bin/python3 bench/run_peers.py --bench-run $(BUILD)/bench_run --engines modelprof,ORT --rounds 4 --dynamo --max-isa AVX2
	$(MAKE) bench-gemm
	$(MAKE) bench-timing
	$(MAKE) bench-trace
	$(MAKE) bench-plan
	$(MAKE) bench-ranks

# The trace analysis on a >= 518 MB trace built from a shared one (build/,
# removed afterwards unless BENCH_TRACE_KEEP=1), against Python's json.load
# (alternating), plain and gzipped (issue 25's targets: >= 35x, RSS <= 10%).
BENCH_TRACE_BYTES ?= 518000000
bench-trace:
	@sh tools/deps.sh build
	$(MAKE) all
	/usr/bin/python3 bench/bench_trace.py --modelprof $(BUILD)/modelprof \
	    --source tests/traces/vit_b16_adamw_stack.trace.json.gz \
	    --big $(BUILD)/bench-big.trace.json --min-bytes $(BENCH_TRACE_BYTES) --gz

# The multi-rank analysis at scale: 1,024 rank traces made from the real
# gloo rank (stragglers injected), analysed by mpirun -n 2 modelprof-mpi at
# 1/8 .. all of the ranks: time linear in bytes, memory per process bounded
# (bench/bench_ranks.py prints the figures). Not part of make test.
BENCH_RANKS ?= 1024
# `make bench-memory` (issue 32): a 1 M-event snapshot made from a shared real one
# (tools/make_big_snapshot.py), read by `modelprof memory --format json` and by Python's
# pickle.load alternately; prints best/median, the ratio and peak RSS against the file's size
# (targets: >= 5x, RSS below the file). Fails with a message while `modelprof memory` is absent.
# `make memory-check` (issue 32): `modelprof memory --format json` on every snapshot of
# tests/snapshots/ and the shared real ones equals tools/snapshot_ref.py's replay (the committed
# NAME.ref.json); every hostile snapshot exits 2 with a message and runs nothing.
memory-check: all
	/usr/bin/python3 tools/memory_check.py --modelprof $(BUILD)/modelprof --sweep

BENCH_MEMORY_EVENTS ?= 1000000
bench-memory:
	$(MAKE) all
	/usr/bin/python3 bench/bench_memory.py --modelprof $(BUILD)/modelprof \
	    --big $(BUILD)/bench/big_snapshot.pickle --events $(BENCH_MEMORY_EVENTS) --python /usr/bin/python3

bench-ranks:
	@sh tools/deps.sh bench
	$(MAKE) all
	@test -x $(BUILD)/modelprof-mpi || { echo "bench-ranks: no $(BUILD)/modelprof-mpi (Open MPI's mpicc missing)"; exit 1; }
	/usr/bin/python3 bench/bench_ranks.py --mpi $(BUILD)/modelprof-mpi --out $(BUILD)/bench-ranks \
	    --ranks $(BENCH_RANKS) --procs 2

.PHONY: FORCE all objs clean demo test bench bench-gemm bench-timing bench-trace bench-plan bench-ranks check check-layers
clean:
	rm -rf $(BUILD)
