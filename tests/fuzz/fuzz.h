/*
 * fuzz.h: what the libFuzzer harnesses share. Each harness is one
 * LLVMFuzzerTestOneInput over a parser, linked against the project's own
 * objects built with clang's fuzzer and ASan/UBSan instrumentation
 * (build/fuzz/, see the Makefile). A broken invariant calls FUZZ_CHECK,
 * which aborts: libFuzzer saves the input as a crash artifact.
 */
#ifndef SHARDFS_FUZZ_H
#define SHARDFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n",      \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

#endif
