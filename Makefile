# shardfs: plain Makefile, pkg-config for every library.
#
#   make            build build/shardfs
#   make check      install missing packages and check every command the
#                   suites run, then the stages build, unit, integration
#                   and fuzz-smoke, each run even when one before failed,
#                   each with its result and wall time; suites run two at
#                   a time (UNIT_JOBS, SUITE_JOBS; ONLY=test_s3 picks
#                   integration suites, SUITE_TIMEOUT bounds each)
#   make demo       build and mount a generated demo dataset
#   make bench      benchmarks (not part of check; ~25 min; subsets:
#                   BENCH_PHASES=latency BENCH_LATENCIES=20 make bench)
#   make SAN=1 ...  the same under ASan + UBSan (a flags stamp rebuilds)
#   make SAN=thread ...
#                   the same under ThreadSanitizer (-O1); the daemon in the
#                   integration suites runs under it too, and a race fails
#                   the run (TSAN_OPTIONS halt_on_error=1)
#   make fuzz       libFuzzer harnesses (tests/fuzz, clang), FUZZ_SECONDS
#                   each (default 300); check runs a short pass of each
#                   (fuzz-smoke, FUZZ_SMOKE_SECONDS, default 6)
#   make stress     the integration suites with STRESS=1 (bigger matrices)
#                   and the long fuzz run

PKG_CONFIG ?= pkg-config
CC ?= cc
CFLAGS ?= -O2 -g
# make install: PREFIX for the binary, man pages and examples; SBINDIR for
# the mount(8) helper (mount looks only in /sbin, whatever the PREFIX);
# SYSTEMDUNITDIR for the unit: $(PREFIX)/lib/systemd/system is in systemd's
# search path for both /usr and /usr/local, and leaves /etc/systemd/system
# to the admin's own units and drop-ins (set it there for other prefixes).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= /sbin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/shardfs
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system

B := build
PKGS := fuse3 libcrypto libcurl expat jansson lmdb zlib libisal libsystemd \
	libmicrohttpd libnfs
TEST_PKGS := check

WARN := -std=gnu11 -Wall -Wextra -Werror -Wmissing-prototypes \
	-Wstrict-prototypes -Wwrite-strings -Wvla -fno-common
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
endif
ifeq ($(SAN),thread)
# -O1 after CFLAGS' -O2: TSan's stacks stay readable and it runs faster.
SANFLAGS := -fsanitize=thread -O1 -g -fno-omit-frame-pointer
# TSan runs 5-15x slower: Check's per-test and the integration suites'
# timeouts stretch to match (still bounded).
CK_TIMEOUT_MULTIPLIER ?= 4
SUITE_TIMEOUT ?= 1800
export CK_TIMEOUT_MULTIPLIER SUITE_TIMEOUT
endif
# A sanitizer report fails the run: the first race, error or leak stops the
# process (a unit test or the daemon) with a non-zero status.
TSAN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1 \
	suppressions=$(CURDIR)/tests/tsan.supp
ASAN_OPTIONS ?= halt_on_error=1 detect_leaks=1
UBSAN_OPTIONS ?= halt_on_error=1 print_stacktrace=1
# Leaks in third-party libraries that shardfs cannot free, and orderings
# the kernel makes that TSan cannot see (each one named and explained in
# its file).
LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/lsan.supp
export TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS))
ALL_CFLAGS = $(WARN) $(CFLAGS) $(SANFLAGS) -D_GNU_SOURCE \
	-DFUSE_USE_VERSION=312 -DSHARDFS_VERSION='"$(VERSION)"' -I. \
	$(PKG_CFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS)
LIBS = $(PKG_LIBS) -lpthread

LIB_SRCS := $(wildcard util/*.c backends/*.c cache/*.c plan/*.c fs/*.c records/*.c \
	transform/*.c) \
	$(filter-out mount/main.c,$(wildcard mount/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
MAIN_OBJ := $(B)/mount/main.o
UNIT_SRCS := $(wildcard tests/unit/check_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)

.PHONY: all check unit integration demo bench deps deps-bench install uninstall clean format \
	format-check fuzz fuzz-build fuzz-smoke stress check-build check-unit \
	check-integration check-fuzz-smoke

all: $(B)/shardfs

# Rebuild everything when the compiler or its flags change.
$(B)/.flags: FORCE
	@mkdir -p $(B)
	@echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || \
		echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' > $@
FORCE:

$(B)/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libshardfs.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(B)/shardfs: $(MAIN_OBJ) $(B)/libshardfs.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libshardfs.a $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(shell $(PKG_CONFIG) --cflags $(TEST_PKGS)) \
		-MMD -MP -o $@ $< $(B)/libshardfs.a $(ALL_LDFLAGS) $(LIBS) \
		$(shell $(PKG_CONFIG) --libs $(TEST_PKGS))

# Packages, then every command the targets run (named if missing).
deps:
	@scripts/install-deps.sh
deps-bench:
	@scripts/install-deps.sh bench

# make check: the stages below one after another, each run even when an
# earlier one failed; each prints its result and wall time, and the last
# line sums them up. Exits non-zero at the end if any stage failed. deps
# comes first and alone: without the commands the suites call, every
# stage would fail for that reason (it names what is missing).
CHECK_STAGES := build unit integration fuzz-smoke
# The build stage compiles everything the others run, on every core.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

check: deps
	@t0=$$(date +%s); rc=0; sum=""; \
	for s in $(CHECK_STAGES); do \
		s0=$$(date +%s); \
		echo "=== check: stage $$s"; \
		if $(MAKE) --no-print-directory check-$$s; then r=passed; \
		else r=FAILED; rc=1; fi; \
		d=$$(($$(date +%s) - s0)); \
		echo "=== check: stage $$s $$r ($$d s)"; \
		sum="$$sum$${sum:+, }$$s $$r ($$d s)"; \
	done; \
	echo "check: $$sum; $$(($$(date +%s) - t0)) s in all"; \
	exit $$rc

check-build:
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) $(B)/shardfs $(UNIT_BINS) \
		$(B)/tests/shard_dump fuzz-build
check-unit: unit
check-integration: integration
check-fuzz-smoke: fuzz-smoke

# Some suites start servers on 127.0.0.1 (check_gcs_creds): no proxy from
# the environment may stand between them and libcurl.
UNIT_ENV := env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY \
	-u ALL_PROXY -u all_proxy NO_PROXY=127.0.0.1,localhost,::1 \
	no_proxy=127.0.0.1,localhost,::1

# tests/unit/run.sh: the Check suites and the shard cross-check (plan/shard.c
# against the reference shardspec.py, ~1 s), UNIT_JOBS at a time (default 2).
unit: $(UNIT_BINS) $(B)/tests/shard_dump
	@$(UNIT_ENV) tests/unit/run.sh $(B)/tests/shard_dump $(UNIT_BINS)

# tests/integration/run.sh: SUITE_JOBS suites at a time (default 2).
integration: $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs tests/integration/run.sh

# Fuzzing: the project's sources built again with clang and libFuzzer's
# instrumentation in their own directory, so build/ is never disturbed.
FUZZ_B := $(B)/fuzz
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer
# clang warns on positional initializers that gcc (the gate) accepts.
FUZZ_CFLAGS = $(WARN) -Wno-missing-field-initializers -O1 -g $(FUZZ_SAN) \
	-D_GNU_SOURCE -DFUSE_USE_VERSION=312 -DSHARDFS_VERSION='"$(VERSION)"' -I. $(PKG_CFLAGS)
# Only the sources the harnesses link: half the compile time, and clang's
# warnings never stop check over code no harness runs. A harness that needs
# more fails to link, naming the missing symbol.
FUZZ_LIB_SRCS := util/log.c backends/http.c backends/http_pool.c \
	backends/posix.c backends/s3_creds.c backends/s3_creds_source.c \
	backends/s3_sign.c backends/s3_xml.c plan/manifest.c plan/shard.c \
	fs/view.c util/ranks.c mount/config.c mount/config_transform.c \
	mount/config_value.c \
	mount/ini.c mount/overrides.c
FUZZ_LIB_SRCS += backends/gcs_json.c backends/objstore.c backends/backend_list.c
# mount/config.c checks nfs:// URLs with the pure parser.
FUZZ_LIB_SRCS += backends/nfs_url.c
FUZZ_LIB_SRCS += util/backoff.c util/hex.c util/sha256.c util/str.c util/thread.c
FUZZ_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FUZZ_B)/%.o)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_B)/%)
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 6
# fuzz_gcs_creds links the GCS credential documents too.
FUZZ_OBJS += $(FUZZ_B)/backends/gcs_jwt.o
# fuzz_records: the record framing and what it links.
FUZZ_OBJS += $(FUZZ_B)/records/format.o $(FUZZ_B)/records/gunzip.o \
	$(FUZZ_B)/records/frame.o $(FUZZ_B)/records/frame_tar.o \
	$(FUZZ_B)/util/crc32c.o
# fs/view.c builds record views' part names (records/rplan.h).
FUZZ_OBJS += $(FUZZ_B)/records/rplan.o $(FUZZ_B)/records/rindex.o \
	$(FUZZ_B)/records/rindex_load.o

$(FUZZ_B)/.flags: FORCE
	@mkdir -p $(FUZZ_B)
	@echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' | cmp -s - $@ || \
		echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' > $@

$(FUZZ_B)/%.o: %.c $(FUZZ_B)/.flags
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_B)/libshardfs.a: $(FUZZ_OBJS)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_B)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_B)/libshardfs.a $(FUZZ_B)/.flags
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< \
		$(FUZZ_B)/libshardfs.a $(LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz-smoke: fuzz-build
	@FUZZ_JOBS=$${FUZZ_JOBS:-2} tests/fuzz/run.sh $(FUZZ_B) $(FUZZ_SMOKE_SECONDS)

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@tests/fuzz/run.sh $(FUZZ_B) $(FUZZ_SECONDS)

stress: deps
	@$(MAKE) --no-print-directory $(B)/shardfs
	@STRESS=1 SHARDFS=$(CURDIR)/$(B)/shardfs tests/integration/run.sh
	@$(MAKE) --no-print-directory fuzz

demo: deps
	@$(MAKE) --no-print-directory $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs scripts/demo.sh

bench: deps-bench
	@$(MAKE) --no-print-directory $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs tests/bench/run.sh

# The unit comes from systemd/shardfs@.service.in (@BINDIR@ placeholder)
# or, while only the plain unit exists, from that file with its
# /usr/local/bin replaced; either way it names this install's binary.
UNIT_SRC := $(firstword $(wildcard systemd/shardfs@.service.in) \
	systemd/shardfs@.service)
EXAMPLES := $(wildcard examples/*)
INSTALL_SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g' \
	-e 's|/usr/local/bin/shardfs|$(BINDIR)/shardfs|g'

# Files generated with this PREFIX go to a directory of their own each
# time: a later install with another PREFIX never reuses stale ones.
# SHARDFS_BIN installs a binary built elsewhere (test_install.sh passes the
# one under test, so installing never rebuilds with other flags).
SHARDFS_BIN ?= $(B)/shardfs
install: $(SHARDFS_BIN)
	@rm -rf $(B)/install && mkdir -p $(B)/install
	$(INSTALL_SUBST) scripts/mount.fuse.shardfs.in \
		>$(B)/install/mount.fuse.shardfs
	$(INSTALL_SUBST) $(UNIT_SRC) >$(B)/install/shardfs@.service
	install -D -m 755 $(SHARDFS_BIN) $(DESTDIR)$(BINDIR)/shardfs
	install -D -m 755 $(B)/install/mount.fuse.shardfs \
		$(DESTDIR)$(SBINDIR)/mount.fuse.shardfs
	install -D -m 644 $(B)/install/shardfs@.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/shardfs@.service
	install -D -m 644 systemd/shardfs@.service.d/transforms.conf \
		$(DESTDIR)$(DOCDIR)/systemd/transforms.conf
	install -D -m 644 man/shardfs.8 $(DESTDIR)$(MANDIR)/man8/shardfs.8
	install -D -m 644 man/shardfs.conf.5 \
		$(DESTDIR)$(MANDIR)/man5/shardfs.conf.5
	install -d -m 755 $(DESTDIR)$(DOCDIR)/examples
	install -m 644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples/
	@echo "installed; configs go in /etc/shardfs/NAME.conf (examples in $(DOCDIR)/examples)"

# Removes what install put there; never /etc/shardfs or the cache.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/shardfs \
		$(DESTDIR)$(SBINDIR)/mount.fuse.shardfs \
		$(DESTDIR)$(SYSTEMDUNITDIR)/shardfs@.service \
		$(DESTDIR)$(MANDIR)/man8/shardfs.8 \
		$(DESTDIR)$(MANDIR)/man5/shardfs.conf.5
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/examples/,$(notdir $(EXAMPLES))) \
		$(DESTDIR)$(DOCDIR)/systemd/transforms.conf
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/systemd \
		$(DESTDIR)$(DOCDIR) 2>/dev/null

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRCS)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf build

-include $(shell find $(B) -name '*.d' 2>/dev/null)
