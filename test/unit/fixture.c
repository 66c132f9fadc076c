/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

int unit_failures;
static char root[] = "/tmp/nmbl-unit.XXXXXX";
static int made;

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	if (made)
		nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fixture_root(void)
{
	if (!made) {
		if (!mkdtemp(root)) {
			perror("mkdtemp");
			exit(2);
		}
		made = 1;
		atexit(cleanup);
	}
	return root;
}

const char *fixture_path(const char *path)
{
	static char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s%s", fixture_root(), path);
	return buf;
}

void fixture_write(const char *path, const void *data, size_t len)
{
	char full[PATH_MAX];
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", fixture_root(), path);
	for (char *p = full + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(full, 0755) < 0 && errno != EEXIST) {
			perror(full);
			exit(2);
		}
		*p = '/';
	}
	f = fopen(full, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(full);
		exit(2);
	}
}

void fixture_text(const char *path, const char *text)
{
	fixture_write(path, text, strlen(text));
}

int unit_main_ctx(void (*const tests[])(void), struct nmbl_ctx **ctx)
{
	int r;

	fake.root = fixture_root();
	if (nmbl_new(fixture_root(), ctx) < 0)
		return 2;
	r = unit_main(tests);
	*ctx = nmbl_unref(*ctx);
	return r;
}

int unit_main(void (*const tests[])(void))
{
	for (size_t i = 0; tests[i]; i++)
		tests[i]();
	if (unit_failures)
		fprintf(stderr, "%d check(s) failed\n", unit_failures);
	return unit_failures ? 1 : 0;
}

void fixture_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		exit(2);
	}
}
