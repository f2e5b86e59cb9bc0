/*
 * unit: what several Check suites share: one TCase per named test, a
 * runner that gives the suite a fresh temp directory and removes it
 * afterwards whatever the outcome, and ARRAY_LEN. Header-only; include
 * from one suite.
 */
#ifndef SHARDFS_UNIT_H
#define SHARDFS_UNIT_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* The number of elements of array a (an array, not a pointer). */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct unit_case {
	const char *name;
	const TTest *test;
};

/* A suite with one TCase (60 s timeout) per case. */
static inline Suite *unit_suite(const char *name, const struct unit_case *c,
				size_t n)
{
	Suite *s = suite_create(name);
	size_t i;

	for (i = 0; i < n; i++) {
		TCase *tc = tcase_create(c[i].name);

		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, c[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

static inline int unit_rm_entry(const char *path, const struct stat *sb,
				int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The one Check runner of every unit binary: runs s (and frees it) in
 * Check's default fork mode, printing Check's summary line; returns the
 * process exit status. With template (a mkdtemp pattern) it first creates
 * dir from it (dir holds cap bytes), and afterwards, whatever the outcome,
 * calls before_rm(dir) if given (to undo what a failed forked test left,
 * e.g. a mount) and removes dir. */
static inline int unit_main(Suite *s, const char *template, char *dir,
			    size_t cap, void (*before_rm)(const char *dir))
{
	SRunner *sr = srunner_create(s); /* owns s from here */
	int failed;

	if (template != NULL) {
		snprintf(dir, cap, "%s", template);
		if (mkdtemp(dir) == NULL) {
			perror("mkdtemp");
			srunner_free(sr);
			return EXIT_FAILURE;
		}
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (template != NULL) {
		if (before_rm != NULL)
			before_rm(dir);
		if (nftw(dir, unit_rm_entry, 16, FTW_DEPTH | FTW_PHYS))
			perror(dir);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Runs s (and frees it); returns the process exit status. */
static inline int unit_run(Suite *s)
{
	return unit_main(s, NULL, NULL, 0, NULL);
}

/* Creates dir from template (a mkdtemp pattern, dir holds cap bytes), runs
 * the suite s, removes dir. Returns the process exit status. */
static inline int unit_run_in_tmpdir(Suite *s, const char *template, char *dir,
				     size_t cap)
{
	return unit_main(s, template, dir, cap, NULL);
}

#endif
