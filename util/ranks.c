/*
 * ranks: see ranks.h. One pass to count items (the array's size), one to
 * scan them, then a sort and a merge.
 */
#include "util/ranks.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* Digits only: a rank has no hex, sign or space inside. */
static int scan_rank(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct ranks_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void reason(char *why, size_t whylen, int rc)
{
	if (!whylen)
		return;
	if (rc == -ERANGE)
		snprintf(why, whylen, "rank out of range (more than 64 bits)");
	else
		snprintf(why, whylen,
			 "not a list of ranks and ranges such as 0,2,8-15");
}

int ranks_parse(const char *s, struct ranks_range **out, size_t *n_out,
		char *why, size_t whylen)
{
	struct ranks_range *r;
	const char *p;
	size_t n = 0, cap = 1, i, m;
	int rc;

	if (!s || !*str_skip_space(s)) {
		if (whylen)
			snprintf(why, whylen, "empty rank list");
		return -EINVAL;
	}
	for (p = s; *p; p++)
		cap += *p == ',';
	r = calloc(cap, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (p = s;;) {
		uint64_t lo, hi;

		p = str_skip_space(p);
		rc = scan_rank(&p, &lo);
		if (rc)
			goto bad;
		p = str_skip_space(p);
		hi = lo;
		if (*p == '-') {
			p = str_skip_space(p + 1);
			rc = scan_rank(&p, &hi);
			if (rc)
				goto bad;
			p = str_skip_space(p);
			if (hi < lo) {
				if (whylen)
					snprintf(why, whylen,
						 "range %" PRIu64 "-%" PRIu64
						 " ends before it starts",
						 lo, hi);
				free(r);
				return -EINVAL;
			}
		}
		r[n].lo = lo;
		r[n].hi = hi;
		n++;
		if (!*p)
			break;
		if (*p != ',') {
			rc = -EINVAL;
			goto bad;
		}
		p++;
	}

	qsort(r, n, sizeof(*r), range_cmp);
	for (m = 0, i = 1; i < n; i++) {
		/* lo == 0 never reaches lo - 1: sorted, so lo <= r[m].hi. */
		if (r[i].lo <= r[m].hi || r[i].lo - 1 == r[m].hi) {
			if (r[i].hi > r[m].hi)
				r[m].hi = r[i].hi;
		} else {
			r[++m] = r[i];
		}
	}
	*out = r;
	*n_out = m + 1;
	return 0;

bad:
	free(r);
	reason(why, whylen, rc);
	return -EINVAL;
}

int ranks_check_world(const struct ranks_range *r, size_t n,
		      uint64_t world_size, char *why, size_t whylen)
{
	if (!n || r[n - 1].hi < world_size)
		return 0;
	if (whylen)
		snprintf(why, whylen,
			 "rank %" PRIu64 " is not below world_size %" PRIu64,
			 r[n - 1].hi, world_size);
	return -ERANGE;
}

bool ranks_contains(const struct ranks_range *r, size_t n, uint64_t rank)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].hi < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && r[lo].lo <= rank;
}

uint64_t ranks_count(const struct ranks_range *r, size_t n)
{
	uint64_t total = 0, k;
	size_t i;

	for (i = 0; i < n; i++) {
		k = r[i].hi - r[i].lo;
		if (k == UINT64_MAX || total > UINT64_MAX - k - 1)
			return UINT64_MAX;
		total += k + 1;
	}
	return total;
}

void ranks_format(const struct ranks_range *r, size_t n, char *buf, size_t cap)
{
	size_t i, len = 0;
	int w;

	if (cap == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		w = r[i].lo == r[i].hi
			    ? snprintf(buf + len, cap - len, "%s%" PRIu64,
				       i ? "," : "", r[i].lo)
			    : snprintf(buf + len, cap - len,
				       "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
				       r[i].lo, r[i].hi);
		if (w < 0 || (size_t)w >= cap - len) {
			/* Cut: say so rather than show a wrong list. */
			if (cap >= 4)
				strcpy(buf + cap - 4, "...");
			return;
		}
		len += (size_t)w;
	}
}
