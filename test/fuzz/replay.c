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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		perror(path);
		return 1;
	}
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		perror(path);
		return 1;
	}
	fclose(f);
	for (long n = 0; n <= len; n++) {
		/* A private copy per length, so ASan sees any read past it. */
		uint8_t *copy = malloc((size_t)n + 1);

		if (!copy)
			return 1;
		for (long i = 0; i < n; i++)
			copy[i] = buf[i];
		LLVMFuzzerTestOneInput(copy, (size_t)n);
		free(copy);
	}
	free(buf);
	return 0;
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
