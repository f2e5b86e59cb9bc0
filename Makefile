# shardfs: plain Makefile, pkg-config for every library.
#
#   make            build build/shardfs
#   make check      install missing packages, build, run every unit and
#                   integration suite
#   make demo       build and mount a generated demo dataset
#   make bench      benchmarks (not part of check)
#   make SAN=1 ...  the same under ASan + UBSan (a flags stamp rebuilds)

PKG_CONFIG ?= pkg-config
CC ?= cc
CFLAGS ?= -O2 -g
PREFIX ?= /usr/local
DESTDIR ?=

B := build
PKGS := fuse3 libcrypto inih libcurl expat jansson lmdb zlib
TEST_PKGS := check

WARN := -std=gnu11 -Wall -Wextra -Werror -Wmissing-prototypes \
	-Wstrict-prototypes -Wwrite-strings -Wvla -fno-common
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
endif

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS))
ALL_CFLAGS = $(WARN) $(CFLAGS) $(SANFLAGS) -D_GNU_SOURCE \
	-DFUSE_USE_VERSION=312 -DSHARDFS_VERSION='"$(VERSION)"' -I. \
	$(PKG_CFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS)
LIBS = $(PKG_LIBS) -lpthread

LIB_SRCS := $(wildcard util/*.c backends/*.c cache/*.c fs/*.c) \
	$(filter-out mount/main.c,$(wildcard mount/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
MAIN_OBJ := $(B)/mount/main.o
UNIT_SRCS := $(wildcard tests/unit/check_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)

.PHONY: all check unit integration demo bench deps install clean format \
	format-check

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

deps:
	@scripts/install-deps.sh

check: deps
	@$(MAKE) --no-print-directory unit integration

unit: $(UNIT_BINS)
	@rc=0; for t in $(UNIT_BINS); do $$t || rc=1; done; exit $$rc

integration: $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs tests/integration/run.sh

demo: deps
	@$(MAKE) --no-print-directory $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory $(B)/shardfs
	@SHARDFS=$(CURDIR)/$(B)/shardfs tests/bench/run.sh

install: $(B)/shardfs
	install -D -m 755 $(B)/shardfs $(DESTDIR)$(PREFIX)/bin/shardfs
	install -D -m 644 systemd/shardfs@.service \
		$(DESTDIR)/etc/systemd/system/shardfs@.service

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRCS)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf build

-include $(shell find $(B) -name '*.d' 2>/dev/null)
