/*
 * unit: what several Check suites share: one TCase per named test, and a
 * runner that gives the suite a fresh temp directory and removes it
 * afterwards whatever the outcome. Header-only; include from one suite.
 */
#ifndef SHARDFS_UNIT_H
#define SHARDFS_UNIT_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

/* Runs s (and frees it); returns the process exit status. */
static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline int unit_rm_entry(const char *path, const struct stat *sb,
				int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Creates dir from template (a mkdtemp pattern, dir holds cap bytes), runs
 * the suite s, removes dir. Returns the process exit status. */
static inline int unit_run_in_tmpdir(Suite *s, const char *template, char *dir,
				     size_t cap)
{
	SRunner *sr = srunner_create(s); /* owns s from here */
	int failed;

	snprintf(dir, cap, "%s", template);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		srunner_free(sr);
		return EXIT_FAILURE;
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(dir, unit_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
