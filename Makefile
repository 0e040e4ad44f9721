# plateau — one Makefile.  Knobs (override on the command line):
#   CUDA=auto|0|1   build the CUDA backend (auto: when nvcc is found)
#   CUDA_ARCH=90a   SM architecture for nvcc (90a: Hopper with wgmma, which
#                   the attention forward uses; 90 builds the mma kernels only)
#   CUDA_HOME       toolkit root (default /usr/local/cuda)
#   CUDNN=auto|0|1  cuDNN's fused flash attention behind the attention calls
#                   (auto: when CUDA is built and cuDNN's headers and library
#                   and the cudnn-frontend headers are found)
#   CUDNN_HOME      cuDNN root with include/cudnn.h and lib/ or lib64/ (auto:
#                   CUDA_HOME, /usr, then the nvidia-cudnn Python wheel)
#   CUDNN_FE_HOME   cudnn-frontend headers (include/cudnn_frontend.h; auto:
#                   DEPS_PREFIX, then $(BUILD)/deps/cudnn-frontend, which
#                   `make cudnn-frontend` fills from the PyPI package)
#   DEBUG=0|1       -O0 -g and sanitizer-friendly flags
#   SAN=0|1         AddressSanitizer + UndefinedBehaviorSanitizer (make asan
#                   sets it with DEBUG=1 CUDA=0 in its own BUILD=build-asan)
#   PREFIX          install prefix for `make install`
#   STATIC_DEPS=0|1 link Check (and OpenBLAS) statically from DEPS_LIBDIR
#   BLAS=openblas|none  none: the CPU backend's GEMM is a plain OpenMP loop
#                   (for machines without OpenBLAS)
#   DEPS_PREFIX     extra include/ and lib/ root for headers and static libs
#   WERROR=1        warnings are errors (0 for a newer compiler on another machine)
#   NP=2            ranks for `make run`;  MPI_NPS="1 2 3 4" ranks for MPI tests
#   DEPS=1          `make run`/`make test` first install Debian packages (0: skip)
.DEFAULT_GOAL := all
SHELL := /bin/bash

CUDA ?= auto
CUDA_ARCH ?= 90a
CUDA_HOME ?= /usr/local/cuda
DEBUG ?= 0
SAN ?= 0
PREFIX ?= /usr/local
STATIC_DEPS ?= 0
BLAS ?= openblas
DEPS_PREFIX ?=
DEPS_LIBDIR ?= $(if $(DEPS_PREFIX),$(DEPS_PREFIX)/lib,/usr/lib/x86_64-linux-gnu)
NP ?= 2
MPI_NPS ?= 1 2 3 4
DEPS ?= 1
BUILD ?= build
CC ?= gcc
NVCC ?= $(shell command -v nvcc 2>/dev/null || ( [ -x $(CUDA_HOME)/bin/nvcc ] && echo $(CUDA_HOME)/bin/nvcc ))

ifeq ($(CUDA),auto)
  ifneq ($(NVCC),)
    HAVE_CUDA := 1
  else
    HAVE_CUDA := 0
  endif
else
  HAVE_CUDA := $(CUDA)
endif
ifeq ($(HAVE_CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found (set NVCC or CUDA_HOME))
  endif
endif

# cuDNN: the library and its headers, and the header-only cudnn-frontend that
# builds the attention graphs (used by one .cu file).  The library's folder
# holds libcudnn.so.9 (a Python wheel ships no unversioned link: link by the
# versioned name).
CUDNN ?= auto
CUDNN_FE_VERSION ?= 1.32.0
ifneq ($(HAVE_CUDA)$(CUDNN),10)
  ifeq ($(HAVE_CUDA),1)
    CUDNN_PY_DIR := $(shell python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
  endif
endif
CUDNN_HOME ?= $(firstword $(foreach d,$(CUDA_HOME) /usr /usr/local $(CUDNN_PY_DIR) $(DEPS_PREFIX),$(if $(wildcard $(d)/include/cudnn.h),$(d))))
CUDNN_LIBDIR ?= $(firstword $(foreach d,$(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib $(CUDNN_HOME)/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu $(CUDNN_PY_DIR)/lib,$(if $(wildcard $(d)/libcudnn.so.9),$(d))))
CUDNN_FE_HOME ?= $(firstword $(foreach d,$(DEPS_PREFIX) $(BUILD)/deps/cudnn-frontend,$(if $(wildcard $(d)/include/cudnn_frontend.h),$(d))))
ifeq ($(CUDNN),auto)
  HAVE_CUDNN := $(if $(and $(filter 1,$(HAVE_CUDA)),$(CUDNN_HOME),$(CUDNN_LIBDIR),$(CUDNN_FE_HOME)),1,0)
else
  HAVE_CUDNN := $(CUDNN)
endif
ifeq ($(HAVE_CUDNN),1)
  ifneq ($(HAVE_CUDA),1)
    $(error CUDNN=1 needs the CUDA backend (CUDA=1 or auto with nvcc found))
  endif
  ifeq ($(and $(CUDNN_HOME),$(CUDNN_LIBDIR)),)
    $(error CUDNN=1 but cuDNN 9 was not found (set CUDNN_HOME: include/cudnn.h and lib*/libcudnn.so.9))
  endif
  ifeq ($(CUDNN_FE_HOME),)
    $(error CUDNN=1 but the cudnn-frontend headers were not found (run `make cudnn-frontend` or set CUDNN_FE_HOME))
  endif
endif

# Debian packages the project needs (make deps).
DEB_PKGS := openmpi-bin libopenmpi-dev libpmix-dev libopenblas-dev check \
            pkg-config gnuplot-nox slurm-wlm munge clang-format

# Lazily evaluated (=): valid only after `make deps` has run.
MPI_CFLAGS = $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS = $(shell mpicc --showme:link 2>/dev/null)
ifeq ($(STATIC_DEPS),1)
  BLAS_LIBS = $(DEPS_LIBDIR)/libopenblas.a -lpthread
  CHECK_LIBS = $(DEPS_LIBDIR)/libcheck.a $(DEPS_LIBDIR)/libsubunit.a -lrt -lm
else
  BLAS_LIBS = -lopenblas
  CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
endif
ifeq ($(BLAS),none)
  BLAS_LIBS :=
  CPPFLAGS += -DPL_HAVE_BLAS=0
endif
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null) $(if $(DEPS_PREFIX),-I$(DEPS_PREFIX)/include)

OPT := -O2
ifeq ($(DEBUG),1)
  OPT := -O0 -g3
endif
ifeq ($(SAN),1)
  ifeq ($(HAVE_CUDA),1)
    $(error SAN=1 needs CUDA=0 (the sanitizers do not see device memory))
  endif
  OPT += -fsanitize=address,undefined -fno-sanitize-recover=undefined \
         -fno-omit-frame-pointer
endif
WERROR ?= 1
WARN := -Wall -Wextra -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
CPPFLAGS += -Iengine/include -Iengine -Isuite -DPL_HAVE_CUDA=$(HAVE_CUDA) -DPL_HAVE_CUDNN=$(HAVE_CUDNN) \
            -D_GNU_SOURCE -I$(BUILD)/gen
CFLAGS += -std=c11 $(OPT) -g $(WARN) -fopenmp -fPIC -march=x86-64-v2
NVCCFLAGS += -std=c++17 -O3 -lineinfo -arch=sm_$(CUDA_ARCH) \
             -Xcompiler -fPIC,-Wall -Iengine/include -Iengine \
             -DPL_HAVE_CUDA=1 -DPL_HAVE_CUDNN=$(HAVE_CUDNN) -I$(CUDA_HOME)/include --expt-relaxed-constexpr
LDLIBS_BASE = $(MPI_LIBS) $(BLAS_LIBS) -fopenmp -lpthread -lm
ifeq ($(HAVE_CUDA),1)
  LDLIBS_CUDA := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
                 -lcublas -lcublasLt -lnccl -lcudart -lstdc++
  ifeq ($(HAVE_CUDNN),1)
    LDLIBS_CUDA += -L$(CUDNN_LIBDIR) -Wl,-rpath,$(CUDNN_LIBDIR) -l:libcudnn.so.9 -lnvrtc
  endif
endif
LDLIBS_ALL = $(LDLIBS_BASE) $(LDLIBS_CUDA)

# What the build records of its sources (jobs/provenance): the git sha, the
# dirty flag and a content hash of the sources it compiles, taken from this
# tree and never from the command line (`override`: GIT_SHA=... is ignored).
override GIT_SHA := $(shell jobs/provenance describe 2>/dev/null || echo "unknown unknown")

# ---- sources (discovered: new files need no Makefile edit) ----------------
# Tests sit beside what they test: test_*.c (Check, one process),
# test_mpi_*.c (Check under mpirun for each of MPI_NPS), test_*.sh (scripts).
# libplateau is engine/ only; the baselines (above the engine) are their own
# archive, linked into the plateau program and the tests above the engine.
LIB_C := $(shell find engine -name '*.c' ! -name 'test_*' 2>/dev/null | sort)
LIB_CU := $(shell find engine -name '*.cu' ! -name 'test_*' 2>/dev/null | sort)
# host-only C++ of the CUDA backend (the cudnn-frontend user), built by $(CXX)
LIB_CPP := $(shell find engine -name '*.cpp' ! -name 'test_*' 2>/dev/null | sort)
BASE_C := $(shell find baselines -name '*.c' ! -name 'test_*' 2>/dev/null | sort)
SUITE_C := $(shell find suite -name '*.c' ! -name 'test_*' ! -path suite/cli/main.c | sort)
TEST_C := $(shell find engine baselines suite -name 'test_*.c' ! -name 'test_mpi_*' | sort)
TEST_MPI_C := $(shell find engine baselines suite -name 'test_mpi_*.c' | sort)
TEST_SH := $(shell find engine baselines suite jobs analysis dev doc -name 'test_*.sh' | sort)
# dev/: experiments (kernel versions that lost, probes), standalone programs
# linked against libplateau; `make dev` builds them (CUDA only)
DEV_CU := $(shell find dev -name '*.cu' 2>/dev/null | sort)
DEV_BINS := $(DEV_CU:dev/%.cu=$(BUILD)/dev/%)
ifneq ($(HAVE_CUDA),1)
  LIB_CU :=
  LIB_CPP :=
endif

LIB_OBJ := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.cu.o) \
           $(LIB_CPP:%.cpp=$(BUILD)/obj/%.cpp.o)
BASE_OBJ := $(BASE_C:%.c=$(BUILD)/obj/%.o)
SUITE_OBJ := $(SUITE_C:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/lib/libplateau.a
BASE_LIB := $(BUILD)/lib/libplateau_baselines.a
BIN := $(BUILD)/bin/plateau
TEST_BINS := $(TEST_C:%.c=$(BUILD)/tests/%) $(TEST_MPI_C:%.c=$(BUILD)/tests/%)

.PHONY: all config deps build run test test-unit test-mpi test-sh install \
        report regress clean format format-check dev asan cudnn-frontend

all: config $(BIN) $(LIB) $(BASE_LIB) $(BUILD)/lib/pkgconfig/plateau.pc

config:
	@mkdir -p results/runs
	@echo "# plateau build: CUDA=$(HAVE_CUDA) (nvcc: $(or $(NVCC),none)) CUDNN=$(HAVE_CUDNN)$(if $(filter 1,$(HAVE_CUDNN)), ($(CUDNN_LIBDIR))) CUDA_ARCH=$(CUDA_ARCH) DEBUG=$(DEBUG) BLAS=$(BLAS) STATIC_DEPS=$(STATIC_DEPS) sources=$(GIT_SHA)"

build: all

# With CUDA and cuDNN present, the cudnn-frontend headers are a dependency too.
deps: $(if $(and $(filter 1,$(HAVE_CUDA)),$(filter-out 0,$(CUDNN)),$(CUDNN_HOME)),cudnn-frontend)
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done | tr '\n' ' '); \
	missing=$${missing% }; \
	if [ -z "$$missing" ]; then echo "# deps: all Debian packages present"; exit 0; fi; \
	line="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing"; \
	if [ "$$(id -u)" != 0 ]; then echo "make deps: not root; run as root:"; echo "  $$line"; exit 1; fi; \
	if ! command -v apt-get >/dev/null; then echo "make deps: no apt-get here; install: $$missing"; exit 1; fi; \
	echo "# deps: installing $$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null

# The C compiler's command line, rewritten only when it changes (CUDA=0 then
# CUDA=auto, DEBUG, SAN in one BUILD dir): every C object is rebuilt then, so
# that objects of two configurations (-DPL_HAVE_CUDA=0 and 1) never mix.  The
# build directory's own include path is left out: BUILD=build and
# BUILD=$$PWD/build (the tests') name the same objects, and a no-op build
# must stay one (suite/cli/test_install.sh checks).
$(BUILD)/gen/cc_flags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(filter-out -I$(BUILD)/gen,$(CPPFLAGS)) $(CFLAGS)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/%.o: %.c $(BUILD)/gen/cc_flags
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(MPI_CFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# nvcc's command line, rewritten only when it changes (CUDA_ARCH=..., DEBUG=...),
# so that changing it rebuilds every CUDA object.
$(BUILD)/gen/nvcc_flags: FORCE
	@mkdir -p $(@D)
	@echo '$(NVCC) $(NVCCFLAGS)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/%.cu.o: %.cu $(BUILD)/gen/nvcc_flags
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@

# The CUDA backend's host C++ (no device code): the C++ compiler with the
# CUDA, cuDNN and cudnn-frontend headers; rebuilt when nvcc's line changes.
CXX ?= g++
CXXFLAGS_CUDA = -std=c++17 $(OPT) -g -fPIC -Wall -Wno-unused-parameter -Iengine/include -Iengine \
                -DPL_HAVE_CUDA=1 -DPL_HAVE_CUDNN=$(HAVE_CUDNN) -D_GNU_SOURCE -I$(CUDA_HOME)/include \
                $(if $(filter 1,$(HAVE_CUDNN)),-isystem $(CUDNN_HOME)/include -isystem $(CUDNN_FE_HOME)/include)
$(BUILD)/obj/%.cpp.o: %.cpp $(BUILD)/gen/nvcc_flags
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_CUDA) -MMD -MP -c $< -o $@

# The sources' provenance (git sha, dirty flag, tree hash: jobs/provenance
# header), rewritten only when it changes so that -MMD rebuilds exactly the
# files that include it (result metadata, --version).
.PHONY: FORCE
$(BUILD)/gen/plateau_git.h: FORCE
	@mkdir -p $(@D)
	@jobs/provenance header > $@.tmp || { rm -f $@.tmp; echo "jobs/provenance header failed"; exit 1; }
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(SUITE_OBJ) $(BUILD)/obj/suite/cli/main.o: | $(BUILD)/gen/plateau_git.h

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BASE_LIB): $(BASE_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(BUILD)/gen/plateau_git.h $(BUILD)/obj/suite/cli/main.o $(SUITE_OBJ) $(BASE_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(BUILD)/obj/suite/cli/main.o $(SUITE_OBJ) $(BASE_LIB) $(LIB) $(LDLIBS_ALL)

# A test links what its layer may use: an engine test libplateau alone, a
# baselines test the baselines too, a suite test the suite's objects as well.
$(BUILD)/tests/engine/%: $(BUILD)/obj/engine/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(CHECK_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/baselines/%: $(BUILD)/obj/baselines/%.o $(BASE_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BASE_LIB) $(LIB) $(CHECK_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/suite/%: $(BUILD)/obj/suite/%.o $(SUITE_OBJ) $(BASE_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(SUITE_OBJ) $(BASE_LIB) $(LIB) $(CHECK_LIBS) $(LDLIBS_ALL)

ifeq ($(HAVE_CUDA),1)
dev: $(DEV_BINS)
else
dev:
	@echo "make dev: the dev programs need CUDA (nvcc not found or CUDA=0)"
endif

$(BUILD)/obj/dev/%.cu.o: dev/%.cu $(BUILD)/gen/nvcc_flags
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/dev/%: $(BUILD)/obj/dev/%.cu.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS_ALL)

# pkg-config file; `make install PREFIX=...` writes it again for that prefix.
define write_pc
	@mkdir -p $(dir $(2))
	@printf 'prefix=%s\nincludedir=$${prefix}/include\nlibdir=$${prefix}/lib\n\nName: plateau\nDescription: bounded-memory long-context MoE training engine\nVersion: 0.1.0\nCflags: -I$${includedir} -I$${includedir}/plateau -DPL_HAVE_CUDA=%s\nLibs: -L$${libdir} -lplateau %s\n' \
	  "$(1)" "$(HAVE_CUDA)" "$$(echo $(LDLIBS_ALL))" > $(2)
endef
$(BUILD)/lib/pkgconfig/plateau.pc: Makefile
	$(call write_pc,$(PREFIX),$@)

# The operator headers keep their folders (include/plateau/ops, model, train,
# plan) and the .pc file adds include/plateau to the search path, so their
# own includes ("ops/ce.h") resolve: a program includes <plateau/ops/moe.h>.
# The chart scripts go to share/plateau/analysis, where `plateau report`
# looks for them beside an installed binary (<bin>/../share/plateau/analysis).
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/plateau \
	  $(DESTDIR)$(PREFIX)/share/plateau/analysis
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/plateau
	install -m 0644 analysis/*.gp $(DESTDIR)$(PREFIX)/share/plateau/analysis/
	install -m 0644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libplateau.a
	install -m 0644 engine/include/plateau/*.h $(DESTDIR)$(PREFIX)/include/plateau/
	for d in ops model train plan; do install -d $(DESTDIR)$(PREFIX)/include/plateau/$$d; \
	  for h in engine/$$d/*.h; do case $$h in *_internal.h|*testutil.h|*testlib.h|*/test_*) ;; \
	    *) install -m 0644 $$h $(DESTDIR)$(PREFIX)/include/plateau/$$d/ ;; esac; done; done
	$(call write_pc,$(PREFIX),$(DESTDIR)$(PREFIX)/lib/pkgconfig/plateau.pc)

# ---- the two set-up commands ----------------------------------------------
ifeq ($(DEPS),1)
DEPS_TARGET := deps
endif

# The main job on the embedded default: CPU backend under mpirun, small sizes;
# results, tables and charts are written and their paths printed.
# The build in one line (its compiler lines go to a log, shown only when it
# fails), then the main job, which ends with the summary of the paper's claims.
run: $(DEPS_TARGET)
	@mkdir -p $(BUILD)
	@printf '# build: make all (log %s) ... ' $(BUILD)/make-run-build.log
	@if $(MAKE) --no-print-directory all >$(BUILD)/make-run-build.log 2>&1; then \
	  echo ok; else echo FAILED; tail -n 40 $(BUILD)/make-run-build.log; exit 1; fi
	@NP=$(NP) BUILD=$(BUILD) jobs/main.sh

test: $(DEPS_TARGET)
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory all tests
	@$(MAKE) --no-print-directory test-unit test-mpi test-sh

tests: $(TEST_BINS)

export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0
MPIRUN ?= mpirun --bind-to none
TEST_TIMEOUT ?= 600

test-unit: $(TEST_C:%.c=$(BUILD)/tests/%)
	@set -e; for t in $^; do echo "== $$t"; timeout $(TEST_TIMEOUT) $$t; done

test-mpi: $(TEST_MPI_C:%.c=$(BUILD)/tests/%)
	@set -e; for t in $^; do for np in $(MPI_NPS); do \
	  echo "== mpirun -np $$np $$t"; OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 CK_FORK=no \
	  timeout $(TEST_TIMEOUT) $(MPIRUN) -np $$np $$t; done; done

test-sh: all
	@set -e; for t in $(TEST_SH); do echo "== $$t"; BUILD=$(BUILD) timeout 1200 bash $$t; done

# The sanitizer build (CUDA=0, -O0, ASan + UBSan) in its own BUILD dir and its
# unit and MPI tests (np 1 and 2) and the bad-input corpus.  Open MPI's own
# allocations at start-up are not ours: .ci/lsan.supp keeps LeakSanitizer on
# our code only (Open MPI keeps its components loaded and malloc stacks are
# unwound fully, so that every leak's stack names its library).
ASAN_BUILD ?= build-asan
ASAN_ENV = OMPI_MCA_mca_base_component_disable_dlclose=1 \
           ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:fast_unwind_on_malloc=0 \
           LSAN_OPTIONS=suppressions=$(CURDIR)/.ci/lsan.supp:print_suppressions=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
asan:
	@$(MAKE) --no-print-directory CUDA=0 DEBUG=1 SAN=1 BUILD=$(ASAN_BUILD) all tests
	@$(ASAN_ENV) $(MAKE) --no-print-directory CUDA=0 DEBUG=1 SAN=1 BUILD=$(ASAN_BUILD) \
	  MPI_NPS="1 2" test-unit test-mpi
	@$(ASAN_ENV) BUILD=$(ASAN_BUILD) timeout 1200 bash suite/cli/test_badinput.sh

# The cudnn-frontend headers (header-only C++, NVIDIA's, from its PyPI
# package) into $(BUILD)/deps/cudnn-frontend: needed only to build the cuDNN
# attention path; without them CUDNN=auto builds without it.
CUDNN_FE_DIR := $(BUILD)/deps/cudnn-frontend
cudnn-frontend:
	@if [ -f $(CUDNN_FE_DIR)/include/cudnn_frontend.h ]; then exit 0; fi; \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT; \
	if python3 -m pip download -q --no-deps --only-binary=:all: -d "$$tmp" \
	     nvidia-cudnn-frontend==$(CUDNN_FE_VERSION) >"$$tmp/log" 2>&1 && \
	   mkdir -p "$$tmp/x" && (cd "$$tmp/x" && python3 -m zipfile -e "$$tmp"/nvidia_cudnn_frontend-*.whl .) && \
	   [ -f "$$tmp/x/include/cudnn_frontend.h" ]; then \
	  mkdir -p $(CUDNN_FE_DIR) && rm -rf $(CUDNN_FE_DIR)/include && \
	  mv "$$tmp/x/include" $(CUDNN_FE_DIR)/include && \
	  echo "# deps: cudnn-frontend $(CUDNN_FE_VERSION) headers in $(CUDNN_FE_DIR)"; \
	else echo "# deps: cudnn-frontend $(CUDNN_FE_VERSION) not fetched (pip download failed): the cuDNN attention path is not built"; fi

report:
	@test -n "$(RUN_DIR)" || { echo "make report RUN_DIR=results/runs/<sweep>"; exit 2; }
	$(BIN) report $(RUN_DIR)

# The regression set of this machine kind (jobs/sweeps/regress.tsv) against
# results/reference/<kind>/ (MACHINE=h200x2 etc. to name the kind).
regress: all
	BUILD=$(BUILD) jobs/regress $(if $(MACHINE),--machine $(MACHINE))

# Every C, CUDA and C++ source of the project in the style of .clang-format:
# `make format` rewrites them, `make format-check` (the first step of
# `make test`) fails naming each file that differs.
FORMAT_SRC = $(shell find engine suite baselines \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cpp' \) | sort)
format:
	clang-format -i $(FORMAT_SRC)

format-check:
	@command -v clang-format >/dev/null || { echo "format-check: clang-format not found (make deps installs it)"; exit 1; }
	@bad=$$(for f in $(FORMAT_SRC); do clang-format --dry-run --Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "format-check: these files differ from .clang-format (make format rewrites them):"; \
	  echo "$$bad" | sed 's/^/  /'; exit 1; fi; echo "# format-check: $(words $(FORMAT_SRC)) files as .clang-format says"

clean:
	rm -rf $(BUILD)

# keep test objects (make would delete them as intermediates of the test rule)
.SECONDARY:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
