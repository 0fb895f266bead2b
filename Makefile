# modelprof build. `make` builds the CLI and the library; `make demo` and
# `make test` also install missing Debian packages when run as root.
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
OPT ?= -O2
CFLAGS ?= $(OPT) -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC $(WARN) $(CFLAGS) -Iinclude -Isrc
LDLIBS := -lm -lpthread
BUILD ?= build

LIB_SRC := $(sort $(wildcard src/base/*.c src/load/*.c src/graph/*.c src/ops/*.c \
                  src/analyze/*.c src/report/*.c))
CLI_SRC := src/cli/main.c
TEST_SRC := $(sort $(wildcard tests/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

all: $(BUILD)/modelprof $(BUILD)/libmodelprof.a $(BUILD)/libmodelprof.so

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libmodelprof.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libmodelprof.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/modelprof: $(CLI_OBJ) $(BUILD)/libmodelprof.a
	$(CC) -o $@ $^ $(LDLIBS)

$(BUILD)/tests: $(TEST_OBJ) $(BUILD)/libmodelprof.a
	$(CC) -o $@ $^ $(LDLIBS)

objs: $(LIB_OBJ)

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)

# ---- the two commands of the README ----
DEMO_MODEL ?= models/resnet18.onnx

demo:
	@sh tools/deps.sh build
	$(MAKE) all
	$(BUILD)/modelprof $(DEMO_MODEL) --dim batch=1 --depth 2

test:
	@sh tools/deps.sh test
	$(MAKE) all $(BUILD)/tests CFLAGS="$(OPT) -g -Werror"
	@echo "== clang build (warnings are errors)"
	$(MAKE) all CC=clang BUILD=$(BUILD)/clang CFLAGS="$(OPT) -g -Werror"
	@echo "== unit, model and CLI tests"
	cd . && MP_BIN=$(BUILD)/modelprof $(BUILD)/tests

$(BUILD)/bench_static: bench/bench_static.c $(BUILD)/libmodelprof.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

bench:
	@sh tools/deps.sh bench
	$(MAKE) all $(BUILD)/bench_static
	/usr/bin/python3 bench/run.py --modelprof $(BUILD)/modelprof --bench-static $(BUILD)/bench_static

.PHONY: all objs clean demo test bench
clean:
	rm -rf $(BUILD)
