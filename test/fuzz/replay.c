/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Run a fuzzer's entry point over every file of its corpus, without
 * libFuzzer: what "make check" does, under ASan and UBSan, so that an input
 * that once crashed the parser stays a test.  Then feed it every prefix of
 * each file, the shapes of a truncated download.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The first N bytes of BUF, in a block of exactly N bytes: one byte more
 * would be slack that ASan does not guard, and a parser reading one byte
 * past the end would pass.  For N == 0, malloc(0)'s block (ASan's has no
 * byte to read) or NULL, both legitimate empty inputs.
 */
static int feed(const uint8_t *buf, size_t n)
{
	uint8_t *copy = malloc(n);

	if (!copy && n)
		return -1;
	if (n)
		memcpy(copy, buf, n);
	LLVMFuzzerTestOneInput(copy, n);
	free(copy);
	return 0;
}

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf = NULL;
	size_t len;
	long end;
	int r = 1;

	if (!f) {
		perror(path);
		return 1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (end = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		perror(path);
		goto close;
	}
	len = (size_t)end;
	/* Never handed to the fuzzer, so a spare byte keeps malloc(0) out. */
	buf = malloc(len + 1);
	if (!buf || fread(buf, 1, len, f) != len) {
		perror(path);
		goto free_buf;
	}
	for (size_t n = 0; n <= len; n++)
		if (feed(buf, n) < 0) {
			perror(path);
			goto free_buf;
		}
	r = 0;
free_buf:
	free(buf);
close:
	fclose(f);
	return r;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : CORPUS;
	char path[4096];
	struct dirent *de;
	int files = 0, r = 0;
	DIR *d = opendir(dir);

	if (!d) {
		perror(dir);
		return 1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		r |= replay_file(path);
		files++;
	}
	closedir(d);
	printf("%d corpus files replayed\n", files);
	return r || files == 0;
}
